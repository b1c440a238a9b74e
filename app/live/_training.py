"""The live view's two training plots (loss; seen accuracy), and the sentence that replaces one that will stay
empty (:func:`app.live._streams.training_gaps`: a monitored loop that passed no train_loss, a run that ended
before training)."""
from __future__ import annotations

import html

import panel as pn

from ._panes import plot_pane
from ._streams import training_gaps

__all__ = ["TrainingPanes"]


class TrainingPanes:
    """``panes``: the plots' FlexBox; ``gap``: the note beside it; ``slots``: {"loss", "accuracy": plot pane}."""

    def __init__(self):
        self.panes = pn.FlexBox(sizing_mode="stretch_width", min_width=560, styles={"flex": "2 1 560px"})
        self.slots: dict[str, pn.pane.HoloViews] = {}
        self.gap = pn.pane.HTML("", visible=False, css_classes=["ls-training-gap"], min_width=280,
                                sizing_mode="stretch_width", margin=(0, 10),
                                styles={"flex": "1 1 280px", "color": "#555"})

    def clear(self) -> None:
        self.panes.objects, self.slots, self.gap.visible = [], {}, False

    def build(self, loss, accuracy, model) -> None:
        """Show the plots ``loss`` and ``accuracy`` (DynamicMaps) of the run ``model``."""
        self.slots = {"loss": plot_pane(loss, 280), "accuracy": plot_pane(accuracy, 280)}
        self.panes.objects = list(self.slots.values())
        self.show_gaps(model)

    def show_gaps(self, model) -> None:
        """Take out a plot that will stay empty (not by its visible: Panel fails to sync a HoloViews pane's own
        visible to its plot); the note says why, one sentence each."""
        gaps = training_gaps(model) if self.slots else {}
        shown = [pane for which, pane in self.slots.items() if which not in gaps]
        if shown != self.panes.objects:
            self.panes.objects = shown
        self.gap.param.update(
            object="".join(f"<div style='padding:6px 0'><i>{html.escape(why)}</i></div>" for why in gaps.values()),
            visible=bool(gaps))
