"""Run and watch: the live views of one run, fed only by :mod:`lab.events`.

:class:`LiveView` turns the engine's event stream into plots that fill in as
the run goes: metric-vs-layer curves (one line per epoch, the latest bold, mean ± std band over
seeds, the bootstrap interval as a dotted band), a layer × epoch heatmap, the 2-D layout of unseen
embeddings in an :class:`~app.explorer.embedding.EmbeddingView` (thumbnails on hover, lasso selection linked
across layers and epochs; the verdict's best layer until one is picked, see :mod:`app.live._picker`),
training curves, layer utilization with each layer's CKA to its epoch-0 features, and a one-line
verdict with, under it, the best layer by each measure (:mod:`app.live._agreement`, read when an evaluation
completes). Each plot is a ``hv.DynamicMap`` fed by a
``Pipe``/``Buffer`` stream that the view's :class:`~app.live._plots.RunPlots` owns (``LiveView.plots``; its
``streams`` also as ``LiveView.streams``); an event updates the streams it touches, never the page. The view keeps
the run's lifecycle: following, events, status and messages, layout. The status line's text comes from
:mod:`app.live._status`, and the redraws run in turns through an :class:`~app.base.RedrawQueue`.

Threading: :meth:`LiveView.consume` must run on the session's thread. A worker
thread calls :meth:`LiveView.push` instead, which hands events to the session's
document through a :class:`~app.base.DocDispatcher` (batched, lock-safe).
"""
from __future__ import annotations

import html

import holoviews as hv
import panel as pn
import param

from lab import catalogue
from lab import events as ev
from lab.status import RunStatus

from app.base import DocDispatcher, RedrawQueue, ThumbnailSource, release_memory
from app.collapse import CollapseView
from app.explorer import no_layouts, warm_up_in_background
from app.explorer.embedding import EmbeddingView

from ._streams import HEATMAP_METRICS, has_seen_split
from ._agreement import AgreementTable
from ._picker import LayoutPicker
from ._plots import RunPlots
from ._status import end_message, ended_unmeasured, probe_html, status_html, under_way
from ._model import RunModel, verdict_html

__all__ = ["LiveView"]


