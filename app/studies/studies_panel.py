"""The Studies tab: pick a study spec, run it on a local Dask cluster, watch its cells and figures fill in.

The study runs in a worker thread (:meth:`lab.study.Study.run`); its events reach the page through a
:class:`~app.base.DocDispatcher`, so no widget is touched off the session's thread. While it runs, the composer
shows it and can grow it (:meth:`StudiesPanel.grow`, through a :class:`lab.study.StudyController`). Figures are
re-read from the run store (``lab.study.figures``: every number from lab.analysis) as runs land, at the epoch the
**Summary** picker names (each run's last, its best by the unseen g, or a given epoch), also while the study runs.
"""
from __future__ import annotations

import html
import logging
import threading

import holoviews as hv
import panel as pn
import param

from lab import events as ev
from lab.export.markdown import escape_markdown
from lab.study import summary_text

from app.base import resources
from app.base import DocDispatcher

from ._devices import study_device_keys
from ._growing import growth_problem
from ._run_events import _REDRAW_SECONDS, RunEvents
from ._figure_reader import FigureReader
from ._specs import shipped_specs
from .study_plots import (
    AGREEMENT_TITLES, accuracy_vs_g, agreement_frame, agreement_text, collapse_curves, generalization_text,
    grid_heatmap, layer_depth_curves, rank_text, transfer_text, transfer_vs_g,
)
from .tunnel_plot import tunnel_plot, tunnel_text

__all__ = ["StudiesPanel", "shipped_specs", "study_device_keys"]


def _has_tunnel(figs: dict) -> bool:
    """Whether the study's runs measured what the tunnel figure needs (a row of ``figs["tunnel"]``)."""
    tunnel = figs.get("tunnel")
    return tunnel is not None and len(tunnel) > 0

_log = logging.getLogger(__name__)
_QUANTITIES = ("utilization", "contribution", "generalization_gap", "resilience")
_SUMMARIES = {"last epoch": "last", "best epoch by unseen g": "best", "epoch…": "epoch"}
"""The Summary picker's options: the words shown and the summary they pick (``"epoch"``: the epoch input's)."""


