"""The run store: atomic writes, round trips, interrupted runs, SIGKILL, run-id safety."""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lab import store as store_mod
from lab.store import RunNotFoundError, RunStore, validate_run_id

CONFIG = {"dataset": "digits", "backbone": "mlp", "strategy": "full", "epochs": 2, "seeds": [0, 1],
          "n_unseen": 3}
LAYERS = ["stem", "blocks.0", "pre_logits"]


def _metric_rows(seed, epoch, layer, nmi=0.5):
    return [{"seed": seed, "epoch": epoch, "layer": layer, "split": "unseen", "metric": "nmi", "value": nmi},
            {"seed": seed, "epoch": epoch, "layer": layer, "split": "seen", "metric": "nc1", "value": 2.0}]


def _write_epoch(w, seed, epoch, nmis=(0.2, 0.6, 0.4), heldout=0.5):
    for layer, nmi in zip(LAYERS, nmis):
        w.append_metrics(_metric_rows(seed, epoch, layer, nmi))
        w.append_utilization([{"seed": seed, "epoch": epoch, "layer": layer, "absolute": 0.1 * epoch,
                               "relative": 0.01 * epoch}])
    w.append_training({"seed": seed, "epoch": epoch, "train_loss": None if epoch == 0 else 1.0 / epoch,
                       "train_accuracy": None if epoch == 0 else 0.5, "heldout_accuracy": heldout,
                       "seconds": 0.5})
    w.heartbeat()


def _dead_pid():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


# ----------------------------------------------------------------------------------------- ids

@pytest.mark.parametrize("bad", ["../../etc", "/etc/passwd", "a/../../b", "", ".", "..", "a..b", "-x",
                                 ".hidden", "a b", "x" * 129, "run\n", None, 5])
def test_bad_run_ids_are_refused(store, bad):
    with pytest.raises(ValueError, match=r"run id .* is not valid"):
        validate_run_id(bad, store.root)
    with pytest.raises(ValueError, match=r"run id .* is not valid"):
        store.load(bad)
    with pytest.raises(ValueError, match=r"run id .* is not valid"):
        store.delete(bad)


def test_symlink_out_of_the_store_is_refused(store, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "meta.json").write_text("{}")
    store.root.mkdir(parents=True)
    (store.root / "escape").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ValueError, match="is not valid"):
        store.load("escape")
    with pytest.raises(ValueError, match="is not valid"):
        store.delete("escape")
    assert (outside / "meta.json").exists()


def test_generated_ids_are_valid_and_sanitised(store):
    w = store.create({**CONFIG, "dataset": "folder:/data/my pets/../x"})
    assert re.fullmatch(r"\d{8}-\d{6}-folder-data-my-pets-x-mlp-[0-9a-f]{4}", w.run_id), w.run_id
    assert validate_run_id(w.run_id, store.root) == w.run_id
    assert w.path == store.root / w.run_id and w.path.is_dir()
    ids = {store.create(CONFIG).run_id for _ in range(5)}
    assert len(ids) == 5


def test_unknown_run_names_id_and_root(store):
    with pytest.raises(KeyError) as err:
        store.load("20990101-000000-nope")
    msg = str(err.value)
    assert "20990101-000000-nope" in msg and str(store.root.resolve()) in msg
    assert isinstance(err.value, RunNotFoundError)


# ----------------------------------------------------------------------------------- round trips

def test_create_writes_config_and_meta(store):
    from lab.config import RunConfig

    cfg = RunConfig(dataset="digits", backbone="mlp", epochs=2, seeds=(0, 1), n_unseen=3, name="trial")
    w = store.create(cfg)
    meta = json.loads((w.path / "meta.json").read_text())
    assert meta["status"] == "running" and meta["pid"] == os.getpid() and meta["host"] == socket.gethostname()
    assert meta["name"] == "trial" and meta["started"] and meta["ended"] is None
    assert {"python", "torch", "timm", "lab", "git_commit"} <= set(meta["versions"])
    w.update_meta(layers=LAYERS, classes=["0", "1"], device="cpu", n_images={"train": 10})
    rec = store.load(w.run_id)
    assert rec.config == cfg
    assert rec.meta["layers"] == LAYERS and rec.meta["device"] == "cpu" and rec.status == "running"


