"""The run engine: event order, persistence, cancellation, failures, seeds, label noise, contribution."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import lab
from lab import events as ev
from lab.config import RunConfig
from lab.runs import CancelToken, prepare_data, run

REPO = Path(__file__).resolve().parents[3]

TINY = dict(dataset="digits", img_size=16, backbone="mlp:depth=2,width=16", n_unseen=4, unseen_per_class=10,
            seen_per_class=6, strategy="full", epochs=2, batch_size=128, lr=1e-2, projection="pca",
            device="cpu", metrics=("nmi", "knn_accuracy", "nc1", "cdnv"))
LAYERS = ["fc1", "fc2", "pre_logits"]
WEIGHTED = ["fc1", "fc2"]           # taps that own weights (pre_logits reflects the whole network)


pytestmark = pytest.mark.usefixtures("one_thread")      # conftest: torch on one thread


def _cfg(**changes):
    return RunConfig(**{**TINY, **changes})


def _events(cfg, store, cancel=None):
    return list(run(cfg, store=store, cancel=cancel))


def _index(events, pred):
    return [i for i, e in enumerate(events) if pred(e)]


def test_the_engine_summary_is_the_stored_runs_summary(store):
    events = _events(_cfg(epochs=1, seeds=(0, 1), metrics=("nmi", "knn_accuracy", "head_accuracy"),
                          train_sample_per_class=4), store)
    assert events[-1].kind == "run_finished", events[-1]
    summary, record = events[-1].summary, store.load(events[-1].run_id)
    assert summary == record.summary() == record.meta["summary"]
    assert summary["status"] == "finished" and summary["best_layer"] in LAYERS and summary["layers"] == LAYERS
    assert set(summary["terminal_phase"]) == {"0", "1"} and summary["seeds"] == [0, 1] and summary["epochs"] == 1
    assert summary["timings"] == record.meta["timings"]["run"] and summary["trainable_fraction"] == 1.0


def test_two_epoch_run_streams_events_in_order_and_stores_them(store):
    events = _events(_cfg(), store)
    kinds = [e.kind for e in events]
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
    assert kinds.count("run_started") == 1 and sum(k in ev.TERMINAL_KINDS for k in kinds) == 1
    assert len({e.run_id for e in events}) == 1
    started = events[0]
    assert [layer["name"] for layer in started.layers] == LAYERS
    assert started.layers[0] == {"name": "fc1", "kind": "vector", "dim": 16}
    assert len(started.unseen) == 4 and len(started.seen) == 6 and started.device == "cpu"
    assert started.n_images["unseen"] == 40 and started.n_images["heldout"] == 36
    assert 0 < started.trainable_fraction == 1.0 or started.trainable_fraction == pytest.approx(1.0)

    finished = _index(events, lambda e: e.kind == "epoch_finished")
    assert [events[i].epoch for i in finished] == [0, 1, 2]
    start = 0
    for epoch, end in zip(range(3), finished):
        window = events[start:end]
        got = {(e.layer, e.split) for e in window if e.kind == "layer_metrics"}
        assert got == {(layer, split) for layer in LAYERS for split in ("unseen", "seen", "train")}
        assert all(e.epoch == epoch for e in window if e.kind in ("layer_metrics", "layer_utilization", "projection_ready"))
        unseen = [e for e in window if e.kind == "layer_metrics" and e.split == "unseen"]
        assert [e.layer for e in unseen] == LAYERS                      # input -> output, as soon as ready
        confidence = [e for e in window if e.kind == "layer_confidence"]
        assert [e.layer for e in confidence] == LAYERS and window.index(confidence[0]) > window.index(unseen[-1])
        assert set(unseen[0].values) == {"nmi", "knn_accuracy", "nc1", "cdnv", "cka_initial"}   # + CKA to epoch 0
        seen = [e for e in window if e.kind == "layer_metrics" and e.split == "seen"]
        assert set(seen[0].values) == {"nc1", "cdnv"}                    # collapse only on seen classes
        assert [e.layer for e in window if e.kind == "layer_utilization"] == WEIGHTED
        pca = [e for e in window if e.kind == "projection_ready" and e.method == "pca"]
        assert [e.layer for e in pca] == LAYERS and pca[0].coords.shape == (40, 2)
        assert any(e.kind == "progress" and e.stage == "extract" for e in window)
        if epoch > 0:
            assert any(e.kind == "progress" and e.stage == "train" for e in window)
        start = end + 1
    epoch0, epoch2 = events[finished[0]], events[finished[2]]
    assert epoch0.train_loss is None and epoch2.train_loss > 0 and 0 <= epoch2.heldout_accuracy <= 1
    assert [e.epoch for e in events if e.kind == "generalization"] == [0, 1, 2]
    util = [e for e in events if e.kind == "layer_utilization"]
    assert all(e.absolute == 0 for e in util if e.epoch == 0) and all(e.absolute > 0 for e in util if e.epoch == 2)

    rec = store.load(started.run_id)
    assert rec.status == "finished"
    assert rec.config == _cfg()
    m = rec.metrics
    assert set(m["layer"]) == set(LAYERS) and sorted(set(m["epoch"])) == [0, 1, 2]
    # per epoch: 4 unseen metrics and CKA to epoch 0, 2 seen metrics, the same 2 on the train sample, and the
    # bootstrap's low, high and best share of nmi and knn_accuracy
    assert len(m) == 3 * (len(LAYERS) * 5 + len(LAYERS) * 2 + len(LAYERS) * 2 + len(LAYERS) * 6)
    assert list(rec.training["epoch"]) == [0, 1, 2]
    assert set(rec.utilization["layer"]) == set(WEIGHTED)
    coords, labels, indices = rec.projection(0, 2, "fc2", method="pca")
    assert coords.shape == (40, 2) and len(labels) == len(indices) == 40
    X, _, _ = rec.embeddings(0, 2, "pre_logits")
    assert X.shape == (40, 16) and X.dtype == np.float16
    assert rec.weights_path(0).is_file()
    assert rec.meta["trainable_fraction"] == pytest.approx(1.0)
    assert events[-1].summary["best_layer"] in LAYERS


def test_store_false_persists_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_RUNS_DIR", str(tmp_path / "default"))
    monkeypatch.chdir(tmp_path)
    events = _events(_cfg(epochs=0, strategy="none", lr=None), store=False)
    assert events[-1].kind == "run_finished"
    assert not (tmp_path / "default").exists() and not (tmp_path / "runs").exists()


def test_cancel_token_after_first_metrics_of_epoch_1_leaves_a_cancelled_run(store):
    token = CancelToken()
    seen = []
    for e in run(_cfg(epochs=3), store=store, cancel=token):
        seen.append(e)
        if e.kind == "layer_metrics" and e.epoch == 1:
            token.cancel()
    kinds = [e.kind for e in seen]
    assert kinds[-1] == "run_cancelled" and "run_finished" not in kinds
    # the cancel took effect at the next check: no further layer of epoch 1 was measured
    assert [e.layer for e in seen if e.kind == "layer_metrics" and e.epoch == 1] == ["fc1"]
    assert [e.epoch for e in seen if e.kind == "epoch_finished"] == [0]
    rec = store.load(seen[0].run_id)
    assert rec.status == "cancelled"
    assert list(rec.training["epoch"]) == [0]
    m = rec.metrics
    assert set(m.loc[m.epoch == 0, "layer"]) == set(LAYERS)
    assert set(m.loc[m.epoch == 1, "layer"]) == {"fc1"}                 # the partial epoch is kept


def test_closing_the_generator_mid_epoch_marks_the_run_cancelled(store):
    gen = run(_cfg(epochs=3, batch_size=32), store=store)
    run_id = None
    for e in gen:
        run_id = e.run_id
        if e.kind == "progress" and e.stage == "train" and e.epoch == 1 and e.done == 2:
            break
    gen.close()                                                         # within one batch
    rec = store.load(run_id)
    assert rec.status == "cancelled" and list(rec.training["epoch"]) == [0]


def test_run_validates_a_dict_config_at_call_time(store):
    with pytest.raises(ValueError, match="unknown RunConfig field 'epochz'"):
        run({"epochz": 3}, store=store)
    with pytest.raises(ValueError, match="config must be a lab.RunConfig or a dict"):
        run("glyphs", store=store)


@pytest.mark.parametrize("changes, message", [
    ({"dataset": "nope"}, "nope"),
    ({"layers": ["fc1", "fc9"]}, r"layers: 'fc9' is not a tap of mlp:depth=2,width=16; valid: fc1, fc2, pre_logits"),
    ({"strategy": "layer", "block": "fc9"}, r"block 'fc9' is not a trainable block of mlp:depth=2,width=16; choose"),
    ({"unseen": ["0", "1", "x"]}, r"class 'x' is not in dataset 'digits'; its classes are '0', '1'"),
    ({"n_unseen": 9}, r"n_unseen=9 leaves fewer than 2 seen classes of the 10 in 'digits'"),
    ({"backbone": "resnet1800"}, r"unknown backbone 'resnet1800'"),
    ({"strategy": "none", "epochs": None, "lr": None, "checkpoint": "run:nosuchrun"},
     r"checkpoint 'run:nosuchrun': no such run in the store"),
    ({"lr": 1e12, "optimizer": "sgd"}, r"epoch 1, batch \d+: training diverged: the loss became nan\. Lower lr"),
])
def test_bad_user_input_ends_in_run_failed_with_a_message(store, changes, message):
    events = _events(_cfg(**changes), store)
    last = events[-1]
    assert last.kind == "run_failed"
    assert "\n" not in last.message and "Traceback" not in last.message
    import re
    assert re.search(message, last.message), last.message
    rec = store.load(last.run_id)
    assert rec.status == "failed" and re.search(message, rec.meta["message"])


def test_several_seeds_emit_aggregates_and_generalization(store):
    events = _events(_cfg(epochs=1, seeds=[0, 1]), store)
    kinds = [e.kind for e in events]
    assert kinds[-1] == "run_finished"
    finished = [(e.seed, e.epoch) for e in events if e.kind == "epoch_finished"]
    assert finished == [(0, 0), (0, 1), (1, 0), (1, 1)]
    aggs = [e for e in events if e.kind == "aggregate"]
    assert {(e.epoch, e.layer, e.split) for e in aggs} == {(ep, layer, split) for ep in (0, 1)
                                                           for layer in LAYERS for split in ("unseen", "seen")}
    assert all(e.n_seeds == 2 and set(e.mean) == set(e.std) for e in aggs)
    # aggregates come once the last seed reported the epoch
    last_seed_epoch0 = kinds.index("epoch_finished", kinds.index("epoch_finished", kinds.index("epoch_finished") + 1) + 1)
    assert min(_index(events, lambda e: e.kind == "aggregate")) > last_seed_epoch0
    overall = [e for e in events if e.kind == "generalization" and e.seed is None]
    per_seed = [e for e in events if e.kind == "generalization" and e.seed is not None]
    assert [e.epoch for e in overall] == [0, 1] and len(per_seed) == 4
    a = next(e for e in aggs if e.epoch == 1 and e.split == "unseen" and e.layer == overall[1].layer)
    assert overall[1].g == pytest.approx(a.mean["nmi"]) and overall[1].g_std == pytest.approx(a.std["nmi"])
    nmis = [e.values["nmi"] for e in events if e.kind == "layer_metrics" and e.epoch == 1
            and e.split == "unseen" and e.layer == a.layer]
    assert a.mean["nmi"] == pytest.approx(np.mean(nmis)) and a.std["nmi"] == pytest.approx(np.std(nmis, ddof=1))
    rec = store.load(events[0].run_id)
    assert sorted(set(rec.metrics["seed"])) == [0, 1] and rec.weights_path(1).is_file()


def test_label_noise_reports_resilience_and_contribution_restores(store):
    events = _events(_cfg(epochs=1, strategy="scl", block="fc1", label_noise=0.3, contribution=True), store)
    assert events[-1].kind == "run_finished", events[-1]
    epochs = [e for e in events if e.kind == "epoch_finished"]
    assert all(e.resilience is not None and 0 <= e.resilience <= 1 for e in epochs)
    contrib = [e for e in events if e.kind == "layer_contribution"]
    assert [e.layer for e in contrib] == WEIGHTED
    assert {"heldout_accuracy", "heldout_loss", "unseen_nmi", "unseen_g", "heldout_accuracy_delta"} <= set(contrib[0].values)
    assert events.index(contrib[0]) > max(_index(events, lambda e: e.kind == "epoch_finished"))
    rec = store.load(events[0].run_id)
    assert set(rec.contribution["layer"]) == set(WEIGHTED)
    assert not rec.training["resilience"].isna().any()
    # contribution restored the model: the stored (pre-contribution) weights still give the final metrics
    final = {e.layer: e.values["nmi"] for e in events if e.kind == "layer_metrics" and e.epoch == 1
             and e.split == "unseen"}
    assert contrib[0].values["unseen_nmi"] - contrib[0].values["unseen_nmi_delta"] == pytest.approx(final["pre_logits"])


def test_a_stored_run_is_a_checkpoint(store):
    first = _events(_cfg(epochs=1), store)
    run_id = first[0].run_id
    # the engine resolves "run:ID" through the store (lab.backbones never imports the store)
    again = _events(_cfg(strategy="none", epochs=None, lr=None, checkpoint=f"run:{run_id}"), store)
    assert again[-1].kind == "run_finished", again[-1]
    before = {e.layer: e.values for e in first if e.kind == "layer_metrics" and e.epoch == 1 and e.split == "unseen"}
    after = {e.layer: e.values for e in again if e.kind == "layer_metrics" and e.epoch == 0 and e.split == "unseen"}
    for layer in LAYERS:
        measured = {k: v for k, v in before[layer].items() if k != "cka_initial"}   # only the training run has it
        assert after[layer] == pytest.approx(measured, rel=1e-5)


def test_prepare_data_rebuilds_the_projection_images():
    data = prepare_data(_cfg())
    assert len(data.unseen) == 40 and len(data.heldout) == 36
    assert data.n_images == {"train": len(data.train), "heldout": 36, "unseen": 40}
    assert set(np.asarray(data.unseen.targets)) == {0, 1, 2, 3}
    assert data.unseen.thumbnail(0).startswith("data:image/png;base64,")


def test_lab_exports_the_engine():
    assert lab.run is run and lab.RunConfig is RunConfig


@pytest.mark.slow       # numba compiles umap once per process (~10-15 s here)
def test_umap_layouts_arrive_after_pca_and_are_stored(store):
    events = _events(_cfg(strategy="none", epochs=None, lr=None, projection="umap"), store)
    assert events[-1].kind == "run_finished"
    proj = [e for e in events if e.kind == "projection_ready"]
    assert [e.layer for e in proj if e.method == "pca"] == LAYERS
    umap = [e for e in proj if e.method == "umap"]
    assert sorted(e.layer for e in umap) == sorted(LAYERS)            # the last epoch is always waited for
    assert all(events.index(u) > events.index(p) for u in umap for p in proj
               if p.method == "pca" and p.layer == u.layer)
    assert umap[0].coords.shape == (40, 2) and np.isfinite(umap[0].coords).all()
    assert list(umap[0].class_names) == events[0].unseen
    coords, labels, indices = store.load(events[0].run_id).projection(0, 0, "fc2", method="umap")
    assert coords.shape == (40, 2) and np.array_equal(indices, np.arange(40))


_KILL_CHILD = textwrap.dedent("""
    import sys
    import torch
    torch.set_num_threads(1)
    from lab.config import RunConfig
    from lab.runs import run
    from lab.store import RunStore

    cfg = RunConfig.from_json(sys.argv[2])
    for e in run(cfg, store=RunStore(sys.argv[1])):
        if e.kind == "run_started":
            print("started", e.run_id, flush=True)
        elif e.kind == "epoch_finished":
            print("epoch", e.epoch, flush=True)
