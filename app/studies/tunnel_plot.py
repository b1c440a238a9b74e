"""The tunnel of a study's conditions, drawn from ``lab.study.figures(...)["tunnel"]``
(:func:`lab.analysis.group_tunnel`; METRICS.md, "Tunnel"). Nothing here computes a statistic.

One point per condition: where its unseen best layer sits (relative depth, 0 = first layer, 1 = last) against
the share of the layers after it that form a tunnel, each the mean over the condition's seeds with its 95 %
Student-t interval over the seeds (no bar with one seed), n in the legend and the hover.
"""
from __future__ import annotations

import holoviews as hv
import holoviews.plotting.bokeh  # noqa: F401 - registers the options of the bokeh backend
import numpy as np
import pandas as pd

from app.base.plots import PLOT_OPTS, plot_text
from app.studies.study_plots import _COLORS, _empty, _group_colors

__all__ = ["tunnel_plot", "tunnel_text", "TUNNEL_TITLE"]

_MARKERS = ("circle", "square", "triangle", "diamond")   # past the palette's colours, a condition differs by marker

TUNNEL_TITLE = "Tunnel per condition: the unseen best layer's relative depth against the tunnel share after it"


def _errors(rows: pd.DataFrame, q: str) -> tuple[pd.Series, pd.Series]:
    """Distances from the mean down to the interval's low end and up to its high end; 0 where undefined."""
    mean = rows[q].astype(float)
    return ((mean - rows[f"{q}_low"].astype(float)).fillna(0.0).clip(lower=0),
            (rows[f"{q}_high"].astype(float) - mean).fillna(0.0).clip(lower=0))


def tunnel_plot(figs: dict):
    """The study's tunnel figure: per condition, the unseen best layer's relative depth (x) against the tunnel
    share (y), mean over seeds with 95 % Student-t interval bars over the seeds, n in the legend and the hover
    (Masarczyk et al. 2023; Harun et al. 2024)."""
    frame = figs.get("tunnel")
    if frame is None or frame.empty:
        return _empty(TUNNEL_TITLE, "no finished run with unseen NMI, the seen NCC accuracy and the numerical "
                                    "rank at every layer yet")
    colors = _group_colors(figs)
    order = list(colors) + [g for g in frame["group"] if g not in colors]   # the study's order of conditions
    layers = []
    for group, rows in frame.groupby("group", sort=False):
        i = order.index(group)
        color = colors.get(group, _COLORS[i % len(_COLORS)])
        n = int(rows["n"].iloc[0])
        label = f"{plot_text(group)} (n={n})"
        down, up = _errors(rows, "share")
        left, right = _errors(rows, "relative_depth")
        data = rows.assign(label=plot_text(group), best=rows["best_layer"].map(plot_text),
                           share_down=down, share_up=up, depth_left=left, depth_right=right)
        if (down + up).gt(0).any():
            layers.append(hv.ErrorBars(data, "relative_depth", ["share", "share_down", "share_up"]).opts(color=color))
        if (left + right).gt(0).any():
            layers.append(hv.ErrorBars(data, "relative_depth", ["share", "depth_left", "depth_right"],
                                       horizontal=True).opts(color=color))
        hover = ["share", "label", "n", "relative_depth_low", "relative_depth_high", "share_low", "share_high",
                 "n_tunnel", "n_layers", "best", "best_layer_n"]
        marker = _MARKERS[(i // len(_COLORS)) % len(_MARKERS)]
        layers.append(hv.Scatter(data, "relative_depth", hover, label=label).opts(
            color=color, marker=marker, size=10, tools=["hover"]))
    return hv.Overlay(layers).opts(
        hv.opts.Overlay(title=TUNNEL_TITLE, xlabel="unseen best layer's relative depth (first = 0, last = 1)",
                        ylabel="tunnel share of the layers after it", legend_position="right", responsive=True,
                        # HoloViews drops the legend past 25 glyphs; a study's conditions each draw up to three
                        legend_limit=10_000, min_height=320, padding=0.05, **PLOT_OPTS))


def _mean_and_interval(row, q: str, digits: int = 2) -> str:
    mean, low, high = float(getattr(row, q)), float(getattr(row, f"{q}_low")), float(getattr(row, f"{q}_high"))
    interval = f" (95 %: {low:.{digits}f} to {high:.{digits}f})" if np.isfinite(low) and np.isfinite(high) else ""
    return f"{mean:.{digits}f}{interval}"


def tunnel_text(figs: dict) -> str:
    """Per condition, in words: what was measured, means over its n seeds with their 95 % intervals."""
    frame = figs.get("tunnel")
    if frame is None or frame.empty:
        return ""
    return "\n".join(
        f"- {plot_text(row.group)} (n = {int(row.n)}): best unseen layer at relative depth "
        f"{_mean_and_interval(row, 'relative_depth')}, most often {plot_text(row.best_layer)} "
        f"({int(row.best_layer_n)} of {int(row.n)}); tunnel share after it {_mean_and_interval(row, 'share')}"
        f" ({row.n_tunnel:.1f} of {int(row.n_layers)} layers); seen probe's best {row.probe_best:.2f}"
        for row in frame.itertuples(index=False))