def test_config_stays_a_dict_when_it_does_not_load(store):
    w = store.create({**CONFIG, "from_the_future": 1})
    with pytest.warns(UserWarning, match="keeping it as a dict"):
        rec = store.load(w.run_id)
    assert rec.config["from_the_future"] == 1


def test_tables_round_trip(store):
    w = store.create(CONFIG)
    for seed in (0, 1):
        for epoch in (0, 1, 2):
            _write_epoch(w, seed, epoch)
    w.append_contribution([{"seed": 0, "layer": "stem", "metric": "heldout_accuracy", "value": 0.3},
                           {"seed": 1, "layer": "stem", "metric": "heldout_accuracy", "value": 0.4}])
    rec = store.load(w.run_id)
    m = rec.metrics
    assert list(m.columns) == ["seed", "epoch", "layer", "split", "metric", "value"]
    assert len(m) == 2 * 3 * len(LAYERS) * 2
    assert m["seed"].dtype == np.int64 and m["value"].dtype == np.float64
    first = m[(m.seed == 0) & (m.epoch == 0) & (m.split == "unseen")]
    assert list(first["layer"]) == LAYERS                       # insertion order kept
    t = rec.training
    assert len(t) == 6 and np.isnan(t.loc[0, "train_loss"]) and t.loc[1, "train_loss"] == 1.0
    assert list(t[["seed", "epoch"]].itertuples(index=False, name=None)) == [
        (s, e) for s in (0, 1) for e in (0, 1, 2)]
    u = rec.utilization
    assert len(u) == 18 and u["relative"].max() == pytest.approx(0.02)
    c = rec.contribution
    assert list(c.columns) == ["seed", "layer", "metric", "value"] and c["value"].tolist() == [0.3, 0.4]


def test_empty_tables_have_columns(store):
    rec = store.load(store.create(CONFIG).run_id)
    assert rec.metrics.empty and list(rec.metrics.columns) == ["seed", "epoch", "layer", "split", "metric", "value"]
    assert rec.training.empty and "heldout_accuracy" in rec.training
    assert rec.summary()["g"] is None


def test_bad_rows_are_refused(store):
    w = store.create(CONFIG)
    with pytest.raises(ValueError, match=r"metrics row 0 lacks \['value'\]"):
        w.append_metrics([{"seed": 0, "epoch": 0, "layer": "x", "split": "unseen", "metric": "nmi"}])
    with pytest.raises(ValueError, match="must hold integers"):
        w.append_metrics([{"seed": "a", "epoch": 0, "layer": "x", "split": "unseen", "metric": "nmi", "value": 1}])
    with pytest.raises(ValueError, match="status must be one of"):
        w.finish("done")


def test_arrays_round_trip(store):
    w = store.create(CONFIG)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 5)).astype(np.float32)
    labels, idx = np.arange(12) % 3, np.arange(100, 112)
    w.save_embeddings(0, 1, "blocks.0", X, labels, idx)
    w.save_embeddings(0, 1, "odd/name", X[:3], labels[:3], idx[:3])
    coords = rng.normal(size=(12, 2))
    w.save_projection(0, 1, "blocks.0", "pca", coords, labels, idx)
    w.save_projection(0, 1, "blocks.0", "umap", coords * 2, labels, idx, class_names=["a", "b", "c"])
    rec = store.load(w.run_id)
    Xr, lr, ir = rec.embeddings(0, 1, "blocks.0")
    assert Xr.dtype == np.float16 and np.allclose(Xr, X, atol=1e-2)
    assert (lr == labels).all() and (ir == idx).all()
    assert rec.embeddings(0, 1, "odd/name")[0].shape == (3, 5)
    c, _, _ = rec.projection(0, 1, "blocks.0")                   # umap preferred
    assert c.dtype == np.float32 and np.allclose(c, coords * 2)
    assert np.allclose(rec.projection(0, 1, "blocks.0", method="pca")[0], coords)
    assert rec.projection_class_names(0, 1, "blocks.0", "umap") == ["a", "b", "c"]
    keys = rec.projection_keys()
    assert sorted(keys["method"]) == ["pca", "umap"] and set(keys["layer"]) == {"blocks.0"}
    assert set(rec.embedding_keys()["layer"]) == {"blocks.0", "odd/name"}
    with pytest.raises(KeyError, match="no embeddings for seed=0, epoch=2"):
        rec.embeddings(0, 2, "blocks.0")
    with pytest.raises(KeyError, match="no umap projection"):
        rec.projection(1, 1, "blocks.0", method="umap")
    with pytest.raises(ValueError, match="coords \\(n, 2\\)"):
        w.save_projection(0, 1, "x", "pca", np.zeros((3, 3)), labels[:3], idx[:3])
    with pytest.raises(ValueError, match="projection method"):
        w.save_projection(0, 1, "x", "../up", coords, labels, idx)


