"""How the Studies tab shows its running study's events: the typed :class:`lab.events.StudyEvent` (progress
lines, the bar, the cells' table as the study grows) beside the tab's own messages ("queued", "figures", "done").

:class:`RunEvents` is the part of :class:`~app.studies.StudiesPanel` that its :class:`~app.base.DocDispatcher`
calls on the session's thread; it reads and sets the panel's widgets and run state.
"""
from __future__ import annotations

import time

from lab import events as ev

from ._growing import mark_cell, regrid

__all__ = ["RunEvents"]

_REDRAW_SECONDS = 2.0
"""While a study runs, its figures are redrawn at most this often, and at most a third of the time (cells of a
second or two land faster than a page redraws a study's figures; a click waits behind a redraw)."""


class RunEvents:
    """Applies batches of a study's events to the Studies tab (mixed into :class:`~app.studies.StudiesPanel`)."""

    def _apply(self, items: list) -> None:
        """Show a batch of the study's events (:class:`lab.events.StudyEvent`) and of this panel's own messages
        (dicts: "queued", "figures", "done")."""
        own = [m if isinstance(m, dict) else {} for m in items]
        newest = max((i for i, m in enumerate(own) if m.get("kind") == "figures"), default=None)
        for i, msg in enumerate(items):
            if isinstance(msg, ev.StudyEvent):
                self._apply_event(msg)
                continue
            kind = msg.get("kind")
            if kind == "figures" and i != newest:
                continue                  # only the newest figures of a batch are worth drawing
            if kind == "queued":
                self.message.object = msg["text"]
            elif kind == "figures":
                started = time.monotonic()
                self._show(msg["status"], msg["figs"])
                reader = getattr(self, "_reader", None)
                if reader is not None:
                    # the page draws at most a third of the time: a click waits behind one redraw at most
                    reader.min_interval = max(_REDRAW_SECONDS, 2 * (time.monotonic() - started))
            elif kind == "done":
                self.running = False
                self.run_button.disabled, self.stop_button.disabled = False, True
                self.progress.visible = False
                self._lines, self._control, self._grown, self._reader = {}, None, None, None
                if self.composer is not None:
                    self.composer.unfollow()
                self.message.object = msg["text"]
        labels = getattr(self, "_labels", {})
        self.running_lines.object = "\n".join(f"- cell {c + 1} ({labels.get(c, '')}): {text}"
                                              for c, text in sorted(self._lines.items()))

    def _apply_event(self, event: ev.StudyEvent) -> None:
        if isinstance(event, ev.StudyStarted):
            self.progress.value = event.skipped
            workers = "?" if event.workers is None else event.workers
            self.message.object = (f"Running {event.todo} run(s) on {workers} local "
                                   f"worker(s); {event.skipped} finished before.")
        elif isinstance(event, ev.CellProgress):
            epoch = f"epoch {event.epoch} " if event.epoch is not None else ""
            self._lines[event.cell] = f"{epoch}{event.stage} {event.done}/{event.total}"
        elif isinstance(event, (ev.CellDone, ev.CellFailed)):
            self._lines.pop(event.cell, None)
            self.progress.value = min(self.progress.max, self.progress.value + 1)
        elif isinstance(event, ev.StudyUpdated):
            self._regrid(self._grown)
            self.progress.max = event.total
            self.progress.value = min(event.total, self.progress.value + event.skipped)
            name = f"**{self._study.name}**" if self._study is not None else "The study"
            self.message.object = (f"{name} now has {event.total} cells: {event.queued} queued, "
                                   f"{event.dropped} dropped, {event.skipped} found stored.")
        elif isinstance(event, (ev.CellQueued, ev.CellDropped)) and self._study is not None:
            queued = isinstance(event, ev.CellQueued)
            self.table.value = mark_cell(self.table.value, self._study, event.key, "queued" if queued else "dropped")
            if not queued and event.key in {c.key for c in self._study.cells()}:
                self.progress.max = max(self.progress.value, self.progress.max - 1)

    def _regrid(self, grown) -> None:
        """The table, labels and lines of the cells of ``grown`` (the study the runner took) from now on."""
        if grown is None or self._study is None:
            return
        self._set_table(regrid(self.table.value, self._study, grown))
        self._study, self._grown = grown, None
        self._labels = {c.index: c.label() for c in grown.cells()}
        self._lines = {}          # numbered by the old grid; the next progress of each running cell refills them
