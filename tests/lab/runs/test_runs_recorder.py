"""lab.runs.recorder: one writer of a run, an explicit null recorder for store=False."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

from lab.config import RunConfig
from lab.runs.recorder import TIMED, NullRecorder, Recorder, open_recorder
from lab.store import RunStore

CFG = RunConfig(dataset="digits", backbone="mlp:depth=2,width=16", strategy="none", device="cpu")


def _public(cls):
    return {name for name, _ in inspect.getmembers(cls, inspect.isfunction) if not name.startswith("_")}


def test_the_null_recorder_spells_out_every_write_and_has_no_catch_all():
    writes = _public(Recorder) - {"timed", "since"}
    assert writes == {"update_meta", "metrics", "utilization", "contribution", "end_epoch", "embeddings",
                      "projection", "images", "thumbnails", "weights", "close", "class_means", "heartbeat"}
    for name in writes:                                   # each one overridden by a no-op of its own
        assert name in NullRecorder.__dict__, name
    assert "__getattr__" not in NullRecorder.__dict__ and "__getattr__" not in Recorder.__dict__
    rec = open_recorder(False, CFG)
    assert isinstance(rec, NullRecorder) and rec.path is None and "-unsaved-" in rec.run_id
    with pytest.raises(AttributeError):
        rec.save_projection                               # noqa: B018 - no method names by string
    with rec.timed("extract"):
        pass
    assert set(rec.timings) == set(TIMED) and rec.timings["extract"] > 0


def test_open_recorder_rejects_a_non_store():
    with pytest.raises(ValueError, match="store must be a lab.RunStore, None or False. Got str instead."):
        open_recorder("runs", CFG)


def test_an_epoch_is_written_whole_when_it_ends_and_a_partial_one_on_close(tmp_path):
    store = RunStore(tmp_path)
    rec = open_recorder(store, CFG)
    assert rec.root == store.root
    labels, idx = np.array([0, 1, 1]), np.arange(3)
    rec.metrics([{"seed": 0, "epoch": 0, "layer": "fc1", "split": "unseen", "metric": "nmi", "value": 0.5}])
    rec.utilization([{"seed": 0, "epoch": 0, "layer": "fc1", "absolute": 0.0, "relative": 0.0}])
    rec.embeddings(0, 0, "fc1", np.ones((3, 4), np.float32), labels, idx)
    rec.projection(0, 0, "fc1", "pca", np.zeros((3, 2), np.float32), labels, idx, class_names=["a", "b"])
    assert len(store.load(rec.run_id).metrics) == 0      # buffered until the epoch ends
    rec.end_epoch({"seed": 0, "epoch": 0, "train_loss": None, "train_accuracy": None, "heldout_accuracy": None,
                   "heldout_loss": None, "resilience": None, "seconds": 1.0})
    run = store.load(rec.run_id)
    assert list(run.metrics["value"]) == [0.5] and list(run.utilization["layer"]) == ["fc1"]
    assert run.embeddings(0, 0, "fc1")[0].shape == (3, 4)
    assert run.projection(0, 0, "fc1", method="pca")[0].shape == (3, 2)
    rec.metrics([{"seed": 0, "epoch": 1, "layer": "fc1", "split": "unseen", "metric": "nmi", "value": 0.25}])
    rec.update_meta(layer_aliases={"fc2": "pre_logits"})
    rec.close("cancelled", message="stopped", summary={"g": 0.5})
    run = store.load(rec.run_id)
    assert run.status == "cancelled" and run.meta["layer_aliases"] == {"fc2": "pre_logits"}
    assert sorted(run.metrics["value"]) == [0.25, 0.5]    # the partial epoch is kept
