"""A run measures the label-free family: RankMe, alpha-ReQ and TwoNN on the unseen and the seen held-out
images (stored and streamed like every metric), LiDAR on augmented views of the unseen images when
``lidar_views`` asks for it (timed under its own stage), and runs recorded before either still open."""
from __future__ import annotations

import json

import numpy as np
import pytest

import lab
from lab import analysis
from lab.events import LayerMetrics

pytestmark = pytest.mark.filterwarnings("ignore::lab.metrics.DegenerateLayerWarning")

_FAMILY = ("rankme", "alpha_req", "twonn_id")


def _run(store, config):
    events = list(lab.run(config, store=store))
    assert events[-1].kind == "run_finished", events[-1]
    return events, store.load(events[0].run_id)


def test_the_family_is_stored_on_unseen_and_seen_and_streamed(store, tiny_config, one_thread):
    cfg = tiny_config(epochs=1, metrics=("nmi", "knn_accuracy", *_FAMILY))
    events, rec = _run(store, cfg)
    m = rec.metrics
    layers = [layer["name"] for layer in rec.meta["layers"]]
    for split in ("unseen", "seen"):
        rows = m[(m["split"] == split) & m["metric"].isin(_FAMILY)]
        assert len(rows) == len(_FAMILY) * len(layers) * 2, split                  # every layer, epochs 0 and 1
        assert rows.groupby("metric")["value"].apply(lambda v: np.isfinite(v).any()).all()
    assert not m[(m["split"] == "train") & m["metric"].isin(_FAMILY)].size        # the train split: collapse only
    streamed = {(e.split, name) for e in events if isinstance(e, LayerMetrics) for name in e.values}
    assert {(s, name) for s in ("unseen", "seen") for name in _FAMILY} <= streamed
    assert (m["metric"] == "lidar").sum() == 0 and rec.meta["timings"]["run"]["lidar"] == 0.0
    # the agreement table has their rows
    table = analysis.measure_agreement(rec)
    assert set(_FAMILY) <= set(table.index) and table.loc[list(_FAMILY), "best_share"].isna().all()


def test_the_stored_value_is_the_function_of_the_extracted_features(store, tiny_config, one_thread):
    import torch

    import lab.backbones
    import lab.features
    from lab.metrics import rankme, twonn_id
    from lab.runs.data import prepare_data

    cfg = tiny_config(strategy="none", epochs=0, metrics=("nmi", "rankme", "twonn_id"), projection="none")
    _, rec = _run(store, cfg)
    data = prepare_data(cfg)
    torch.manual_seed(0)                                    # the engine seeds the model of seed 0 so
    bb = lab.backbones.load(cfg.backbone, num_classes=0, in_chans=data.dataset.in_chans,
                            img_size=cfg.img_size, device="cpu")
    feats = lab.features.extract(bb, data.unseen, layers=["fc1"])
    row = rec.metrics.set_index(["split", "layer", "metric"])["value"]
    assert row[("unseen", "fc1", "rankme")] == pytest.approx(rankme(feats["fc1"]), rel=1e-6)
    assert row[("unseen", "fc1", "twonn_id")] == pytest.approx(twonn_id(feats["fc1"]), rel=1e-6)


def test_lidar_views_store_lidar_and_its_timing_stage(store, tiny_config, one_thread):
    cfg = tiny_config(epochs=1, lidar_views=2, lidar_images=20, metrics=("nmi", "lidar"), projection="none")
    events, rec = _run(store, cfg)
    m = rec.metrics
    lidar = m[m["metric"] == "lidar"]
    layers = [layer["name"] for layer in rec.meta["layers"]]
    assert set(lidar["split"]) == {"unseen"} and len(lidar) == len(layers) * 2
    assert np.isfinite(lidar["value"]).all() and (lidar["value"] >= 1.0 - 1e-6).all()
    timings = rec.meta["timings"]
    assert "lidar" in timings["stages"] and timings["run"]["lidar"] > 0
    assert all(row["lidar"] > 0 for row in timings["epochs"])
    assert any(isinstance(e, LayerMetrics) and "lidar" in e.values for e in events)
    assert analysis.measure_agreement(rec).loc["lidar", "best_layer"] in layers


def test_lidar_draws_a_stratified_sample_within_its_budget(tiny_config):
    from lab.runs.data import prepare_data
    from lab.runs.label_free_eval import lidar_sample

    unseen = prepare_data(tiny_config()).unseen                                   # 4 classes x 10 images
    sample = lidar_sample(unseen, 9, seed=0)
    assert len(sample) == 8 and np.bincount(np.asarray(sample.targets)).tolist() == [2, 2, 2, 2]
    assert lidar_sample(unseen, 500, seed=0) is unseen
    assert np.array_equal(lidar_sample(unseen, 9, seed=0).targets, sample.targets)


def test_lidar_settings_are_checked(tiny_config):
    with pytest.raises(ValueError, match="add 'lidar' to metrics and set lidar_views"):
        tiny_config(lidar_views=2)
    with pytest.raises(ValueError, match="add 'lidar' to metrics and set lidar_views"):
        tiny_config(metrics=("nmi", "lidar"))
    with pytest.raises(ValueError, match=r"lidar_views must be 0 \(LiDAR off\) or an integer >= 2"):
        tiny_config(metrics=("nmi", "lidar"), lidar_views=1)
    with pytest.raises(ValueError, match="lidar_images must be an integer >= 2"):
        tiny_config(lidar_images=1)


def test_a_run_recorded_before_the_family_opens(store, tiny_config, one_thread):
    _, rec = _run(store, tiny_config(epochs=0, strategy="none", projection="none"))
    path = rec.path / "config.json"
    config = json.loads(path.read_text())
    for field in ("lidar_views", "lidar_images"):
        config.pop(field)
    path.write_text(json.dumps(config))
    meta_path = rec.path / "meta.json"
    meta = json.loads(meta_path.read_text())
    timings = meta.get("timings") or {}
    timings["stages"] = [s for s in timings.get("stages", []) if s != "lidar"]
    for row in [timings.get("run", {}), *timings.get("epochs", [])]:
        row.pop("lidar", None)
    meta_path.write_text(json.dumps(meta))
    old = store.load(rec.run_id)
    assert old.config.lidar_views == 0 and not old.metrics["metric"].isin(("lidar", *_FAMILY)).any()
    table = analysis.measure_agreement(old)
    assert "nmi" in table.index and not set(_FAMILY) & set(table.index)
    assert any("rankme" in note for note in table.attrs["notes"])
