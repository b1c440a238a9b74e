"""The layer axes of the app's plots: as many layer names as fit, every name still in the hover.

A deep backbone (a 48-layer MLP, a ViT-L's 24 blocks, module taps) has more layers than an axis can print side by
side; :func:`layer_ticks` keeps every k-th, and :func:`shown_layers_hook` does the same on a categorical axis (the
heatmap's rows, the utilization bars). :mod:`app.base.plots` uses them on every layer axis.
"""
from __future__ import annotations

import math

from bokeh.models import CustomJSTickFormatter

from ._plot_style import PLOT_OPTS

__all__ = ["TICK_PITCH", "layer_ticks", "plot_opts_with", "shown_layers_hook"]

TICK_PITCH = {"x": 18, "y": 14}
"""Pixels one layer's tick label (8 pt) needs along an axis: on x, turned 45° (its line height over sin 45°);
on y, level (its line height and a gap)."""
_AXIS_MARGIN = 80
"""Pixels of a plot's width (or height) that are not its axis: the other axis' labels, the title, the toolbar."""


def layer_ticks(layers, length: int, *, axis: str = "x") -> list[tuple[int, str]]:
    """The layer ticks that fit along an ``axis`` ("x" or "y") of a plot ``length`` pixels wide (or high).

    Every ``k``-th layer from the first, ``k`` the least that keeps the labels from overlapping
    (:data:`TICK_PITCH` pixels each along the axis, the plot less :data:`_AXIS_MARGIN`): 49 layers on a 380 px
    plot are labelled every 3rd. A responsive plot's ``length`` is its least size, so the labels fit at any width.
    Every layer's full name stays in the plot's hover. Returns ``[(position, name), ...]``, positions 0..L-1.
    """
    if axis not in TICK_PITCH:
        raise ValueError(f"axis must be one of {', '.join(TICK_PITCH)}; got {axis!r} instead")
    layers = list(layers)
    fit = max(1, int((length - _AXIS_MARGIN) // TICK_PITCH[axis]))
    step = max(1, math.ceil(len(layers) / fit))
    return [(i, layers[i]) for i in range(0, len(layers), step)]


_SHOWN_ONLY = "return shown.includes(tick) ? tick : ''"


def shown_layers_hook(layers, length: int, axis: str):
    """A HoloViews hook that prints on a categorical layer axis only the labels :func:`layer_ticks` keeps (the
    factors stay, so every cell and bar keeps its place and its hover). A formatter, not ``major_label_overrides``,
    which BokehJS's categorical axis ignores; one per axis, its list updated in place (no new model per redraw)."""
    shown = [str(name) for _, name in layer_ticks(layers, length, axis=axis)]

    def hook(plot, _element):
        for bokeh_axis in getattr(plot.state, f"{axis}axis"):
            if isinstance(bokeh_axis.formatter, CustomJSTickFormatter):
                if bokeh_axis.formatter.args.get("shown") != shown:
                    bokeh_axis.formatter.args = {"shown": shown}
            else:
                bokeh_axis.formatter = CustomJSTickFormatter(args={"shown": shown}, code=_SHOWN_ONLY)

    return hook


def plot_opts_with(*hooks) -> dict:
    """:data:`PLOT_OPTS` with ``hooks`` after its own."""
    return {**PLOT_OPTS, "hooks": [*PLOT_OPTS["hooks"], *hooks]}
