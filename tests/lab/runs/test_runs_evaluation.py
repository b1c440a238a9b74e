"""lab.runs.evaluation and lab.runs.results: identical taps, and the engine's numbers = lab.analysis's."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from lab import analysis
from lab.backbones import load
from lab.config import RunConfig
from lab.features import extract
from lab.runs import run
from lab.runs.evaluation import find_aliases

RESNET_LAYERS = ("layer3.1", "layer4.0", "layer4.1", "pre_logits")
TINY_RESNET = dict(dataset="digits", img_size=16, backbone="resnet18", n_unseen=4, unseen_per_class=10,
                   seen_per_class=6, strategy="layer", block="layer4.1", epochs=1, batch_size=256, lr=1e-2,
                   projection="none", device="cpu", metrics=("nmi",), layers=RESNET_LAYERS)


pytestmark = pytest.mark.usefixtures("one_thread")      # conftest: torch on one thread


def _features(name, **kwargs):
    torch.manual_seed(0)
    bb = load(name, device="cpu", **kwargs)
    x = torch.randn(12, 1, bb.img_size, bb.img_size, generator=torch.Generator().manual_seed(0))  # (N, C, H, W)
    return bb, extract(bb, x, layers=bb.layers)


def test_resnet_last_block_is_its_pre_logits():
    bb, feats = _features("resnet18", in_chans=1, img_size=32)
    aliases = find_aliases(feats, bb.layers)
    assert aliases["layer4.1"] == "pre_logits"
    # every alias is an exact match (up to float32 pooling) of a deeper tap of the same shape
    for tap, deeper in aliases.items():
        assert bb.layers.index(deeper) > bb.layers.index(tap)
        assert np.allclose(feats[tap].numpy(), feats[deeper].numpy(), rtol=1e-5, atol=1e-6)
    # and nothing that differs is called an alias: layer3.1 (256 ch) and pre_logits (512 ch) never compare
    assert "layer3.1" not in aliases or aliases["layer3.1"] != "pre_logits"


def test_a_vit_has_no_identical_taps_and_the_mlp_s_last_layer_is_its_pre_logits():
    bb, feats = _features("vit_tiny_patch16_224", in_chans=1, img_size=32, patch_size=8, depth=4)
    assert find_aliases(feats, bb.layers) == {}          # pre_logits is normed: not the last block's token
    bb, feats = _features("mlp:depth=3,width=16", in_chans=1, img_size=16)
    assert find_aliases(feats, bb.layers) == {"fc3": "pre_logits"}   # the MLP's pre-logits *is* fc3


def test_find_aliases_compares_only_same_shapes_and_respects_the_tolerance():
    a = torch.arange(12.0).reshape(4, 3)
    feats = {"a": a, "b": a + 1e-3, "c": a.clone(), "d": a.reshape(3, 4)}
    assert find_aliases(feats, ["a", "b", "c", "d"]) == {"a": "c"}
    assert find_aliases(feats, ["a", "b", "c"], atol=1e-2) == {"a": "c", "b": "c"}


def test_resnet_run_reports_its_identical_taps_and_the_deeper_layer(store):
    events = list(run(RunConfig(**TINY_RESNET), store=store))
    assert events[-1].kind == "run_finished", events[-1]
    gens = [e for e in events if e.kind == "generalization"]
    assert [e.epoch for e in gens] == [0, 1]
    # timm zero-initialises each block's last batch-norm scale: at epoch 0 a random ResNet's blocks
    # pass their input on, so layer4.0 is pre_logits too; training layer4.1 ends that, not the
    # structural identity of the last block and the pooled pre-logits
    assert gens[0].aliases == {"layer4.0": "pre_logits", "layer4.1": "pre_logits"}
    assert gens[-1].aliases == {"layer4.1": "pre_logits"}
    assert all(e.layer != "layer4.1" for e in gens)     # reported as the deeper tap
    rec = store.load(events[0].run_id)
    assert rec.meta["layer_aliases"] == {"layer4.1": "pre_logits"}
    summary = events[-1].summary
    assert summary["best_layer"] != "layer4.1"
    # the engine's summary is lab.analysis's summary of the stored tables
    stored = analysis.run_summary(rec.metrics, rec.training, layers=rec.meta["layers"],
                                  aliases=rec.meta["layer_aliases"])
    for key, value in stored.items():
        assert summary[key] == value, key
    for key in ("epochs", "seeds", "layers", "trainable_fraction", "timings"):
        assert key in summary
    assert summary["layers"] == list(RESNET_LAYERS) and summary["seeds"] == [0]


def test_per_seed_generalization_is_the_best_nmi_of_that_seed_and_epoch(store):
    cfg = RunConfig(**{**TINY_RESNET, "strategy": "none", "block": None, "epochs": None, "lr": None, "seeds": [0, 1],
                       "layers": ("layer2.1", "layer3.1", "pre_logits")})
    events = list(run(cfg, store=store))
    assert events[-1].kind == "run_finished", events[-1]
    for seed in (0, 1):
        nmi = {e.layer: e.values["nmi"] for e in events if e.kind == "layer_metrics" and e.seed == seed
               and e.split == "unseen"}
        gen = next(e for e in events if e.kind == "generalization" and e.seed == seed)
        best = max(nmi.values())
        assert gen.g == best and nmi[gen.layer] == best and gen.g_std is None
    overall = next(e for e in events if e.kind == "generalization" and e.seed is None)
    per_layer = {layer: [e.values["nmi"] for e in events if e.kind == "layer_metrics" and e.layer == layer
                         and e.split == "unseen"] for layer in cfg.layers}
    means = {layer: np.mean(v) for layer, v in per_layer.items()}
    assert overall.g == pytest.approx(max(means.values()))
    assert overall.g_std == pytest.approx(np.std(per_layer[overall.layer], ddof=1))
    assert overall.to_dict()["aliases"] == overall.aliases


def test_transferability_is_measured_on_the_seen_images_before_fine_tuning_only(store):
    cfg = RunConfig(**{**TINY_RESNET, "metrics": ("nmi", "logme", "sfda"), "layers": ("layer3.1", "pre_logits")})
    events = list(run(cfg, store=store))
    assert events[-1].kind == "run_finished", events[-1]
    m = store.load(events[0].run_id).metrics
    seen0 = m[(m["split"] == "seen") & (m["epoch"] == 0)]
    for layer in cfg.layers:
        # the estimators and plain kNN accuracy, their baseline (the seen images are never clustered)
        assert set(seen0.loc[seen0["layer"] == layer, "metric"]) == {"logme", "sfda", "knn_accuracy"}
    assert m[(m["split"] == "seen") & (m["epoch"] == 1)].empty
    assert not m[(m["split"] == "unseen")]["metric"].isin(["logme", "sfda"]).any()
    # the stored values are the metrics of the features, not of a copy computed elsewhere
    assert np.isfinite(seen0["value"]).all() and (seen0.loc[seen0["metric"] == "sfda", "value"] <= 1).all()


def test_every_evaluation_bootstraps_the_unseen_images_and_g_carries_its_interval(store):
    cfg = RunConfig(**{**TINY_RESNET, "metrics": ("nmi", "knn_accuracy"), "layers": ("layer2.1", "layer3.1", "pre_logits")})
    events = list(run(cfg, store=store))
    assert events[-1].kind == "run_finished", events[-1]
    conf = [e for e in events if e.kind == "layer_confidence"]
    assert {(e.epoch, e.layer) for e in conf} == {(ep, layer) for ep in (0, 1) for layer in cfg.layers}
    assert set(conf[0].values) == {f"{m}_{s}" for m in ("nmi", "knn_accuracy") for s in ("low", "high", "best_share")}
    for epoch in (0, 1):
        shares = [e.values["nmi_best_share"] for e in conf if e.epoch == epoch]
        assert sum(shares) == pytest.approx(1.0)                 # every resample has one best layer
    rec = store.load(events[0].run_id)
    stored = analysis.generalization(rec.metrics, layers=rec.meta["layers"], aliases=rec.meta.get("layer_aliases"))
    for gen in (e for e in events if e.kind == "generalization"):
        row = stored[stored["epoch"] == gen.epoch].iloc[0]
        assert (gen.g_low, gen.g_high, gen.best_share) == (row["g_low"], row["g_high"], row["best_share"])
        assert gen.g_low <= gen.g_high and 0 < gen.best_share <= 1
    detail = rec.meta["timings"]["detail"]                       # the bootstrap is timed apart from the metrics
    assert 0 < detail["bootstrap"] < detail["metrics"]
    assert events[-1].summary["timings"] == store.load(events[0].run_id).meta["timings"]["run"]


def test_a_training_run_records_how_far_each_layer_moved_from_its_epoch_0_features(store):
    events = list(run(RunConfig(**TINY_RESNET), store=store))              # trains layer4.1 only
    assert events[-1].kind == "run_finished", events[-1]
    m = store.load(events[0].run_id).metrics
    cka = m[m["metric"] == "cka_initial"].set_index(["epoch", "layer"])["value"]
    assert (cka.loc[0] == 1.0).all() and set(cka.loc[1].index) == set(RESNET_LAYERS)
    # layer3.1's weights are frozen, but training updates every batch-norm's running statistics, so it moves too
    assert ((cka.loc[1] > 0) & (cka.loc[1] < 0.999)).all()
    assert cka.loc[(1, "pre_logits")] == pytest.approx(cka.loc[(1, "layer4.1")])     # the same features
    frozen = list(run(RunConfig(**{**TINY_RESNET, "strategy": "none", "block": None, "epochs": None, "lr": None}),
                      store=store))
    assert not any("cka_initial" in e.values for e in frozen if e.kind == "layer_metrics")   # nothing trains


def test_initial_cka_keeps_a_bounded_subset_of_epoch_0_and_compares_the_same_images(monkeypatch):
    from lab.metrics import DegenerateLayerWarning, cka
    from lab.runs import similarity

    monkeypatch.setattr(similarity, "MAX_IMAGES", 50)
    g = torch.Generator().manual_seed(0)
    X0 = torch.randn(80, 6, generator=g)
    X1 = X0 @ torch.randn(6, 6, generator=g) + 0.5 * torch.randn(80, 6, generator=g)
    tracker = similarity.InitialCKA(subset_seed=3)
    assert tracker.measure(0, 0, "a", X0) == {"cka_initial": 1.0}
    kept = tracker._subset(80)
    assert len(kept) == 50 and (kept.diff() > 0).all()                       # a fixed subset, in image order
    assert tracker.measure(0, 1, "a", X1)["cka_initial"] == pytest.approx(cka(X0[kept], X1[kept]), abs=1e-12)
    assert tracker.measure(1, 1, "a", X1) == {}                               # that seed has no epoch 0 here
    tracker.measure(0, 0, "dead", X0)
    with pytest.warns(DegenerateLayerWarning, match="layer 'dead': cka_initial set to NaN"):
        assert np.isnan(tracker.measure(0, 1, "dead", torch.zeros(80, 6))["cka_initial"])


def test_an_unseen_class_of_one_image_gets_no_interval_but_the_run_finishes(tmp_path, store, caplog):
    from PIL import Image

    rng = np.random.default_rng(0)
    for cls, n in {"a": 6, "b": 6, "c": 6, "d": 5, "e": 1}.items():
        (tmp_path / "images" / cls).mkdir(parents=True)
        for i in range(n):
            Image.fromarray(rng.integers(0, 255, (16, 16), dtype=np.uint8)).save(tmp_path / "images" / cls / f"{i}.png")
    cfg = RunConfig(dataset=f"folder:{tmp_path / 'images'}", backbone="mlp:depth=2,width=8", strategy="none",
                    unseen=("d", "e"), metrics=("nmi",), projection="none", device="cpu")
    events = list(run(cfg, store=store))
    assert events[-1].kind == "run_finished", events[-1]
    assert not [e for e in events if e.kind == "layer_confidence"]
    (gen,) = [e for e in events if e.kind == "generalization"]
    assert np.isfinite(gen.g) and gen.g_low is None and gen.best_share is None
    assert "an unseen class has a single image" in caplog.text
