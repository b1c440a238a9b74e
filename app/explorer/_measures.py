"""The measures of :class:`app.EmbeddingView`'s selection, per layer, over the same on all images.

:class:`SelectionMeasures` draws one measure of :func:`lab.analysis.selection_measures` (share right, mean
margin, NMI or CDNV; a selector picks which) as a curve over the all-image curve, and lists the report's
notes (what it could not give, and why). It owns the stream its plot reads; the explorer hands it each new
report.
"""
from __future__ import annotations

import html

import holoviews as hv
import pandas as pd
import panel as pn
import param

from app.base import plots

__all__ = ["SelectionMeasures"]

_HINT = ("Select images (lasso, box, or <i>select forgotten</i>) to see their measures per layer next to all "
         "images.")


class SelectionMeasures(pn.viewable.Viewer):
    """A :func:`lab.analysis.selection_report` of the current selection as a curve per layer, and its notes."""

    measure = param.Selector(default="share_right", objects=list(plots.SELECTION_MEASURES),
                             doc="Which measure of the selection report is drawn.")

    def __init__(self, **params):
        super().__init__(**params)
        self.frame: pd.DataFrame | None = None       # the report drawn (lab's DataFrame), None: none
        self._layers: tuple | None = None
        self._pipe = hv.streams.Pipe(data=None)
        self._pane = pn.pane.HoloViews(None, sizing_mode="stretch_width", min_width=360, max_width=720,
                                       linked_axes=False, visible=False, css_classes=["ls-selection-measures"])
        self._measure_w = pn.widgets.RadioButtonGroup.from_param(
            self.param.measure, options={label: name for name, label in plots.SELECTION_MEASURES.items()},
            color="light", css_classes=["ls-selection-measure"], margin=(5, 10))
        self._text = pn.pane.HTML("", sizing_mode="stretch_width", css_classes=["ls-selection-notes"])
        self.param.watch(lambda _e: self._send(), "measure")
        self._layout = pn.Column(self._text, self._measure_w, self._pane, sizing_mode="stretch_width",
                                 visible=False)

    def show(self, frame: pd.DataFrame | None, *, epoch: int | None = None, visible: bool = True,
             axis: str = "epoch") -> None:
        """Draw ``frame`` (a selection report; None: no selection) of the evaluation at ``epoch`` (``axis``: what
        the run's epoch numbers count, "step" for a loop counted in optimizer steps); ``visible`` False hides the
        whole part (a view without per-image answers)."""
        self._layout.visible = visible
        self.frame = frame if visible else None
        if self.frame is None:
            self._pane.visible = self._measure_w.visible = False
            self._text.object = f"<div style='color:#777;font-size:12px'>{_HINT}</div>" if visible else ""
            return
        self._text.object = _notes_html(frame, epoch, axis)
        layers = tuple(frame.index)
        if layers != self._layers or self._pane.object is None:     # new layers: a new x axis
            self._layers = layers
            self._pipe = hv.streams.Pipe(data=None)
            self._send()
            self._pane.object = hv.DynamicMap(self._render, streams=[self._pipe])
        else:
            self._send()
        self._pane.visible = self._measure_w.visible = True

    def _send(self) -> None:
        if self.frame is not None:
            self._pipe.send({"frame": self.frame, "measure": self.measure})

    def _render(self, data):
        frame, measure = data["frame"], data["measure"]
        label = plots.SELECTION_MEASURES[measure]
        return plots.selection_curves(frame, measure, title=f"{label} per layer: the selection and all images",
                                      width=420, responsive=True)

    def __panel__(self):
        return self._layout


def _notes_html(frame: pd.DataFrame, epoch: int | None, axis: str = "epoch") -> str:
    n, k = int(frame["n"].iloc[0]) if len(frame) else 0, int(frame["n_classes"].iloc[0]) if len(frame) else 0
    where = f" at {html.escape(axis)} {epoch}" if epoch is not None else ""
    head = (f"<b>Measures on the selection</b>{where}: {n:,} image{'s' if n != 1 else ''} of {k} "
            f"class{'es' if k != 1 else ''}, each layer next to all {int(frame.attrs.get('n_images', 0)):,} "
            "unseen images (NMI against the layer's k-means clusters of all images; CDNV of the selected "
            "classes on all their images)")
    notes = "".join(f"<li>{html.escape(str(note))}</li>" for note in frame.attrs.get("notes") or [])
    notes = f"<ul style='margin:2px'>{notes}</ul>" if notes else ""
    return f"<div class='ls-selection-report' data-n='{n}' style='font-size:12px'>{head}{notes}</div>"
