"""HoloViews element builders for the live and compare views.

Pure functions from small pandas frames to HoloViews elements; the views wrap
them in ``hv.DynamicMap`` fed by ``Pipe``/``Buffer`` streams. Each builder
returns the same element structure whatever the data (empty data gives NaN
curves), so that HoloViews updates the existing Bokeh glyphs in place.
"""
from __future__ import annotations

from types import MappingProxyType

import holoviews as hv
import numpy as np
import pandas as pd
from bokeh.models import HoverTool

__all__ = [
    "METRIC_LABELS", "LOG_METRICS", "epoch_keys", "metric_curves", "heatmap", "projection_points",
    "training_curves", "utilization_bars", "compare_curves", "empty_projection_frame",
]

METRIC_LABELS = MappingProxyType({
    "nmi": "NMI", "knn_accuracy": "kNN accuracy", "knn_purity": "kNN purity",
    "weighted_knn_accuracy": "weighted kNN", "linear_probe_accuracy": "linear probe",
    "nc1": "NC1", "cdnv": "CDNV", "numerical_rank": "numerical rank", "nc2_equinorm": "NC2 equinorm",
    "nc2_equiangularity": "NC2 equiangularity", "ncc_accuracy": "NCC accuracy",
})
"""Short human labels of the metric names used by lab."""

LOG_METRICS = frozenset({"nc1", "cdnv"})
"""Metrics shown on a log axis (they span orders of magnitude across layers)."""

_SPLIT_RAMPS = MappingProxyType({
    # light -> dark per split; the latest epoch gets the darkest shade
    "unseen": ("#c6dbef", "#9ecae1", "#6baed6", "#4292c6", "#2171b5", "#08519c", "#08306b"),
    "seen": ("#fdd0a2", "#fdae6b", "#fd8d3c", "#f16913", "#d94801", "#a63603", "#7f2704"),
})
_SPLIT_DASH = MappingProxyType({"unseen": "solid", "seen": "dashed"})
_MAX_LINES = 16
_CATEGORY_COLORS = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd",
    "#e6550d", "#31a354", "#756bb1", "#636363",
)


def metric_label(metric: str) -> str:
    return METRIC_LABELS.get(metric, metric)


def plot_text(text) -> str:
    """Text a user supplied (class folder names, run names) for plot data and labels.

    In Jupyter, Panel embeds the plot's data in a <script> tag, where a name such as
    ``</script><script>...`` would run; full-width angle brackets read the same and cannot
    close a tag. (lab.export's notebooks carry their own copy: they must run without app/.)
    """
    return str(text).replace("<", "\uff1c").replace(">", "\uff1e")


