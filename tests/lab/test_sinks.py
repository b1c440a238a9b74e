"""lab.sinks: stored runs mirrored to TensorBoard (event files read back with TensorBoard's
EventAccumulator) and MLflow (a local file store read back with MlflowClient)."""
from __future__ import annotations

import math
import re
import sys

import numpy as np
import pytest

import lab
import lab.runs
import lab.sinks
from lab.__main__ import main
from lab.store import RunStore

LAYERS = ["fc1", "fc2", "pre_logits"]


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """A run written through the RunWriter API: the real digits split of its config, metrics for 2 epochs,
    training rows, utilization, and unseen-class embeddings whose indices index that split's unseen set."""
    store = RunStore(tmp_path_factory.mktemp("runs"))
    cfg = lab.RunConfig(name="sinks", dataset="digits", backbone="mlp", strategy="full", epochs=1, n_unseen=3,
                        unseen_per_class=6, seen_per_class=4, projection="pca", save_weights=False)
    data = lab.runs.prepare_data(cfg)
    w = store.create(cfg)
    w.update_meta(layers=[{"name": n, "kind": "vector", "dim": 5} for n in LAYERS], device="cpu",
                  split={"seen": list(data.split.seen), "unseen": list(data.split.unseen)})
    rng = np.random.default_rng(0)
    n = len(data.unseen)
    labels = np.asarray(data.unseen.targets)
    for epoch in (0, 1):
        w.append_metrics([{"seed": 0, "epoch": epoch, "layer": layer, "split": split, "metric": metric,
                           "value": float(rng.random())}
                          for layer in LAYERS for split, metric in (("unseen", "nmi"), ("unseen", "nc1"),
                                                                    ("seen", "nc1"))])
        w.append_training({"seed": 0, "epoch": epoch, "train_loss": None if epoch == 0 else 0.7,
                           "heldout_accuracy": 0.4 + 0.3 * epoch, "seconds": 0.5})
        w.append_utilization([{"seed": 0, "epoch": epoch, "layer": layer, "absolute": 0.1 * epoch + i,
                               "relative": 0.01 * epoch} for i, layer in enumerate(LAYERS)])
        for layer in LAYERS:
            w.save_embeddings(0, epoch, layer, rng.normal(size=(n, 5)).astype(np.float16), labels, np.arange(n))
    w.finish("finished")
    return store, w.run_id, data


def _accumulator(folder):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    return acc


def test_tensorboard_scalars_are_the_stored_metrics_and_curves(stored, tmp_path):
    store, run_id, _ = stored
    folders = lab.sinks.to_tensorboard([run_id], tmp_path / "tb", embeddings="none", store=store)
    assert folders == [tmp_path / "tb" / run_id]
    acc = _accumulator(folders[0])
    tags = set(acc.Tags()["scalars"])
    record = store.load(run_id)
    for row in record.metrics.itertuples():
        events = acc.Scalars(f"{row.split}/{row.metric}/{row.layer}")
        value = {e.step: e.value for e in events}[row.epoch]
        assert value == pytest.approx(row.value, rel=1e-6)
    assert [(e.step, round(e.value, 6)) for e in acc.Scalars("training/heldout_accuracy")] == [(0, 0.4), (1, 0.7)]
    assert [e.step for e in acc.Scalars("training/train_loss")] == [1]      # epoch 0 has no training loss
    assert {f"utilization/absolute/{layer}" for layer in LAYERS} <= tags
    assert len([t for t in tags if t.count("/") == 2 and t.split("/")[0] in ("seen", "unseen")]) == 9


