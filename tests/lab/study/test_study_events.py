"""The study's typed events (lab.events.StudyEvent): what a worker sends reads back as the same event, and the
CLI's console reads them."""
from __future__ import annotations

import dataclasses

import pytest

from lab import events as ev
from lab.status import RunStatus

EVENTS = [
    ev.StudyStarted(total=4, todo=3, skipped=1, workers=2, threads=1, devices=("GPU 0", "cpu"), dashboard=None),
    ev.StudyStarted(total=2, todo=0, skipped=2),
    ev.StudyCancelled(),
    ev.CellStarted(0, run_id="r1", layers=3, pid=123),
    ev.CellProgress(0, stage="train", done=2, total=5, epoch=1, seed=0),
    ev.CellEpochFinished(0, epoch=1, seed=0, heldout_accuracy=0.5),
    ev.CellRunEnded(0, run_id="r1", status=RunStatus.CANCELLED, message="cancelled by the user"),
    ev.CellDone(0, run_id="r1", status=RunStatus.FAILED, message="boom"),
    ev.CellFailed(1, message="KilledWorker: ..."),
    ev.StudyUpdated(total=6, queued=2, dropped=1, skipped=1),
    ev.CellQueued(4, key='{"seeds": [2], "strategy": {"block": "fc2", "strategy": "layer"}}'),
    ev.CellDropped(5, key='{"seeds": [3]}'),
]


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: e.kind)
def test_a_study_event_round_trips_through_its_plain_dict(event):
    data = event.to_dict()
    assert data["kind"] == event.kind and isinstance(event, ev.StudyEvent)
    # plain data on the wire (Dask's event log): a status travels as its string
    assert all(type(v) in (str, int, float, list, type(None)) for v in data.values()), data
    assert ev.study_event(data) == event
    assert ev.study_event({**data, "worker": "tcp://127.0.0.1:1"}) == event      # what Dask's event log adds
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.kind_of_thing = 1


def test_the_study_event_kinds_differ_from_the_run_events_and_unknown_ones_are_refused():
    run_kinds = {ev.RunStarted.kind, ev.Progress.kind, ev.EpochFinished.kind, *ev.TERMINAL_KINDS}
    assert not {e.kind for e in EVENTS} & run_kinds
    assert all(isinstance(e, ev.CellEvent) == hasattr(e, "cell") for e in EVENTS)
    with pytest.raises(ValueError, match=r"a study event's kind must be one of .*; got 'progress'"):
        ev.study_event({"kind": "progress", "cell": 0})


def test_the_worker_turns_its_runs_events_into_its_cells_events():
    from lab.study.runner import _cell_event

    started = ev.RunStarted("r1", config={}, layers=[{"name": "a"}, {"name": "b"}], classes=[], seen=[], unseen=[],
                            seeds=[0], device="cpu", n_images={})
    assert _cell_event(started, 2) == ev.CellStarted(2, run_id="r1", layers=2, pid=_cell_event(started, 2).pid)
    assert _cell_event(ev.Progress("r1", stage="extract", done=1, total=4, seed=0, epoch=0), 2) == ev.CellProgress(
        2, stage="extract", done=1, total=4, epoch=0, seed=0)
    for end in (ev.RunFinished("r1", seconds=1.0), ev.RunFailed("r1", message="x"), ev.RunCancelled("r1")):
        out = _cell_event(end, 2)
        assert isinstance(out, ev.CellRunEnded) and out.status is end.status and out.run_id == "r1"
    assert _cell_event(ev.LayerMetrics("r1", seed=0, epoch=0, layer="a", split="unseen", values={}), 2) is None


def test_the_cli_console_reads_the_typed_events(capsys):
    from lab.cli.study import _StudyConsole

    console = _StudyConsole(3, progress=False)
    console.labels = {0: "cell 1 (a)", 1: "cell 2 (b)", 2: "cell 3 (c)"}
    console.handle(ev.StudyStarted(total=3, todo=2, skipped=1, workers=1, threads=2, devices=("GPU 0",)))
    console.handle(ev.CellProgress(0, stage="train", done=1, total=4, epoch=1, seed=0))
    assert 0 in console.bars
    console.handle(ev.CellDone(0, run_id="r1", status=RunStatus.CANCELLED, message="stopped"))
    console.handle(ev.CellDone(2, run_id="r3", status=RunStatus.FINISHED, message="ignored"))
    console.handle(ev.CellFailed(1, message="KilledWorker"))
    console.close()
    out = capsys.readouterr().out
    assert "2 run(s) to do, 1 already finished; 1 worker(s) x 2 thread(s) on GPU 0" in out
    assert "cell 1 (a): cancelled (run r1): stopped" in out and "cell 3 (c): finished (run r3)\n" in out
    assert "cell 2 (b): failed on the cluster: KilledWorker" in out
    assert not console.bars                      # every running cell's bar closed when it ended
