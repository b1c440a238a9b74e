"""The live view's training section: the training plots (loss; seen accuracy), layer utilization and each layer's
CKA to its first evaluation, and the sentences that replace a plot that would be empty axes
(:func:`app.live._streams.training_gaps`: a monitored loop that passed no train_loss, a run that ended before
training, a value measured once)."""
from __future__ import annotations

import html
from functools import partial

import holoviews as hv
import panel as pn

from app.base import wrap_row

from ._panes import grow, plot_pane
from ._streams import training_gaps

__all__ = ["TrainingPanes"]


class TrainingPanes:
    """``panes``: the training plots' wrapping row (:func:`app.base.wrap_row`); ``gap``: the note beside it; ``slots``: {"loss", "accuracy": plot
    pane}; ``utilization`` and ``cka``: the plot panes of layer utilization and CKA to the first evaluation (the
    view fills them), ``cka_caption`` the line under the latter; ``section``: all of it, laid out."""

    def __init__(self):
        self.panes = wrap_row(min_width=560, styles={"flex": "2 1 560px"})
        self.slots: dict[str, pn.pane.HoloViews] = {}
        self.gap = pn.pane.HTML("", visible=False, css_classes=["ls-training-gap"], min_width=280,
                                sizing_mode="stretch_width", margin=(0, 10),
                                styles={"flex": "1 1 280px", "color": "#555"})
        self.utilization = plot_pane(None, 360)
        # shown by its box (a HoloViews pane's own visible does not reach its plot): hidden where a sentence says why
        self.utilization_box = pn.Column(self.utilization, margin=0, **grow(360))
        self.cka = plot_pane(None, 360)            # which layers fine-tuning moved
        self.cka_caption = pn.pane.HTML("", sizing_mode="stretch_width", margin=(0, 10),
                                        styles={"color": "#555", "font-size": "12px"})
        self.cka_box = pn.Column(self.cka, self.cka_caption, **grow(360))
        # the training plots share the row's width, beside utilization and CKA
        self.section = pn.Column(pn.pane.HTML("<b>Training</b> (seen classes)", margin=(5, 10)),
                                 wrap_row(self.gap, self.panes, self.utilization_box, self.cka_box),
                                 sizing_mode="stretch_width", styles={"flex": "1 1 100%"})

    def clear(self) -> None:
        self.panes.objects, self.slots, self.gap.visible = [], {}, False
        self.utilization.object = self.cka.object = self.cka_caption.object = None

    def build(self, model, streams: dict, render) -> None:
        """Show the training plots of the run ``model`` from ``streams["training"]`` (the view's Buffer), drawn by
        ``render`` (:class:`app.live._render.LiveRenderers`)."""
        seeds, buffer = list(model.seeds), streams["training"]
        self.slots = {which: plot_pane(hv.DynamicMap(partial(render.training, which=which, seeds=seeds),
                                                     streams=[buffer]), 280) for which in ("loss", "accuracy")}
        self.panes.objects = list(self.slots.values())
        self.show_gaps(model, utilization="utilization" in streams)

    def build_utilization(self, model, pipe, render) -> None:
        """Utilization per layer from ``pipe`` (None: the run trains nothing, no plot)."""
        self.utilization.object = None if pipe is None else hv.DynamicMap(
            partial(render.utilization, layers=list(model.layers)), streams=[pipe])

    def build_cka(self, model, pipe, render) -> None:
        """Each layer's CKA to its first evaluation from ``pipe`` (None: the run trains nothing, no plot)."""
        self.cka.object = None if pipe is None else hv.DynamicMap(
            partial(render.cka, layers=list(model.layers)), streams=[pipe])

    def show_gaps(self, model, utilization: bool = True) -> None:
        """Take out a plot that will stay empty (not by its visible: Panel fails to sync a HoloViews pane's own
        visible to its plot); the note says why, one sentence each. ``utilization``: the run draws utilization
        and CKA to the first evaluation (a run that trains)."""
        gaps = training_gaps(model) if self.slots else {}
        self.utilization_box.visible = utilization and "utilization" not in gaps
        self.cka_box.visible = utilization and "cka" not in gaps
        shown = [pane for which, pane in self.slots.items() if which not in gaps]
        if shown != self.panes.objects:
            self.panes.objects = shown
        self.gap.param.update(
            object="".join(f"<div style='padding:6px 0'><i>{html.escape(why)}</i></div>" for why in gaps.values()),
            visible=bool(gaps))
