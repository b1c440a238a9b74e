"""HoloViews element builders for the app's views and for notebooks.

Pure functions from small pandas frames (or stored runs) to HoloViews elements. The app's
views wrap them in ``hv.DynamicMap`` fed by ``Pipe``/``Buffer`` streams; each of those
builders returns the same element structure whatever the data (empty data gives NaN curves),
so that HoloViews updates the existing Bokeh glyphs in place.

Exported and shipped notebooks draw with the same module (``from app import plots``): the
figures of stored runs (:func:`layer_curves`, :func:`layer_epoch_heatmap`, :func:`epoch_curves`,
:func:`projection_plot`, :func:`accuracy_vs_g`) take their numbers from :mod:`lab.export.tables`,
that is from :mod:`lab.analysis`; names, labels and log scales come from :mod:`lab.catalogue`.
Text a user typed (run and class names) reaches a plot only through :func:`plot_text`.
"""
from __future__ import annotations

import holoviews as hv
import numpy as np
import pandas as pd
from bokeh.models import HoverTool

from ._plot_style import (_CATEGORY_COLORS, _LEVEL, _SPLIT_DASH, _SPLIT_RAMPS, HEATMAP_WIDTH, LOG_METRICS,
                             METRIC_LABELS, NEVER, SPLIT_DASH_COLLAPSE, PLOT_OPTS, _layer_values, _log10,
                             _positive, _width, arrival_colors, class_colors, curves_title, draw_on_canvas, epoch_keys,
                             metric_label, plot_text, plot_title, value_range, wheel_zoom_off)
from lab.export import tables

from ._layer_axis import TICK_PITCH, layer_ticks, plot_opts_with, shown_layers_hook

from ._collapse_plots import (CLASSIFIER_COLOR, SPLIT_MARKERS, SPLIT_NAMES, TERMINAL_LABEL, collapse_curves,
                              cosine_heatmap, law_depth, law_label, law_r_curve, layer_colors, simplex_plane)

__all__ = [
    "METRIC_LABELS", "LOG_METRICS", "metric_label", "plot_text", "plot_title", "epoch_keys", "metric_curves",
    "curves_title", "value_range",
    "heatmap", "projection_points", "training_curves", "utilization_bars", "compare_curves",
    "empty_projection_frame", "layer_curves", "layer_epoch_heatmap", "epoch_curves", "projection_plot",
    "accuracy_vs_g", "HEATMAP_WIDTH", "class_colors", "arrival_colors", "NEVER", "SELECTION_MEASURES",
    "selection_curves", "PLOT_OPTS", "wheel_zoom_off", "draw_on_canvas", "layer_ticks", "TICK_PITCH",
    # neural collapse over training (app.base._collapse_plots)
    "collapse_curves", "cosine_heatmap", "simplex_plane", "layer_colors", "CLASSIFIER_COLOR", "TERMINAL_LABEL",
    "SPLIT_NAMES", "SPLIT_DASH_COLLAPSE",
    # the law of equi-separation (app.base._collapse_plots)
    "law_depth", "law_r_curve", "law_label", "SPLIT_MARKERS",
]


