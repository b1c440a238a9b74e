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
from lab.study import summary_phrase

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


def _n_label(group, rows: pd.DataFrame, n: str = "n") -> str:
    """A condition's legend entry: its label and n, the most seeds behind one of its points."""
    count = pd.to_numeric(rows[n], errors="coerce").max() if n in rows and len(rows) else np.nan
    return plot_text(group) + (f" (n={int(count)})" if np.isfinite(count) else "")


def _summary_words(figs: dict) -> str:
    phrase = summary_phrase(figs)
    return f" at {phrase}" if phrase else ""


def _seed_band(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows with the 95 % interval over seeds, of zero width where it is undefined (fewer than 2 seeds)."""
    mean = rows["mean"].astype(float)
    low = rows["seed_low"].astype(float) if "seed_low" in rows else mean
    high = rows["seed_high"].astype(float) if "seed_high" in rows else mean
    return rows.assign(seed_low=low.fillna(mean), seed_high=high.fillna(mean))


def _curves(frame: pd.DataFrame, *, ylabel: str, title: str, logy: bool = False, mark_best: bool = True,
            colors: dict | None = None):
    if frame is None or frame.empty:
        return _empty(title)
    layers = []
    for i, (group, rows) in enumerate(frame.groupby("group", sort=False)):
        color = (colors or {}).get(group, _COLORS[i % len(_COLORS)])
        label = _n_label(group, rows)
        rows = _seed_band(rows.sort_values("depth")).assign(std=lambda d: d["std"].fillna(0.0),
                                                            layer_name=lambda d: d["layer"].map(plot_text))
        # the band: the 95 % interval of the mean over the condition's seeds (METRICS.md, "Seeds as replicates")
        band = rows.assign(below=rows["mean"] - rows["seed_low"], above=rows["seed_high"] - rows["mean"])
        layers.append(hv.Spread(band, "depth", ["mean", "below", "above"], label=label).opts(color=color, alpha=0.2))
        if _has_interval(rows):
            layers.append(_interval_segments(rows, "depth", "low", "high", color=color, line_width=2, alpha=0.8))
        layers.append(hv.Curve(rows, "depth", ["mean", "seed_low", "seed_high", "n", "std", "layer_name"],
                               label=label).opts(color=color, tools=["hover"], line_width=2))
        if mark_best and rows["best"].any():
            layers.append(hv.Scatter(rows[rows["best"]], "depth", ["mean", "seed_low", "seed_high", "n", "layer_name"],
                                     label=label).opts(color=color, marker="star", size=14, tools=["hover"]))
    # padding: the first and last layers' marks and bars sit at depth 0 and 1; without it they were cut in half
    return hv.Overlay(layers).opts(
        hv.opts.Overlay(title=title, xlabel="relative depth (input = 0, output = 1)", ylabel=ylabel, logy=logy,
                        legend_position="right", responsive=True, min_height=320, padding=(0.03, 0.05),
                        **PLOT_OPTS))


_SEED_BAND = "band: 95 % interval over seeds"


def layer_depth_curves(figs: dict):
    """g's metric (unseen NMI, mean over seeds) at every layer against relative depth, per condition, at the
    study's summary epoch; band: the 95 % interval of the mean over seeds (Student t; none for one seed); vertical
    bars: the 95 % bootstrap interval over the unseen images (where the runs recorded it); the star marks each
    condition's best layer (Dyballa et al.). Legend entries carry n, the seeds pooled."""
    frame = figs.get("layers")
    bars = "; bars: 95 % bootstrap interval over unseen images" if _has_interval(frame) else ""
    # short: the axis says "relative depth", the guide says the rest; a longer title is cut at the plot's width
    return _curves(frame, ylabel="unseen NMI (mean over seeds)", colors=_group_colors(figs),
                   title=f"Unseen NMI per layer{_summary_words(figs)} ({_SEED_BAND}{bars})")


def collapse_curves(figs: dict):
    """NC1 on the seen held-out images per layer, per condition (Li, Liu et al. figure 10); band: the 95 % interval
    of the mean over seeds."""
    return _curves(figs.get("nc1"), ylabel="NC1 (seen held-out, mean over seeds)", logy=True, mark_best=False,
                   colors=_group_colors(figs),
                   title=f"NC1 per layer per condition{_summary_words(figs)} ({_SEED_BAND})")


def rank_text(ranks: dict) -> str:
    """What the rank correlation of seen accuracy and g measured, or why it was not computed."""
    n = ranks.get("n", 0)
    if n < 3 or not np.isfinite(ranks.get("spearman", np.nan)):
        return f"{n} condition(s): too few (or no spread) for a rank correlation of seen accuracy and g."
    lo, hi = ranks["spearman_ci"]
    klo, khi = ranks["kendall_ci"]
    return (f"Over {n} conditions: Spearman ρ = {ranks['spearman']:.2f} (95 % bootstrap {lo:.2f} to {hi:.2f}), "
            f"Kendall τ = {ranks['kendall']:.2f} ({klo:.2f} to {khi:.2f}).")


def _interval_words(low, high, n, what: str = "seeds") -> str:
    """"n = 3; 95 % interval over seeds 0.70 to 0.92", or "n = 1: no interval" below 2."""
    n = int(n) if n is not None and np.isfinite(float(n)) else 0
    if n >= 2 and np.isfinite(float(low)) and np.isfinite(float(high)):
        return f"n = {n}; 95 % interval over {what} {float(low):.3f} to {float(high):.3f}"
    return f"n = {n}: no interval over {what}"


def generalization_text(figs: dict) -> str:
    """Per condition, g (mean over seeds) with its 95 % interval over seeds and n, the seen held-out accuracy the
    same way, and g's bootstrap interval and best-layer share where the runs recorded them."""
    gen = figs.get("generalization")
    if gen is None or gen.empty:
        return ""
    lines = []
    for row in gen.itertuples(index=False):
        if not np.isfinite(float(row.g)):
            continue
        sure = confidence_text(getattr(row, "g_low", None), getattr(row, "g_high", None),
                               getattr(row, "best_share", None))
        seeds = _interval_words(getattr(row, "g_seed_low", np.nan), getattr(row, "g_seed_high", np.nan), row.n_seeds)
        acc = ""
        if np.isfinite(float(row.heldout_accuracy)):
            words = _interval_words(getattr(row, "heldout_seed_low", np.nan), getattr(row, "heldout_seed_high", np.nan),
                                    getattr(row, "heldout_n", 0), "runs")
            acc = f"; seen held-out accuracy {row.heldout_accuracy:.3f} ({words})"
        lines.append(f"- {plot_text(row.group)}: g = {row.g:.3f} ({seeds}) at {plot_text(row.layer)}"
                     + (f"; {sure} (95 % bootstrap over the unseen images)" if sure else "") + acc)
    return "\n".join(lines)


def _error(frame: pd.DataFrame, mean: str, low: str, high: str) -> tuple[pd.Series, pd.Series]:
    """Distances from ``mean`` down to ``low`` and up to ``high`` (0 where the interval is undefined)."""
    m = frame[mean].astype(float)
    lo = frame[low].astype(float) if low in frame else m
    hi = frame[high].astype(float) if high in frame else m
    return (m - lo).fillna(0.0), (hi - m).fillna(0.0)


def accuracy_vs_g(figs: dict):
    """One point per condition: seen held-out accuracy against g, with the 95 % interval of each mean over seeds
    as error bars (Gerritz et al.); a thick translucent bar: g's 95 % bootstrap interval over the unseen images
    (where recorded). Each condition has the colour of its curve in :func:`layer_depth_curves`, its legend entry
    carries n."""
    gen = figs.get("generalization")
    bars = "; thick: g's 95 % bootstrap interval over unseen images" if _has_interval(gen, "g_low", "g_high") else ""
    title = f"Seen accuracy against g{_summary_words(figs)} (bars: 95 % interval over seeds{bars})"
    if gen is None or gen.empty or not np.isfinite(gen["g"].astype(float)).any():
        return _empty(title)
    g_neg, g_pos = _error(gen, "g", "g_seed_low", "g_seed_high")
    a_neg, a_pos = _error(gen, "heldout_accuracy", "heldout_seed_low", "heldout_seed_high")
    data = gen.assign(label=gen["group"].map(plot_text), layer=gen["layer"].map(plot_text),
                      g_neg=g_neg, g_pos=g_pos, acc_neg=a_neg, acc_pos=a_pos)
    colors = _group_colors(figs)
    layers = []
    for i, (group, row) in enumerate(data.groupby("group", sort=False)):
        color = colors.get(group, _COLORS[i % len(_COLORS)])
        label = _n_label(group, row, "n_seeds")
        layers.append(hv.ErrorBars(row, "heldout_accuracy", ["g", "acc_neg", "acc_pos"], horizontal=True).opts(
            color=color))
        layers.append(hv.ErrorBars(row, "heldout_accuracy", ["g", "g_neg", "g_pos"]).opts(color=color))
        if bars:
            layers.append(_interval_segments(row, "heldout_accuracy", "g_low", "g_high", color=color,
                                             line_width=8, alpha=0.35))
        hover = ["g", *[c for c in ("g_seed_low", "g_seed_high") if c in row], "n_seeds", "label", "layer", "n_runs",
                 *[c for c in ("heldout_seed_low", "heldout_seed_high") if c in row],
                 *(["g_low", "g_high", "best_share"] if bars else [])]
        layers.append(hv.Scatter(row, "heldout_accuracy", hover, label=label).opts(size=10, color=color,
                                                                                    tools=["hover"]))
    return hv.Overlay(layers).opts(
        hv.opts.Overlay(title=title, xlabel="seen held-out accuracy", ylabel="g (best-layer unseen NMI)",
                        legend_position="right", responsive=True, min_height=320, **PLOT_OPTS))


def grid_heatmap(figs: dict, quantity: str, layer: str | None = None):
    """Mean over repeats of one quantity across the first two condition axes (Wang & Yang figures 1-3); the hover
    shows n and the 95 % interval of the mean over the repeats."""
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
    return hv.HeatMap(data, [x, y], ["mean", "std", "n", *[c for c in ("seed_low", "seed_high") if c in data]]).opts(
        title=title + " (hover: n and 95 % interval over repeats)", colorbar=True, cmap="viridis", tools=["hover"],
        responsive=True, min_height=320, xrotation=30, **PLOT_OPTS)


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
             f"unseen NMI the layer reaches{_summary_words(figs) or ' at the last epoch'}, over layers:"]
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
    (x) and the unseen NMI it reaches after (y, mean over seeds) with the 95 % interval of that mean over seeds as
    error bars, and that NMI's bootstrap interval over the unseen images (thick, translucent) where recorded. The
    legend entry of a condition carries n."""
    points = (figs.get("transfer") or {}).get("points")
    boot = "; thick: bootstrap over images" if _has_interval(points, "nmi_low", "nmi_high") else ""
    title = (f"Scores before fine-tuning against unseen NMI{_summary_words(figs)} (bars: 95 % interval over "
             f"seeds{boot})")
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
            neg, pos = _error(rows, "nmi", "nmi_seed_low", "nmi_seed_high")
            rows = rows.assign(nmi_neg=neg, nmi_pos=pos)
            layers.append(hv.ErrorBars(rows, score, ["nmi", "nmi_neg", "nmi_pos"]).opts(color=color))
            if _has_interval(rows, "nmi_low", "nmi_high"):
                layers.append(_interval_segments(rows, score, "nmi_low", "nmi_high", color=color, line_width=8,
                                                 alpha=0.35))
            hover = ["nmi", *[c for c in ("nmi_seed_low", "nmi_seed_high", "n") if c in rows], "layer_name", "depth"]
            layers.append(hv.Scatter(rows, score, hover, label=_n_label(group, rows)).opts(
                color=color, size=9, tools=["hover"]))
        panels.append(hv.Overlay(layers).opts(
            hv.opts.Overlay(title=f"{_score_label(score)} (epoch 0)", xlabel=f"{_score_label(score)} before fine-tuning",
                            ylabel=f"unseen NMI{_summary_words(figs)}", show_legend=score == scores[-1],
                            legend_position="right", width=460 if score == scores[-1] else 320, height=300,
                            **PLOT_OPTS)))
    # each panel its own x range: the scores' scales differ (the interval segments' x0 would link them)
    return hv.Layout(panels).opts(title=title, shared_axes=False).cols(len(panels))


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
