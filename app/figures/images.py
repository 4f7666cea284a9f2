"""Image grids: real and released rows shown as grayscale images (no Streamlit import).

All images are tiled into ONE mosaic array drawn by a single ``go.Heatmap`` (much faster to build
and render than one subplot per image); gaps between tiles are NaN (transparent). Hovering shows
the image number and the pixel value. Used by every mechanism whose rows are images
(``"images"`` capability).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

__all__ = ["image_grid_figure", "image_grid_pixels", "image_mosaic", "real_vs_released_figure"]


def image_mosaic(images: np.ndarray, shape: tuple[int, int], *, ncols: int = 10, gap: int = 1,
                 title_band: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Tile ``images`` (m, h*w) into a mosaic; returns ``(mosaic, index)`` of the same 2-D shape.

    ``mosaic`` holds pixel values (NaN in gaps and title bands); ``index`` the image number of each
    pixel (-1 outside images). Each tile occupies ``title_band`` empty rows above ``h`` image rows.

    Raises
    ------
    ValueError
        If a row does not have ``h*w`` values or ``ncols < 1``.
    """
    h, w = (int(s) for s in shape)
    imgs = np.asarray(images, dtype=float)
    if imgs.ndim == 1:
        imgs = imgs[None, :]
    if imgs.ndim != 2 or imgs.shape[1] != h * w:
        raise ValueError(f"images must have shape (m, {h * w}) for image shape {shape}, got {imgs.shape}")
    if ncols < 1:
        raise ValueError(f"ncols must be >= 1, got {ncols}")
    m = imgs.shape[0]
    ncols = min(ncols, max(m, 1))
    nrows = max(1, math.ceil(m / ncols))
    tile_h, tile_w = title_band + h + gap, w + gap
    padded = np.full((nrows * ncols, tile_h, tile_w), np.nan)
    padded[:m, title_band:title_band + h, :w] = imgs.reshape(m, h, w)
    index = np.full((nrows * ncols, tile_h, tile_w), -1, dtype=np.int64)
    index[:m, title_band:title_band + h, :w] = np.arange(m)[:, None, None]

    def tile(a: np.ndarray) -> np.ndarray:
        grid = a.reshape(nrows, ncols, tile_h, tile_w).transpose(0, 2, 1, 3)
        return grid.reshape(nrows * tile_h, ncols * tile_w)[: nrows * tile_h - gap, : ncols * tile_w - gap]

    return tile(padded), tile(index)


def _gray_range(mosaic: np.ndarray, zmin: float | None, zmax: float | None) -> tuple[float, float]:
    """The gray-scale range: given bounds, else the 1st and 99th percentiles of the finite pixels."""
    finite = mosaic[np.isfinite(mosaic)]
    if zmin is None or zmax is None:
        lo, hi = np.percentile(finite, [1, 99]) if finite.size else (0.0, 1.0)
        zmin = float(lo) if zmin is None else zmin
        zmax = float(hi) if zmax is None else zmax
    if not zmax > zmin:
        zmax = zmin + 1.0
    return float(zmin), float(zmax)


