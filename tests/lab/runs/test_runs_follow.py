"""lab.runs.follow: a stored run read back, as another process writes it, as the engine's own events."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter

import numpy as np
import pytest

import lab
from lab import events as ev
from lab.runs.follow import RunFollower, follow
from tests.fixtures.configs import TINY
from tests.fixtures.paths import REPO


def _by(events, kind, key):
    return {key(e): e for e in events if e.kind == kind}


def test_the_training_row_reads_back_as_the_engine_wrote_it_and_as_the_store_returns_it():
    import pandas as pd

    from lab.runs.results import read_training_row, write_training_row
    from lab.runs.timings import TRAINING_ROW_KEYS

    spent = {key: 0.5 + i for i, key in enumerate(TRAINING_ROW_KEYS)}
    row = write_training_row(1, 0, train_loss=None, train_accuracy=None, heldout_accuracy=0.25, heldout_loss=1.5,
                             resilience=None, seconds=9.0, spent=spent)
    engine = read_training_row("r", row, timings={"train": 0.0, "total": 9.0})
    assert (engine.seed, engine.epoch, engine.train_loss, engine.heldout_accuracy, engine.seconds) == (1, 0, None,
                                                                                                       0.25, 9.0)
    assert engine.timings == {"train": 0.0, "total": 9.0}                   # the clock's row, when at hand
    stored = pd.DataFrame([row]).iloc[-1].to_dict()                         # None comes back as NaN
    again = read_training_row("r", stored)
    assert again.train_loss is None and again.resilience is None and again.heldout_loss == 1.5
    assert again.timings == {**spent, "total": 9.0}


@pytest.mark.slow
def test_a_finished_run_replays_as_the_engine_streamed_it(store, one_thread):
    live = list(lab.run(lab.RunConfig(**{**TINY, "epochs": 1, "seeds": (0, 1)}), store=store))
    follower = RunFollower(live[0].run_id, store=store)
    replay = follower.poll()
    assert follower.ended and follower.poll() == []
    counts = Counter(e.kind for e in live)
    counts["progress"] = 4                       # one per completed (seed, epoch) instead of one per batch
    assert Counter(e.kind for e in replay) == counts
    assert replay[0].kind == "run_started" and replay[-1].kind == "run_finished"
    start, again = live[0], replay[0]
    assert (again.layers, again.seen, again.unseen, again.seeds) == (start.layers, start.seen, start.unseen,
                                                                     start.seeds)
    assert again.config == start.config
    cell = lambda e: (e.seed, e.epoch, e.layer, e.split)           # noqa: E731
    for kind, key in [("layer_metrics", cell), ("layer_confidence", lambda e: (e.seed, e.epoch, e.layer))]:
        a, b = _by(live, kind, key), _by(replay, kind, key)
        assert a.keys() == b.keys()
        for k in a:
            assert b[k].values == pytest.approx(a[k].values, nan_ok=True), (kind, k)
    a, b = _by(live, "generalization", lambda e: (e.seed, e.epoch)), _by(replay, "generalization",
                                                                           lambda e: (e.seed, e.epoch))
    assert a.keys() == b.keys() and (None, 1) in a                  # the across-seed value too
    for k in a:
        assert (b[k].layer, b[k].best_share) == (a[k].layer, a[k].best_share)
        assert b[k].g == pytest.approx(a[k].g) and b[k].g_std == pytest.approx(a[k].g_std)
    a, b = (_by(x, "aggregate", lambda e: (e.epoch, e.layer, e.split)) for x in (live, replay))
    assert a.keys() == b.keys() and all(b[k].mean == pytest.approx(a[k].mean, nan_ok=True) for k in a)
    a, b = (_by(x, "epoch_finished", lambda e: (e.seed, e.epoch)) for x in (live, replay))
    assert all(b[k].heldout_accuracy == pytest.approx(a[k].heldout_accuracy) for k in a)
    assert all(b[k].train_loss == pytest.approx(a[k].train_loss) for k in a if a[k].train_loss is not None)
    a, b = (_by(x, "projection_ready", lambda e: (e.seed, e.epoch, e.layer, e.method)) for x in (live, replay))
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_allclose(b[k].coords, a[k].coords, rtol=1e-6)
        assert list(b[k].indices) == list(a[k].indices)
    a, b = (_by(x, "class_means", lambda e: (e.seed, e.epoch, e.layer, e.split)) for x in (live, replay))
    assert a.keys() == b.keys() and all(np.allclose(b[k].gram, a[k].gram) for k in a)
    assert replay[-1].summary["best_layer"] == store.load(live[0].run_id).meta["summary"]["best_layer"]


def _start_loop(store, control, end="finish", epochs=3):
    control.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", "tests.fixtures.monitored_loop", str(store.root), str(control),
                             "--epochs", str(epochs), "--end", end], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _poll_until(follower, proc, done, limit=180.0):
    """Poll until ``done(events so far)``; a hang guard, not a timing assertion."""
    got, end = [], time.monotonic() + limit
    while not done(got):
        if time.monotonic() > end:
            proc.kill()
            pytest.fail(f"gave up waiting; events {Counter(e.kind for e in got)}; loop said: {proc.stdout.read()}")
        got += follower.poll()
        time.sleep(0.1)
    return got


def _run_id(control, proc, limit=180.0):
    end = time.monotonic() + limit
    while not (control / "run_id").exists():
        if proc.poll() is not None or time.monotonic() > end:
            pytest.fail(f"the loop never opened its run: {proc.stdout.read() if proc.poll() is not None else ''}")
        time.sleep(0.05)
    return (control / "run_id").read_text()


def _finished_epochs(events):
    return [e.epoch for e in events if e.kind == "epoch_finished"]


@pytest.mark.slow
def test_a_monitored_loop_in_another_process_is_followed_epoch_by_epoch(store, tmp_path):
    control = tmp_path / "control"
    proc = _start_loop(store, control)
    try:
        follower = RunFollower(_run_id(control, proc), store=store)
        first = _poll_until(follower, proc, lambda got: 0 in _finished_epochs(got))
        assert first[0].kind == "run_started" and first[0].config["backbone"] == "monitor:MLP"
        assert _finished_epochs(first) == [0] and follower.status == "running" and not follower.ended
        assert {e.epoch for e in first if e.kind == "layer_metrics"} == {0}
        assert any(e.kind == "generalization" for e in first)
        (control / "go1").touch()
        second = _poll_until(follower, proc, lambda got: 1 in _finished_epochs(got))
        assert _finished_epochs(second) == [1] and not any(e.kind == "run_started" for e in second)
        assert {e.epoch for e in second if e.kind == "layer_metrics"} == {1}
        running = store.running()                                   # what the app's watch list reads
        assert running["run_id"].tolist() == [follower.run_id] and running["epochs"].tolist() == [1]
        listed = store.list().set_index("run_id").loc[follower.run_id]
        assert listed["status"] == "running" and listed["epochs"] == 1      # evaluated so far, not planned
        (control / "go2").touch()
        rest = _poll_until(follower, proc, lambda got: bool(got) and got[-1].kind in ev.TERMINAL_KINDS)
        assert _finished_epochs(rest) == [2] and rest[-1].kind == "run_finished"
        assert rest[-1].summary["best_layer"] in ("fc1", "fc2", "pre_logits")
        assert proc.wait(60) == 0
        assert store.running().empty and store.list()["epochs"].tolist() == [2]
    finally:
        proc.kill()


@pytest.mark.slow
def test_a_loop_that_dies_without_closing_reads_as_interrupted(store, tmp_path):
    control = tmp_path / "control"
    proc = _start_loop(store, control, end="hang", epochs=1)
    try:
        run_id = _run_id(control, proc)
        follower = RunFollower(run_id, store=store)
        _poll_until(follower, proc, lambda got: 0 in _finished_epochs(got))
        assert follower.status == "running"
        (control / "exit").touch()
        proc.wait(60)
        end = _poll_until(follower, proc, lambda got: bool(got) and got[-1].kind in ev.TERMINAL_KINDS)
        assert end[-1].kind == "run_interrupted" and "epoch 0" in end[-1].message
        assert store.load(run_id).status == "interrupted"
    finally:
        proc.kill()


@pytest.mark.slow
def test_a_loop_that_raises_is_followed_to_its_failure(store, tmp_path, capsys):
    from lab.cli.entry import main

    control = tmp_path / "control"
    proc = _start_loop(store, control, end="fail", epochs=1)
    try:
        run_id = _run_id(control, proc)
        events = list(follow(run_id, store=store, every=0.1, timeout=180))
        assert events[-1].kind == "run_failed" and "the loss went NaN" in events[-1].message
        assert _finished_epochs(events) == [0]
    finally:
        proc.kill()
    # the command line prints the same evaluations and the end
    assert main(["runs", "follow", run_id, "--runs-dir", str(store.root), "--every", "0.1"]) == 1
    out, err = capsys.readouterr()
    assert "epoch 0 | best layer " in out and "ended failed" in err and "the loss went NaN" in err
    assert main(["runs", "follow", "no-such-run", "--runs-dir", str(store.root)]) == 2
    assert "no run 'no-such-run'" in capsys.readouterr().err


def test_bad_calls_say_what_to_pass(store):
    with pytest.raises(KeyError, match="no-such-run"):
        RunFollower("no-such-run", store=store)
    with pytest.raises(ValueError, match="every must be a positive"):
        next(follow("x", store=store, every=0))