def test_weights_round_trip_and_run_weights(store):
    torch = pytest.importorskip("torch")
    w = store.create(CONFIG)
    lin = torch.nn.Linear(3, 2)
    state = {"a.weight": lin.weight, "b.weight": lin.weight, "a.bias": lin.bias,   # tied: shared storage
             "steps": torch.tensor(7)}
    w.save_weights(1, state)
    w.save_weights(0, {"a.weight": torch.zeros(2, 3)})
    from safetensors.torch import load_file

    path = store.run_weights(f"run:{w.run_id}/1")
    assert path == w.path / "weights" / "seed1.safetensors"
    loaded = load_file(path)
    assert torch.equal(loaded["b.weight"], lin.weight.detach()) and int(loaded["steps"]) == 7
    assert store.run_weights(f"run:{w.run_id}") == w.path / "weights" / "seed0.safetensors"  # 1st seed
    with pytest.raises(FileNotFoundError, match="no weights for seed 5"):
        store.run_weights(f"run:{w.run_id}/5")
    with pytest.raises(ValueError, match="integer seed"):
        store.run_weights(f"run:{w.run_id}/x")
    with pytest.raises(ValueError, match="is not valid"):
        store.run_weights("run:../../etc")


def test_opening_a_store_does_not_change_what_resolves(store, tmp_path, monkeypatch):
    """RunStore() keeps no record of the stores opened: a run: checkpoint resolves in the store passed
    down (then the default store), never in one that happened to be opened earlier."""
    from lab.errors import CheckpointError

    monkeypatch.setenv("LAB_RUNS_DIR", str(tmp_path / "default"))
    w = store.create(CONFIG)
    (w.path / "weights").mkdir()
    (w.path / "weights" / "seed0.safetensors").write_bytes(b"")
    RunStore(store.root)                                   # opened again: changes nothing
    with pytest.raises(CheckpointError, match=rf"checkpoint 'run:{w.run_id}': no such run in the store "
                                              rf"{tmp_path / 'default'}; `python -m lab runs list` shows"):
        RunStore().run_weights(f"run:{w.run_id}")
    assert store.run_weights(f"run:{w.run_id}") == w.path / "weights" / "seed0.safetensors"
    with pytest.raises(CheckpointError, match=rf"closest: 'run:{w.run_id}'"):
        store.run_weights(f"run:{w.run_id}x")
    other = RunStore(tmp_path / "other")                  # not found there: the default store is searched next
    with pytest.raises(CheckpointError, match=rf"no such run in the store {tmp_path / 'other'} \(nor in the "
                                              rf"default store {tmp_path / 'default'}\)"):
        other.run_weights(f"run:{w.run_id}")
    monkeypatch.setenv("LAB_RUNS_DIR", str(store.root))
    assert other.run_weights(f"run:{w.run_id}") == w.path / "weights" / "seed0.safetensors"


def test_backbones_load_a_stored_run(store):
    backbones = pytest.importorskip("lab.backbones")
    bb = backbones.load("mlp:depth=2,width=8", in_chans=1, img_size=8, device="cpu")
    w = store.create(CONFIG)
    w.save_weights(0, bb.model.state_dict())
    with pytest.raises(ValueError, match=r"names a stored run, which only its run store can find, and no store "
                                         r"was given; pass the store: lab.backbones.resolve_checkpoint"):
        backbones.load("mlp:depth=2,width=8", in_chans=1, img_size=8, checkpoint=f"run:{w.run_id}/0")
    ckpt = backbones.resolve_checkpoint(f"run:{w.run_id}/0", store=store)
    assert (ckpt.path, ckpt.kind, ckpt.source) == (w.path / "weights" / "seed0.safetensors", "safetensors", "run")
    again = backbones.load("mlp:depth=2,width=8", in_chans=1, img_size=8, device="cpu", checkpoint=ckpt)
    for (k, a), (_, b) in zip(bb.model.state_dict().items(), again.model.state_dict().items()):
        assert (a == b).all(), k