class LiveView(pn.viewable.Viewer):
    """Live plots of one run at a time, driven by :mod:`lab.events` events.

    Examples
    --------
    >>> view = LiveView()
    >>> view.consume([lab.events.RunStarted(...), lab.events.LayerMetrics(...)])  # doctest: +SKIP
    >>> view.streams["curves:nmi"].data                                            # doctest: +SKIP
    """

    heatmap_metric = param.Selector(default=catalogue.g_metric(), objects=list(HEATMAP_METRICS),
                                    doc="Metric shown in the layer × epoch heatmap.")
    heatmap_split = param.Selector(default="unseen", objects=list(reversed(catalogue.held_out_splits())),
                                   doc="Which images the heatmap metric is measured on.")
    thumbnails = param.ClassSelector(class_=ThumbnailSource, default=None, allow_None=True,
                                     doc="Image thumbnails of the evaluation images (hover tooltips).")
    status = param.String(default="idle", constant=True,
                          doc="idle, queued, starting, running, stopping, finished, failed, cancelled or "
                              "interrupted (a followed run whose process stopped without closing it).")
    store = param.Parameter(default=None, doc="The lab.RunStore the shown run is recorded in (RunControl sets it); "
                                              "the per-image answers and the measures' best layers read it.")

    def __init__(self, **params):
        super().__init__(**params)
        self.model = RunModel()
        self._dispatcher = DocDispatcher(self.consume, doc=None)
        self._following = None              # the run this view follows from the store (app.live._follow)
        self._n_events = 0
        self._message, self._notice = "", None     # _notice: (message, alert type) the alert box keeps
        self._unmeasured_shown = False      # the sentence of a run that ended before measuring anything is shown
        self._verdict_data: dict = {}
        self._redraws = RedrawQueue(lambda: self._dispatcher, after_turn=self._refresh_status)
        # widgets and panes (per instance: never shared between sessions)
        self._status_md = pn.pane.HTML(status_html(self.model, self.status, self._message), margin=(0, 10),
                                       sizing_mode="stretch_width", css_classes=["ls-status"])
        self._progress = pn.indicators.Progress(value=0, max=1000, active=False, width=260, bar_color="primary",
                                                margin=(8, 10), visible=False)
        self._verdict = pn.pane.HTML("", sizing_mode="stretch_width", margin=(0, 10), css_classes=["ls-verdict"])
        self.agreement = AgreementTable()        # the measures' best layers, read when an evaluation completes
        self._alert = pn.pane.Alert("", alert_type="danger", visible=False, sizing_mode="stretch_width",
                                    css_classes=["ls-alert"])
        # the layout of the layer and epoch the player and epoch picker choose; it reads the run's layouts
        # from this view's model (the model changes with each run, hence the callables)
        self.embedding = EmbeddingView.for_live(lambda: self.model, lambda: self.thumbnails,
                                                lambda: (self.store, self.model.run_id))
        # which layer and epoch it shows: the verdict's best layer until the user picks one
        self.picker = LayoutPicker(lambda: self.model, lambda: self._verdict_data.get("layer"), self._on_pick)
        # a run stored without layouts: one sentence in place of a player and an explorer that would do nothing
        self._no_layouts = pn.pane.HTML("", visible=False, margin=(10, 10), styles={"color": "#555"},
                                        css_classes=["ls-no-layouts"])
        self._explorer = pn.Column(self.picker, self.embedding, margin=0, sizing_mode="stretch_width")
        self.collapse = CollapseView.for_live(lambda: self.model)    # neural collapse; draws once unfolded
        self._heatmap_metric_w = pn.widgets.Select.from_param(self.param.heatmap_metric, label="Heatmap metric",
                                                              width=190)
        self._heatmap_split_w = pn.widgets.RadioButtonGroup.from_param(self.param.heatmap_split, width=150,
                                                                       margin=(28, 10, 10, 10))
        # the run's plots and the streams that feed them
        self.plots = RunPlots(lambda: self.model, self._redraws, picker=self.picker, embedding=self.embedding,
                              thumbnails=lambda: self.thumbnails,
                              heatmap=lambda: (self.heatmap_metric, self.heatmap_split),
                              heatmap_controls=pn.Row(self._heatmap_metric_w, self._heatmap_split_w),
                              explorer=(self._no_layouts, self._explorer))
        self._probe = pn.pane.HTML(probe_html(self.probe()), visible=True, margin=0, height=0, width=0,
                                   styles={"overflow": "hidden"}, css_classes=["ls-probe-pane"])
        self.param.watch(self._on_heatmap_choice, ["heatmap_metric", "heatmap_split"])
        self._layout = self._build_layout()

    # ------------------------------------------------------------------ public API
    @property
    def streams(self) -> dict[str, hv.streams.Stream]:
        """The streams of the run shown, by name (:attr:`RunPlots.streams <app.live._plots.RunPlots>`)."""
        return self.plots.streams

    @property
    def training(self):
        """The training section's panes (:class:`app.live._training.TrainingPanes`), which :attr:`plots` fills."""
        return self.plots.training

    def bind_document(self, doc) -> None:
        """Route :meth:`push` through ``doc`` (the session document); None: apply synchronously."""
        self._dispatcher = DocDispatcher(self.consume, doc=doc, min_interval=0.5)

    def push(self, item) -> None:
        """Thread-safe: queue an event (or a zero-argument callable) for the session's thread.

        The run's end and status messages are shown at the next tick; other events are batched.
        """
        urgent = not isinstance(item, ev.Event) or item.kind in ev.TERMINAL_KINDS
        self._dispatcher.push(item, urgent=urgent)

    def follow(self, run_id: str, store=None, *, every: float = 1.0) -> None:
        """Show a stored run and follow it as another process writes it (:mod:`lab.runs.follow`): a
        :class:`lab.Monitor` in someone's training loop, ``python -m lab run``, a study's worker; a finished run
        is replayed. Until the run ends, :meth:`stop_following` or a run started here. ``store``: None for this
        view's store, else the default one. Raises KeyError for a run the store lacks. Session thread only."""
        from ._follow import follow_in

        self.stop_following()
        self._following = follow_in(self, run_id, store, every=every)
        self._following.start()

    def stop_following(self, wait: float | None = None) -> None:
        """Stop following the stored run (what it showed stays). ``wait``: seconds to wait for the following thread
        to end: outside a served page it applies the events itself, so a script reading the view right after would
        race it."""
        if self._following is not None:
            self._following.stop()
            if wait is not None:
                self._following.wait(wait)
        self._following = None

    @property
    def followed(self) -> str | None:
        """Id of the stored run this view shows by following it (still written or ended), or None for a run
        started here (or none)."""
        return self._following.run_id if self._following is not None else None

    @property
    def following(self) -> str | None:
        """Id of the stored run this view follows while it is written, or None."""
        return self._following.run_id if self._following is not None and self._following.active else None

    def reset(self, message: str = "Starting…", status: str = "starting") -> None:
        """Forget the current run and show an empty, waiting view (session thread only)."""
        self.model = RunModel()
        self._redraws.reset()
        self._n_events = 0
        self._unmeasured_shown = False
        self._message, self._notice = message, None
        self.plots.clear(message)
        self.embedding.clear()
        self.collapse.clear()
        self._alert.visible = False
        self._verdict.object = ""
        self.agreement.clear()
        self._set_status(status)
        self._progress.param.update(value=0, active=status in ("starting", "queued"), visible=True)
        self._refresh_status()
        if self._dispatcher.doc is not None:      # served: once the last run's models have left the document
            self._dispatcher.doc.add_next_tick_callback(release_memory)

    def set_message(self, message: str, status: str | None = None, alert: str | None = None) -> None:
        """Show a status message (e.g. "queued behind another run"); ``alert`` shows it in a box of that type."""
        self._message = message
        if alert:     # kept over the last run's end (its worker may settle after a refusal) until a run starts
            self._notice = (message, alert)
        self.plots.say(message)         # no plots yet: the placeholder says it too
        if status is not None:
            self._set_status(status)
        self._refresh_status()

    def settle(self) -> None:
        """After the worker has ended: show the run's final status (clears a pending "stopping")."""
        if self.model.ended:
            self._set_status(self.model.status)
        elif under_way(self.status):
            self._set_status(RunStatus.CANCELLED)
        self._refresh_status()

    def set_thumbnails(self, source: ThumbnailSource | None) -> None:
        """Use ``source`` for hover thumbnails and refresh the layout shown (session thread)."""
        self.thumbnails = source
        self.plots.thumbnails_changed()

    def consume(self, items) -> None:
        """Apply a batch of events (or callables) to the views. Session thread only."""
        changed: set[str] = set()
        resume = False
        for item in items:
            if getattr(item, "kind", None) == ev.EpochFinished.kind:   # its evaluation is on disk by now
                self._redraws.schedule("send:evaluation", self._on_evaluation)
            if item == self._redraws.turn:
                resume = True               # redraw after this batch's events (the run's end goes first)
                continue
            if callable(item) and not isinstance(item, ev.Event):
                item()
                continue
            self._n_events += 1
            if item.kind == ev.RunStarted.kind and (self.model.layers or
                                                    self.model.run_id not in (None, item.run_id)):
                self.model = RunModel()     # a new run in this view: start from a clean slate
            try:
                touched = self.model.apply(item) | ({"collapse"} if self.collapse.observe(item) else set())
            except Exception as exc:  # a malformed event must not freeze the view
                self.set_message(f"Could not show an event of kind {getattr(item, 'kind', '?')}: {exc}",
                                 alert="warning")
                continue
            if item.kind == ev.RunStarted.kind:
                self._build_run_views()
                if item.n_images.get("unseen", 0) > self.embedding.rasterize_above:
                    warm_up_in_background()     # its layouts will be rasterized: compile the kernels meanwhile
            if item.kind == ev.ProjectionReady.kind and self.thumbnails is not None:
                self.thumbnails.get(item.indices)   # fill the cache (no-op when warmed by the worker)
            changed |= touched
        keep_stopping = self.status == "stopping" and self.model.status == "running"
        if self.model.status != self.status and self.model.status != "idle" and not keep_stopping:
            self._set_status(self.model.status)
        self._refresh(changed)
        if resume and not changed:
            self._redraws.turn()
        else:               # redraw in a flush of its own: text and status go out first
            self._redraws.request(gap=0.05, again=resume)

    # ------------------------------------------------------------------ building per-run plots
    def _build_run_views(self) -> None:
        """A new run: its controls at once, then its streams and plots (:meth:`RunPlots.build`)."""
        m = self.model
        self._redraws.clear()
        self._unmeasured_shown = False
        metrics_in_run = [x for x in HEATMAP_METRICS if x in (m.config.get("metrics") or HEATMAP_METRICS)]
        if metrics_in_run:
            self.param.heatmap_metric.objects = metrics_in_run
            if self.heatmap_metric not in metrics_in_run:
                self.heatmap_metric = metrics_in_run[0]
        self._verdict_data = {}
        self.picker.start()
        why = no_layouts(m.run_id, m.config)
        self._no_layouts.param.update(object=html.escape(why or ""), visible=bool(why))
        self._explorer.visible = not why
        # a run without a seen split (a loop given unseen images only): no "seen" button that would show nothing
        seen = has_seen_split(m)
        if not seen and self.heatmap_split != "unseen":
            self.heatmap_split = "unseen"
        self._heatmap_split_w.visible = seen
        self.plots.build()

    # ------------------------------------------------------------------ refresh
    def _refresh(self, changed: set[str]) -> None:
        """Schedule the redraws ``changed`` needs (run in turns by the redraw queue) and update the text at once."""
        m = self.model
        dirty = set(m.dirty_metrics)
        m.dirty_metrics.clear()
        if self.streams:
            self.plots.refresh(changed, dirty)
            if changed & {"curves", "collapse"}:
                self._redraws.schedule("send:collapse", self.collapse.refresh)
        if changed & {"verdict", "status", "progress"}:
            self._refresh_verdict()
        if self.streams and changed & {"projection", "verdict"}:     # a new layout, or maybe a new best layer
            self.plots.follow_projection()
        self._refresh_status()

    def _on_evaluation(self) -> None:
        """An evaluation completed: read the measures' best layers and the per-image record again."""
        self.agreement.show(self.store, self.model.run_id, axis=self.model.axis)
        self.embedding.refresh_answers()

    def selection_report(self):
        """:func:`lab.analysis.selection_report` of the layout's selection (``embedding.selection``) at the
        evaluation it shows: :meth:`app.EmbeddingView.selection_report`."""
        return self.embedding.selection_report()

    def _on_pick(self) -> None:
        """The user picked a layer or an epoch: show it now."""
        self.plots.send_projection()
        self._refresh_status()

    def _on_heatmap_choice(self, *_events) -> None:
        if "heatmap" in self.streams:
            self.plots.send_heatmap()
            self._refresh_status()

    # ------------------------------------------------------------------ text
    def _set_status(self, status: str) -> None:
        with param.edit_constant(self):
            self.status = status

    def _refresh_verdict(self) -> None:
        self._verdict_data = self.model.verdict()      # its layer is the one the layout follows
        self._verdict.object = verdict_html(self._verdict_data, running=self.status == "running",
                                            axis=self.model.axis)

    def _refresh_status(self) -> None:
        m = self.model
        self._status_md.object = status_html(m, self.status, self._message, pinned=self._notice is not None)
        running = under_way(self.status)
        self._progress.param.update(
            value=int(1000 * m.fraction_done()) if self.status != "queued" else 0,
            active=self.status in ("starting", "queued") or (running and m.epochs_done == 0 and not m.progress),
            visible=(running and not m.open_ended) or (self.status == "finished" and not m.open_ended),
        )
        if m.ended and m.status != RunStatus.FINISHED:
            self._alert.param.update(object=end_message(m), visible=True,
                                     alert_type="danger" if m.status == RunStatus.FAILED else "warning")
            self.plots.say("The run ended before any layer was measured; see the message above.")
            if ended_unmeasured(m) and not self._unmeasured_shown:
                self.plots.show_unmeasured()
                self._unmeasured_shown = True
                self.collapse.refresh()         # its sentence, not what an earlier run left in it
        if self._notice is not None:
            self._alert.param.update(object=self._notice[0], alert_type=self._notice[1], visible=True)
        self._probe.object = probe_html(self.probe())

    def probe(self) -> dict:
        """Counts of what the view shows, written into the page's hidden probe element so that tests (and the
        browser tests' hook) read its Python state without reading its plots: its status, the layers with curves
        drawn, the heatmap's cells, the layout's points and layer (and whether it follows the best layer), the
        redraws still waiting (0: every plot is current), and the models of the session's document."""
        m = self.model
        shown = self.embedding.n_points > 0
        return {
            "status": self.status, "run_id": m.run_id, "events": self._n_events, "layers": len(m.layers),
            **self.plots.counts(),          # metric_layers, heatmap_cells, projection_points
            "layout_layer": self.picker.layer if shown else None,
            # whether the layout still follows the verdict's best layer (a pick on the player stops it), and that layer
            "follow_best": self.picker.follow_best,
            "picked": self.picker.picked,   # what made the last pick, if any
            "best_layer": self._verdict_data.get("layer"),
            "epochs_done": m.epochs_done, "message": m.message, "notice": self._message,
            "stage": m.progress.stage if m.progress is not None else None,
            "redraws": len(self._redraws),
            # what every message walks, so it must stay the size of what the page shows; None outside a session
            "doc_models": len(self._dispatcher.doc.models) if self._dispatcher.doc is not None else None,
        }

    # ------------------------------------------------------------------ layout
    def _build_layout(self):
        return pn.Column(
            pn.Row(self._progress, self._status_md, sizing_mode="stretch_width"),
            self._verdict,
            self.agreement,
            self._alert,
            self.plots.curves_box,
            self.collapse,
            self.plots.details,
            self._probe,
            sizing_mode="stretch_width",
        )

    def __panel__(self):
        return self._layout
