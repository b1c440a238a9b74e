"""A study that grows and shrinks while it runs (StudyController), on a real Dask LocalCluster."""
from __future__ import annotations

import json
import threading

import pytest

from lab import events as ev
from lab.store import RunStore
from lab.study import Study, StudyController

BASE = {"dataset": "digits", "backbone": "mlp:depth=2,width=16", "img_size": 16, "strategy": "full", "epochs": 1,
        "projection": "none", "unseen_per_class": 10, "seen_per_class": 6, "metrics": ["nmi"], "save_weights": False}


def test_controller_refuses_another_study_and_an_ended_run(tmp_path):
    control = StudyController()
    study = Study("one", BASE, {"seeds": [[0]]})
    control.attach(study, RunStore(tmp_path / "runs"))
    with pytest.raises(ValueError, match="the running study is 'one'; an update must be a version of it"):
        control.update(Study("two", BASE, {"seeds": [[0]]}))
    with pytest.raises(ValueError, match="already controls the running study 'one'"):
        control.attach(study, None)
    with pytest.raises(ValueError, match="unknown dataset 'digit'"):
        control.update(Study("one", {**BASE, "dataset": "digit"}, {"seeds": [[0]]}))
    assert control.take() == (None, set())
    control.detach()
    with pytest.raises(ValueError, match="study 'one' is no longer running; run the updated study again"):
        control.update(study)


def test_a_change_given_before_the_runner_attaches_is_kept_for_it(tmp_path):
    """A seed added as soon as a study is launched, while its cluster still starts, reaches the runner."""
    store = RunStore(tmp_path / "runs")
    study = Study("one", BASE, {"seeds": [[0]]})
    control = StudyController()
    grown = study.extend(seeds=[[1]])
    control.update(grown)
    control.drop(["k"])
    control.attach(study, store)
    assert control.take() == (grown, {"k"})
    other = StudyController()
    other.update(Study("two", BASE, {"seeds": [[0]]}))      # meant for another study: not this one's change
    other.attach(study, store)
    assert other.take() == (None, set())


@pytest.mark.slow
def test_a_running_study_queues_new_cells_drops_unstarted_ones_and_runs_nothing_twice(tmp_path):
    store = RunStore(tmp_path / "runs")
    study = Study("grow", BASE, {"seeds": [[0]]})
    grown = study.extend(seeds=[1, 2, 3, 4, 5])
    final = grown.without(seeds=[5])
    control = StudyController()
    seen: list = []
    lock = threading.Lock()

    def on_event(event):
        with lock:
            seen.append(event)
            if isinstance(event, ev.CellStarted) and event.cell == 0 and len(
                    [e for e in seen if isinstance(e, ev.CellStarted)]) == 1:
                control.update(grown)             # while the first cell runs: five more
            if isinstance(event, ev.CellDone) and len([e for e in seen if isinstance(e, ev.CellDone)]) == 1:
                control.update(final)             # [5] removed: dropped unless it started
                control.drop([c.key for c in final.cells() if c.values["seeds"] == [4]])

    # one cell to start with: the local cluster starts one worker and grows to two for the cells queued later
    result = study.run(store=store, threads_per_worker=1, on_event=on_event, control=control)
    kinds = [type(e).__name__ for e in seen]
    updates = [e for e in seen if isinstance(e, ev.StudyUpdated)]
    assert updates[0] == ev.StudyUpdated(total=6, queued=5, dropped=0, skipped=0), kinds
    assert updates[1].total == 5 and updates[1].queued == 0
    queued = [e for e in seen if isinstance(e, ev.CellQueued)]
    assert [json.loads(e.key)["seeds"] for e in queued] == [[1], [2], [3], [4], [5]]
    assert [e.cell for e in queued] == [1, 2, 3, 4, 5]
    dropped = {tuple(json.loads(e.key)["seeds"]) for e in seen if isinstance(e, ev.CellDropped)}
    assert dropped == {(4,), (5,)} and updates[1].dropped in (1, 2)     # [4] too when its drop came with it
    assert {tuple(v["seeds"]) for v in result.dropped} == dropped
    # every cell ran once: the first one, the queued ones not dropped; nothing of the dropped ones
    done = [e for e in seen if isinstance(e, ev.CellDone)]
    assert sorted(e.cell for e in done) == [0, 1, 2, 3] and not result.failed and not result.cancelled
    assert sorted(result.run_ids) == [0, 1, 2, 3] and len(store.ids()) == 4
    started = next(e for e in seen if isinstance(e, ev.StudyStarted))
    assert started.workers == 1
    cells = sorted(store.load(i).meta["cell"]["seeds"] for i in store.ids())
    assert cells == [[0], [1], [2], [3]]
    status = final.status(store=store)
    assert list(status["status"]) == ["finished"] * 4 + ["pending"]
    # the events of a cell name its index in the grid of the moment, as the run's meta does
    for event in done:
        assert store.load(event.run_id).meta["cell"] == final.cells()[event.cell].values
    with pytest.raises(ValueError, match="no longer running"):
        control.update(final)
    again = final.run(store=store, threads_per_worker=1)
    assert sorted(again.skipped) == [0, 1, 2, 3] and sorted(again.run_ids) == [0, 1, 2, 3, 4]