# ------------------------------------------------------------------------------- atomic writes

def test_temp_files_are_never_read(store):
    w = store.create(CONFIG)
    _write_epoch(w, 0, 0)
    folder = w.path / "tables" / "metrics"
    (folder / ".tmp-s0-e0001-000099.parquet.abc").write_bytes(b"PAR1 half a parquet file")
    (folder / "notes.txt").write_text("not a part")
    rec = store.load(w.run_id)
    assert len(rec.metrics) == 2 * len(LAYERS)


def test_failed_write_leaves_previous_data_and_no_temp(store, monkeypatch):
    import pyarrow.parquet as pq

    w = store.create(CONFIG)
    _write_epoch(w, 0, 0)
    before = sorted(p.name for p in (w.path / "tables" / "metrics").iterdir())

    def crash(table, where, **kwargs):
        where.write(b"PAR1 partial")
        raise RuntimeError("disk full")

    monkeypatch.setattr(pq, "write_table", crash)
    with pytest.raises(RuntimeError, match="disk full"):
        w.append_metrics(_metric_rows(0, 1, "stem"))
    assert sorted(p.name for p in (w.path / "tables" / "metrics").iterdir()) == before
    monkeypatch.undo()
    assert len(store.load(w.run_id).metrics) == 2 * len(LAYERS)


def test_meta_write_is_atomic(store, monkeypatch):
    w = store.create(CONFIG)
    monkeypatch.setattr(store_mod.os, "replace", lambda *a: (_ for _ in ()).throw(OSError("boom")))
    with pytest.raises(OSError, match="boom"):
        w.update_meta(layers=LAYERS)
    monkeypatch.undo()
    meta = json.loads((w.path / "meta.json").read_text())
    assert meta["status"] == "running" and "layers" not in meta
    assert not [p for p in w.path.iterdir() if p.name.startswith(".tmp-")]


def test_merge_interrupted_before_cleanup_does_not_duplicate(store):
    w = store.create(CONFIG)
    for layer in LAYERS:
        w.append_metrics(_metric_rows(0, 0, layer))
    folder = w.path / "tables" / "metrics"
    raw = {p.name: p.read_bytes() for p in folder.iterdir()}
    w.append_training({"seed": 0, "epoch": 0, "heldout_accuracy": 0.5})   # merges epoch 0
    assert len(list(folder.iterdir())) == 1
    for name, blob in raw.items():                 # as if killed between the merge and the clean-up
        (folder / name).write_bytes(blob)
    w.append_metrics(_metric_rows(0, 0, "late"))   # written after the merge: must be kept
    m = store.load(w.run_id).metrics
    assert list(m[m.split == "unseen"]["layer"]) == LAYERS + ["late"]


# ------------------------------------------------------------------------------- status / kill

def test_finish_and_summary(store):
    w = store.create(CONFIG)
    for seed, shift in ((0, 0.0), (1, 0.1)):
        _write_epoch(w, seed, 0, nmis=(0.9, 0.1, 0.1), heldout=0.2)
        _write_epoch(w, seed, 1, nmis=(0.2 + shift, 0.6 + shift, 0.4), heldout=0.5 + shift)
    w.finish("finished", summary={"note": "ok"})
    rec = store.load(w.run_id)
    assert rec.status == "finished" and rec.meta["ended"]
    s = rec.summary()
    assert s["epoch"] == 1 and s["best_layer"] == "blocks.0"
    assert s["g"] == pytest.approx(0.65) and s["g_std"] == pytest.approx(np.std([0.6, 0.7], ddof=1))
    assert s["heldout_accuracy"] == pytest.approx(0.55) and s["n_seeds"] == 2
    assert rec.meta["summary"]["note"] == "ok" and rec.meta["summary"]["best_layer"] == "blocks.0"
    assert rec.meta["summary"]["status"] == "finished"        # the final status, not "running"


def test_finish_stores_one_summary_and_the_engine_adds_only_what_tables_lack(store):
    w = store.create(CONFIG)
    _write_epoch(w, 0, 0, nmis=(0.2, 0.6, 0.4))
    w.finish("finished", summary={"g": 99.0, "best_layer": "stem", "timings": {"train": 1.5},
                                  "trainable_fraction": 1.0})
    meta = store.load(w.run_id).meta
    assert "engine_summary" not in meta
    assert meta["summary"]["best_layer"] == "blocks.0" and meta["summary"]["g"] == pytest.approx(0.6)
    assert meta["summary"]["timings"] == {"train": 1.5} and meta["summary"]["trainable_fraction"] == 1.0


