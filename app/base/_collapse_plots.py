"""Plots of neural collapse over training (Papyan, Han & Donoho 2020): a measure against epoch per layer and split,
the cosine matrix of the centred class means beside the simplex ETF's, the means of three classes in their plane, and
the law of equi-separation (He & Su 2023): log10 NC1 against depth with its fitted line, and its r against epoch.

Private: :mod:`app.base.plots` re-exports the public names. The numbers come from the run's metrics (mean over
seeds, :func:`lab.analysis.aggregate_seeds`), :func:`lab.analysis.terminal_phase`, :func:`lab.analysis.simplex`
and :func:`lab.analysis.separation_law` (its points and line: :func:`lab.analysis.separation_law_points`); nothing
here computes a statistic.
"""
from __future__ import annotations

from types import MappingProxyType

import holoviews as hv
import numpy as np
import pandas as pd
from bokeh.models import HoverTool

from lab import catalogue

from ._plot_style import SPLIT_DASH_COLLAPSE, PLOT_OPTS, _by_split, _width, class_colors, metric_label, plot_text

__all__ = ["CLASSIFIER_COLOR", "TERMINAL_LABEL", "SPLIT_NAMES", "SPLIT_MARKERS", "collapse_curves", "cosine_heatmap",
           "simplex_plane", "layer_colors", "law_depth", "law_r_curve", "law_label"]

CLASSIFIER_COLOR = "#222222"
"""Colour of the classifier-side lines (the head's weight rows); the class means' lines take their layer's."""
TERMINAL_LABEL = "terminal phase (100 % train accuracy)"
"""The label of the vertical line at the first epoch whose training-sample accuracy is 1.0."""
SPLIT_NAMES = MappingProxyType({split.name: split.label for split in catalogue.SPLIT_TABLE})
"""How each split is named in the collapse plots' hover and key (the labels of the catalogue's split table)."""
SPLIT_MARKERS = _by_split(train="circle", seen="square", unseen="triangle")
"""Marker of each split's points in the law-of-equi-separation plots (beside the split's dash)."""
_LAW_COLOR = "#333333"
_CURSOR_COLOR = "#777777"
_FONTS = {"title": 11, "labels": 9, "xticks": 8, "yticks": 8}
_LAYER_RAMP = ("#08519c", "#2ca02c", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#a6761d", "#1b9e77",
               "#e6ab02", "#17becf")


def layer_colors(layers) -> dict[str, str]:
    """{layer: colour} of the class means' lines, in the order given (the same in every collapse plot)."""
    return {name: _LAYER_RAMP[i % len(_LAYER_RAMP)] for i, name in enumerate(layers)}


def _line_values(frame: pd.DataFrame, metric: str, layer: str, split: str, epochs: np.ndarray) -> np.ndarray:
    rows = frame[(frame["metric"] == metric) & (frame["layer"] == layer) & (frame["split"] == split)] \
        if len(frame) else frame
    values = dict(zip(rows["epoch"].astype(int), rows["mean"].astype(float))) if len(rows) else {}
    return np.array([values.get(int(e), np.nan) for e in epochs], dtype=float)


