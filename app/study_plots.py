"""HoloViews figures of a study, drawn from :func:`lab.study.figures` (numbers from lab.analysis).

Used by the app's Studies tab and by study notebooks alike; nothing here computes a statistic.
"""
from __future__ import annotations

import holoviews as hv
import holoviews.plotting.bokeh  # noqa: F401 - registers the options of the bokeh backend
import numpy as np
import pandas as pd

from app.plots import plot_text

__all__ = ["layer_depth_curves", "accuracy_vs_g", "grid_heatmap", "collapse_curves", "rank_text"]

_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf")


def _empty(title: str, message: str = "no finished runs yet"):
    return hv.Text(0.5, 0.5, message).opts(title=title, xaxis=None, yaxis=None, responsive=True,
                                          min_height=300, toolbar=None)


def _group_colors(figs: dict) -> dict:
    """One colour per condition, in the order of the study's conditions (the same in every figure)."""
    groups = []
    for key in ("generalization", "layers", "nc1"):
        frame = figs.get(key)
        if frame is not None and "group" in frame:
            groups += [g for g in frame["group"] if g not in groups]
    return {g: _COLORS[i % len(_COLORS)] for i, g in enumerate(groups)}


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
        layers.append(hv.Curve(rows, "depth", ["mean", "std", "n", "layer_name"], label=label).opts(
            color=color, tools=["hover"], line_width=2))
        if mark_best and rows["best"].any():
            layers.append(hv.Scatter(rows[rows["best"]], "depth", ["mean", "layer_name"], label=label).opts(
                color=color, marker="star", size=14, tools=["hover"]))
    return hv.Overlay(layers).opts(
        hv.opts.Overlay(title=title, xlabel="relative depth (input = 0, output = 1)", ylabel=ylabel, logy=logy,
                        legend_position="right", responsive=True, min_height=320))


def layer_depth_curves(figs: dict):
    """g's metric (unseen NMI, mean ± std over seeds) at every layer against relative depth, per condition;
    the star marks each condition's best layer (Dyballa et al.)."""
    return _curves(figs.get("layers"), ylabel="unseen NMI (mean over seeds)", colors=_group_colors(figs),
                   title="Unseen NMI per layer against relative depth (band: ±1 std over seeds)")


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


def accuracy_vs_g(figs: dict):
    """One point per condition: seen held-out accuracy against g, error bars ±1 std (Gerritz et al.).
    Each condition has the colour of its curve in :func:`layer_depth_curves`."""
    gen = figs.get("generalization")
    title = "Seen accuracy against g, per condition (bars: ±1 std)"
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
        layers.append(hv.Scatter(row, "heldout_accuracy", ["g", "label", "layer", "n_runs"], label=label).opts(
            size=10, color=color, tools=["hover"]))
    return hv.Overlay(layers).opts(
        hv.opts.Overlay(title=title, xlabel="seen held-out accuracy", ylabel="g (best-layer unseen NMI)",
                        legend_position="right", responsive=True, min_height=320))


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
        xrotation=30)