def test_summary_is_lab_analysis_with_the_runs_layers_and_aliases(store):
    from lab import analysis

    w = store.create(CONFIG)
    w.update_meta(layers=[{"name": layer, "kind": "vector", "dim": 4} for layer in LAYERS],
                  layer_aliases={"blocks.0": "pre_logits"})
    for seed in (0, 1):
        _write_epoch(w, seed, 0, nmis=(0.2, 0.6 + 0.1 * seed, 0.4))
    w.append_metrics(_metric_rows(0, 1, "stem", nmi=0.99))      # epoch 1 reached one layer only
    rec = store.load(w.run_id)
    s = rec.summary()
    expected = analysis.run_summary(rec.metrics, rec.training, layers=LAYERS, aliases={"blocks.0": "pre_logits"})
    assert s == {"status": "running", "layers": list(LAYERS), **expected}
    # the incomplete epoch 1 says nothing; blocks.0 has pre_logits' features, so it is reported as that
    assert s["epoch"] == 0 and s["best_layer"] == "pre_logits" and s["best_is_final"] is True
    assert s["g"] == pytest.approx(0.65) and s["g_std"] == pytest.approx(np.std([0.6, 0.7], ddof=1))


def test_context_manager_marks_failed(store):
    with pytest.raises(RuntimeError):
        with store.create(CONFIG) as w:
            raise RuntimeError("exploded")
    rec = store.load(w.run_id)
    assert rec.status == "failed" and "exploded" in rec.meta["message"]


def test_dead_pid_reads_as_interrupted(store):
    w = store.create(CONFIG)
    _write_epoch(w, 0, 0)
    assert store.load(w.run_id).status == "running"          # we are alive
    w.update_meta(pid=_dead_pid())
    rec = store.load(w.run_id)
    assert rec.status == "interrupted" and rec.meta["stored_status"] == "running"
    assert len(rec.metrics) == 2 * len(LAYERS)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc for process start times")
def test_reused_pid_reads_as_interrupted(store):
    w = store.create(CONFIG)
    w.update_meta(pid_start=(w.meta["pid_start"] or 0) + 12345)  # our pid, but "started" at another time
    assert store.load(w.run_id).status == "interrupted"


def test_other_host_uses_the_heartbeat(store):
    w = store.create(CONFIG)
    w.update_meta(host="elsewhere", pid=1)
    assert store.load(w.run_id).status == "running"          # fresh heartbeat
    meta = json.loads((w.path / "meta.json").read_text())
    meta["updated"] = "2000-01-01T00:00:00+00:00"
    (w.path / "meta.json").write_text(json.dumps(meta))
    assert store.load(w.run_id).status == "interrupted"


_KILL_CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    from lab.store import RunStore

    w = RunStore(sys.argv[1]).create({"dataset": "digits", "backbone": "mlp", "seeds": [0]})
    print(w.run_id, flush=True)
    epoch = 0
    while True:
        for layer in ("a", "b", "c"):
            w.append_metrics([{"seed": 0, "epoch": epoch, "layer": layer, "split": "unseen",
                               "metric": "nmi", "value": 0.1 * epoch}])
            w.save_embeddings(0, epoch, layer, np.ones((8, 4)), np.zeros(8), np.arange(8))
        w.append_training({"seed": 0, "epoch": epoch, "train_loss": 1.0, "heldout_accuracy": 0.5})
        w.heartbeat()
        print(epoch, flush=True)
        epoch += 1
