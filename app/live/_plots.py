"""The live view's plots of one run: the streams they read and the panes that draw them.

:class:`RunPlots` feeds its streams, so it owns them (the HoloViz habit): per run it makes new streams and puts
their plots in the panes it built once for the view, replacing what the last run drew (a Bokeh document keeps
every model its roots still reference, so plots are replaced, never stacked). What each stream carries comes from
:mod:`app.live._streams`, how each is drawn from :mod:`app.live._render`; the builds and sends run in turns
through the view's :class:`~app.base.RedrawQueue`. The view keeps the run's lifecycle (events, status, text).
"""
from __future__ import annotations

from functools import partial
from typing import Callable

import holoviews as hv
import panel as pn

from app.base import RedrawQueue, ThumbnailSource, plots, wrap_row
from app.compare import similarity_plots
from app.explorer.embedding import EmbeddingView

from ._model import RunModel
from ._panes import CURVE_WIDTH, EXPLORER_LEAST, WHOLE_ROW, fillers, grow, plot_pane
from ._picker import LayoutPicker
from ._render import LiveRenderers
from ._status import PLACEHOLDER, UNMEASURED, ended_unmeasured, placeholder_html
from ._streams import cka_initial_data, curve_specs, curves_data, heatmap_data, projection_data
from ._training import TrainingPanes

__all__ = ["RunPlots"]


