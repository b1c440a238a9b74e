"""The client's book of a running study's cells: which are stored, submitted, started, failed or dropped.

Kept by :func:`lab.study.runner.run_study` while the study runs, and grown or shrunk with it (a
:class:`~lab.study.control.StudyController`).
"""
from __future__ import annotations

import dataclasses

from lab import events
from lab.status import RunStatus
from lab.study.records import StudyResult

__all__ = ["CellBook", "is_finished"]


class CellBook:
    """What the client knows of the running study's cells, by key (a cell's index moves when the study grows).

    Each submitted cell gets a serial number, the ``cell`` its worker's events carry: its index for the cells
    of the study as it started, new numbers after those for cells queued later, so that a worker's event is
    told apart whatever the grid has become and is handed on with the cell's index of the moment.
    """

    def __init__(self, study, stored: dict):
        self.study = study
        self.index = {c.key: c.index for c in study.cells()}
        self.cells = {c.key: c for c in study.cells()}          # every cell seen, the newest version of each
        self.serial_key: dict[int, str] = {}
        self._first = dict(self.index)                           # the serials of the cells it started with
        self.next_serial = len(self.index)
        self.futures: dict = {}                                  # future -> key, while not collected
        self.submitted: dict[str, object] = {}                   # key -> future, while not collected
        self.started: set[str] = set()
        self.run_ids: dict[str, str] = {}
        self.failed: dict[str, str] = {}
        self.skipped = [c.key for c in study.cells() if is_finished(stored, c.key)]
        self.run_ids.update({key: stored[key].run_id for key in self.skipped})
        self.dropped: list[dict] = []

    def serial(self, cell) -> int:
        """The serial number of a cell being submitted (a cell submitted again gets a new one)."""
        serial = self._first.pop(cell.key, None)
        if serial is None:
            serial, self.next_serial = self.next_serial, self.next_serial + 1
        self.serial_key[serial] = cell.key
        return serial

    def index_of(self, key: str) -> int:
        """The cell's index in the study of the moment; a cell removed from it keeps the index it had."""
        return self.index.get(key, self.cells[key].index)

    def worker_event(self, event: events.StudyEvent) -> events.StudyEvent:
        """A worker's event with the cell's index of the moment (noting the cells that started)."""
        if not isinstance(event, events.CellEvent):
            return event
        key = self.serial_key.get(event.cell)
        if key is None:
            return event
        if isinstance(event, events.CellStarted):
            self.started.add(key)
        index = self.index_of(key)
        return event if index == event.cell else dataclasses.replace(event, cell=index)

    def result(self, cancelled: bool, seconds: float) -> StudyResult:
        """The :class:`StudyResult` of the cells of the study as it ends, by their index."""
        index = self.index
        return StudyResult(self.study.name, {index[k]: r for k, r in self.run_ids.items() if k in index},
                           [index[k] for k in self.skipped if k in index],
                           {index[k]: m for k, m in self.failed.items() if k in index}, cancelled, seconds,
                           dropped=list(self.dropped))


def is_finished(stored: dict, key: str) -> bool:
    """Whether the stored run of cell ``key`` (in ``stored``: key -> record) finished."""
    return key in stored and stored[key].status == RunStatus.FINISHED
