"""What keeps the app quick in a browser (issue 16 item 7), checked as properties, not timings.

The timings themselves are measured by ``benchmarks/bench_browser.py`` (headless Chromium); these
tests pin the changes that made them: the Explore scatter draws a bounded number of SVG points
(display only: the 2-D view is computed from all rows), the real image grid is built once per
dataset, and the launcher preloads modules that exist.
"""

from __future__ import annotations

import base64
import importlib
import json
import sys

import numpy as np

from app.runner import DISPLAY_POINTS, PCA_FIT_ROWS, two_d_view
from tests.test_app import goto, new_app


def _n_points(trace: dict) -> int:
    x = trace["x"]
    if isinstance(x, dict):  # Plotly's typed array {"dtype", "bdata"}
        return np.frombuffer(base64.b64decode(x["bdata"]), dtype=x["dtype"]).size
    return len(x)


def test_explore_scatter_draws_at_most_display_points_per_set_as_svg():
    at = new_app()  # digits: 1,347 released (training) rows, 450 real held-out rows
    goto(at, "explore")
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    released = [t for t in spec["data"] if t.get("showlegend", True)]
    real = [t for t in spec["data"] if not t.get("showlegend", True)]
    assert {t["type"] for t in spec["data"]} == {"scatter"}  # no WebGL context per redraw
    assert sum(map(_n_points, released)) == DISPLAY_POINTS < 1347
    assert sum(map(_n_points, real)) == min(DISPLAY_POINTS, 450)


def test_two_d_view_axes_do_not_depend_on_how_many_points_are_drawn():
    rng = np.random.default_rng(0)
    real = rng.normal(size=(PCA_FIT_ROWS + 500, 6)) * np.array([5, 3, 1, 1, 1, 1])
    released = real[: PCA_FIT_ROWS // 2] + rng.normal(size=(PCA_FIT_ROWS // 2, 6))
    few = two_d_view(real, released, max_points=10)
    many = two_d_view(real, released, max_points=1000)
    assert few[0].shape == (10, 2) and many[0].shape == (1000, 2)
    np.testing.assert_allclose(few[0], many[0][:10])  # same axes: only fewer points drawn
    np.testing.assert_allclose(few[1], many[1][:10])


def test_real_image_grid_is_built_once_per_dataset_and_split():
    at = new_app()
    goto(at, "explore")
    keys = [k for k in at.session_state._memo if k[0] == "real_images"]
    figure = at.session_state._memo[keys[0]]
    at.select_slider(key="p:local-gaussian:epsilon").set_value(5.0).run()
    assert not at.exception
    assert [k for k in at.session_state._memo if k[0] == "real_images"] == keys
    assert at.session_state._memo[keys[0]] is figure  # not rebuilt for a new epsilon


def test_launcher_preloads_modules_that_exist_and_skips_a_missing_one():
    from app import launch

    for name in launch.PRELOAD:  # a typo would be skipped silently at start-up
        importlib.import_module(name)
    sys.modules.pop("colorsys", None)  # a small module without side effects
    thread = launch.preload(("no_such_module_dp_explorer", "colorsys"))
    thread.join(timeout=60)
    assert not thread.is_alive() and "colorsys" in sys.modules


def test_image_grid_pixels_match_the_figures_gray_scale_and_tiles():
    from app.figures.images import image_grid_pixels, image_mosaic

    images = np.array([[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0], [8.0, 9.0, 10.0, 11.0]])
    pixels = image_grid_pixels(images, (2, 2), ncols=2, zmin=0.0, zmax=10.0, tile_px=6)
    mosaic, index = image_mosaic(images, (2, 2), ncols=2)
    assert pixels.dtype == np.uint8 and pixels.shape == (mosaic.shape[0] * 3, mosaic.shape[1] * 3)
    small = pixels[::3, ::3]  # one value per mosaic pixel: each is a 3 x 3 block
    assert np.all(pixels == np.repeat(np.repeat(small, 3, axis=0), 3, axis=1))
    inside = index >= 0
    expected = np.rint(np.clip(mosaic[inside] / 10.0, 0, 1) * 255)
    np.testing.assert_array_equal(small[inside], expected)  # zmin black, zmax white, clipped above
    assert np.all(small[~inside] == 255)  # gaps and the empty fourth tile are white


def test_first_page_shows_the_digit_images_as_a_picture_without_plotly():
    at = new_app()  # opens on the Data page with digits
    assert not at.exception
    assert len(at.get("image")) == 1 and not at.get("plotly_chart")


def test_explore_view_axes_are_fitted_once_per_real_rows_not_per_move():
    at = new_app()
    goto(at, "explore")
    views = [k for k in at.session_state._memo if k[0] == "view"]
    assert len(views) == 1
    axes = at.session_state._memo[views[0]]
    before = json.loads(at.get("plotly_chart")[0].proto.spec)
    at.select_slider(key="p:local-gaussian:epsilon").set_value(5.0).run()
    assert not at.exception
    assert [k for k in at.session_state._memo if k[0] == "view"] == views
    assert at.session_state._memo[views[0]] is axes  # the same fitted axes serve the new move
    after = json.loads(at.get("plotly_chart")[0].proto.spec)
    hollow = [t for t in before["data"] if not t.get("showlegend", True)]
    assert hollow == [t for t in after["data"] if not t.get("showlegend", True)]  # real points stay
    assert before["data"] != after["data"]  # the released points moved


def test_explore_image_grids_are_pictures_and_the_released_one_follows_epsilon():
    """digits on Explore: the real and released grids are still pictures (no Plotly heatmaps to
    redraw per move); moving epsilon changes the released picture and keeps the real one."""
    at = new_app()
    goto(at, "explore")

    def urls() -> list[str]:
        return [im.proto.imgs[0].url for im in at.get("image")]

    real, released = urls()
    assert len(at.get("plotly_chart")) == 1  # the scatter only
    at.select_slider(key="p:local-gaussian:epsilon").set_value(5.0).run()
    assert not at.exception
    real_after, released_after = urls()
    assert real_after == real and released_after != released
