"""lab.RunStatus: the one owner of a run's status words, and the store reading its strings through it."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

import lab
from lab import events as ev
from lab.errors import not_evaluated
from lab.status import RunStatus
from lab.store import RunStore

CONFIG = {"dataset": "digits", "backbone": "mlp", "strategy": "full", "epochs": 1, "seeds": [0], "n_unseen": 3}


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_the_statuses_are_the_five_words_meta_json_stores():
    assert lab.RunStatus is RunStatus and "RunStatus" in lab.__all__
    assert [s.value for s in RunStatus] == ["running", "finished", "failed", "cancelled", "interrupted"]
    for status in RunStatus:
        assert status == status.value and RunStatus(status.value) is status and str(status) == status.value
        assert f"{status}" == status.value and json.loads(json.dumps({"s": status})) == {"s": status.value}


def test_ended_and_active_partition_the_statuses_and_interrupted_is_ended():
    ended = {s for s in RunStatus if s.ended}
    active = {s for s in RunStatus if s.active}
    assert ended | active == set(RunStatus) and not ended & active
    assert active == {RunStatus.RUNNING}
    assert RunStatus.INTERRUPTED.ended and not RunStatus.INTERRUPTED.active
    # closed: ended by the run itself (what a writer may finish with); interrupted ended without closing
    assert {s for s in RunStatus if s.closed} == ended - {RunStatus.INTERRUPTED}


def test_the_phrases_are_worded_once_and_read_in_a_sentence():
    assert {s: s.phrase for s in RunStatus} == {
        RunStatus.RUNNING: "is running", RunStatus.FINISHED: "finished", RunStatus.FAILED: "failed",
        RunStatus.CANCELLED: "was cancelled", RunStatus.INTERRUPTED: "was interrupted"}
    assert not_evaluated("r1", "class means", "cancelled").startswith("run 'r1' was cancelled before its first")
    assert not_evaluated("r1", "class means", "interrupted").startswith("run 'r1' was interrupted before")
    assert RunStatus.phrase_of("damaged") == "ended (damaged)"      # a word that is no status is named as it is


@pytest.mark.parametrize("word", ["damaged", "unknown", "idle", "stopping", "", None, 3, ["running"]])
def test_a_word_that_is_no_status_reads_as_none_and_neither_ended_nor_active(word):
    assert RunStatus.read(word) is None
    assert not RunStatus.has_ended(word) and not RunStatus.is_active(word)


def test_the_terminal_events_name_their_status():
    assert [e.status for e in (ev.RunFinished, ev.RunFailed, ev.RunCancelled, ev.RunInterrupted)] == [
        RunStatus.FINISHED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.INTERRUPTED]


@pytest.mark.parametrize("status", [s for s in RunStatus if s.closed])
def test_every_closing_status_round_trips_through_the_store(tmp_path, status):
    store = RunStore(tmp_path)
    w = store.create(CONFIG)
    w.finish(status.value)
    assert json.loads((w.path / "meta.json").read_text())["status"] == status.value     # a plain string on disk
    rec = store.load(w.run_id)
    assert rec.status is status and rec.status == status.value
    assert store.list().set_index("run_id").loc[w.run_id, "status"] == status.value


def test_a_writer_refuses_a_status_it_cannot_close_with(tmp_path):
    w = RunStore(tmp_path).create(CONFIG)
    for bad in ("interrupted", "running", "done"):
        with pytest.raises(ValueError, match=r"status must be one of \['finished', 'failed', 'cancelled'\]"):
            w.finish(bad)


def test_a_running_run_reads_running_and_a_dead_one_interrupted_which_has_ended(tmp_path):
    store = RunStore(tmp_path)
    w = store.create(CONFIG)
    assert store.load(w.run_id).status is RunStatus.RUNNING and not store.load(w.run_id).status.ended
    w.update_meta(pid=_dead_pid())
    rec = store.load(w.run_id)
    assert rec.status is RunStatus.INTERRUPTED and rec.status.ended
    assert rec.meta["stored_status"] == "running"
    assert store.running().empty                       # the store does not list it as being written


def test_a_status_word_the_store_does_not_know_is_kept_as_stored(tmp_path):
    store = RunStore(tmp_path)
    w = store.create(CONFIG)
    w.finish("finished")
    meta = json.loads((w.path / "meta.json").read_text())
    (w.path / "meta.json").write_text(json.dumps({**meta, "status": "exploded"}))
    assert store.load(w.run_id).status == "exploded" and RunStatus.read(store.load(w.run_id).status) is None
    del meta["status"]
    (w.path / "meta.json").write_text(json.dumps(meta))
    assert store.load(w.run_id).status == "unknown"
