"""The live view reads a run's status from lab.RunStatus: a store run marked interrupted has ended there too."""
from __future__ import annotations

import subprocess
import sys

from lab.runs.follow import RunFollower
from lab.status import RunStatus
from lab.store import RunStore

CONFIG = {"dataset": "digits", "backbone": "mlp", "strategy": "full", "epochs": 1, "seeds": [0], "n_unseen": 3}


def test_a_store_run_marked_interrupted_is_ended_for_the_store_and_the_run_model(tmp_path):
    from app.live._model import RunModel
    from app.live._status import end_message, under_way

    store = RunStore(tmp_path)
    w = store.create(CONFIG)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    w.update_meta(pid=dead.pid)                  # the writing process is gone without closing the run
    assert store.load(w.run_id).status.ended
    model = RunModel()
    for event in RunFollower(w.run_id, store=store).poll():
        model.apply(event)
    assert model.status is RunStatus.INTERRUPTED and model.ended
    assert end_message(model).startswith("**The run was interrupted:**")
    assert not under_way(model.status)


def test_the_views_own_states_are_not_run_statuses_and_only_running_ones_are_under_way():
    from app.live._model import RunModel
    from app.live._status import under_way

    model = RunModel()
    for state in ("idle", "queued", "starting", "stopping"):
        model.status = state
        assert not model.ended and RunStatus.read(state) is None
    assert [s for s in ("idle", "queued", "starting", "stopping") if under_way(s)] == ["queued", "starting",
                                                                                          "stopping"]
    assert [s for s in RunStatus if under_way(s)] == [RunStatus.RUNNING]