def metric_curves(frame: pd.DataFrame, *, metric: str, splits: tuple[str, ...], layers: list[str],
                  n_epochs: int, band: bool = False, interval: bool = False, height: int = 290,
                  width: int = 380, responsive: bool = False, epochs=None, axis: str = "epoch",
                  label: str | None = None) -> hv.Overlay:
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
    interval : bool
        Draw the latest epoch's bootstrap interval (columns low, high) as a dotted band where both are finite.
    responsive : bool
        Grow with the page (``width`` is then the least width); else ``width`` pixels wide.
    epochs : list of int, optional
        The run's evaluation epochs when they are not 0..n_epochs (:func:`epoch_keys`).
    axis : {"epoch", "step"}
        What the run's epoch numbers count (its meta ``axis``: a monitored loop may count optimizer steps).
    label : str, optional
        The metric's name on the y axis, in the hover and the title (default: :func:`metric_label`).

    The title is two lines, what is measured and the key of the lines (:func:`curves_title`); the y axis spans
    every value drawn, bands included, with a little padding (:func:`value_range`).
    """
    log = metric in LOG_METRICS
    label = ("log10 " if log else "") + (label or metric_label(metric, axis=axis))
    n = len(layers)
    x = np.arange(n, dtype=float)
    layer_pos = {name: i for i, name in enumerate(layers)}
    shown = set(epoch_keys(n_epochs, epochs))
    latest = int(frame["epoch"].max()) if len(frame) else -1
    ydim = hv.Dimension(metric, label=label)
    xdim = hv.Dimension("layer_pos", label="layer")
    elements, shown_interval, drawn_y = [], False, []
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
            drawn_y += [_log10(lower, log), _log10(upper, log)]
            elements.append(hv.Area((x, _log10(lower, log), _log10(upper, log)), xdim, [ydim, "upper"]).opts(
                color=ramp[-2], alpha=0.2, line_alpha=0, framewise=True))
        if interval:
            low, high = (_log10(_layer_values(groups.get(latest), c, layer_pos, n), log) for c in ("low", "high"))
            drawn = np.isfinite(low) & np.isfinite(high)
            shown_interval = shown_interval or bool(drawn.any())
            drawn_y += [low[drawn], high[drawn]]
            elements.append(hv.Area((x[drawn], low[drawn], high[drawn]), xdim, [ydim, "high"]).opts(
                color=ramp[-1], fill_alpha=0.12, line_alpha=0.8, line_dash="dotted", framewise=True))
        elements.append(hv.Curve((old_x, old_y), xdim, ydim).opts(
            color=ramp[2], line_width=1.4, alpha=0.8, line_dash=dash, framewise=True))
        drawn_y += [old_y, _log10(mean, log)]
        # the names under "layer_name": a column "layer" would be overwritten by the x axis' label, "layer"
        latest_frame = {"layer_pos": x, metric: _log10(mean, log), "layer_name": np.array(layers, dtype=object),
                        "std": std, "epoch": np.full(n, latest), "split": np.full(n, split, dtype=object)}
        elements.append(hv.Curve(latest_frame, xdim, [ydim, "layer_name", "std", "epoch", "split"]).opts(
            color=ramp[-1], line_width=3.5, line_dash=dash, framewise=True))
        # markers: a layer measured alone is visible at once (a line needs two points), and carry the hover
        elements.append(hv.Scatter(latest_frame, xdim, [ydim, "layer_name", "std", "epoch", "split"]).opts(
            color=ramp[-1], size=7, framewise=True,
            tools=[HoverTool(tooltips=[("layer", "@layer_name"), (label, f"@{{{metric}}}{{0.000}}"),
                                       ("± std", "@std{0.000}"), ("split", "@split"), (axis, "@epoch")])]))
    # the y axis spans the values drawn, bands included, whatever HoloViews' defaults (a range shared with another
    # plot once spanned 0-1: the live view's panes keep their own axes, see app.live.view)
    return hv.Overlay(elements).redim.range(**{metric: value_range(*drawn_y)}).opts(
        title=curves_title(label, splits, shown_interval, axis), height=height, **_width(width, responsive),
        show_legend=False, xrotation=45,
        xticks=layer_ticks(layers, width), xlim=(-0.3, n - 0.7),
        fontsize={"title": 11, "labels": 9, "xticks": 8, "yticks": 8}, toolbar="right",   # the title's row is its own
        default_tools=["pan", "wheel_zoom", "reset", "save"], **PLOT_OPTS,
    )


def heatmap(frame: pd.DataFrame, *, metric: str, split: str, layers: list[str],
            height: int = 320, width: int = HEATMAP_WIDTH, title: str | None = None, cmap: str = "viridis",
            responsive: bool = False, axis: str = "epoch") -> hv.HeatMap:
    """Layer × epoch heatmap of one metric; cells not yet measured (NaN) stay transparent.

    Collapse metrics that span orders of magnitude are shown as log10. ``frame`` has columns
    epoch, layer, value (the mean over seeds); ``title`` must already be safe (:func:`plot_title`).
    ``responsive``: grow with the page, ``width`` the least width; ``axis``: what the epochs count ("step" for
    a monitored loop counted in optimizer steps), the x axis' label.
    """
    label = metric_label(metric)
    data = frame[["epoch", "layer", "value"]].copy()
    if metric in LOG_METRICS:
        data["value"] = _log10(data["value"].to_numpy(dtype=float), True)
        label = f"log10 {label}"
    return hv.HeatMap(
        data, kdims=[hv.Dimension("epoch", label=axis), hv.Dimension("layer", values=list(layers))],
        vdims=[hv.Dimension("value", label=label)],
    ).opts(
        cmap=cmap, colorbar=True, tools=["hover"], clipping_colors={"NaN": (0, 0, 0, 0)}, framewise=True,
        title=title or f"{label} ({split}) · layer × {axis}", height=height, **_width(width, responsive),
        xlabel=axis, ylabel="layer",
        **_epoch_axis(frame),
        fontsize={"title": 11, "labels": 9, "xticks": 8, "yticks": 8}, toolbar="above",
        default_tools=["reset", "save"], **plot_opts_with(shown_layers_hook(layers, height, "y")),
    )


def _epoch_axis(frame: pd.DataFrame) -> dict:
    """At most 12 epoch ticks, and half a cell beyond the first and last epoch (else their columns are halved)."""
    epochs = sorted({int(e) for e in frame["epoch"]}) if len(frame) else [0]
    return {"xticks": epochs[::max(1, len(epochs) // 12)], "xlim": (epochs[0] - 0.5, epochs[-1] + 0.5)}


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
        default_tools=["pan", "wheel_zoom", "box_zoom", "reset", "save"], **PLOT_OPTS,
        fontsize={"title": 11, "legend": 8},
    )


def training_curves(frame: pd.DataFrame, *, seeds: list[int], which: str = "loss",
                    height: int = 240, width: int = 300, responsive: bool = False,
                    axis: str = "epoch") -> hv.NdOverlay:
    """Training loss (``which="loss"``) or seen accuracy (``"accuracy"``: held-out bold, train dashed)
    per epoch (``axis``: or per step), one line per seed (``responsive``: growing with the page from ``width``)."""
    xdim = hv.Dimension("epoch", label=axis)
    seeds = list(seeds) or [0]
    curves = {}
    for seed in seeds:
        rows = frame[frame["seed"] == seed] if len(frame) else frame
        x = rows["epoch"].to_numpy(dtype=float) if len(rows) else np.array([], dtype=float)

        def col(name, rows=rows, x=x):
            return rows[name].to_numpy(dtype=float) if len(rows) else x

        if which == "loss":
            curves[(seed, "train")] = hv.Curve((x, col("train_loss")), xdim, "train loss").opts(
                color="#444444", line_width=2, framewise=True)
        else:
            curves[(seed, "held-out")] = hv.Curve((x, col("heldout_accuracy")), xdim, "seen accuracy").opts(
                color="#d94801", line_width=2.5, framewise=True)
            curves[(seed, "train")] = hv.Curve((x, col("train_accuracy")), xdim, "seen accuracy").opts(
                color="#fdae6b", line_width=1.5, line_dash="dashed", framewise=True)
    title = "training loss" if which == "loss" else "seen accuracy (held-out bold)"
    # ticks at the evaluations (whole epochs or steps), not at 0.5s between them
    evaluations = sorted({int(e) for e in frame["epoch"].dropna()}) if len(frame) else []
    opts = dict(title=title, height=height, **_width(width, responsive), show_legend=False, toolbar=None,
                fontsize={"title": 11, "labels": 9, "xticks": 8, "yticks": 8}, **PLOT_OPTS,
                **({"xticks": evaluations[::max(1, len(evaluations) // 8)]} if evaluations else {}))
    if which != "loss":
        opts["ylim"] = (0, 1.02)
    return hv.NdOverlay(curves, kdims=["seed", "data"]).opts(batched=False, **opts)


def utilization_bars(frame: pd.DataFrame, *, layers: list[str], height: int = 240, width: int = 420,
                     responsive: bool = False, axis: str = "epoch") -> hv.Bars:
    """Relative utilization ‖W−W⁰‖/‖W⁰‖ per layer at the latest epoch (Wang & Yang); ``responsive``: growing
    with the page from ``width``."""
    values = dict(zip(frame["layer"], frame["relative"])) if len(frame) else {}
    epoch = int(frame["epoch"].iloc[0]) if len(frame) else None
    data = pd.DataFrame({"layer": list(layers), "relative": [values.get(name, np.nan) for name in layers]})
    title = "layer utilization" + (f" · {axis} {epoch}" if epoch is not None else " (after training starts)")
    return hv.Bars(data, "layer", ("relative", "‖W−W⁰‖ / ‖W⁰‖")).opts(
        title=title, height=height, **_width(width, responsive), color="#6a51a3", xrotation=45, tools=["hover"],
        framewise=True,
        fontsize={"title": 11, "labels": 9, "xticks": 8, "yticks": 8}, toolbar=None,
        **plot_opts_with(shown_layers_hook(layers, width, "x")),
    )


def compare_curves(frame: pd.DataFrame, *, metric: str, split: str, height: int = 420,
                   width: int = 760) -> hv.NdOverlay:
    """Overlay of several runs' metric-vs-layer curves at their last evaluation (mean over seeds; a run may count
    epochs or steps).

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
    title = f"{label} ({split}) · last evaluation of each run"
    if not curves:
        curves["(select runs in the table)"] = hv.Curve({"depth": np.array([0.0, 1.0]), metric: np.full(2, np.nan),
                                                         "layer": np.array(["", ""], dtype=object)},
                                                        xdim, [ydim, "layer"])
        title = "Select runs in the table to overlay their curves"
    return hv.NdOverlay(curves, kdims="run").opts(
        title=title, height=height, width=width, legend_position="bottom", toolbar="above", batched=False,
        **PLOT_OPTS,
    )


