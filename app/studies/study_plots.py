"""HoloViews figures of a study, drawn from :func:`lab.study.figures` (numbers from lab.analysis).

Used by the app's Studies tab and by study notebooks alike; nothing here computes a statistic.
"""
from __future__ import annotations

import holoviews as hv
import holoviews.plotting.bokeh  # noqa: F401 - registers the options of the bokeh backend
import numpy as np
import pandas as pd

from app.base.plots import PLOT_OPTS, plot_text
from lab import catalogue
from lab.analysis import ALL_CONDITIONS, confidence_text
from lab.catalogue import metric_label

__all__ = ["layer_depth_curves", "accuracy_vs_g", "grid_heatmap", "collapse_curves", "rank_text",
           "generalization_text", "transfer_vs_g", "transfer_text", "agreement_frame", "agreement_text",
           "AGREEMENT_TITLES"]

_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf")


def _empty(title: str, message: str = "no finished runs yet"):
    return hv.Text(0.5, 0.5, message).opts(title=title, xaxis=None, yaxis=None, responsive=True,
                                          min_height=300, toolbar=None, **PLOT_OPTS)


def _group_colors(figs: dict) -> dict:
    """One colour per condition, in the order of the study's conditions (the same in every figure)."""
    groups = []
    for key in ("generalization", "layers", "nc1"):
        frame = figs.get(key)
        if frame is not None and "group" in frame:
            groups += [g for g in frame["group"] if g not in groups]
    return {g: _COLORS[i % len(_COLORS)] for i, g in enumerate(groups)}


def _has_interval(frame: pd.DataFrame | None, low: str = "low", high: str = "high") -> bool:
    return (frame is not None and {low, high} <= set(frame)
            and bool((np.isfinite(frame[low].astype(float)) & np.isfinite(frame[high].astype(float))).any()))


def _interval_segments(rows: pd.DataFrame, x: str, low: str, high: str, *, color: str, **opts):
    """Vertical segments from ``low`` to ``high`` at ``x`` where both are finite (none for runs without them)."""
    rows = rows[np.isfinite(rows[low].astype(float)) & np.isfinite(rows[high].astype(float))]
    data = pd.DataFrame({"x0": rows[x].astype(float), "y0": rows[low].astype(float),
                         "x1": rows[x].astype(float), "y1": rows[high].astype(float)})
    return hv.Segments(data, ["x0", "y0", "x1", "y1"]).opts(color=color, **opts)


def _curves(frame: pd.DataFrame, *, ylabel: str, title: str, logy: bool = False, mark_best: bool = True,
            colors: dict | None = None):
    if frame is None or frame.empty:
        return _empty(title)
    layers = []
    for i, (group, rows) in enumerate(frame.groupby("group", sort=False)):
        color = (colors or {}).get(group, _COLORS[i % len(_COLORS)])
        label = plot_text(group)
        rows = rows.sort_values("depth").assign(std=lambda d: d["std"].fillna(0.0),
                                                layer_name=lambda d: d["layer"].map(plot_text))
        layers.append(hv.Spread(rows, "depth", ["mean", "std"], label=label).opts(color=color, alpha=0.2))
        if _has_interval(rows):
            layers.append(_interval_segments(rows, "depth", "low", "high", color=color, line_width=2, alpha=0.8))
        layers.append(hv.Curve(rows, "depth", ["mean", "std", "n", "layer_name"], label=label).opts(
            color=color, tools=["hover"], line_width=2))
        if mark_best and rows["best"].any():
            layers.append(hv.Scatter(rows[rows["best"]], "depth", ["mean", "layer_name"], label=label).opts(
                color=color, marker="star", size=14, tools=["hover"]))
    # padding: the first and last layers' marks and bars sit at depth 0 and 1; without it they were cut in half
    return hv.Overlay(layers).opts(
        hv.opts.Overlay(title=title, xlabel="relative depth (input = 0, output = 1)", ylabel=ylabel, logy=logy,
                        legend_position="right", responsive=True, min_height=320, padding=(0.03, 0.05),
                        **PLOT_OPTS))


def layer_depth_curves(figs: dict):
    """g's metric (unseen NMI, mean ± std over seeds) at every layer against relative depth, per condition;
    vertical bars: the 95 % bootstrap interval over the unseen images (where the runs recorded it); the
    star marks each condition's best layer (Dyballa et al.)."""
    frame = figs.get("layers")
    bars = "; bars: 95 % bootstrap interval over the unseen images" if _has_interval(frame) else ""
    return _curves(frame, ylabel="unseen NMI (mean over seeds)", colors=_group_colors(figs),
                   title=f"Unseen NMI per layer against relative depth (band: ±1 std over seeds{bars})")


def collapse_curves(figs: dict):
    """NC1 on the seen held-out images per layer, per condition (Li, Liu et al. figure 10)."""
    return _curves(figs.get("nc1"), ylabel="NC1 (seen held-out, mean over seeds)", logy=True, mark_best=False,
                   colors=_group_colors(figs),
                   title="NC1 per layer per condition")


