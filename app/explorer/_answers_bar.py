"""The per-image controls of :class:`app.EmbeddingView`: colour mode, select-forgotten, their note and legend,
and the measures of the selection.

:class:`AnswersBar` holds the :class:`~app.explorer._answers.ImageAnswers` of the evaluation the view's left plot
shows (read once per run, seed and epoch; again when the host says a new evaluation landed) and keeps its
widgets in step: enabled with what they read, or disabled with the one-line reason.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import panel as pn

from app.base import plots

from ._answers import NO_RUN, ImageAnswers, answers_note_html, arrival_legend_html
from ._measures import SelectionMeasures

__all__ = ["AnswersBar"]

_NO_STORE = "the live view does not know the run store this run is recorded in (set LiveView.store)"


class AnswersBar:
    """Widgets and state of one view's per-image answers.

    Parameters
    ----------
    color_param : the view's ``color_by`` parameter (its widget)
    on_forgotten : called when the select-forgotten button is pressed
    """

    def __init__(self, color_param, on_forgotten: Callable[[], None]):
        self.answers: ImageAnswers | None = None
        self.key = None
        self.arrival = None                 # the source's rows' arrival layers (categorical), None: no answers
        self.colors: dict[str, str] = {}
        self.color_w = pn.widgets.RadioButtonGroup.from_param(color_param, color="light", disabled=True,
                                                              margin=(5, 10), css_classes=["ls-color-by"])
        self.forgotten_w = pn.widgets.Button(label="Select forgotten by the final layer", disabled=True,
                                             width=300, margin=(5, 10), css_classes=["ls-select-forgotten"])
        self.forgotten_w.on_click(lambda _e: on_forgotten())
        self.note = pn.pane.HTML("", sizing_mode="stretch_width", margin=(0, 10))
        self.legend = pn.pane.HTML("", visible=False, sizing_mode="stretch_width", margin=(0, 10))
        self.measures = SelectionMeasures()
        self.row = pn.Column(pn.FlexBox(pn.pane.HTML("Colour by", margin=(12, 0, 5, 10)), self.color_w,
                                        self.forgotten_w, sizing_mode="stretch_width"),
                             self.note, sizing_mode="stretch_width", margin=0)

    @property
    def ok(self) -> bool:
        return self.answers is not None and self.answers.ok

    def load(self, source, epoch: int | None, *, force: bool = False) -> bool:
        """Read the answers of ``source``'s run at its seed and ``epoch`` unless already read (``force``: again).
        True when what the view shows may have changed."""
        run = source.run() if source is not None else None
        key = (id(source), None if run is None else run[1], getattr(source, "seed", None), epoch)
        if key == self.key and not force:
            return False
        self.key = key
        if source is None:
            answers = None
        elif run is None:
            answers = ImageAnswers.unavailable(NO_RUN)
        elif run[0] is None:
            answers = ImageAnswers.unavailable(_NO_STORE)
        elif run[1] is None:
            answers = ImageAnswers.unavailable("the run has not started yet")
        else:
            answers = ImageAnswers(run[0], run[1], seed=source.seed, epoch=epoch)
        if answers is not None and answers.ok:
            problem = answers.check_images(np.asarray(source.indices))
            answers = ImageAnswers.unavailable(problem) if problem else answers
        self.set(answers, source)
        return True

    def set(self, answers: ImageAnswers | None, source) -> None:
        """Use ``answers`` (None: none, e.g. an empty view) for ``source``'s images."""
        self.answers = answers
        if answers is None:
            self.key = None
        ok = self.ok
        self.arrival = answers.arrival(source.indices) if ok else None
        self.colors = plots.arrival_colors(answers.layers) if ok else {}
        why = None if ok or answers is None else answers.problem
        n = len(answers.forgotten()) if ok else 0
        self.color_w.param.update(disabled=not ok, description=why)
        none = f"no image is forgotten at this {answers.axis}" if answers is not None else None
        self.forgotten_w.param.update(disabled=not n, label=f"Select forgotten by the final layer ({n})" if ok
                                      else "Select forgotten by the final layer",
                                      description=why or (None if n else none))
        self.note.object = answers_note_html(answers)
        if ok:
            self.legend.object = arrival_legend_html(answers, self.colors)

    def show_legend(self, shown: bool) -> None:
        self.legend.visible = bool(shown and self.ok)

    def measure(self, selection) -> None:
        """Draw the measures of ``selection`` (image indices) on the record read."""
        if not self.ok:
            self.measures.show(None, visible=False)
            return
        self.measures.show(self.answers.measures(selection) if len(selection) else None, epoch=self.answers.epoch,
                           axis=self.answers.axis)