SELECTION_MEASURES = {"share_right": "share right (kNN vote)", "mean_margin": "mean margin (class centres)",
                      "nmi": metric_label("nmi"), "cdnv": metric_label("cdnv")}
"""The measures of :func:`lab.analysis.selection_report` drawn by :func:`selection_curves`, with their labels."""


def selection_curves(frame: pd.DataFrame, measure: str = "share_right", *, title: str = "", height: int = 260,
                     width: int = 420, responsive: bool = False) -> hv.Overlay:
    """One measure per layer on a selection of images over the same on all images.

    ``frame`` is a :func:`lab.analysis.selection_report` (index layer, columns ``measure`` and ``all_`` +
    ``measure``); ``measure`` one of :data:`SELECTION_MEASURES`. The element structure is the same for any
    frame (all images, then the selection: a line and markers each), so a DynamicMap updates it in place.
    """
    if measure not in SELECTION_MEASURES:
        raise ValueError(f"measure must be one of {', '.join(SELECTION_MEASURES)}; got {measure!r}")
    log = measure in LOG_METRICS
    label = ("log10 " if log else "") + SELECTION_MEASURES[measure]
    layers = [plot_text(name) for name in frame.index]
    x = np.arange(len(layers), dtype=float)
    n = int(frame["n"].iloc[0]) if len(frame) else 0
    xdim, ydim = hv.Dimension("layer_pos", label="layer"), hv.Dimension("value", label=label)
    elements, drawn = [], []
    for column, name, color, dash in ((f"all_{measure}", "all images", "#7f7f7f", "dashed"),
                                      (measure, f"selection ({n:,} image{'s' if n != 1 else ''})", "#08519c",
                                       "solid")):
        y = _log10(frame[column].to_numpy(dtype=float), log) if len(frame) else np.zeros(0)
        drawn.append(y)
        data = {"layer_pos": x, "value": y, "layer_name": np.array(layers, dtype=object)}   # see metric_curves
        elements.append(hv.Curve(data, xdim, [ydim, "layer_name"], label=name).opts(
            color=color, line_width=2.5, line_dash=dash, framewise=True))
        elements.append(hv.Scatter(data, xdim, [ydim, "layer_name"], label=name).opts(
            color=color, size=7, framewise=True,
            tools=[HoverTool(tooltips=[("", name), ("layer", "@layer_name"), (label, "@value{0.000}")])]))
    return hv.Overlay(elements).redim.range(value=value_range(*drawn)).opts(
        title=title, height=height, **_width(width, responsive), xrotation=45, legend_position="bottom_left",
        xticks=layer_ticks(layers, width), xlim=(-0.3, max(len(layers), 1) - 0.7), toolbar="right",
        fontsize={"title": 11, "labels": 9, "xticks": 8, "yticks": 8, "legend": 8},
        default_tools=["pan", "wheel_zoom", "reset", "save"], **PLOT_OPTS)