""")


def test_sigkill_mid_run_leaves_completed_epochs(store, repo_root):
    env = {**os.environ, "PYTHONPATH": str(repo_root) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-c", _KILL_CHILD, str(store.root)], stdout=subprocess.PIPE,
                            text=True, env=env, cwd=repo_root)
    try:
        run_id = proc.stdout.readline().strip()
        done = [int(proc.stdout.readline()) for _ in range(3)]       # epochs 0, 1, 2 completed
        assert done == [0, 1, 2]
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    rec = store.load(run_id)
    assert rec.status == "interrupted"
    t = rec.training
    completed = sorted(t["epoch"])
    assert completed[:3] == [0, 1, 2] and completed == list(range(len(completed)))
    m = rec.metrics
    for epoch in completed:
        assert list(m[m.epoch == epoch]["layer"]) == ["a", "b", "c"]
        assert rec.embeddings(0, epoch, "c")[0].shape == (8, 4)
    listed = store.list()
    assert listed.loc[listed.run_id == run_id, "status"].item() == "interrupted"


# ------------------------------------------------------------------------------ list / delete

def test_list_sorts_newest_first_and_skips_damage(store):
    a = store.create({**CONFIG, "name": "older"})
    _write_epoch(a, 0, 0)
    a.finish("finished")
    b = store.create(CONFIG)
    _write_epoch(b, 0, 0, nmis=(0.1, 0.2, 0.7), heldout=0.8)
    meta = json.loads((a.path / "meta.json").read_text())
    meta["started"] = "2001-01-01T00:00:00+00:00"
    (a.path / "meta.json").write_text(json.dumps(meta))
    (store.root / "broken").mkdir()
    (store.root / "broken" / "meta.json").write_text("{not json")
    (store.root / "empty").mkdir()
    (store.root / "stray.txt").write_text("x")
    (store.root / ".tmp-stuff").mkdir()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        df = store.list()
    assert list(df["run_id"]) == [b.run_id, a.run_id, "broken"]       # damaged runs are listed, last
    assert list(df.columns) == ["run_id", "name", "status", "dataset", "backbone", "strategy", "epochs",
                                "seeds", "started", "best_layer", "g", "heldout_accuracy", "damage"]
    assert df.loc[2, "status"] == "damaged" and "meta.json is not valid JSON" in df.loc[2, "damage"]
    assert pd.isna(df.loc[2, "dataset"])                                # never a default config
    assert df.loc[1, "name"] == "older" and df.loc[1, "status"] == "finished"
    assert df.loc[0, "best_layer"] == "pre_logits" and df.loc[0, "g"] == pytest.approx(0.7)
    assert df.loc[0, "seeds"] == "0,1" and df.loc[0, "epochs"] == 2
    messages = " ".join(str(w.message) for w in caught)
    assert "'empty'" in messages


def test_list_of_missing_root_is_empty(tmp_path):
    df = RunStore(tmp_path / "nothing").list()
    assert df.empty and "run_id" in df


def test_default_root_from_env(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_RUNS_DIR", str(tmp_path / "elsewhere"))
    assert RunStore().root == tmp_path / "elsewhere"
    monkeypatch.delenv("LAB_RUNS_DIR")
    assert RunStore().root == Path("runs")


def test_compare(store):
    ids = []
    for name in ("x", "y"):
        w = store.create({**CONFIG, "name": name})
        _write_epoch(w, 0, 0)
        ids.append(w.run_id)
    df = store.compare(ids)
    assert list(df.columns[:2]) == ["run_id", "name"] and set(df["run_id"]) == set(ids)
    assert len(df) == 2 * 2 * len(LAYERS)
    with pytest.raises(KeyError, match="no run 'nope'"):
        store.compare(["nope"])


def test_delete(store):
    w = store.create(CONFIG)
    _write_epoch(w, 0, 0)
    with pytest.raises(ValueError, match="is still running"):
        store.delete(w.run_id)
    w.finish("cancelled")
    store.delete(w.run_id)
    assert not w.path.exists() and store.root.exists()
    with pytest.raises(KeyError, match="no run"):
        store.delete(w.run_id)
    live = store.create(CONFIG)
    store.delete(live.run_id, force=True)
    assert not live.path.exists()


def test_runs_appear_whole_and_readable_by_others(store):
    w = store.create(CONFIG)
    _write_epoch(w, 0, 0)
    assert sorted(p.name for p in store.root.iterdir()) == [w.run_id]       # no staging folder left
    mask = os.umask(0)
    os.umask(mask)
    for path in [w.path, w.path / "meta.json", *(w.path / "tables" / "metrics").iterdir()]:
        expected = (0o777 if path.is_dir() else 0o666) & ~mask
        assert path.stat().st_mode & 0o777 == expected, path


def test_unserialisable_meta_changes_nothing(store):
    w = store.create(CONFIG)
    with pytest.raises(TypeError, match="cannot store a value of type object"):
        w.update_meta(layers=LAYERS, bad=object())
    w.heartbeat()                                   # the writer still works
    assert "layers" not in store.load(w.run_id).meta
