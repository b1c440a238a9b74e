"""The live view follows a stored run written by another process: the same views as a run started here."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pandas as pd
import pytest

import lab
from lab import events as ev
from tests.fixtures.configs import TINY
from tests.fixtures.paths import REPO


def _wait(condition, proc=None, limit=180.0, what="the condition"):
    """A hang guard, not a timing assertion."""
    end = time.monotonic() + limit
    while not condition():
        if time.monotonic() > end:
            if proc is not None:
                proc.kill()
            pytest.fail(f"gave up waiting for {what}" + (f"; the loop said: {proc.stdout.read()}" if proc else ""))
        time.sleep(0.1)


def _metrics(view):
    cols = ["seed", "epoch", "layer", "split", "metric"]
    return view.model.metrics.sort_values(cols).reset_index(drop=True)


@pytest.mark.slow
def test_a_followed_run_shows_what_the_run_showed_live(store, one_thread):
    from app.live import LiveView

    live = LiveView()
    live.consume(list(lab.run(lab.RunConfig(**{**TINY, "epochs": 1}), store=store)))
    run_id = live.model.run_id
    followed = LiveView()
    followed.follow(run_id, store=store)
    assert followed._following.wait(120)
    pd.testing.assert_frame_equal(_metrics(followed), _metrics(live))
    assert followed.model.verdict() == pytest.approx(live.model.verdict())
    a, b = live.probe(), followed.probe()
    for key in ("status", "run_id", "layers", "metric_layers", "heatmap_cells", "projection_points", "layout_layer",
                "epochs_done"):
        assert b[key] == a[key], key
    pd.testing.assert_frame_equal(followed.model.training.drop(columns="seconds"),
                                  live.model.training.drop(columns="seconds"))
    assert followed.following is None                     # it ended with the run
    with pytest.raises(KeyError, match="no-such-run"):
        followed.follow("no-such-run", store=store)


@pytest.mark.slow
def test_a_monitored_loop_elsewhere_is_listed_watched_and_read_as_interrupted_when_it_dies(tmp_path):
    from app.layerscope import LayerScope

    store = lab.RunStore(tmp_path / "runs")
    control = tmp_path / "control"
    control.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "tests.fixtures.monitored_loop", str(store.root), str(control),
                             "--epochs", "2", "--end", "hang", "--name", "my loop"], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        scope = LayerScope(store=store)
        assert scope.watcher.runs == [] and not scope.watcher.select.options
        _wait(lambda: (control / "run_id").exists(), proc, what="the loop's run")
        run_id = (control / "run_id").read_text()

        def listed():
            scope.watcher.refresh()
            return scope.watcher.runs == [run_id]
        _wait(listed, proc, what="the running run in the list")
        assert "my loop" in next(iter(scope.watcher.select.options))
        assert scope.watcher.watch()
        view = scope.live
        # the follow thread applies each event as it reads it (no session here): wait for the status line
        _wait(lambda: "1 evaluation so far" in view._status_md.object, proc, what="epoch 0 in the view")
        assert view.status == "running" and view.model.open_ended and view.following == run_id
        assert view.model.epochs_done == 1 and view.probe()["metric_layers"] == 3
        (control / "go1").touch()
        _wait(lambda: view.model.epochs_done == 2, proc, what="epoch 1 in the view")
        assert view.model.heatmap_frame("nmi", "unseen")["epoch"].unique().tolist() == [0, 1]
        assert view.streams.get("utilization") is not None          # the loop trained: weights moved
        (control / "exit").touch()
        proc.wait(60)
        assert view._following.wait(120)                 # the view follows until the run ends
        assert view.status == "interrupted" and "stopped without closing the run" in view._alert.object
        assert "epoch 1" in view._alert.object
        scope.watcher.refresh()
        assert scope.watcher.runs == []
        assert store.list().set_index("run_id").loc[run_id, "status"] == "interrupted"
    finally:
        proc.kill()


def test_an_open_ended_run_draws_the_epochs_it_evaluated():
    from app.base.plots import epoch_keys
    from app.live._model import RunModel

    model = RunModel()
    model.apply(ev.RunStarted("r", config={"backbone": "monitor:MLP", "strategy": "none", "epochs": 3},
                              layers=[{"name": "a"}, {"name": "b"}], classes=["x", "y"], seen=[], unseen=["x", "y"],
                              device="cpu", n_images={}, seeds=[0]))
    assert model.open_ended and model.n_epochs == 0
    for step in (0, 50, 100):
        for i, layer in enumerate("ab"):
            model.apply(ev.LayerMetrics("r", seed=0, epoch=step, layer=layer, split="unseen", values={"nmi": i}))
        model.apply(ev.EpochFinished("r", seed=0, epoch=step, train_loss=None, train_accuracy=None,
                                     heldout_accuracy=None, seconds=1.0))
    assert model.n_epochs == 100 and model.epoch_axis() == [0, 50, 100]
    frame = model.heatmap_frame("nmi", "unseen")
    assert sorted(set(frame["epoch"])) == [0, 50, 100] and frame["value"].notna().all()
    assert model.eta_seconds() is None and model.fraction_done() == 0.0
    assert epoch_keys(100, [0, 50, 100]) == [0, 50, 100]
    assert epoch_keys(100, list(range(0, 1001, 10)))[-1] == 1000
    model.apply(ev.RunInterrupted("r", message="gone"))
    assert model.status == "interrupted" and model.message == "gone"
