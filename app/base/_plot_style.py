"""What every plot of :mod:`app.base.plots` shares: metric labels and log scales, colours, safe text, axis ranges.

Private: :mod:`app.base.plots` re-exports the public names (``from app import plots``).
"""
from __future__ import annotations

from collections.abc import Mapping, Set
from types import MappingProxyType

import numpy as np
import pandas as pd

from lab import analysis, catalogue

__all__ = [
    "METRIC_LABELS", "LOG_METRICS", "metric_label", "HEATMAP_WIDTH", "plot_text", "plot_title", "epoch_keys",
    "curves_title", "value_range", "class_colors", "arrival_colors", "NEVER", "wheel_zoom_off", "draw_on_canvas",
    "PLOT_OPTS",
]


class _MetricLabels(Mapping):
    """{metric: short label}, read from the live catalogue at each use (a metric registered later is in it)."""

    def __getitem__(self, name):
        return catalogue.METRICS[name].label

    def __iter__(self):
        return iter(catalogue.METRICS)

    def __len__(self):
        return len(catalogue.METRICS)


class _LogMetrics(Set):
    """The metric names drawn as log10, read from the live catalogue at each use."""

    def __contains__(self, name):
        info = catalogue.METRICS.get(name)
        return bool(info is not None and info.log_scale)

    def __iter__(self):
        return iter(catalogue.metric_names(where=lambda m: m.log_scale))

    def __len__(self):
        return len(catalogue.metric_names(where=lambda m: m.log_scale))


def _by_split(**styles) -> Mapping:
    """A style per split, keyed on the catalogue's split table and in its order; a key that names no split fails
    at import, not as a silently default-styled line."""
    unknown = sorted(set(styles) - set(catalogue.SPLITS))
    if unknown:
        raise ValueError(f"split styles must be keyed on {', '.join(map(repr, catalogue.SPLITS))}. Got {unknown[0]!r}.")
    return MappingProxyType({name: styles[name] for name in catalogue.SPLITS if name in styles})


METRIC_LABELS = _MetricLabels()
"""Short human labels of the metric names used by lab (from :mod:`lab.catalogue`, live: not a copy)."""

LOG_METRICS = _LogMetrics()
"""Metrics shown as log10 (they span orders of magnitude across layers; from :mod:`lab.catalogue`, live)."""

metric_label = catalogue.metric_label

_SPLIT_RAMPS = _by_split(
    # light -> dark per split; the latest epoch gets the darkest shade
    unseen=("#c6dbef", "#9ecae1", "#6baed6", "#4292c6", "#2171b5", "#08519c", "#08306b"),
    seen=("#fdd0a2", "#fdae6b", "#fd8d3c", "#f16913", "#d94801", "#a63603", "#7f2704"),
)
_SPLIT_DASH = _by_split(unseen="solid", seen="dashed")
SPLIT_DASH_COLLAPSE = _by_split(train="solid", seen="dashed", unseen="dotted")
"""Line dash of each split in the neural-collapse panels: the training sample solid, held-out seen images dashed,
unseen classes dotted (collapse on the training set against new data)."""
_MAX_LINES = 16
HEATMAP_WIDTH = 440
"""Width in pixels of a layer × epoch heatmap (its least width where it grows with the page)."""
_LEVEL = f"{100 * analysis.LEVEL:.0f} %"
_CATEGORY_COLORS = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd",
    "#e6550d", "#31a354", "#756bb1", "#636363",
)


def plot_text(text) -> str:
    """Text a user supplied (class folder names, run names) for plot data and labels.

    In Jupyter, Panel embeds the plot's data in a <script> tag, where a name such as
    ``</script><script>...`` would run; full-width angle brackets read the same and cannot
    close a tag. Exported notebooks draw with this module too.
    """
    return str(text).replace("<", "\uff1c").replace(">", "\uff1e")


def plot_title(text, limit: int = 70) -> str:
    """A plot title from user text: :func:`plot_text`, shortened to ``limit`` characters, braces doubled
    (HoloViews formats titles with ``str.format``)."""
    text = plot_text(text)
    text = text if len(text) <= limit else text[:limit - 1] + "…"
    return text.replace("{", "{{").replace("}", "}}")


def _width(width: int, responsive: bool) -> dict:
    """Plot options: ``width`` pixels wide, or (``responsive``) as wide as its pane, at least ``width``."""
    return dict(responsive=True, min_width=width) if responsive else dict(width=width)


