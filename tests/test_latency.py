"""What keeps the app quick in a browser (issue 16 item 7), checked as properties, not timings.

The timings themselves are measured by ``benchmarks/bench_browser.py`` (headless Chromium); these
tests pin the changes that made them: the Explore scatter is a Vega-Lite chart on a canvas whose
spec does not change with epsilon (the browser keeps it and swaps its points) and draws a bounded
number of points (display only: the 2-D view is computed from all rows), the noise table is a
plain table, the real image grid is built once per dataset, the first page needs no
scikit-learn, and the launcher preloads modules that exist.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from app.figures.common import REAL_ROWS, RELEASED_ROWS, SCATTER_ROWS
from app.runner import DISPLAY_POINTS, PCA_FIT_ROWS, two_d_view
from dpcore.mechanisms import LocalGaussian
from tests.test_app import ROOT, goto, new_app


def scatter(at) -> tuple[dict, pd.DataFrame]:
    """The Explore scatter's Vega-Lite spec and the points it was sent (Arrow IPC)."""
    charts = at.get("vega_lite_chart")
    assert len(charts) == 1
    proto = charts[0].proto
    return json.loads(proto.spec), pa.ipc.open_stream(proto.data.data).read_all().to_pandas()


def test_explore_scatter_draws_at_most_display_points_per_set_on_a_canvas():
    at = new_app("local-gaussian")  # digits: 1,347 released (training) rows, 450 real held-out rows
    goto(at, "explore")
    spec, data = scatter(at)
    assert not at.get("plotly_chart")
    assert spec["usermeta"]["embedOptions"]["renderer"] == "canvas"  # no DOM node per point
    counts = data[SCATTER_ROWS].value_counts()
    assert counts[RELEASED_ROWS] == DISPLAY_POINTS < 1347
    assert counts[REAL_ROWS] == min(DISPLAY_POINTS, 450)


def test_explore_scatter_spec_is_the_same_for_every_epsilon_only_the_points_change():
    """Streamlit re-creates a Vega view when the spec changes and otherwise replaces its data in
    place; a chart with an element id (selections) would be remounted: it has none."""
    at = new_app("local-gaussian")
    goto(at, "explore")
    spec, data = scatter(at)
    assert not at.get("vega_lite_chart")[0].proto.id
    at.select_slider(key="p:local-gaussian:epsilon").set_value(5.0).run()
    assert not at.exception
    spec_after, data_after = scatter(at)
    assert spec_after == spec
    real, real_after = (d[d[SCATTER_ROWS] == REAL_ROWS] for d in (data, data_after))
    pd.testing.assert_frame_equal(real, real_after)  # the same real rows
    rel, rel_after = (d[d[SCATTER_ROWS] == RELEASED_ROWS] for d in (data, data_after))
    assert len(rel) == len(rel_after) > 0 and not np.allclose(rel["axis 1"], rel_after["axis 1"])


def test_explore_noise_table_is_a_plain_table_that_follows_epsilon():
    at = new_app("local-gaussian")
    goto(at, "explore")
    assert not at.dataframe  # no interactive grid rebuilt per move
    before = at.table[0].value
    at.select_slider(key="p:local-gaussian:epsilon").set_value(5.0).run()
    after = at.table[0].value
    assert list(after.columns) == list(before.columns) and "noise scale" in after.columns
    scale = float(before["noise scale"].iloc[0]), float(after["noise scale"].iloc[0])
    assert 0 < scale[1] < scale[0] / 3  # Gaussian scale ~ 1 / epsilon


@pytest.mark.parametrize(("dataset", "test_size"), [("digits", 0.25), ("digits", 0.35),
                                                     ("breast-cancer", 0.1), ("diabetes", 0.5)])
def test_split_sizes_on_the_data_page_are_those_of_the_split(dataset, test_size):
    from tests.test_app import choose_dataset

    at = new_app("local-gaussian")
    choose_dataset(at, dataset)
    at.slider(key="p:test_size").set_value(test_size).run()
    assert not at.exception
    ds = at.session_state.dataset
    train, test = ds.split(test_size, random_state=0)
    n_train, n_test = train.n_samples, test.n_samples
    assert any(f"from {n_train:,} training rows and evaluate on {n_test:,} real held-out rows" in c.value
               for c in at.caption)


@pytest.mark.slow
def test_first_page_imports_no_scikit_learn():
    """A fresh process running the first page (Data) without the launcher (``streamlit run``)
    never imports scikit-learn: 4 s of the first run on a loaded machine for a row count."""
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from streamlit.testing.v1 import AppTest
        at = AppTest.from_file({str(ROOT / "app" / "streamlit_app.py")!r}, default_timeout=120)
        at.run()
        assert not at.exception and at.title[0].value == "Data"
        print("sklearn" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-1] == "False"


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
    at = new_app("local-gaussian")
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
    launch.import_modules(("no_such_module_dp_explorer", "colorsys"))
    assert "colorsys" in sys.modules