def _log10(values: np.ndarray, log: bool) -> np.ndarray:
    """log10 of the positive values (NaN elsewhere) when ``log``; the values unchanged otherwise.

    Collapse metrics are drawn as log10 on a linear axis rather than on a Bokeh
    log axis, which cannot start from an empty (all-NaN) plot.
    """
    if not log:
        return np.asarray(values, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log10(_positive(values, True))


def epoch_keys(n_epochs: int) -> list[int]:
    """Epochs that get a line: all when few, else an even subset that keeps 0 and the last."""
    epochs = list(range(n_epochs + 1))
    if len(epochs) <= _MAX_LINES:
        return epochs
    picks = np.unique(np.round(np.linspace(0, n_epochs, _MAX_LINES)).astype(int))
    return [int(e) for e in picks]


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


def metric_curves(frame: pd.DataFrame, *, metric: str, splits: tuple[str, ...], layers: list[str],
                  n_epochs: int, band: bool = False, height: int = 270, width: int = 380) -> hv.Overlay:
    """Metric vs layer: one line per epoch and split, the latest epoch bold (with hover).

    The element structure is fixed for given ``splits`` and ``band`` (per split:
    optional mean ± std band of the latest epoch, the earlier epochs as one
    NaN-separated line, the latest epoch as a line and markers), so that a DynamicMap updates the same
    Bokeh glyphs in place; few glyphs keep each update cheap.

    Parameters
    ----------
    frame : DataFrame
        Columns split, epoch, layer, mean, std (one row per measured cell,
        means across seeds; std NaN for a single seed).
    layers : list of str
        x positions 0..L-1, labelled with the layer names.
    band : bool
        Draw the across-seed std band (use when the run has several seeds).
    """
    log = metric in LOG_METRICS
    label = ("log10 " if log else "") + metric_label(metric)
    n = len(layers)
    x = np.arange(n, dtype=float)
    layer_pos = {name: i for i, name in enumerate(layers)}
    shown = set(epoch_keys(n_epochs))
    latest = int(frame["epoch"].max()) if len(frame) else -1
    ydim = hv.Dimension(metric, label=label)
    xdim = hv.Dimension("layer_pos", label="layer")
    elements = []
    for split in splits:
        rows = frame[frame["split"] == split] if len(frame) else frame
        groups = {int(e): g for e, g in rows.groupby("epoch")} if len(rows) else {}
        ramp = _SPLIT_RAMPS.get(split, _SPLIT_RAMPS["unseen"])
        dash = _SPLIT_DASH.get(split, "solid")
        # earlier epochs: one line with NaN breaks between epochs (one glyph however many epochs)
        xs, ys = [], []
        for epoch, g in sorted(groups.items()):
            if epoch == latest or epoch not in shown:
                continue
            xs += [x, [np.nan]]
            ys += [_log10(_layer_values(g, "mean", layer_pos, n), log), [np.nan]]
        old_x = np.concatenate(xs) if xs else np.array([np.nan])
        old_y = np.concatenate(ys) if ys else np.array([np.nan])
        mean = _layer_values(groups.get(latest), "mean", layer_pos, n)
        std = _layer_values(groups.get(latest), "std", layer_pos, n)
        if band:
            spread = np.nan_to_num(std)
            lower, upper = mean - spread, mean + spread
            if log:
                lower = np.where(lower > 0, lower, mean * 0.5)
            elements.append(hv.Area((x, _log10(lower, log), _log10(upper, log)), xdim, [ydim, "upper"]).opts(
                color=ramp[-2], alpha=0.2, line_alpha=0, framewise=True))
        elements.append(hv.Curve((old_x, old_y), xdim, ydim).opts(
            color=ramp[2], line_width=1.4, alpha=0.8, line_dash=dash, framewise=True))
        latest_frame = {"layer_pos": x, metric: _log10(mean, log), "layer": np.array(layers, dtype=object),
                        "std": std, "epoch": np.full(n, latest), "split": np.full(n, split, dtype=object)}
        elements.append(hv.Curve(latest_frame, xdim, [ydim, "layer", "std", "epoch", "split"]).opts(
            color=ramp[-1], line_width=3.5, line_dash=dash, framewise=True))
        # markers: a layer measured alone is visible at once (a line needs two points), and carry the hover
        elements.append(hv.Scatter(latest_frame, xdim, [ydim, "layer", "std", "epoch", "split"]).opts(
            color=ramp[-1], size=7, framewise=True,
            tools=[HoverTool(tooltips=[("layer", "@layer"), (label, f"@{{{metric}}}{{0.000}}"),
                                       ("± std", "@std{0.000}"), ("split", "@split"), ("epoch", "@epoch")])]))
    title = f"{label} ({' & '.join(splits)})"
    if len(splits) > 1:
        title += " · seen dashed"
    return hv.Overlay(elements).opts(
        title=title, height=height, width=width, show_legend=False, xrotation=45,
        xticks=list(zip(x.tolist(), layers)), xlim=(-0.3, n - 0.7),
        fontsize={"title": 11, "labels": 9, "xticks": 8, "yticks": 8}, toolbar="above",
        default_tools=["pan", "wheel_zoom", "reset", "save"],
    )


def heatmap(frame: pd.DataFrame, *, metric: str, split: str, layers: list[str],
            height: int = 320, width: int = 440) -> hv.HeatMap:
    """Layer × epoch heatmap of one metric; cells not yet measured (NaN) stay transparent.

    Collapse metrics that span orders of magnitude are shown as log10.
    """
    label = metric_label(metric)
    data = frame[["epoch", "layer", "value"]].copy()
    if metric in LOG_METRICS:
        data["value"] = _log10(data["value"].to_numpy(dtype=float), True)
        label = f"log10 {label}"
    return hv.HeatMap(
        data, kdims=["epoch", hv.Dimension("layer", values=list(layers))],
        vdims=[hv.Dimension("value", label=label)],
    ).opts(
        cmap="viridis", colorbar=True, tools=["hover"], clipping_colors={"NaN": (0, 0, 0, 0)}, framewise=True,
        title=f"{label} ({split}) · layer × epoch", height=height, width=width, xlabel="epoch", ylabel="layer",
        xticks=_epoch_ticks(frame),
        fontsize={"title": 11, "labels": 9, "xticks": 8, "yticks": 8}, toolbar="above",
        default_tools=["reset", "save"],
    )


def _epoch_ticks(frame: pd.DataFrame) -> list[int]:
    epochs = sorted({int(e) for e in frame["epoch"]}) if len(frame) else [0]
    step = max(1, len(epochs) // 12)
    return epochs[::step]


def empty_projection_frame() -> pd.DataFrame:
    return pd.DataFrame({"x": pd.Series(dtype=float), "y": pd.Series(dtype=float),
                         "class": pd.Series(dtype=str), "index": pd.Series(dtype=int),
                         "thumb": pd.Series(dtype=str)})


_THUMB_TOOLTIP = """
<div style="display:flex;align-items:center;gap:6px">
  <img src="@thumb" width="48" height="48" style="image-rendering:pixelated;border:1px solid #ccc"
       onerror="this.style.display='none'"></img>
  <div><b>@class</b><br><span style="font-size:10px">image #@index</span></div>
</div>
"""


def projection_points(frame: pd.DataFrame, *, classes: list[str], title: str,
                      height: int = 360, width: int = 420) -> hv.Points:
    """2-D layout of unseen embeddings coloured by class; hover shows the image thumbnail."""
    cmap = {name: _CATEGORY_COLORS[i % len(_CATEGORY_COLORS)] for i, name in enumerate(classes)}
    hover = HoverTool(tooltips=_THUMB_TOOLTIP)
    return hv.Points(frame, ["x", "y"], ["class", "index", "thumb"]).opts(
        color="class", cmap=cmap, size=6, alpha=0.8, line_color="white", line_width=0.3, framewise=True,
        tools=[hover], title=title, height=height, width=width, xaxis=None, yaxis=None,
        legend_position="right", show_legend=True, toolbar="above",
        default_tools=["pan", "wheel_zoom", "box_zoom", "reset", "save"],
        fontsize={"title": 11, "legend": 8},
    )


def training_curves(frame: pd.DataFrame, *, seeds: list[int], which: str = "loss",
                    height: int = 240, width: int = 300) -> hv.NdOverlay:
    """Training loss (``which="loss"``) or seen accuracy (``"accuracy"``: held-out bold, train dashed)
    per epoch, one line per seed."""
    seeds = list(seeds) or [0]
    curves = {}
    for seed in seeds:
        rows = frame[frame["seed"] == seed] if len(frame) else frame
        x = rows["epoch"].to_numpy(dtype=float) if len(rows) else np.array([], dtype=float)

        def col(name, rows=rows, x=x):
            return rows[name].to_numpy(dtype=float) if len(rows) else x

        if which == "loss":
            curves[(seed, "train")] = hv.Curve((x, col("train_loss")), "epoch", "train loss").opts(
                color="#444444", line_width=2, framewise=True)
        else:
            curves[(seed, "held-out")] = hv.Curve((x, col("heldout_accuracy")), "epoch", "seen accuracy").opts(
                color="#d94801", line_width=2.5, framewise=True)
            curves[(seed, "train")] = hv.Curve((x, col("train_accuracy")), "epoch", "seen accuracy").opts(
                color="#fdae6b", line_width=1.5, line_dash="dashed", framewise=True)
    title = "training loss" if which == "loss" else "seen accuracy (held-out bold)"
    opts = dict(title=title, height=height, width=width, show_legend=False, toolbar=None,
                fontsize={"title": 11, "labels": 9, "xticks": 8, "yticks": 8})
    if which != "loss":
        opts["ylim"] = (0, 1.02)
    return hv.NdOverlay(curves, kdims=["seed", "data"]).opts(batched=False, **opts)


def utilization_bars(frame: pd.DataFrame, *, layers: list[str], height: int = 240, width: int = 420) -> hv.Bars:
    """Relative utilization ‖W−W⁰‖/‖W⁰‖ per layer at the latest epoch (Wang & Yang)."""
    values = dict(zip(frame["layer"], frame["relative"])) if len(frame) else {}
    epoch = int(frame["epoch"].iloc[0]) if len(frame) else None
    data = pd.DataFrame({"layer": list(layers), "relative": [values.get(name, np.nan) for name in layers]})
    title = "layer utilization" + (f" · epoch {epoch}" if epoch is not None else " (after training starts)")
    return hv.Bars(data, "layer", ("relative", "‖W−W⁰‖ / ‖W⁰‖")).opts(
        title=title, height=height, width=width, color="#6a51a3", xrotation=45, tools=["hover"], framewise=True,
        fontsize={"title": 11, "labels": 9, "xticks": 8, "yticks": 8}, toolbar=None,
    )


def compare_curves(frame: pd.DataFrame, *, metric: str, split: str, height: int = 420,
                   width: int = 760) -> hv.NdOverlay:
    """Overlay of several runs' metric-vs-layer curves at their last epoch (mean over seeds).

    Parameters
    ----------
    frame : DataFrame
        Columns run, layer, layer_index, value. Layers of different backbones
        differ, so x is the relative depth 0..1 (input → output).
    """
    log = metric in LOG_METRICS
    label = ("log10 " if log else "") + metric_label(metric)
    xdim = hv.Dimension("depth", label="relative depth (input → output)")
    ydim = hv.Dimension(metric, label=label)
    curves = {}
    groups = list(frame.groupby("run", sort=False)) if frame is not None and len(frame) else []
    for i, (run, g) in enumerate(groups):
        g = g.sort_values("layer_index")
        depth = g["layer_index"].to_numpy(dtype=float) / max(1, g["layer_index"].max())
        curves[run] = hv.Curve(
            {"depth": depth, metric: _log10(g["value"].to_numpy(dtype=float), log),
             "layer": g["layer"].to_numpy(dtype=object)},
            xdim, [ydim, "layer"],
        ).opts(color=_CATEGORY_COLORS[i % len(_CATEGORY_COLORS)], line_width=2.5, tools=["hover"])
    title = f"{label} ({split}) · last epoch of each run"
    if not curves:
        curves["(select runs in the table)"] = hv.Curve({"depth": np.array([0.0, 1.0]), metric: np.full(2, np.nan),
                                                         "layer": np.array(["", ""], dtype=object)},
                                                        xdim, [ydim, "layer"])
        title = "Select runs in the table to overlay their curves"
    return hv.NdOverlay(curves, kdims="run").opts(
        title=title, height=height, width=width, legend_position="bottom", toolbar="above", batched=False,
    )
