"""HoloViews elements of :class:`app.EmbeddingView`: the points of one layout, drawn plainly or rasterized.

Below the view's threshold every point is a Bokeh glyph (hover names its class and image); above it the
layout is rasterized on the server by Datashader (one RGBA image per pan or zoom, whatever the number of
points), coloured per class with :func:`app.base.plots.class_colors` (or by any categorical column of the
frame, ``by``: the arrival layer, with :func:`app.base.plots.arrival_colors`), and HoloViews' server-side hover
names the class and image of the point under the pointer (``selector=first(row)``: only the hovered pixel's
values travel). The selection is drawn on top, in the same colours with a dark rim, at every layout.
"""
from __future__ import annotations

import threading

import holoviews as hv
import numpy as np
import pandas as pd
import panel as pn
from bokeh.models import HoverTool

from app.base.plots import PLOT_OPTS

__all__ = ["PlotPanel", "points_frame", "extent", "raster_base", "raster_highlight", "points_base", "points_highlight",
           "hovered_row", "warm_up", "warm_up_in_background"]

PLOT_WIDTH, PLOT_HEIGHT = 520, 460
"""Least width and height of one plot in pixels, legend included (it grows with the page's width)."""
FRAME_WIDTH, FRAME_HEIGHT = 400, 420
"""About the size of its data frame: the raster's size until the browser reports the real one."""

_TOOLS = ["lasso_select", "box_select"]
_DEFAULT_TOOLS = ["pan", "wheel_zoom", "reset", "save"]
_RIM = "#111111"


def points_frame(coords: np.ndarray, labels: np.ndarray, indices: np.ndarray, classes: list[str]) -> pd.DataFrame:
    """x, y, class (categorical over every class, so colours never shift), image index, as plot data."""
    codes = np.asarray(labels, dtype=np.int64)
    return pd.DataFrame({
        "x": coords[:, 0], "y": coords[:, 1],
        "class": pd.Categorical.from_codes(codes, categories=list(dict.fromkeys(classes))),
        "index": np.asarray(indices, dtype=np.int64),
    })


def extent(xy: np.ndarray, pad: float = 0.04) -> tuple[tuple[float, float], tuple[float, float]]:
    """Padded x and y ranges of the points ``xy`` (N, 2) (a unit range around a single point)."""
    if not len(xy):
        return (0.0, 1.0), (0.0, 1.0)
    lo, hi = xy.min(axis=0), xy.max(axis=0)
    span = np.where(hi - lo > 0, hi - lo, 1.0)
    lo, hi = lo - pad * span, hi + pad * span
    return (float(lo[0]), float(hi[0])), (float(lo[1]), float(hi[1]))


def _common(title: str) -> dict:
    # the legend goes beside the frame: inside it would hide the points under it
    return dict(title=title, responsive=True, min_width=PLOT_WIDTH, height=PLOT_HEIGHT, xaxis=None, yaxis=None,
                toolbar="above",
                legend_position="right",
                default_tools=_DEFAULT_TOOLS, active_tools=["pan"], fontsize={"title": 11},
                framewise=True, **PLOT_OPTS)   # the wheel scrolls the page until zoom is picked in the toolbar


def _vdims(by: str) -> list[str]:
    return ["class", "index"] + ([by] if by not in ("class", "index") else [])


def _shade(frame: pd.DataFrame, *, x_range, y_range, width: int, height: int, color_key=None, cmap=None,
           selector: bool = False, px: int = 0, threshold: float = 0.5, by: str = "class") -> hv.RGB:
    if not len(frame):      # datashade cannot shade an empty aggregate by category: a clear image instead
        return hv.RGB(np.zeros((2, 2, 4), dtype=np.uint8), bounds=(x_range[0], y_range[0], x_range[1], y_range[1]))
    # imported here, not with the module: Datashader brings numba and dask.dataframe, a second on every process
    # that imports the app (a server, a notebook's kernel), and only a layout above the threshold needs it
    import datashader as ds
    from holoviews.operation.datashader import datashade, dynspread, spread

    points = hv.Points(frame, ["x", "y"], _vdims(by))
    kwargs = dict(aggregator=ds.count_cat(by), color_key=color_key) if color_key else \
        dict(aggregator=ds.count(), cmap=cmap)
    if selector:
        kwargs["selector"] = ds.first("index")
    rgb = datashade(points, dynamic=False, x_range=x_range, y_range=y_range, width=max(int(width), 10),
                    height=max(int(height), 10), min_alpha=90, **kwargs)
    if px:
        rgb = spread(rgb, px=px) if threshold is None else dynspread(rgb, max_px=px, threshold=threshold)
    return rgb


def raster_base(frame: pd.DataFrame, colors: dict[str, str], *, x_range, y_range, width: int, height: int,
                title: str, dim: bool, by: str = "class") -> hv.RGB:
    """Every point rasterized in the colour of its ``by`` category (faint while a selection is shown), with
    server-side hover; ``width`` x ``height`` pixels over ``x_range`` x ``y_range`` (the plot's frame)."""
    rgb = _shade(frame, x_range=x_range, y_range=y_range, width=width, height=height, color_key=colors,
                 selector=True, px=2, threshold=0.5, by=by)
    return rgb.opts(alpha=0.25 if dim else 1.0, tools=["hover", *_TOOLS],
                    hover_tooltips=[("class", "class"), ("image #", "index")], selector_in_hovertool=False,
                    **_common(title))