""")


@pytest.mark.slow
def test_sigkill_mid_run_leaves_a_loadable_interrupted_run(store):
    cfg = _cfg(epochs=200)
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-c", _KILL_CHILD, str(store.root), cfg.to_json(indent=None)],
                            stdout=subprocess.PIPE, text=True, env=env, cwd=REPO)
    try:
        head = proc.stdout.readline().split()
        assert head[0] == "started", head
        run_id = head[1]
        done = [proc.stdout.readline().strip() for _ in range(3)]
        assert done == ["epoch 0", "epoch 1", "epoch 2"]
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    rec = store.load(run_id)
    assert rec.status == "interrupted"
    epochs = sorted(rec.training["epoch"])
    assert epochs[:3] == [0, 1, 2] and epochs == list(range(len(epochs)))
    m = rec.metrics
    for epoch in epochs:
        assert set(m.loc[m.epoch == epoch, "layer"]) == set(LAYERS)
    assert rec.projection(0, epochs[-1], "fc1", method="pca")[0].shape == (40, 2)


@pytest.mark.slow
def test_precision_reaches_training_and_extraction(store):
    """RunConfig.precision is the autocast of both: on CPU "auto" is float32 (bit-identical numbers);
    "bfloat16" autocasts the MLP's matmuls on CPU too, which moves the metrics."""
    def values(precision):
        out = _events(_cfg(epochs=1, precision=precision, projection="none"), store)
        assert out[-1].kind == "run_finished", out[-1]
        rows = [(e.epoch, e.layer, e.split, sorted(e.values.items())) for e in out if e.kind == "layer_metrics"]
        losses = [e.train_loss for e in out if e.kind == "epoch_finished" and e.epoch == 1]
        return rows, losses

    auto, float32, bf16 = values("auto"), values("float32"), values("bfloat16")
    assert auto == float32
    before_training = [[r for r in rows if r[0] == 0] for rows in (bf16[0], float32[0])]
    assert before_training[0] != before_training[1]                   # extraction
    assert bf16[1] != float32[1]                                      # training