def collapse_curves(frame: pd.DataFrame, *, metrics: tuple[str, ...], layers: list[str], head: str | None,
                    classifier: frozenset | set = frozenset(), splits=catalogue.SPLITS,
                    terminal: list | tuple = (), title: str = "", log: bool = False, height: int = 250,
                    width: int = 360, responsive: bool = False, axis: str = "epoch") -> hv.Overlay:
    """One collapse measure (or a class-means measure and its classifier twin) against epoch (``axis``: what
    the epoch numbers count, "step" for a loop counted in optimizer steps).

    Parameters
    ----------
    frame : DataFrame
        Columns metric, split, epoch, layer, mean (the mean over seeds), one row per measured cell.
    metrics : tuple of str
        The metrics drawn; those in ``classifier`` are drawn only at ``head`` (the head input) on the train and
        seen splits, in :data:`CLASSIFIER_COLOR`, the others at every one of ``layers`` in the layer's colour.
    splits : the splits drawn, told apart by dash (:data:`~app.base._plot_style.SPLIT_DASH_COLLAPSE`).
    terminal : one epoch (or None) per seed: a vertical line at each (unlabelled: the view's key names it
        :data:`TERMINAL_LABEL`).
    log : a log y axis (values that are not positive are left out).

    The element structure depends only on the arguments other than ``frame`` and ``terminal``'s values (a line
    per metric, layer and split, NaN where not measured, and one mark per seed), so a DynamicMap updates the
    same glyphs in place.
    """
    epochs = np.array(sorted({int(e) for e in frame["epoch"]}) if len(frame) else [0], dtype=float)
    colors = layer_colors(layers)
    elements, drawn = [], []
    for metric in metrics:
        is_head = metric in classifier
        where = ([head] if head is not None else []) if is_head else list(layers)
        for layer in where:
            for split in splits:
                if is_head and split == "unseen":
                    continue
                y = _line_values(frame, metric, layer, split, epochs)
                if log:
                    y = np.where(y > 0, y, np.nan)
                drawn.append(y)
                side = "classifier" if is_head else "class means"
                data = {"epoch": epochs, "value": y, "layer": np.full(len(epochs), plot_text(layer), dtype=object),
                        "split": np.full(len(epochs), SPLIT_NAMES.get(split, split), dtype=object),
                        "measure": np.full(len(epochs), f"{metric_label(metric)} ({side})", dtype=object)}
                color = CLASSIFIER_COLOR if is_head else colors[layer]
                vdims = ["value", "layer", "split", "measure"]
                elements.append(hv.Curve(data, "epoch", vdims).opts(
                    color=color, line_width=2.6 if is_head else 2, line_dash=SPLIT_DASH_COLLAPSE.get(split, "solid"),
                    framewise=True))
                elements.append(hv.Scatter(data, "epoch", vdims).opts(
                    color=color, size=4, framewise=True,
                    tools=[HoverTool(tooltips=[("", "@measure"), ("layer", "@layer"), ("split", "@split"),
                                               (axis, "@epoch"), ("value", "@value{0.0000}")])]))
    finite = np.concatenate(drawn) if drawn else np.zeros(0)
    finite = finite[np.isfinite(finite)]
    top = float(finite.max()) if finite.size else np.nan
    # the mark unlabelled: on a panel this small its label ran over the lines; the card's key names it
    elements.extend(_terminal_marks(terminal, top, label=False))
    return hv.Overlay(elements).opts(
        title=title, height=height, **_width(width, responsive), show_legend=False, logy=log, xlabel=axis,
        ylabel=("log scale" if log else ""), fontsize=_FONTS, toolbar="right",
        xticks=[int(e) for e in epochs][::max(1, len(epochs) // 10)], padding=0.06,
        default_tools=["pan", "wheel_zoom", "box_zoom", "reset", "save"], **PLOT_OPTS)


def _terminal_marks(terminal, top: float, label: bool = True) -> list:
    """A red vertical line at each seed's terminal-phase epoch (None: not reached), labelled once at ``top``
    (``label``)."""
    marks = [float(e) if e is not None else np.nan for e in terminal] or [np.nan]
    elements = [hv.VLine(epoch).opts(color="#b2182b", line_dash="dashdot", line_width=1.5) for epoch in marks]
    if not label:
        return elements
    first = min((e for e in marks if np.isfinite(e)), default=np.nan)
    label_at = (first, top if np.isfinite(first) else np.nan)
    elements.append(hv.Text(*label_at, " " + TERMINAL_LABEL.replace(" (", "\n ("), halign="left", valign="top",
                            fontsize=7).opts(color="#b2182b"))
    return elements


def cosine_heatmap(matrix: np.ndarray, classes: list[str], *, title: str, height: int = 300,
                   width: int = 330) -> hv.HeatMap:
    """A K × K matrix of cosines (rows and columns the classes in sorted-label order) on the fixed scale −1..1."""
    names = [plot_text(name) for name in classes]
    k = len(names)
    matrix = np.asarray(matrix, dtype=float).reshape(k, k) if k else np.zeros((0, 0))
    cols, rows = np.meshgrid(np.arange(k), np.arange(k))
    data = pd.DataFrame({"column": [names[j] for j in cols.ravel()], "row": [names[i] for i in rows.ravel()],
                         "cosine": matrix.ravel()})
    return hv.HeatMap(data, kdims=[hv.Dimension("column", values=names), hv.Dimension("row", values=names[::-1])],
                      vdims=[hv.Dimension("cosine", range=(-1, 1))]).opts(
        cmap="RdBu_r", clim=(-1, 1), colorbar=True, tools=["hover"], title=title, height=height, width=width,
        xrotation=45, xlabel="", ylabel="", fontsize=_FONTS, toolbar="above", framewise=True,
        default_tools=["save"], **PLOT_OPTS)


def simplex_plane(coords: np.ndarray, classes: list[str], *, title: str, height: int = 300,
                  width: int = 330) -> hv.Overlay:
    """The centred class means in their own plane (``coords``, K × 2, from :func:`lab.analysis.simplex`), joined in
    class order, beside the equilateral triangle (the simplex ETF of three classes) of their mean radius, turned to
    the first mean."""
    coords = np.asarray(coords, dtype=float).reshape(-1, 2)
    names = [plot_text(name) for name in classes]
    radius = float(np.mean(np.linalg.norm(coords, axis=1))) if len(coords) else np.nan
    start = float(np.arctan2(coords[0, 1], coords[0, 0])) if len(coords) else 0.0
    angles = start + 2 * np.pi * np.arange(len(coords)) / max(len(coords), 1)
    ideal = np.column_stack([radius * np.cos(angles), radius * np.sin(angles)])
    ring = lambda xy: np.vstack([xy, xy[:1]]) if len(xy) else xy   # noqa: E731 - closes a polygon
    colors = class_colors(names)
    points = pd.DataFrame({"x": coords[:, 0], "y": coords[:, 1], "class": names})
    # the axes hold the farthest mean as well as the triangle (the mean radius alone clipped the largest class)
    reach = float(np.max(np.linalg.norm(coords, axis=1))) if len(coords) else np.nan
    span = 1.15 * (max(reach, radius) if np.isfinite(reach) and reach > 0 else 1.0)
    return (hv.Path([ring(ideal)]).opts(color="#999999", line_dash="dashed", line_width=1.5)
            * hv.Path([ring(coords)]).opts(color="#333333", line_width=1.5)
            * hv.Points(points, ["x", "y"], ["class"]).opts(color="class", cmap=colors, size=11, tools=["hover"],
                                                             show_legend=True, legend_position="top_right")
            ).opts(title=title, height=height, width=width, xaxis=None, yaxis=None, data_aspect=1,
                   xlim=(-span, span), ylim=(-span, span), fontsize=_FONTS, toolbar="above",
                   default_tools=["pan", "wheel_zoom", "reset", "save"], **PLOT_OPTS)


def _finite(value) -> bool:
    try:
        return bool(np.isfinite(float(value)))
    except (TypeError, ValueError):
        return False


def law_label(split: str, row) -> str:
    """The legend entry of one split in the law plot: its name, the ratio per layer and r (or why there is none)."""
    name = SPLIT_NAMES.get(split, split)
    if row is None or not _finite(row["ratio"]):
        return f"{name}: no law"
    r = f"r {float(row['r']):+.3f}" if _finite(row["r"]) else "r undefined"
    return f"{name}: ×{float(row['ratio']):.2f} per layer, {r}"


def _law_legend() -> dict:
    return dict(show_legend=True, legend_position="bottom", legend_cols=1, legend_opts={"label_text_font_size": "8pt",
                                                                                        "spacing": 0, "padding": 2})


def law_depth(points: pd.DataFrame, law: pd.DataFrame, *, layers: list[str], splits=catalogue.SPLITS,
              title: str = "", height: int = 340, width: int = 360) -> hv.Overlay:
    """log10 NC1 against depth at one evaluation: each split's points per layer and the law's fitted line.

    Parameters
    ----------
    points : :func:`lab.analysis.separation_law_points` of one seed and epoch (columns split, index, log10_nc1,
        fitted, layer); the points drawn are the fitted ones, the line its ``fitted`` column: nothing is fitted here.
    law : :func:`lab.analysis.separation_law` of the same seed and epoch (split, ratio, r): the legend's numbers.
    layers : the distinct layers, input -> output, whose index is the x axis (the points' ``index``).
    splits : one point set and line per split, told apart by dash and marker, NaN where not measured, so the
        element structure depends only on ``layers`` and ``splits`` (a DynamicMap updates the glyphs in place).
    """
    index = np.arange(len(layers), dtype=float)
    names = np.array([plot_text(name) for name in layers], dtype=object)
    elements = []
    for split in splits:
        rows = points[points["split"] == split] if len(points) else points
        y = np.full(len(layers), np.nan)
        line = np.full(len(layers), np.nan)
        if len(rows):
            at = rows["index"].astype(int).to_numpy()
            keep = at < len(layers)
            y[at[keep]] = rows["log10_nc1"].astype(float).to_numpy()[keep]
            line[at[keep]] = rows["fitted"].astype(float).to_numpy()[keep]
        match = law[law["split"] == split] if len(law) else law
        label = law_label(split, match.iloc[0] if len(match) else None)
        side = np.full(len(layers), SPLIT_NAMES.get(split, split), dtype=object)
        data = {"layer index": index, "log10 NC1": y, "layer": names, "split": side,
                "NC1": np.where(np.isfinite(y), 10.0 ** np.nan_to_num(y), np.nan)}
        elements.append(hv.Curve({"layer index": index, "log10 NC1": line}, "layer index", "log10 NC1",
                                 label=label).opts(color=_LAW_COLOR, line_width=1.6, framewise=True,
                                                   line_dash=SPLIT_DASH_COLLAPSE.get(split, "solid")))
        elements.append(hv.Scatter(data, "layer index", ["log10 NC1", "layer", "split", "NC1"], label=label).opts(
            color=_LAW_COLOR, marker=SPLIT_MARKERS.get(split, "circle"), size=7, framewise=True,
            tools=[HoverTool(tooltips=[("layer", "@layer"), ("split", "@split"), ("NC1", "@NC1{0.0000}")])]))
    return hv.Overlay(elements).opts(
        title=title, height=height, width=width, xlabel="layer (input → output)", ylabel="log10 NC1",
        xticks=[(i, str(names[i])) for i in range(len(layers))], xrotation=45, fontsize=_FONTS, toolbar="right",
        padding=0.08, default_tools=["pan", "wheel_zoom", "box_zoom", "reset", "save"], **_law_legend(),
        **PLOT_OPTS)


def law_r_curve(across: pd.DataFrame, *, splits=catalogue.SPLITS, terminal=(), epoch=None,
                title: str = "", height: int = 340, width: int = 360, axis: str = "epoch") -> hv.Overlay:
    """Pearson r of log10 NC1 against depth, per epoch: the law emerging (r near −1) or reversed (near +1).

    Parameters
    ----------
    across : :func:`lab.analysis.separation_law_across_seeds` (epoch, split, r: the mean over seeds).
    splits : one line per split, told apart by dash and marker (NaN where absent: a fixed element structure).
    terminal : one epoch (or None) per seed: the terminal-phase mark, as on the collapse panels.
    epoch : the epoch the law-against-depth plot shows: a grey vertical line.
    axis : what the run's evaluation numbers count ("epoch", or "step"): the x axis's label.
    """
    epochs = np.array(sorted({int(e) for e in across["epoch"]}) if len(across) else [0], dtype=float)
    elements = [hv.HLine(0.0).opts(color="#cccccc", line_width=1)]
    for split in splits:
        rows = across[across["split"] == split] if len(across) else across
        values = dict(zip(rows["epoch"].astype(int), rows["r"].astype(float))) if len(rows) else {}
        r = np.array([values.get(int(e), np.nan) for e in epochs], dtype=float)
        label = SPLIT_NAMES.get(split, split)
        data = {"epoch": epochs, "r": r, "split": np.full(len(epochs), label, dtype=object)}
        # framewise: a live run adds epochs, and the x range must grow with them (it stayed at the first ones)
        elements.append(hv.Curve(data, "epoch", ["r", "split"], label=label).opts(
            color=_LAW_COLOR, line_width=1.8, line_dash=SPLIT_DASH_COLLAPSE.get(split, "solid"), framewise=True))
        elements.append(hv.Scatter(data, "epoch", ["r", "split"], label=label).opts(
            color=_LAW_COLOR, marker=SPLIT_MARKERS.get(split, "circle"), size=6, framewise=True,
            tools=[HoverTool(tooltips=[("split", "@split"), (axis, "@epoch"), ("r", "@r{+0.000}")])]))
    elements.append(hv.VLine(float(epoch) if epoch is not None else np.nan).opts(color=_CURSOR_COLOR, line_width=2,
                                                                                 alpha=0.6))
    elements.extend(_terminal_marks(terminal, 1.0))
    return hv.Overlay(elements).opts(
        title=title, height=height, width=width, xlabel=axis, ylabel="r (log10 NC1 against depth)",
        ylim=(-1.08, 1.08), xticks=[int(e) for e in epochs][::max(1, len(epochs) // 10)], fontsize=_FONTS,
        toolbar="right", default_tools=["pan", "wheel_zoom", "box_zoom", "reset", "save"], **_law_legend(),
        **PLOT_OPTS)