def rank_text(ranks: dict) -> str:
    """What the rank correlation of seen accuracy and g measured, or why it was not computed."""
    n = ranks.get("n", 0)
    if n < 3 or not np.isfinite(ranks.get("spearman", np.nan)):
        return f"{n} condition(s): too few (or no spread) for a rank correlation of seen accuracy and g."
    lo, hi = ranks["spearman_ci"]
    klo, khi = ranks["kendall_ci"]
    return (f"Over {n} conditions: Spearman ρ = {ranks['spearman']:.2f} (95 % bootstrap {lo:.2f} to {hi:.2f}), "
            f"Kendall τ = {ranks['kendall']:.2f} ({klo:.2f} to {khi:.2f}).")


def generalization_text(figs: dict) -> str:
    """Per condition, g with its bootstrap interval and best-layer share where the runs recorded them."""
    gen = figs.get("generalization")
    if gen is None or gen.empty:
        return ""
    lines = []
    for row in gen.itertuples(index=False):
        if not np.isfinite(float(row.g)):
            continue
        sure = confidence_text(getattr(row, "g_low", None), getattr(row, "g_high", None),
                               getattr(row, "best_share", None))
        std = f" ± {row.g_std:.3f} (std over {row.n_seeds} seeds)" if pd.notna(row.g_std) else ""
        lines.append(f"- {plot_text(row.group)}: g = {row.g:.3f}{std} at {plot_text(row.layer)}"
                     + (f"; {sure} (95 % bootstrap over the unseen images)" if sure else ""))
    return "\n".join(lines)


def accuracy_vs_g(figs: dict):
    """One point per condition: seen held-out accuracy against g, error bars ±1 std (Gerritz et al.);
    a thick translucent bar: g's 95 % bootstrap interval over the unseen images (where recorded).
    Each condition has the colour of its curve in :func:`layer_depth_curves`."""
    gen = figs.get("generalization")
    bars = "; thick: g's 95 % bootstrap interval" if _has_interval(gen, "g_low", "g_high") else ""
    title = f"Seen accuracy against g, per condition (bars: ±1 std{bars})"
    if gen is None or gen.empty or not np.isfinite(gen["g"].astype(float)).any():
        return _empty(title)
    data = gen.assign(label=gen["group"].map(plot_text), layer=gen["layer"].map(plot_text),
                      g_std=gen["g_std"].astype(float).fillna(0.0),
                      heldout_std=gen["heldout_std"].astype(float).fillna(0.0))
    colors = _group_colors(figs)
    layers = []
    for i, (group, row) in enumerate(data.groupby("group", sort=False)):
        color = colors.get(group, _COLORS[i % len(_COLORS)])
        label = plot_text(group)
        layers.append(hv.ErrorBars(row, "heldout_accuracy", ["g", "heldout_std"], horizontal=True).opts(color=color))
        layers.append(hv.ErrorBars(row, "heldout_accuracy", ["g", "g_std"]).opts(color=color))
        if bars:
            layers.append(_interval_segments(row, "heldout_accuracy", "g_low", "g_high", color=color,
                                             line_width=8, alpha=0.35))
        hover = ["g", "label", "layer", "n_runs", *(["g_low", "g_high", "best_share"] if bars else [])]
        layers.append(hv.Scatter(row, "heldout_accuracy", hover, label=label).opts(size=10, color=color,
                                                                                    tools=["hover"]))
    return hv.Overlay(layers).opts(
        hv.opts.Overlay(title=title, xlabel="seen held-out accuracy", ylabel="g (best-layer unseen NMI)",
                        legend_position="right", responsive=True, min_height=320, **PLOT_OPTS))


def grid_heatmap(figs: dict, quantity: str, layer: str | None = None):
    """Mean over repeats of one quantity across the first two condition axes (Wang & Yang figures 1-3)."""
    grid, axes = figs.get("grid"), list(figs.get("axes") or [])
    title = plot_text(f"{quantity}" + (f" at {layer}" if layer else "") + ", mean over repeats")
    if grid is None or grid.empty or len(axes) < 2 or "quantity" not in grid:
        return _empty(title, "needs a finished study with two condition axes")
    rows = grid[grid["quantity"] == quantity]
    if "layer" in rows and len(rows):
        # one heatmap per layer: without a layer, the first one (several per cell would be dropped)
        layer = layer if layer is not None else str(rows["layer"].iloc[0])
        rows = rows[rows["layer"] == layer]
        title = plot_text(f"{quantity}" + (f" at {layer}" if layer else "") + ", mean over repeats")
    if rows.empty:
        return _empty(title, f"no {quantity} measured")
    x, y = axes[0], axes[1]
    data = rows.assign(**{x: rows[x].map(plot_text), y: rows[y].map(plot_text)})
    return hv.HeatMap(data, [x, y], ["mean", "std", "n"]).opts(
        title=title, colorbar=True, cmap="viridis", tools=["hover"], responsive=True, min_height=320,
        xrotation=30, **PLOT_OPTS)


# ------------------------------------------------------------------------------ transferability vs g

_NOT_MEASURED = ("The runs of this study did not measure transferability scores (add logme and sfda to the "
                 "study's metrics: they are measured on the seen held-out images before fine-tuning).")