class RunPlots:
    """The plots of the run a live view shows, and the streams that feed them.

    ``streams``: {name: ``hv.streams.Pipe``/``Buffer``} of the run shown ("curves:METRIC", "heatmap", "projection",
    "training", and for a run that trains "utilization" and "cka_initial"); empty before a run starts.
    ``render``: the plots' DynamicMap callbacks. ``curves_box``: the metric-vs-layer plots (or the sentence in their
    place); ``heatmap_pane``; ``training``: the training section's panes; ``details``: the row of the heatmap (under
    ``heatmap_controls``), ``explorer`` and the training section, shown once the heatmap is drawn.

    ``model``, ``thumbnails`` and ``heatmap`` (the heatmap's (metric, split)) are callables: the view's run, hover
    images and heatmap choice change after this is built. ``picker`` chooses the layout's layer and epoch,
    ``embedding`` shows it.
    """

    def __init__(self, model: Callable[[], RunModel], redraws: RedrawQueue, *, picker: LayoutPicker,
                 embedding: EmbeddingView, thumbnails: Callable[[], ThumbnailSource | None],
                 heatmap: Callable[[], tuple[str, str]], heatmap_controls, explorer):
        self._model, self._redraws, self._picker, self._embedding = model, redraws, picker, embedding
        self._thumbnails, self._heatmap_choice = thumbnails, heatmap
        self.streams: dict[str, hv.streams.Stream] = {}
        self.render = LiveRenderers(model)
        self._placeholder = None            # the waiting sentence among the curves, until they are drawn
        self._shown_projection = None       # the layout the embedding shows (a new one elsewhere redraws nothing)
        self._projection_points = 0
        # rows of curves that wrap: Bokeh layouts (app.base.wrap_row), not a pn.FlexBox, which blanks plots inside
        self.curves_box = wrap_row(pn.pane.HTML(PLACEHOLDER, styles=WHOLE_ROW))
        self.heatmap_pane = plot_pane(None, plots.HEATMAP_WIDTH)
        self.training = TrainingPanes()     # a plot that will stay empty gives way to a sentence saying why
        # every plot grows with the page: the heatmap and the layout share their row 1 : 2, the training plots theirs
        heat_col = pn.Column(heatmap_controls, self.heatmap_pane, **grow(plots.HEATMAP_WIDTH))
        proj_col = pn.Column(*explorer, **grow(EXPLORER_LEAST, share=2))
        self.details = wrap_row(heat_col, proj_col, self.training.section, visible=False)

    # ------------------------------------------------------------------ per run
    def clear(self, message: str) -> None:
        """No run: no streams, empty panes, ``message`` where the curves will be."""
        self.streams = {}
        self._shown_projection = None
        self._projection_points = 0
        self._placeholder = pn.pane.HTML(placeholder_html(message), css_classes=["ls-placeholder"], styles=WHOLE_ROW)
        self.curves_box.objects = [self._placeholder]
        self.details.visible = False
        self.heatmap_pane.object = None
        self.training.clear()

    def say(self, message: str) -> None:
        """``message`` in the placeholder, while no run's plots are built."""
        if not self.streams and self._placeholder is not None:
            self._placeholder.object = placeholder_html(message)

    def show_unmeasured(self) -> None:
        """One sentence in place of the plots of a run that ended before measuring anything (no dead player, no
        empty axes)."""
        if self.streams:
            self.curves_box.objects = [pn.pane.HTML(placeholder_html(UNMEASURED), styles=WHOLE_ROW,
                                                    css_classes=["ls-placeholder"])]
            self.details.visible = False

    def build(self) -> None:
        """Streams of a new run at once; its plots one by one (each HoloViews plot costs 0.1-0.5 s)."""
        m = self._model()
        streams: dict[str, hv.streams.Stream] = {}
        for metric, splits in curve_specs(m):
            streams[f"curves:{metric}"] = hv.streams.Pipe(data=curves_data(m, metric, splits))
        streams["heatmap"] = hv.streams.Pipe(data=self._heatmap_data())
        streams["projection"] = hv.streams.Pipe(data=self._projection_data())
        streams["training"] = hv.streams.Buffer(data=m.training.iloc[0:0].astype(float), length=100_000,
                                                index=False)
        if m.config.get("strategy", "full") != "none" or m.open_ended:     # a monitored loop trains
            streams["utilization"] = hv.streams.Pipe(data=m.utilization_frame())
            streams["cka_initial"] = hv.streams.Pipe(data=cka_initial_data(m))
        self.streams = streams
        specs = curve_specs(m)
        if self._placeholder is not None:
            self._placeholder.object = placeholder_html("Drawing the plots…")
        if not specs:
            self.curves_box.objects = [pn.pane.HTML("<i>No metric-vs-layer plot for the chosen metrics.</i>",
                                                    styles=WHOLE_ROW)]
        for i, (metric, splits) in enumerate(specs):
            self._redraws.schedule(f"build:curves:{metric}",
                                   partial(self._build_curve_pane, metric, splits, first=i == 0))
        self._redraws.schedule("build:heatmap", self._build_heatmap_pane)
        self._redraws.schedule("build:projection", self._picker.build_player)
        self._redraws.schedule("build:training", self._build_training_panes)
        self._redraws.schedule("build:utilization", self._build_utilization_pane)
        self._redraws.schedule("build:cka_initial", self._build_cka_pane)

    @property
    def curves_drawn(self) -> bool:
        """Whether a metric-vs-layer plot is on the page."""
        return any(isinstance(o, pn.pane.HoloViews) for o in self.curves_box.objects)

    def _build_curve_pane(self, metric: str, splits, first: bool) -> None:
        if ended_unmeasured(self._model()):
            return
        pipe = self.streams[f"curves:{metric}"]
        self._redraws.discard(f"send:curves:{metric}")
        pipe.send(curves_data(self._model(), metric, splits))        # no plot subscribed yet: only stores the data
        dmap = hv.DynamicMap(partial(self.render.curves, metric=metric, splits=splits), streams=[pipe])
        pane = plot_pane(dmap, CURVE_WIDTH, margin=4, css_classes=["ls-curves"])
        drawn = [] if first else [o for o in self.curves_box.objects if isinstance(o, pn.pane.HoloViews)]
        self.curves_box.objects = [*drawn, pane, *fillers()]

    def _build_heatmap_pane(self) -> None:
        if ended_unmeasured(self._model()):
            return
        self._redraws.discard("send:heatmap")
        self.streams["heatmap"].send(self._heatmap_data())
        self.heatmap_pane.object = hv.DynamicMap(self.render.heatmap, streams=[self.streams["heatmap"]])
        self.details.visible = True

    def _build_training_panes(self) -> None:
        self._redraws.discard("send:training")
        self._send_training()
        self.training.build(self._model(), self.streams, self.render)

    def _build_utilization_pane(self) -> None:
        if "utilization" in self.streams:
            self._redraws.discard("send:utilization")
            self.streams["utilization"].send(self._model().utilization_frame())
        self.training.build_utilization(self._model(), self.streams.get("utilization"), self.render)

    def _build_cka_pane(self) -> None:
        if "cka_initial" in self.streams:
            self._redraws.discard("send:cka_initial")
            self._send_cka()
        self.training.build_cka(self._model(), self.streams.get("cka_initial"), self.render)

    # ------------------------------------------------------------------ stream payloads
    def _heatmap_data(self) -> dict:
        return heatmap_data(self._model(), *self._heatmap_choice())

    def _projection_data(self) -> dict:
        return projection_data(self._model(), self._picker.layer, self._picker.epoch, self._thumbnails())

    # ------------------------------------------------------------------ per event
    def refresh(self, changed: set[str], dirty: set[str]) -> None:
        """Schedule the sends that ``changed`` (what the events touched) and ``dirty`` (the metrics they brought)
        need, and take out the training plots that will stay empty. Only while a run's streams exist."""
        m = self._model()
        if "curves" in changed:
            for metric, splits in curve_specs(m):        # a bootstrap row changes its metric's band
                if {metric, f"{metric}_low", f"{metric}_high"} & dirty and f"curves:{metric}" in self.streams:
                    self._redraws.schedule(f"send:curves:{metric}", partial(self._send_curves, metric, splits))
        if "heatmap" in changed and (self._heatmap_choice()[0] in dirty or m.ended):     # ended: its columns change
            self._redraws.schedule("send:heatmap", self.send_heatmap)
        if "training" in changed:
            self._redraws.schedule("send:training", self._send_training)
        if changed & {"training", "status", "utilization", "curves"}:     # curves: CKA to the first evaluation
            self.training.show_gaps(m, utilization="utilization" in self.streams)
        if "utilization" in changed and "utilization" in self.streams:
            self._redraws.schedule("send:utilization",
                                   lambda: self.streams["utilization"].send(m.utilization_frame()))
        if "curves" in changed and "cka_initial" in dirty and "cka_initial" in self.streams:
            self._redraws.schedule("send:cka_initial", self._send_cka)

    def _send_curves(self, metric: str, splits) -> None:
        self.streams[f"curves:{metric}"].send(curves_data(self._model(), metric, splits))

    def _send_cka(self) -> None:
        m = self._model()
        data = cka_initial_data(m)
        self.streams["cka_initial"].send(data)
        self.training.cka_caption.object = similarity_plots.initial_caption(data, axis=m.axis)

    def send_heatmap(self) -> None:
        """Send the heatmap the view's choice (metric, split) asks for."""
        self.streams["heatmap"].send(self._heatmap_data())

    def _send_training(self) -> None:
        buffer = self.streams["training"]
        rows = self._model().training.iloc[len(buffer.data):]
        if len(rows):
            buffer.send(rows.astype(float))

    def follow_projection(self) -> None:
        """A new layout, or maybe a new best layer: redraw the layout if the one to show changed."""
        moved = self._picker.follow()
        layer, epoch = self._picker.layer, self._picker.epoch
        current = self._model().projection(layer, epoch) if layer else None
        if not moved and current is self._shown_projection:
            return                      # the new layout is for another layer or epoch: nothing to redraw
        self._redraws.schedule("send:projection", self.send_projection)

    def send_projection(self) -> None:
        """Show the layout of the picker's layer and epoch now."""
        pipe = self.streams.get("projection")
        if pipe is None:
            return
        data = self._projection_data()
        self._projection_points = len(data["frame"])
        layer, epoch = self._picker.layer, self._picker.epoch
        self._shown_projection = self._model().projection(layer, epoch) if layer else None
        pipe.send(data)           # what the layout shows, for consumers of the streams (tests, notebooks)
        self._embedding.show(layer, epoch)

    def thumbnails_changed(self) -> None:
        """The hover images changed: show the layout shown again with them."""
        if self._model().projection_keys() and self._shown_projection is not None:
            self.send_projection()

    # ------------------------------------------------------------------ what it shows
    def counts(self) -> dict:
        """What the plots show: the layers with curves drawn (unseen values), the heatmap's cells and the layout's
        points (0 where not drawn)."""
        frame = self._model().metrics
        unseen = frame[(frame["split"] == "unseen") & frame["value"].notna()] if len(frame) else frame
        heat = self.streams.get("heatmap")
        cells = (int(heat.data["frame"]["value"].notna().sum())
                 if heat is not None and self.heatmap_pane.object is not None else 0)
        return {"metric_layers": int(unseen["layer"].nunique()) if len(unseen) and self.curves_drawn else 0,
                "heatmap_cells": cells,
                "projection_points": self._projection_points if self._embedding.n_points > 0 else 0}