def image_grid_pixels(images: np.ndarray, shape: tuple[int, int], *, ncols: int = 10,
                      zmin: float | None = None, zmax: float | None = None, gap: int = 1,
                      tile_px: int = 56) -> np.ndarray:
    """The grid of :func:`image_grid_figure` as a still 8-bit grayscale picture (for ``st.image``).

    Same mosaic and gray scale as the figure (``zmin`` black, ``zmax`` white, gaps white), each
    pixel enlarged to a ``scale x scale`` block, ``scale = max(1, tile_px // max(h, w))``, so the
    browser shows sharp pixels. A picture needs none of Plotly's JavaScript, which is what a page
    without any other chart then loads faster (no hover values, unlike the figure).

    Returns
    -------
    numpy.ndarray of uint8, shape (rows * scale, cols * scale)

    Raises
    ------
    ValueError
        As :func:`image_mosaic`.
    """
    h, w = (int(s) for s in shape)
    mosaic, _ = image_mosaic(images, (h, w), ncols=ncols, gap=gap)
    zmin, zmax = _gray_range(mosaic, zmin, zmax)
    gray = np.clip((mosaic - zmin) / (zmax - zmin), 0.0, 1.0)
    pixels = np.where(np.isfinite(mosaic), np.rint(gray * 255), 255).astype(np.uint8)
    scale = max(1, tile_px // max(h, w))
    return np.repeat(np.repeat(pixels, scale, axis=0), scale, axis=1)


def image_grid_figure(
    images: np.ndarray,
    shape: tuple[int, int],
    titles: Sequence[str] | None = None,
    *,
    ncols: int = 10,
    zmin: float | None = None,
    zmax: float | None = None,
    gap: int = 1,
    title: str = "",
    tile_px: int = 56,
) -> go.Figure:
    """A grid of grayscale images as one heatmap.

    Parameters
    ----------
    images : array of shape (m, h*w)
        One image per row (e.g. released rows, or real rows in the same units).
    shape : (h, w)
    titles : sequence of str, optional
        One short caption per image (e.g. its label), drawn above the tile.
    ncols : int
        Images per row of the grid.
    zmin, zmax : float, optional
        Gray-scale range; default: the 1st and 99th percentiles of all pixels (noisy releases
        have outliers). Pass the public bounds (e.g. 0 and 1) to compare real and released images
        on the same scale.
    gap : int
        Empty pixels between tiles.
    title : str
    tile_px : int
        Displayed size of one tile in screen pixels (sets the figure size).

    Returns
    -------
    plotly.graph_objects.Figure
    """
    h, w = (int(s) for s in shape)
    band = max(2, round(0.3 * h)) if titles is not None else 0
    mosaic, index = image_mosaic(images, (h, w), ncols=ncols, gap=gap, title_band=band)
    zmin, zmax = _gray_range(mosaic, zmin, zmax)
    fig = go.Figure(go.Heatmap(
        z=mosaic, customdata=index, colorscale="gray", zmin=zmin, zmax=zmax, showscale=False,
        hovertemplate="image %{customdata}<br>value %{z:.3f}<extra></extra>", hoverongaps=False,
    ))
    m = np.asarray(images).reshape(-1, h * w).shape[0]
    ncols_used = min(ncols, max(m, 1))
    nrows = max(1, math.ceil(m / ncols_used))
    if titles is not None:
        # one text trace (adding one annotation per image is ~100x slower to build)
        tile_h, tile_w = band + h + gap, w + gap
        texts = [str(t) for t in list(titles)[:m]]
        r, c = np.divmod(np.arange(len(texts)), ncols_used)
        fig.add_trace(go.Scatter(
            x=c * tile_w + (w - 1) / 2, y=r * tile_h + (band - 1) / 2, text=texts, mode="text",
            textfont={"size": 10}, hoverinfo="skip", showlegend=False,
        ))
    fig.update_xaxes(visible=False, constrain="domain")
    fig.update_yaxes(visible=False, autorange="reversed", scaleanchor="x", constrain="domain")
    scale = tile_px / max(h, w)
    fig.update_layout(
        width=int(ncols_used * (w + gap) * scale) + 20,
        height=int(nrows * (band + h + gap) * scale) + (40 if title else 20),
        margin={"l": 10, "r": 10, "t": 30 if title else 10, "b": 10},
        title={"text": title, "font": {"size": 13}} if title else None,
        plot_bgcolor="white",
    )
    return fig


def real_vs_released_figure(
    real: np.ndarray,
    released: np.ndarray,
    shape: tuple[int, int],
    *,
    n: int = 10,
    real_titles: Sequence[str] | None = None,
    released_titles: Sequence[str] | None = None,
    zmin: float | None = None,
    zmax: float | None = None,
) -> go.Figure:
    """``n`` real images (top row) above ``n`` released images (bottom row), on one gray scale.

    Titles default to "real" / "released"; pass labels to show them instead.
    """
    real = np.asarray(real, dtype=float).reshape(-1, int(np.prod(shape)))[:n]
    released = np.asarray(released, dtype=float).reshape(-1, int(np.prod(shape)))[:n]
    k = max(len(real), len(released), 1)
    blank = np.full((1, real.shape[1]), np.nan)
    top = np.vstack([real, np.repeat(blank, k - len(real), axis=0)])
    bottom = np.vstack([released, np.repeat(blank, k - len(released), axis=0)])
    rt = list(real_titles)[: len(real)] if real_titles is not None else ["real"] * len(real)
    st = list(released_titles)[: len(released)] if released_titles is not None else (
        ["released"] * len(released))
    titles = rt + [""] * (k - len(rt)) + st + [""] * (k - len(st))
    return image_grid_figure(np.vstack([top, bottom]), shape, titles, ncols=k, zmin=zmin, zmax=zmax)