def _score_label(score: str) -> str:
    return f"seen {metric_label(score)}" if score == catalogue.TRANSFER_BASELINE else metric_label(score)


def transfer_text(figs: dict) -> str:
    """What the transferability-vs-g comparison measured: Spearman's rho per score and scope with its
    interval and number of points, or one line saying the study's runs measured no score."""
    transfer = figs.get("transfer") or {}
    table = transfer.get("correlations")
    if not transfer.get("scores") or table is None or table.empty:
        return _NOT_MEASURED
    lines = ["Spearman ρ between each score at epoch 0 (seen held-out images, before fine-tuning) and the "
             "unseen NMI the layer reaches at the last epoch, over layers:"]
    for row in table.itertuples(index=False):
        where = "all (condition, layer) points" if row.scope == ALL_CONDITIONS else plot_text(row.scope)
        if not np.isfinite(row.spearman):
            value = "not defined (fewer than 3 layers, or no spread)"
        elif np.isfinite(row.spearman_low):
            value = f"ρ = {row.spearman:.2f} (95 % bootstrap {row.spearman_low:.2f} to {row.spearman_high:.2f})"
        else:
            value = f"ρ = {row.spearman:.2f} (too few points for an interval)"
        lines.append(f"- {_score_label(row.score)}, {where} (n = {row.n}): {value}")
    return "\n".join(lines)


def transfer_vs_g(figs: dict):
    """One panel per transferability score: each (condition, layer) point at its score before fine-tuning
    (x) and the unseen NMI it reaches after (y), with that NMI's bootstrap interval where recorded."""
    title = "Transferability scores before fine-tuning against the unseen NMI after it"
    transfer = figs.get("transfer") or {}
    points, scores = transfer.get("points"), list(transfer.get("scores") or [])
    if not scores or points is None or points.empty:
        return _empty(title, _NOT_MEASURED if figs.get("generalization") is not None
                      and len(figs["generalization"]) else "no finished runs yet")
    colors = _group_colors(figs)
    panels = []
    for score in scores:
        layers = []
        for i, (group, rows) in enumerate(points.groupby("group", sort=False)):
            color = colors.get(group, _COLORS[i % len(_COLORS)])
            rows = rows[np.isfinite(rows[score].astype(float))].assign(layer_name=lambda d: d["layer"].map(plot_text))
            if rows.empty:
                continue
            if _has_interval(rows, "nmi_low", "nmi_high"):
                layers.append(_interval_segments(rows, score, "nmi_low", "nmi_high", color=color, alpha=0.6))
            layers.append(hv.Scatter(rows, score, ["nmi", "layer_name", "depth"], label=plot_text(group)).opts(
                color=color, size=9, tools=["hover"]))
        panels.append(hv.Overlay(layers).opts(
            hv.opts.Overlay(title=f"{_score_label(score)} (epoch 0)", xlabel=f"{_score_label(score)} before fine-tuning",
                            ylabel="unseen NMI, last epoch", show_legend=score == scores[-1],
                            legend_position="right", width=460 if score == scores[-1] else 320, height=300,
                            **PLOT_OPTS)))
    return hv.Layout(panels).opts(title=title).cols(len(panels))


# ------------------------------------------------------------------------------ do the measures agree?

AGREEMENT_TITLES = {"label": "measure", "n_runs": "runs", "same_best_layer": "same best layer as NMI",
                    "share_same": "share of runs", "median_spearman": "median Spearman ρ with NMI"}
"""The shown columns of :func:`agreement_frame` and their titles."""


def agreement_frame(figs: dict) -> pd.DataFrame:
    """:func:`lab.analysis.study_agreement` (``figs["agreement"]``) as shown: one row per measure, its label
    (label-free measures marked "no labels"), the runs compared, how many and what share of them have NMI's best
    layer, and the median Spearman ρ with NMI across layers; empty when no run had NMI and another measure."""

    table = figs.get("agreement")
    if table is None or table.empty:
        return pd.DataFrame(columns=list(AGREEMENT_TITLES))
    label_free = catalogue.metric_names(family="label_free")
    label = [f"{row.label} (no labels)" if measure in label_free else str(row.label)
             for measure, row in table.iterrows()]
    return pd.DataFrame({"label": label, "n_runs": table["n_runs"].astype(int).to_numpy(),
                         "same_best_layer": table["same_best_layer"].astype(int).to_numpy(),
                         "share_same": table["share_same"].astype(float).to_numpy(),
                         # blank, not "NaN", where no run gave a rank correlation (too few layers)
                         "median_spearman": [float(v) if np.isfinite(v) else None
                                             for v in table["median_spearman"].astype(float)]})


def agreement_text(figs: dict) -> str:
    """One line above the agreement table: what it counts, or why it is empty."""
    table = figs.get("agreement")
    if table is None or table.empty:
        return ("Do the measures agree? No finished run has NMI and another measure to compare yet.")
    return ("Do the measures agree? Per measure, over the study's runs: how often its best layer (at the run's "
            "last complete NMI evaluation) is NMI's, and the median Spearman ρ between its layer order and NMI's. "
            "The label-free measures read no unseen label.")
