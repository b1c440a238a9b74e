"""The live view's panes that grow with the page: plots keep their own axes, curves share rows evenly."""
from __future__ import annotations

import panel as pn

__all__ = ["CURVE_WIDTH", "EXPLORER_LEAST", "WHOLE_ROW", "fillers", "grow", "plot_pane"]

CURVE_WIDTH = 380
"""Least width in pixels of a metric-vs-layer plot (it grows with the page; its title's two lines fit at this)."""
EXPLORER_LEAST = 720
"""Least width of the explorer's column: its plot (at least 520 px, margins 10) beside its hover card (170 px, margins
10). Narrower, the plot ran under the hover card; the heatmap then takes a row of its own."""


def grow(basis: int, share: int = 1) -> dict:
    """Options of a component that grows with the page: at least ``basis`` pixels wide, sharing a row's spare
    width with its neighbours in the ratio of ``share``."""
    return dict(sizing_mode="stretch_width", min_width=basis, styles={"flex": f"{share} 1 {basis}px"})


def plot_pane(obj, basis: int, **params) -> pn.pane.HoloViews:
    """A plot that grows with the page (:func:`grow`) and keeps its own axes: Panel links the axes of panes whose
    plots share a dimension name across the whole page, and the NMI curves' y axis took the range of the Compare
    tab's empty NMI plot (0-1)."""
    return pn.pane.HoloViews(obj, linked_axes=False, **grow(basis), **params)


WHOLE_ROW = {"flex": "1 1 100%"}      # text among the curves takes a row of its own


def fillers(n: int = 3) -> list[pn.Spacer]:
    """Empty cells after the curves, as wide as one and of no height: the last row's plots keep the width of the
    rows above (alone in its row, a plot would stretch to the page's width)."""
    return [pn.Spacer(height=0, margin=(0, 4), min_width=CURVE_WIDTH, sizing_mode="stretch_width",
                      styles={"flex": f"1 1 {CURVE_WIDTH}px"}) for _ in range(n)]