# ---------------------------------------------------------------------------------------------
# figures of stored runs (exported and shipped notebooks): numbers from lab.export.tables / lab.analysis
# ---------------------------------------------------------------------------------------------

_NOTEBOOK_FONTS = {"title": 11, "labels": 9, "xticks": 8, "yticks": 8}


def _error_bars(mean: np.ndarray, std: np.ndarray, log: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """y, and the distances down and up to mean ∓ std, on the plotted scale (log10 for log metrics)."""
    spread = np.nan_to_num(std)
    y = _log10(mean, log)
    if not log:
        return y, spread, spread
    lower = np.where(mean - spread > 0, mean - spread, mean * 0.5)   # log axes cannot reach 0
    return y, y - _log10(lower, True), _log10(mean + spread, True) - y


def layer_curves(runs, metric: str, *, split: str = "unseen", epoch: int | None = None,
                 labels=None, height: int = 360, width: int = 480) -> hv.Overlay:
    """Metric vs layer, one curve per run: mean ± std over seeds (error bars) at one epoch, and a light
    band for the bootstrap interval over the unseen images where the run recorded one.

    Parameters
    ----------
    runs : {key: RunRecord} or list of records (see :mod:`lab.export.tables`)
    epoch : None = each run's last complete evaluation
    labels : {key: label}; default :func:`lab.export.tables.run_labels`

    Runs of one architecture share the x axis by layer name; runs with different layers are
    placed by relative depth (0 = input, 1 = output), the layer named in the hover.
    """
    runs = tables.as_runs(runs)
    frame = tables.curve_table(runs, metric, split=split, epoch=epoch, labels=labels)
    log = metric in LOG_METRICS
    label = ("log10 " if log else "") + metric_label(metric)
    orders = [tables.run_layers(record) for record in runs.values()]
    shared = bool(orders) and all(order == orders[0] for order in orders)
    xdim = hv.Dimension("x", label="layer (input → output)" if shared else "relative depth (input → output)")
    ydim = hv.Dimension(metric, label=label)
    hover = [ydim, "layer", "std", "n"]
    elements = []
    for i, (_key, rows) in enumerate(frame.groupby("key", sort=False)):
        color = _CATEGORY_COLORS[i % len(_CATEGORY_COLORS)]
        name = plot_text(rows["run"].iloc[0])
        mean, std = rows["mean"].to_numpy(dtype=float), rows["std"].to_numpy(dtype=float)
        y, down, up = _error_bars(mean, std, log)
        data = {"x": rows["layer_index" if shared else "depth"].to_numpy(dtype=float), metric: y,
                "layer": np.array([plot_text(n) for n in rows["layer"]], dtype=object), "std": std,
                "n": rows["n"].to_numpy(), "down": down, "up": up}
        low, high = rows["low"].to_numpy(dtype=float), rows["high"].to_numpy(dtype=float)
        if np.isfinite(low).any():
            elements.append(hv.Area((data["x"], _log10(_positive(low, log), log), _log10(high, log)), xdim,
                                    [ydim, "high"]).opts(color=color, alpha=0.15, line_alpha=0))
        elements += [
            hv.Curve(data, xdim, hover, label=name).opts(color=color, line_width=2, tools=["hover"]),
            hv.ErrorBars(data, xdim, [ydim, "down", "up"], label=name).opts(color=color),
            hv.Scatter(data, xdim, hover, label=name).opts(color=color, size=6, tools=["hover"]),
        ]
    if not elements:
        elements = [hv.Curve({"x": [], metric: []}, xdim, ydim)]
    opts = dict(width=width, height=height, legend_position="bottom", legend_cols=1, xrotation=45 if shared else 0,
                fontsize=_NOTEBOOK_FONTS, show_legend=True, padding=0.08, **PLOT_OPTS,
                title=plot_title(f"{label} ({split}) per layer, mean ± std over seeds"
                                 + (f"; band {_LEVEL} bootstrap" if frame["low"].notna().any() else "")
                                 if len(frame) else f"no {metric} ({split}) values stored"))
    if shared:
        opts["xticks"] = layer_ticks([plot_text(name) for name in orders[0]], width)
    return hv.Overlay(elements).opts(**opts)


def layer_epoch_heatmap(record, metric: str = "nmi", split: str = "unseen", *, label: str | None = None,
                        cmap: str = "viridis", height: int = 340, width: int = 440) -> hv.HeatMap:
    """Layer × epoch heatmap of one stored run: the mean over seeds of ``metric`` (log10 for log metrics); the
    x axis names what the run's epoch numbers count (:func:`lab.export.tables.run_axis`: "step" for a loop
    counted in optimizer steps)."""
    frame = tables.epoch_table(record, metric, split=split)
    frame = frame.assign(layer=frame["layer"].map(plot_text)).rename(columns={"mean": "value"})
    layers = [plot_text(name) for name in tables.run_layers(record)]
    name = label if label is not None else (record.name or record.run_id)
    log = "log10 " if metric in LOG_METRICS else ""
    title = plot_title(f"{name}: {log}{metric_label(metric)} ({split}), mean over seeds")
    return heatmap(frame, metric=metric, split=split, layers=layers, title=title, cmap=cmap,
                   height=height, width=width, axis=tables.run_axis(record))


def epoch_curves(record, metric: str, split: str = "unseen", *, height: int = 360,
                 width: int = 640) -> hv.Overlay:
    """Metric vs layer of one stored run, one line per epoch (or step: :func:`lab.export.tables.run_axis`),
    light to dark, the last bold with ± std."""
    frame = tables.epoch_table(record, metric, split=split)
    frame = frame.assign(layer=frame["layer"].map(plot_text), split=split)
    n_epochs = int(frame["epoch"].max()) if len(frame) else 0
    band = bool(len(frame)) and int(frame["n"].max()) > 1
    layers = [plot_text(n) for n in tables.run_layers(record)]
    return metric_curves(frame, metric=metric, splits=(split,), layers=layers, n_epochs=n_epochs, band=band,
                         height=height, width=width, epochs=sorted(set(frame["epoch"])) if len(frame) else None,
                         axis=tables.run_axis(record))


def projection_plot(record, layer: str, *, seed: int | None = None, epoch: int | None = None,
                    method: str | None = None, label: str | None = None,
                    height: int = 380, width: int = 480) -> hv.Element:
    """The stored 2-D layout of the unseen images at ``layer``, coloured by class.

    By default the first stored seed, the last epoch with a layout of ``layer``, and UMAP when
    stored (else the method stored); a run without one gets a text saying so.
    """
    name = label if label is not None else (record.name or record.run_id)
    keys = record.projection_keys()
    keys = keys[keys["layer"] == layer] if len(keys) else keys
    for column, wanted in (("method", method), ("seed", seed), ("epoch", epoch)):
        if wanted is not None and len(keys):
            keys = keys[keys[column] == wanted]
    if not len(keys):
        return hv.Text(0, 0, plot_text(f"no stored layout of layer {layer!r}")).opts(
            width=width, height=height, title=plot_title(name), xaxis=None, yaxis=None, **PLOT_OPTS)
    seed = int(keys["seed"].min())
    keys = keys[keys["seed"] == seed]
    epoch = int(keys["epoch"].max())
    methods = set(keys.loc[keys["epoch"] == epoch, "method"])
    method = "umap" if "umap" in methods else sorted(methods)[0]
    coords, classes, indices = record.projection(seed, epoch, layer, method)
    names = (record.projection_class_names(seed, epoch, layer, method)
             or (record.meta.get("split") or {}).get("unseen")
             or [str(i) for i in range(int(classes.max()) + 1 if len(classes) else 0)])
    names = [plot_text(n) for n in names]
    frame = pd.DataFrame({"x": coords[:, 0], "y": coords[:, 1], "class": [names[i] for i in classes],
                          "index": indices, "thumb": ""})
    title = plot_title(f"{method.upper()} of {layer}, seed {seed}, {tables.run_axis(record)} {epoch}: {name}", 50)
    return projection_points(frame, classes=names, title=title, height=height, width=width)


def accuracy_vs_g(table: pd.DataFrame, *, by: str = "run", x: str = "seen_accuracy", y: str = "g",
                  height: int = 420, width: int = 560, axis: str = "epoch") -> hv.Overlay:
    """Seen accuracy against g: one point per row, the rows of one ``by`` group joined in epoch order.

    ``table`` is :func:`lab.export.tables.generalization_table` (or any frame with ``by``, ``x``, ``y``);
    where no row has an ``x`` value, g is drawn against the epoch instead, named ``axis`` (what the runs' epoch
    numbers count: :func:`lab.export.tables.runs_axis`).
    """
    if not (len(table) and table[x].notna().any()) and "epoch" in table:
        x = "epoch"
    hover = [c for c in ("epoch", "g_std", "g_layer", "best_layer") if c in table and c not in (x, y)]
    text_cols = [c for c in hover if table[c].dtype == object]
    xlabel = {"seen_accuracy": "seen accuracy (held-out)", "epoch": axis}.get(x, x)
    hover = [hv.Dimension(c, label=axis) if c == "epoch" else c for c in hover]
    xdim = hv.Dimension(x, label=xlabel)
    elements = []
    for i, (group, rows) in enumerate(table.dropna(subset=[x, y]).groupby(by, sort=False)):
        rows = rows.sort_values("epoch") if "epoch" in rows else rows
        rows = rows.assign(**{c: rows[c].map(plot_text) for c in text_cols})
        color, name = _CATEGORY_COLORS[i % len(_CATEGORY_COLORS)], plot_text(group)
        elements += [hv.Curve(rows, xdim, [y, *hover], label=name).opts(color=color),
                     hv.Scatter(rows, xdim, [y, *hover], label=name).opts(color=color, size=8, tools=["hover"])]
    if not elements:
        elements = [hv.Scatter({x: [], y: []}, x, y)]
    title = ("seen accuracy vs unseen generalization" if x == "seen_accuracy"
             else f"g per {xlabel} (no seen accuracy stored)")
    return hv.Overlay(elements).opts(width=width, height=height, xlabel=xlabel, ylabel="g (best-layer unseen NMI)",
                                     legend_position="bottom", legend_cols=1, show_legend=True, title=title,
                                     fontsize=_NOTEBOOK_FONTS, padding=0.1, **PLOT_OPTS)