class StudiesPanel(RunEvents, pn.viewable.Viewer):
    """One per session: a spec picker, Run / Stop, the cells' status and the study's figures."""

    spec = param.Selector(default=None, objects=[], doc="The study spec to run or show.")
    workers = param.Integer(default=None, bounds=(1, 64), allow_None=True,
                            doc="Worker processes of the local cluster (default: one per core).")
    running = param.Boolean(default=False, doc="A study of this session is running.")
    quantity = param.Selector(default="utilization", objects=list(_QUANTITIES),
                              doc="Quantity of the condition heatmap (Wang & Yang).")
    layer = param.Selector(default=None, objects=[None], allow_None=True, doc="Layer of the condition heatmap.")
    summary = param.Selector(default="last", objects=list(_SUMMARIES.values()),
                             doc="The epoch each run is read at: its last, its best by the unseen g, or `epoch`.")
    epoch = param.Integer(default=0, bounds=(0, None), doc="The epoch read when `summary` is 'epoch'.")

    def __init__(self, store, *, base_config=None, **params):
        super().__init__(**params)
        self.store = store
        self._base_config = base_config      # the sidebar's settings, where a blank composed study starts
        self.composer = None                 # made at the first "New study": it reads the store
        self._composer_box = pn.Column(visible=False, sizing_mode="stretch_width")
        self.new_button = pn.widgets.Button(label="New study", width=110, css_classes=["ls-study-new"])
        self.new_button.on_click(lambda _e: self.toggle_composer())
        self._specs = shipped_specs()
        self.param.spec.objects = list(self._specs)
        if self._specs and self.spec is None:
            self.spec = next(iter(self._specs))
        self._cancel: threading.Event | None = None
        self._control = None                 # the StudyController of the study running, None when none runs
        self._study = None                   # the study running (after StudyUpdated: the grown one)
        self._grown = None                   # the study last given to the controller, until StudyUpdated
        self._figs: dict = {}
        self._reader = None                  # the running study's FigureReader (its pace follows the redraws)
        self._redraws = 0                    # Summary choices made: a read answers only the newest
        self._shown = None                   # the study whose figures are shown (the spec's, or the one launched)
        self._showing_run = False            # True from a launch: the figures follow the running (grown) study
        self._lines: dict[int, str] = {}
        self._dispatcher = DocDispatcher(self._apply, doc=None)
        self.run_button = pn.widgets.Button(label="Run study", color="primary", width=140,
                                            css_classes=["ls-study-run"])
        self.stop_button = pn.widgets.Button(label="Stop", color="warning", width=90, disabled=True,
                                             css_classes=["ls-study-stop"])
        self.run_button.on_click(lambda _e: self.start())
        self.stop_button.on_click(lambda _e: self.stop())
        self.message = pn.pane.Markdown("", sizing_mode="stretch_width", css_classes=["ls-study-message"])
        self.progress = pn.indicators.Progress(value=0, max=1, sizing_mode="stretch_width", visible=False,
                                               css_classes=["ls-study-progress"])
        self.running_lines = pn.pane.Markdown("", sizing_mode="stretch_width", css_classes=["ls-study-running"])
        self.table = self._new_table(pn.widgets.Tabulator().value)
        self._table_slot = pn.Column(self.table, sizing_mode="stretch_width")
        self.ranks = pn.pane.Markdown("", sizing_mode="stretch_width", css_classes=["ls-study-ranks"])
        self.transfer_text = pn.pane.Markdown("", sizing_mode="stretch_width", css_classes=["ls-study-transfer-text"])
        self.agreement_text = pn.pane.Markdown("", sizing_mode="stretch_width", css_classes=["ls-study-agreement-text"])
        self.agreement = pn.widgets.Tabulator(
            agreement_frame({}), disabled=True, show_index=False, sizing_mode="stretch_width", layout="fit_data_table",
            titles=AGREEMENT_TITLES, css_classes=["ls-study-agreement"],
            formatters={c: {"type": "money", "precision": 2} for c in ("share_same", "median_spearman")})
        # linked_axes=False: Panel links the ranges of panes whose plots share a dimension (both curve
        # plots have "depth"); replacing a linked plot then sends the browser a reference to a range
        # it never received ("reference ... isn't known") and later updates of the page are dropped.
        self.plots = {name: pn.pane.HoloViews(None, sizing_mode="stretch_width", min_height=330, linked_axes=False,
                                               css_classes=[f"ls-study-{name}"])
                      for name in ("layers", "accuracy", "grid", "nc1", "transfer", "tunnel")}
        # shown by its box (see the live view: a HoloViews pane's own visible does not reach its plot): a study
        # whose runs measured no transferability score has the sentence below it, not a box around the same sentence
        self._transfer_box = pn.Column(self.plots["transfer"], sizing_mode="stretch_width", margin=0)
        # the tunnel (lab.analysis.group_tunnel) needs unseen NMI, the seen NCC accuracy and the numerical rank:
        # a study that measured them has the figure, another a sentence saying what is missing
        self._tunnel_box = pn.Column(self.plots["tunnel"], sizing_mode="stretch_width", margin=0)
        self.tunnel_text = pn.pane.Markdown("", sizing_mode="stretch_width", css_classes=["ls-study-tunnel-text"])
        self.param.watch(lambda _e: self.refresh(), "spec")
        # the layer picker is not from_param: its options and value must change together (a param's
        # objects and value changed one after the other reach the browser as a blank choice)
        self.layer_select = pn.widgets.Select(label="Layer", options=[], width=200, css_classes=["ls-study-layer"])
        self.layer_select.param.watch(lambda e: setattr(self, "layer", e.new), "value")
        # the condition heatmap and its controls, for a study of two condition axes or more; else one line says so
        grid_controls = pn.Row(pn.widgets.Select.from_param(self.param.quantity, name="Heatmap", width=200,
                                                            css_classes=["ls-study-heatmap"]),
                               self.layer_select)
        self._grid_box = pn.Column(grid_controls, self.plots["grid"], sizing_mode="stretch_width", max_width=900)
        self._grid_note = pn.pane.Markdown("", visible=False, sizing_mode="stretch_width",
                                           css_classes=["ls-study-grid-note"])
        self.param.watch(lambda _e: self._draw_grid(), ["quantity", "layer"])
        self.summary_select = pn.widgets.Select(label="Summary", options=dict(_SUMMARIES), value=self.summary,
                                                width=200, css_classes=["ls-study-summary"])
        self.epoch_input = pn.widgets.IntInput(label="Epoch", value=self.epoch, start=0, width=90, visible=False,
                                               css_classes=["ls-study-epoch"])
        self.summary_select.param.watch(lambda e: setattr(self, "summary", e.new), "value")
        # an emptied epoch box keeps the last epoch read
        self.epoch_input.param.watch(lambda e: e.new is not None and setattr(self, "epoch", max(0, int(e.new))),
                                     "value")
        self.summary_note = pn.pane.Markdown("", sizing_mode="stretch_width", css_classes=["ls-study-summary-note"])
        self.param.watch(self._summary_changed, ["summary", "epoch"])
        self.refresh()

    # -- the spec and the store ------------------------------------------------------------------
    def study(self):
        from lab.study import Study

        if self.spec is None:
            raise ValueError("no study spec found in studies/; add a YAML spec there")
        return Study.from_file(self._specs[self.spec])

    def current_summary(self):
        """The summary the figures are read at: ``"last"``, ``"best"`` or the epoch (:func:`lab.study.figures`)."""
        return int(self.epoch) if self.summary == "epoch" else self.summary

    def _summary_changed(self, _event=None) -> None:
        self.summary_select.value = self.summary
        self.epoch_input.param.update(visible=self.summary == "epoch", value=self.epoch)
        from lab.analysis import summary_label

        # answered at once; the figures (a read of every run of the study and a redraw: seconds) on the next tick
        label = escape_markdown(summary_label(self.current_summary()))
        self.summary_note.object = f"Reading every run at its {label}…"
        doc = pn.state.curdoc
        if doc is not None and doc.session_context is not None:
            # answered at once: the figures are read on a thread (a read of every run: seconds) and drawn after
            self._redraws += 1
            threading.Thread(target=self._read_then_show, args=(doc, self._redraws), daemon=True,
                             name="lab-study-summary").start()
        else:
            self.redraw()

    def _read_then_show(self, doc, generation: int) -> None:
        study = self._study_shown()
        if study is None:
            return
        from lab.study import figures

        try:
            status, figs = study.status(store=self.store), figures(study, store=self.store,
                                                                    summary=self.current_summary())
        except Exception as exc:          # noqa: BLE001 - shown on the page, never raised into Tornado
            _log.exception("could not read the study's figures")
            status, figs = None, {"error": f"{type(exc).__name__}: {exc}"}

        def show() -> None:
            if generation != self._redraws:
                return                     # another choice came since: its own read follows
            if status is None:
                self.summary_note.object = f"**Could not read the figures:** {escape_markdown(figs['error'])}"
            else:
                self._show(status, figs)

        try:
            doc.add_next_tick_callback(show)
        except Exception:                  # noqa: BLE001 - the page was closed meanwhile: nothing to show
            _log.debug("the study's page closed before its figures were read", exc_info=True)

    def _study_shown(self):
        """The study whose figures the tab shows: the running (grown) one from a launch on, else the spec's."""
        return self._study if self._showing_run and self._study is not None else self._shown

    def redraw(self) -> None:
        """Re-read the figures of the study shown (the running one while it runs) at the current summary."""
        study = self._study_shown()
        if study is None:
            return
        from lab.study import figures

        self._show(study.status(store=self.store), figures(study, store=self.store, summary=self.current_summary()))

    def refresh(self) -> None:
        """Re-read the cells' status and the figures from the store."""
        try:
            study = self.study()
        except (ValueError, FileNotFoundError) as exc:
            self.message.object = f"**Cannot read the spec:** {exc}"
            return
        from lab.study import figures

        self._shown, self._showing_run = study, False
        self._show(study.status(store=self.store), figures(study, store=self.store, summary=self.current_summary()))
        self.message.object = (f"**{study.name}** — {len(study.cells())} runs "
                               f"({' × '.join(f'{k} [{len(v)}]' for k, v in study.axes.items())}). "
                               f"{study.description}")

    @staticmethod
    def _new_table(frame):
        return pn.widgets.Tabulator(
            frame, disabled=True, show_index=False, sizing_mode="stretch_width",
            max_height=320, layout="fit_data_table", css_classes=["ls-study-table"],
            titles={"heldout_accuracy": "seen acc.", "best_layer": "best layer", "g": "g (NMI)", "g_std": "g std",
                    "g_low": "g 95 % low", "g_high": "g 95 % high", "best_share": "best in (share of resamples)"},
            widths={"run_id": 360},
            formatters={c: {"type": "money", "precision": 3}
                        for c in ("g", "g_std", "g_low", "g_high", "best_share", "heldout_accuracy")})

    def _set_table(self, status) -> None:
        if self.table.value is not None and list(status.columns) == list(self.table.value.columns):
            self.table.value = status
        else:
            # another spec's axes: a new table. Changing a Tabulator's columns and rows in one update
            # can reach the browser as the new columns over the old rows (seen in CI under load).
            self.table = self._new_table(status)
            self._table_slot.objects = [self.table]

    def _show(self, status, figs) -> None:
        self._set_table(status)
        self._figs = figs
        self._draw([("layers", layer_depth_curves), ("accuracy", accuracy_vs_g), ("nc1", collapse_curves),
                    ("transfer", transfer_vs_g), *([("tunnel", tunnel_plot)] if _has_tunnel(figs) else [])], figs)
        self.ranks.object = "\n\n".join(t for t in (generalization_text(figs), rank_text(figs.get("ranks") or {})) if t)
        finished = figs.get("generalization")
        self._tunnel_box.visible = _has_tunnel(figs)
        # escaped: the lines name conditions, whose values a user typed
        self.tunnel_text.object = (escape_markdown(tunnel_text(figs)) if _has_tunnel(figs) else
                                   "" if finished is None or not len(finished) else
                                   "No tunnel figure: it needs the unseen NMI, the seen NCC accuracy and the "
                                   "numerical rank at every layer (add `ncc_accuracy` and `numerical_rank` to the "
                                   "study's metrics; METRICS.md, \"Tunnel\").")
        self.transfer_text.object = transfer_text(figs)
        transfer, finished = figs.get("transfer") or {}, figs.get("generalization")
        self._transfer_box.visible = bool(transfer.get("scores")) or finished is None or not len(finished)
        self.agreement_text.object = agreement_text(figs)
        self.agreement.value = agreement_frame(figs)
        axes = list(figs.get("axes") or [])
        self._grid_box.visible = len(axes) >= 2
        self._grid_note.param.update(visible=len(axes) < 2, object=(
            "The condition heatmap needs a study of two condition axes; this one has "
            + (f"one ({axes[0]})." if axes else "none.") if len(axes) < 2 else ""))
        grid = figs.get("grid")
        layers = list(dict.fromkeys(str(x) for x in grid["layer"] if str(x))) if grid is not None and "layer" in grid else []
        layer = self.layer if self.layer in layers else (layers[0] if layers else None)
        self.param.layer.objects = layers or [None]
        self.layer_select.param.update(options=layers, value=layer)
        if self.layer != layer:
            self.layer = layer                                 # redraws the heatmap (watcher)
        else:
            self._draw_grid()
        # last: it says what the figures above show once they show it (escaped: it names conditions a user typed)
        self.summary_note.object = escape_markdown(summary_text(figs))

    def _draw(self, plots: list, figs: dict) -> None:
        """Draw each ``(name, figure function)`` of ``plots`` from ``figs`` into its pane."""
        for name, make in plots:
            self.plots[name].object = make(figs)

    def _draw_grid(self) -> None:
        if self._figs:
            needs_layer = self.quantity in ("utilization", "contribution")
            self.plots["grid"].object = grid_heatmap(self._figs, self.quantity, self.layer if needs_layer else "")

    def toggle_composer(self) -> None:
        """Show or hide the :class:`~app.studies.StudyComposer`; its Launch runs the study as :meth:`start`."""
        if self.composer is None:
            from .composer import StudyComposer

            self.composer = StudyComposer(self.store, base_config=self._base_config, on_launch=self.start,
                                          on_grow=self.grow, on_save=self._saved)
            self._composer_box.objects = [self.composer]
            if self.running and self._study is not None:
                self.composer.follow(self._study)
        self._composer_box.visible = not self._composer_box.visible

    def _saved(self, path) -> None:
        """A spec the composer saved is offered by the spec picker too."""
        self._specs = shipped_specs()
        self.param.spec.objects = list(self._specs)

    # -- running ----------------------------------------------------------------------------------
    def start(self, study=None) -> None:
        """Run ``study`` (a :class:`lab.Study`; default: the picked spec's) on a local Dask cluster."""
        if self.running:
            return
        try:
            study = study if study is not None else self.study()
        except (ValueError, FileNotFoundError) as exc:
            self.message.object = f"**Cannot start:** {exc}"
            return
        # hold=False: figures replace whole HoloViews panes (see DocDispatcher)
        self._dispatcher = DocDispatcher(self._apply, doc=pn.state.curdoc, min_interval=0.5, hold=False)
        from lab.study import StudyController

        self._cancel = threading.Event()
        self._control, self._study, self._grown = StudyController(), study, None
        self._shown, self._showing_run = study, True
        if self.composer is not None:
            self.composer.follow(study)
        self._lines = {}
        self._labels = {c.index: c.label() for c in study.cells()}
        self.running = True
        self.run_button.disabled, self.stop_button.disabled = True, False
        self.progress.visible, self.progress.value, self.progress.max = True, 0, len(study.cells())
        try:
            self.redraw()                  # the launched study's cells and figures at once, not the spec's
        except (ValueError, OSError) as exc:
            self.message.object = f"**Cannot read the run store:** {exc}"
        threading.Thread(target=self._work, args=(study, self._cancel, self._dispatcher, self._control),
                         daemon=True, name="lab-study").start()

    def grow(self, study) -> str:
        """Run ``study`` (the running study with values or seeds added or removed) from now on: its new cells
        are queued, cells of removed values that have not started are dropped. Returns what happened, also
        shown in the tab's message; a study of another name or other settings is refused there."""
        if not self.running or self._control is None:
            text = "**Not added:** no study is running; launch it instead."
        elif (problem := growth_problem(self._study, study)) is not None:
            text = f"**Not added:** {html.escape(problem, quote=False)}"
        else:
            try:
                self._control.update(study)
            except ValueError as exc:            # the run has ended, or a new cell's name does not resolve
                text = f"**Not added:** {html.escape(str(exc), quote=False)}"
            else:
                self._grown = study
                text = f"Sent **{html.escape(study.name, quote=False)}** ({len(study.cells())} cells) to the running study."
        self.message.object = text
        return text

    def stop(self) -> None:
        if self._cancel is not None:
            self._cancel.set()
            self.message.object = "Stopping: the local cluster shuts down; finished runs stay in the store."

    def _work(self, study, cancel: threading.Event, dispatcher: DocDispatcher, control=None) -> None:
        from lab.study import figures

        current = [study]                   # the grown study once the runner took it (StudyUpdated)

        def read() -> dict:
            # the summary picked now (a param read from this thread: a plain attribute, no widget touched)
            grid = current[0]
            return {"kind": "figures", "status": grid.status(store=self.store),
                    "figs": figures(grid, store=self.store, summary=self.current_summary())}

        # the figures are read on their own thread: the runner only marks them stale, so a Stop or the next
        # cell's import never waits for a read of every stored run of the study
        reader = self._reader = FigureReader(read, dispatcher.push, min_interval=_REDRAW_SECONDS)

        def on_event(event: ev.StudyEvent) -> None:
            if isinstance(event, ev.StudyUpdated) and self._grown is not None:
                current[0] = self._grown
            dispatcher.push(event, urgent=not isinstance(event, ev.CellProgress))
            if isinstance(event, (ev.CellDone, ev.CellFailed)):
                reader.mark()

        def on_wait(holder: str) -> None:
            dispatcher.push({"kind": "queued", "text": f"Queued: a device is busy with another run ({holder}); "
                                                       "the study starts as soon as it is free."}, urgent=True)

        try:
            devices = study_device_keys(cell.config for cell in study.cells())
            with resources.shared().devices.hold_all(devices, f"study {getattr(study, 'name', '')}".strip(),
                                                     should_stop=cancel.is_set, on_wait=on_wait) as acquired:
                if not acquired:
                    dispatcher.push({"kind": "done", "text": "Stopped while waiting for the device."}, urgent=True)
                    return
                result = study.run(store=self.store, workers=self.workers, cancel=cancel, on_event=on_event,
                                   control=control)
            text = ("Stopped." if result.cancelled else
                    f"Finished: {len(result.run_ids) - len(result.failed)} of {len(current[0].cells())} runs "
                    f"({len(result.skipped)} from before), {len(result.failed)} failed, {result.seconds:.0f} s.")
        except Exception as exc:          # noqa: BLE001 - shown on the page, never raised into Tornado
            _log.exception("study failed")
            text = f"**The study stopped:** {type(exc).__name__}: {exc}"
        finally:
            reader.close()                 # the last figures, read once the study's runs are all in, come first
        dispatcher.push({"kind": "done", "text": text}, urgent=True)

    def __panel__(self):
        controls = pn.Row(pn.widgets.Select.from_param(self.param.spec, name="Study spec", width=260,
                                                    css_classes=["ls-study-spec"]),
                          pn.widgets.IntInput.from_param(self.param.workers, name="Workers", width=100,
                                                        css_classes=["ls-study-workers"]),
                          self.run_button, self.stop_button, self.new_button, sizing_mode="stretch_width")
        summary = pn.Row(self.summary_select, self.epoch_input, sizing_mode="stretch_width")
        # one figure per row: the legends (one entry per condition, long labels) sit right of the plots
        return pn.Column(
            controls, self._composer_box, self.message, self.progress, self.running_lines, self._table_slot,
            summary, self.summary_note,
            self.plots["layers"], self.plots["accuracy"], self.ranks,
            self._grid_box, self._grid_note,
            self.plots["nc1"], self._transfer_box, self.transfer_text, self._tunnel_box, self.tunnel_text,
            self.agreement_text, self.agreement,
            sizing_mode="stretch_width",
        )