@pytest.mark.slow
def test_prepared_server_process_runs_the_first_page_without_new_imports_or_a_stack_walk():
    """After the launcher's :func:`app.launch.prepare_process`, the first visitor's run of the
    Data page imports no module and never calls ``inspect.stack`` (Streamlit's once-per-process
    "use streamlit run" check walked the run's stack, resolving every module's path: ~0.5 s)."""
    code = textwrap.dedent(f"""
        import inspect, sys
        sys.path.insert(0, {str(ROOT)!r})
        from app import launch
        launch.prepare_process()
        from streamlit.testing.v1 import AppTest
        calls = []
        real_stack = inspect.stack
        inspect.stack = lambda *a, **k: calls.append(1) or real_stack(*a, **k)
        at = AppTest.from_file({str(ROOT / "app" / "streamlit_app.py")!r}, default_timeout=120)
        loaded = set(sys.modules)
        at.run()
        assert not at.exception and at.title[0].value == "Data"
        start_up = ("streamlit.testing", "streamlit.components", "packaging", "encodings",
                    "pyarrow.vendored")  # AppTest's runtime start (a server's start-up, not a run)
        new = sorted(m for m in set(sys.modules) - loaded if not m.startswith(start_up))
        print(len(calls), new)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "0 []"


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
    at = new_app("local-gaussian")  # opens on the Data page with digits
    assert not at.exception
    assert len(at.get("image")) == 1 and not at.get("plotly_chart")


def test_explore_view_axes_are_fitted_once_per_real_rows_not_per_move():
    at = new_app("local-gaussian")
    goto(at, "explore")
    views = [k for k in at.session_state._memo if k[0] == "view"]
    assert len(views) == 1
    axes = at.session_state._memo[views[0]]
    at.select_slider(key="p:local-gaussian:epsilon").set_value(5.0).run()
    assert not at.exception
    assert [k for k in at.session_state._memo if k[0] == "view"] == views
    assert at.session_state._memo[views[0]] is axes  # the same fitted axes serve the new move


def test_explore_image_grids_are_pictures_and_the_released_one_follows_epsilon():
    """digits on Explore: the real and released grids are still pictures (no Plotly heatmaps to
    redraw per move); moving epsilon changes the released picture and keeps the real one."""
    at = new_app("local-gaussian")
    goto(at, "explore")

    def urls() -> list[str]:
        return [im.proto.imgs[0].url for im in at.get("image")]

    real, released = urls()
    assert not at.get("plotly_chart") and len(at.get("vega_lite_chart")) == 1  # the scatter only
    at.select_slider(key="p:local-gaussian:epsilon").set_value(5.0).run()
    assert not at.exception
    real_after, released_after = urls()
    assert real_after == real and released_after != released


def test_scatter_chart_without_labels_or_real_rows_keeps_its_sets_apart():
    """Regression data (no classes): real grey, released red, a legend of the two sets; a release
    without a public map for real rows: only the released layer, which then carries pan/zoom."""
    from app.figures.common import release_scatter_chart

    rng = np.random.default_rng(0)
    real, rel = rng.normal(size=(30, 2)), rng.normal(size=(40, 2))
    data, spec = release_scatter_chart(real, rel, axis_text="axes", axis_titles=("a (u)", "b (u)"))
    assert data[SCATTER_ROWS].value_counts().to_dict() == {RELEASED_ROWS: 40, REAL_ROWS: 30}
    colour = spec["layer"][0]["encoding"]["color"]
    assert colour["field"] == SCATTER_ROWS and colour["scale"]["domain"] == [REAL_ROWS, RELEASED_ROWS]
    assert spec["title"] == {"text": "Released rows", "subtitle": "axes", "anchor": "start"}
    assert spec["layer"][0]["encoding"]["x"]["title"] == "a (u)"
    data, spec = release_scatter_chart(None, rel, None, np.arange(40) % 3, "axes",
                                       classes=[0, 1, 2, 3])
    assert len(spec["layer"]) == 1 and spec["layer"][0]["params"][0]["bind"] == "scales"
    assert spec["layer"][0]["encoding"]["color"]["scale"]["domain"] == ["0", "1", "2", "3"]
    assert set(data["class"]) == {"0", "1", "2"} and len(data) == 40
    # more classes than colours: no class legend, the sets are told apart instead
    _, spec = release_scatter_chart(real, rel, np.arange(30), np.arange(40))
    assert spec["layer"][0]["encoding"]["color"]["field"] == SCATTER_ROWS


def test_explore_draws_only_the_displayed_rows_of_a_row_wise_release_and_shows_the_full_facts():
    """LocalGaussian (row-wise): the preview draws the scatter's and the image grid's rows only,
    and the page's numbers (guaranteed epsilon, noise table, clipping count) are those of the
    release of every row; at epsilon = inf the plotted released points are exactly the plotted
    training rows, so the rows sit at the right positions."""
    from app.figures.common import noise_table
    from app.runner import displayed_rows, fit_view, preview_rows, real_in_release_space

    at = new_app("local-gaussian")
    goto(at, "explore")
    ss = at.session_state
    train, test = ss.dataset.split(ss["p:test_size"], random_state=0)
    result = next(v for k, v in ss._memo.items() if k[0] == "explore" and len(k) == 6)
    n = train.n_samples
    np.testing.assert_array_equal(result.rows, displayed_rows(n))
    assert result.release.data.shape[0] == len(result.rows) < n == result.release.n_rows
    assert any(f"draws the {len(result.rows):,} released rows shown above, of {n:,}" in c.value
               for c in at.caption)
    eps = float(result.release.parameters["epsilon"])
    full, diagnostics = LocalGaussian(epsilon=eps, random_state=0).explore(train)
    assert result.release.noise == full.noise and result.release.guarantee == full.guarantee
    assert result.diagnostics == diagnostics
    assert at.table[0].value.to_dict("records") == noise_table(full.noise)
    assert at.metric[0].value == f"{full.guarantee.epsilon:.4g}"

    at.select_slider(key="p:local-gaussian:epsilon").set_value(np.inf).run()
    assert not at.exception
    _, data = scatter(at)
    released = data[data[SCATTER_ROWS] == RELEASED_ROWS][["axis 1", "axis 2"]].to_numpy()
    clean = LocalGaussian(epsilon=np.inf, random_state=0).release(train)
    pca = fit_view(np.ascontiguousarray(real_in_release_space(clean, test.X)[:PCA_FIT_ROWS]))
    expected = pca.transform(np.asarray(clean.data)[preview_rows(n)])
    np.testing.assert_allclose(released, expected, rtol=1e-5, atol=1e-5)


def test_rows_at_finds_drawn_rows_and_refuses_missing_ones():
    from app.runner import rows_at

    drawn = np.array([2, 5, 9])
    np.testing.assert_array_equal(rows_at(drawn, np.array([9, 2])), [2, 0])
    np.testing.assert_array_equal(rows_at(None, np.array([9, 2])), [9, 2])
    for missing in ([3], [10]):
        with pytest.raises(ValueError, match="not drawn"):
            rows_at(drawn, np.array(missing))


def test_bounds_tools_are_built_only_while_their_expander_is_open():
    """The Data page's "Import a bounds file, or set many columns at once" expander is lazy: on a
    bundled dataset (metadata bounds) it starts closed and its widgets are not built; opening it
    builds them; on a table whose bounds come from the data it starts open."""
    from tests.test_app import goto as go

    def tools(at) -> list[str]:
        ids = [u.proto.id for u in at.get("file_uploader")]
        return [k for k in ("bounds_file",) if any(k in i for i in ids)] + [n.key for n in at.number_input]

    at = new_app("local-gaussian")
    assert at.title[0].value == "Data" and tools(at) == []
    assert [e.label for e in at.expander][-1] == "Import a bounds file, or set many columns at once"
    at.session_state[f"bounds_tools:{at.session_state.dataset.fingerprint[:12]}"] = True  # the user opens it
    at.run()
    assert tools(at) == ["bounds_file", "bulk_lo", "bulk_hi"]

    at = new_app("local-gaussian")
    go(at, "data")
    at.radio(key="p:data_source").set_value("Upload a file").run()
    csv = "a,b\n" + "\n".join(f"{i % 7},{(i * 3) % 5}" for i in range(30))
    at.get("file_uploader")[0].set_value(("mine.csv", csv.encode(), "text/csv")).run()
    at.selectbox(key="upload_label").select("(none)").run()  # an explicit choice (Data page, step 2)
    next(b for b in at.button if b.label == "Use this table").click().run()
    assert at.session_state.dataset.bounds_source == "data" and not at.exception
    assert tools(at) == ["bounds_file", "bulk_lo", "bulk_hi"]


def test_first_page_builds_no_grid_until_asked_and_keeps_both_grids_one_click_away():
    """The Data page on digits (the first page): the rows are shown as images, the bounds come
    from the metadata, so neither grid (table preview, bounds editor: the browser's largest
    JavaScript chunks) is built; a caption gives the bounds; opening the expanders builds them.
    A table without images gets its preview at once."""
    from tests.test_app import choose_dataset

    def grids(at) -> list[str]:
        return [("editor" if "bounds_editor" in (d.proto.id or "") else "preview") for d in at.dataframe]

    at = new_app("local-gaussian")
    ds = at.session_state.dataset
    assert at.title[0].value == "Data" and grids(at) == [] and ds.image_shape
    assert any(c.value == "All 64 columns: [0, 16]." for c in at.caption)
    labels = [e.label for e in at.expander]
    assert labels[:2] == ["Table preview (first 50 rows)", "See and edit the bounds of every column"]
    at.session_state[f"preview:{ds.fingerprint[:12]}"] = True
    at.session_state[f"bounds_table:{ds.fingerprint[:12]}"] = True
    at.run()
    assert grids(at) == ["preview", "editor"] and len(at.dataframe[0].value) == 50
    assert any(b.label == "Apply these bounds as public" for b in at.button)

    choose_dataset(at, "breast-cancer")  # no images: the preview is the way to see the rows
    assert grids(at) == ["preview"]