def test_tensorboard_projector_gets_embeddings_labels_and_sprites(stored, tmp_path):
    from PIL import Image

    store, run_id, data = stored
    folder = lab.sinks.to_tensorboard(run_id, tmp_path / "tb", store=store)[0]
    config = (folder / "projector_config.pbtxt").read_text()
    assert config.count("embeddings {") == len(LAYERS)                      # the last epoch of every layer
    record = store.load(run_id)
    X, labels, indices = record.embeddings(0, 1, "fc2")
    emb = next(p for p in folder.glob("*/*") if p.name.endswith("fc2"))
    assert emb.parent.name == "00001"                                         # global step = epoch 1
    tensors = np.loadtxt(emb / "tensors.tsv", delimiter="\t")
    np.testing.assert_allclose(tensors, X.astype(np.float32), rtol=1e-3, atol=1e-3)
    names = (emb / "metadata.tsv").read_text().splitlines()
    assert names == [data.split.unseen[int(i)] for i in labels]
    sprite = np.asarray(Image.open(emb / "sprite.png").convert("L"), dtype=np.float32)
    images = data.unseen.images                                              # uint8 (N, C, H, W)
    size = int(re.search(r"single_image_dim: (\d+)", config).group(1))
    assert sprite.shape[0] == sprite.shape[1] == size * math.ceil(math.sqrt(len(X)))
    for k in (0, len(X) - 1):           # tile k of the sprite is image indices[k], mean grey level kept
        r, c = divmod(k, math.ceil(math.sqrt(len(X))))
        tile = sprite[r * size:(r + 1) * size, c * size:(c + 1) * size]
        expected = images[int(indices[k])].float().mean().item()
        assert tile.mean() == pytest.approx(expected, abs=2.0)
    assert sprite[:size, :size].std() > 1.0                                  # an image, not a blank tile


def test_tensorboard_bad_input_says_what_to_do(stored, tmp_path):
    store, run_id, _ = stored
    with pytest.raises(ValueError, match="embeddings must be 'last', 'all' or 'none'"):
        lab.sinks.to_tensorboard([run_id], tmp_path, embeddings="first", store=store)
    with pytest.raises(ValueError, match="no run ids given"):
        lab.sinks.to_tensorboard([], tmp_path, store=store)


def test_tensorboard_takes_a_record(stored, tmp_path):
    store, run_id, _ = stored
    folders = lab.sinks.to_tensorboard(store.load(run_id), tmp_path / "rec", embeddings="none")   # a record
    assert folders == [tmp_path / "rec" / run_id]


def test_cli_to_tensorboard_writes_event_files(stored, tmp_path, capsys):
    store, run_id, _ = stored
    code = main(["runs", "to-tensorboard", run_id, str(tmp_path / "tb"), "--runs-dir", str(store.root)])
    assert code == 0, capsys.readouterr().err
    assert list((tmp_path / "tb" / run_id).glob("events.out.tfevents.*"))
    assert "tensorboard --logdir" in capsys.readouterr().out
    code = main(["runs", "to-tensorboard", "20990101-000000-nope", str(tmp_path / "tb"),
                 "--runs-dir", str(store.root)])
    assert code == 2


def test_mlflow_round_trip_through_a_local_file_store(stored, tmp_path, monkeypatch):
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")     # MLflow 3 wants a database unless told otherwise
    store, run_id, _ = stored
    uri = (tmp_path / "mlruns").as_uri()
    [mlflow_id] = lab.sinks.to_mlflow([run_id], tracking_uri=uri, store=store)
    client = MlflowClient(tracking_uri=uri)
    run = client.get_run(mlflow_id)
    assert run.info.status == "FINISHED" and run.info.run_name == "sinks"
    assert run.data.tags["layerscope.run_id"] == run_id
    assert run.data.params["dataset"] == "digits" and run.data.params["epochs"] == "1"
    record = store.load(run_id)
    nmi = record.metrics.query("metric == 'nmi' and layer == 'fc2'").sort_values("epoch")
    history = client.get_metric_history(mlflow_id, "unseen/nmi/fc2")
    history = sorted(history, key=lambda h: h.step)
    assert [h.step for h in history] == list(nmi["epoch"])
    assert [h.value for h in history] == pytest.approx(list(nmi["value"]))
    assert [h.step for h in client.get_metric_history(mlflow_id, "training/heldout_accuracy")] == [0, 1]
    artefacts = {a.path for a in client.list_artifacts(mlflow_id, f"layerscope/{run_id}")}
    assert f"layerscope/{run_id}/config.json" in artefacts and f"layerscope/{run_id}/meta.json" in artefacts


def test_mlflow_missing_names_the_install_command(stored, monkeypatch, capsys):
    store, run_id, _ = stored
    monkeypatch.setitem(sys.modules, "mlflow", None)          # as if mlflow were not installed
    with pytest.raises(ModuleNotFoundError, match="pip install mlflow"):
        lab.sinks.to_mlflow([run_id], store=store)
    code = main(["runs", "to-mlflow", run_id, "--runs-dir", str(store.root)])
    err = capsys.readouterr().err
    assert code == 2 and "pip install mlflow" in err and len(err.strip().splitlines()) == 1