def raster_highlight(frame: pd.DataFrame, colors: dict[str, str], *, x_range, y_range, width: int,
                     height: int, by: str = "class") -> hv.Overlay:
    """The selected points, rasterized on the same grid as :func:`raster_base`: a dark rim, then their colours."""
    size = dict(x_range=x_range, y_range=y_range, width=width, height=height)
    rim = _shade(frame, cmap=[_RIM], px=3, threshold=None, **size)
    fill = _shade(frame, color_key=colors, px=2, threshold=None, by=by, **size)
    return rim.opts(tools=_TOOLS) * fill.opts(tools=_TOOLS)


def points_base(frame: pd.DataFrame, colors: dict[str, str], *, title: str, dim: bool,
                by: str = "class") -> hv.Points:
    """Every point as a glyph coloured by its ``by`` category (faint while a selection is shown); hover names it.
    The legend lists the categories in their order (drawn in that order: the browser's legend follows it)."""
    alpha = 0.25 if dim else 0.85
    tips = [("class", "@class"), ("image #", "@index")] + ([(by, f"@{{{by}}}")] if by not in ("class", "index") else [])
    if by != "class" and len(frame):
        frame = frame.iloc[np.argsort(frame[by].cat.codes.to_numpy(), kind="stable")]
    return hv.Points(frame, ["x", "y"], _vdims(by)).opts(
        color=by, cmap=colors, size=6, alpha=alpha, selection_alpha=alpha, nonselection_alpha=alpha,
        line_color="white", line_width=0.3, tools=[HoverTool(tooltips=tips), *_TOOLS], show_legend=True,
        **_common(title))


def points_highlight(frame: pd.DataFrame, colors: dict[str, str], by: str = "class") -> hv.Points:
    """The selected points, full colour with a dark rim."""
    return hv.Points(frame, ["x", "y"], _vdims(by)).opts(
        color=by, cmap=colors, size=8, alpha=1.0, selection_alpha=1.0, nonselection_alpha=1.0,
        line_color=_RIM, line_width=1.2, show_legend=False, tools=_TOOLS)


class PlotPanel:
    """One plot of the view (0: left, 1: right in side-by-side mode): its streams and what it shows."""

    def __init__(self):
        self.pipe = hv.streams.Pipe(data=None)      # {"frame", "title", "key", "by", "colors"} of the layout shown
        self.ranges = self.size = None
        self.key = None                             # (layer, epoch, method) shown
        self.frame: pd.DataFrame | None = None
        self.raster = None                          # the last base image (raster mode): hover reads its pixels
        self.lasso = self.box = self.pointer = None  # hv.streams.Lasso, BoundsXY, PointerXY of the plot
        # as wide as the page lets it (two share the width side by side), up to twice its height: wider, a layout
        # would be stretched sideways. Its axes are its own (Panel would link the x and y of every layout shown)
        self.pane = pn.pane.HoloViews(None, sizing_mode="stretch_width", min_width=PLOT_WIDTH,
                                      max_width=2 * PLOT_HEIGHT + 120, margin=(0, 5), linked_axes=False,
                                      css_classes=["ls-embedding-plot"])


def hovered_row(rgb: hv.RGB | None, x: float, y: float) -> int | None:
    """The row of the point whose pixel of ``rgb`` (a :func:`raster_base`) is under (x, y), as the hover
    tooltip names it; None over an empty pixel or outside the image."""
    data = getattr(rgb, "data", None)
    if data is None or "__index__" not in getattr(data, "data_vars", ()):
        return None
    xs, ys = data["x"].values, data["y"].values
    if len(xs) < 2 or len(ys) < 2:
        return None
    dx, dy = abs(xs[1] - xs[0]) / 2, abs(ys[1] - ys[0]) / 2
    if not (min(xs[0], xs[-1]) - dx <= x <= max(xs[0], xs[-1]) + dx
            and min(ys[0], ys[-1]) - dy <= y <= max(ys[0], ys[-1]) + dy):
        return None
    row = int(data["__index__"].values[int(np.abs(ys - y).argmin()), int(np.abs(xs - x).argmin())])
    return row if row >= 0 else None


_WARM_LOCK = threading.Lock()
_WARM_THREAD: threading.Thread | None = None


def warm_up() -> None:
    """Compile Datashader's kernels (numba JIT, once per process: about 10 s of CPU on 2 cores) on a tiny
    layout, so that the first real layout draws in well under a second."""
    import holoviews.plotting.bokeh  # noqa: F401  (the options below need a plotting backend loaded)

    frame = points_frame(np.array([[0.0, 0.0], [1.0, 1.0], [0.5, 0.2]]), np.array([0, 1, 1]), np.arange(3),
                         ["a", "b"])
    colors = {"a": "#1f77b4", "b": "#ff7f0e"}
    size = dict(x_range=(0.0, 1.0), y_range=(0.0, 1.0), width=20, height=20)
    raster_base(frame, colors, title="", dim=False, **size)
    raster_highlight(frame, colors, **size)


def warm_up_in_background() -> threading.Thread:
    """Start :func:`warm_up` in a daemon thread, once per process (later calls return that thread).

    Called when a run that will be rasterized starts (its unseen images outnumber the view's threshold), not
    at server start: most runs draw their points as glyphs and never need the kernels, and compiling them
    at start took the CPU from the first page (a numba compile holds the GIL). The layouts come after the
    run's features, metrics and projection, by when the kernels are ready; a draw that comes sooner waits
    on numba's compiler lock rather than compiling twice."""
    global _WARM_THREAD
    with _WARM_LOCK:
        if _WARM_THREAD is None:
            _WARM_THREAD = threading.Thread(target=warm_up, name="layerscope-datashader-warm-up", daemon=True)
            _WARM_THREAD.start()
        return _WARM_THREAD