def _log10(values: np.ndarray, log: bool) -> np.ndarray:
    """log10 of the positive values (NaN elsewhere) when ``log``; the values unchanged otherwise.

    Collapse metrics are drawn as log10 on a linear axis rather than on a Bokeh
    log axis, which cannot start from an empty (all-NaN) plot.
    """
    if not log:
        return np.asarray(values, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log10(_positive(values, True))


def epoch_keys(n_epochs: int, epochs=None) -> list[int]:
    """Epochs that get a line: all when few, else an even subset that keeps the first and the last.

    ``epochs``: the run's evaluation epochs when they are not 0..n_epochs (a monitored loop may number its
    evaluations by steps: 0, 50, 100, ...); None: 0..n_epochs."""
    epochs = list(range(n_epochs + 1)) if epochs is None else sorted({int(e) for e in epochs})
    if len(epochs) <= _MAX_LINES:
        return epochs
    picks = np.unique(np.round(np.linspace(0, len(epochs) - 1, _MAX_LINES)).astype(int))
    return [epochs[i] for i in picks]


def _ramp_color(split: str, epoch: int, n_epochs: int) -> str:
    ramp = _SPLIT_RAMPS.get(split, _SPLIT_RAMPS["unseen"])
    if n_epochs <= 0:
        return ramp[-1]
    return ramp[min(len(ramp) - 1, int(round(epoch / n_epochs * (len(ramp) - 1))))]


def _positive(values: np.ndarray, log: bool) -> np.ndarray:
    if not log:
        return values
    values = np.asarray(values, dtype=float).copy()
    values[values <= 0] = np.nan   # log axes cannot show 0 or negatives
    return values


def _layer_values(rows: pd.DataFrame, column: str, layer_pos: dict[str, int], n: int) -> np.ndarray:
    values = np.full(n, np.nan)
    if rows is not None and len(rows):
        for name, value in zip(rows["layer"].tolist(), rows[column].tolist()):
            i = layer_pos.get(name)
            if i is not None:
                values[i] = value
    return values


def curves_title(label: str, splits, interval: bool, axis: str = "epoch") -> str:
    """The title of a metric-vs-layer plot: what is measured on the first line, the key of its lines on the
    second, so that each fits beside the toolbar at the least width (on one line the key was cut off).

    The key names the seen split's dashes and the bootstrap band where the plot has them, else the bold line;
    the title keeps two lines either way, so the plot does not shrink when the band arrives."""
    key = (["seen dashed"] if len(splits) > 1 else []) + ([f"dotted: {_LEVEL} bootstrap"] if interval else [])
    return f"{label} ({' & '.join(splits)})\n{' · '.join(key) or f'bold: latest {axis}'}"


def value_range(*values, padding: float = 0.06) -> tuple[float | None, float | None]:
    """(low, high) of the finite numbers in ``values`` (arrays), widened by ``padding`` of the span on each side
    (of the magnitude, at least 0.01, for a single value); (None, None) when none is finite (HoloViews' default)."""
    finite = np.concatenate([np.asarray(v, dtype=float).ravel() for v in values]) if values else np.zeros(0)
    finite = finite[np.isfinite(finite)]
    if not finite.size:
        return None, None
    low, high = float(finite.min()), float(finite.max())
    pad = padding * (high - low) if high > low else max(0.01, padding * abs(high))
    return low - pad, high + pad


def class_colors(classes) -> dict[str, str]:
    """{class name (:func:`plot_text`): colour}: the i-th class gets the i-th category colour, as in
    :func:`app.base.plots.projection_points`, so that a class has one colour in every plot of a run."""
    return {plot_text(name): _CATEGORY_COLORS[i % len(_CATEGORY_COLORS)] for i, name in enumerate(classes)}


NEVER = "never"
"""The arrival "layer" of an image the final layer has wrong (:func:`lab.analysis.arrival_counts` names it so)."""


def arrival_colors(layers) -> dict[str, str]:
    """{layer (:func:`plot_text`): colour, :data:`NEVER`: red}: a ramp in layer order, dark purple (input) to
    yellow (output), so that the colours of the arrival layers read in depth order; "never" stands apart."""
    from bokeh.palettes import Viridis256

    names = [plot_text(name) for name in layers]
    span = max(len(names) - 1, 1)
    colors = {name: Viridis256[round(220 * i / span)] for i, name in enumerate(names)}
    colors[NEVER] = "#d62728"
    return colors


def wheel_zoom_off(plot, element) -> None:
    """HoloViews hook: the wheel-zoom tool stays in the toolbar but starts off, so that the mouse wheel over a plot
    scrolls the page; the user turns zoom on from the toolbar.

    HoloViews activates ``wheel_zoom`` by default, and Bokeh's ``"auto"`` would activate it when a plot is clicked;
    None leaves every scroll tool off until its toolbar button is pressed.
    """
    toolbar = getattr(getattr(plot, "state", None), "toolbar", None)
    if toolbar is not None:
        toolbar.active_scroll = None


def draw_on_canvas(plot, element) -> None:
    """HoloViews hook: draw on a 2-D canvas, not with WebGL (HoloViews' default).

    The app's plots are small (layouts above 5,000 points are rasterized by Datashader), where WebGL buys nothing
    and costs much: Bokeh draws every WebGL plot on one shared GL canvas and copies it into the plot's own, on each
    paint, and without a GPU (a headless browser, a remote desktop) GL is emulated on the CPU. Walking a page of
    stored runs, Chromium spent 13 % of its time in those copies (``drawImage`` from ``blit_webgl``).
    """
    state = getattr(plot, "state", None)
    if hasattr(state, "output_backend"):
        state.output_backend = "canvas"


PLOT_OPTS = MappingProxyType({"hooks": [wheel_zoom_off, draw_on_canvas]})
"""Plot options of every plot the app builds: ``element.opts(**PLOT_OPTS)`` (see :func:`wheel_zoom_off` and
:func:`draw_on_canvas`)."""
