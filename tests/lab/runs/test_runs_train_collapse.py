"""Neural collapse on the training set in a real (tiny) run: the split "train", the classifier-side rows at the
head input, ClassMeans events and their store, the terminal phase in the summary, label noise and old runs."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

import lab
from lab import analysis, catalogue
from lab.events import ClassMeans, LayerMetrics, RunFinished
from lab.runs import collapse_eval
from lab.runs.data import prepare_data

pytestmark = pytest.mark.filterwarnings("ignore::lab.metrics.DegenerateLayerWarning")

_CLASSIFIER = catalogue.metric_names(family="classifier_collapse")
_METRICS = ("nc1", "nc2_equiangularity", "nc2_cosine_std", "ncc_accuracy") + _CLASSIFIER
# fits its 5-image train sample within a few epochs on one CPU thread (no augmentation, constant lr)
_FITS = dict(backbone="mlp:depth=2,width=64", n_unseen=6, epochs=5, lr_schedule="constant", batch_size=32,
             augment=False, lr=3e-3, train_sample_per_class=5, metrics=_METRICS)


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    from lab.config import RunConfig
    from tests.fixtures.configs import TINY

    store = lab.RunStore(tmp_path_factory.mktemp("runs"))
    cfg = RunConfig(**{**TINY, **_FITS})
    events = list(lab.run(cfg, store=store))
    assert isinstance(events[-1], RunFinished), getattr(events[-1], "message", events[-1])
    return cfg, store, events


def _metric_rows(events, split):
    return [e for e in events if isinstance(e, LayerMetrics) and e.split == split]


def test_train_split_has_the_collapse_family_at_every_layer(finished):
    cfg, store, events = finished
    layers = events[0].layers
    names = [layer["name"] for layer in layers]
    rows = store.load(events[-1].run_id).metrics
    train = rows[rows["split"] == "train"]
    for epoch in range(cfg.n_epochs + 1):
        for layer in names:
            got = set(train[(train["epoch"] == epoch) & (train["layer"] == layer)]["metric"])
            assert set(cfg.collapse_metrics) <= got, (epoch, layer, got)
    assert len(_metric_rows(events, "train")) >= (cfg.n_epochs + 1) * len(names)


def test_classifier_rows_at_the_head_input_on_train_and_seen(finished):
    cfg, store, events = finished
    rows = store.load(events[-1].run_id).metrics
    head = rows[rows["metric"].isin(catalogue.metric_names(family="classifier_collapse"))]
    assert set(head["layer"]) == {catalogue.HEAD_LAYER}
    assert set(head["split"]) == {"train", "seen"}
    per_epoch = head.groupby(["split", "epoch"])["metric"].nunique()
    assert (per_epoch == len(_CLASSIFIER)).all() and len(per_epoch) == 2 * (cfg.n_epochs + 1)
    # the seen held-out accuracy of the head is the training rows' heldout_accuracy
    training = store.load(events[-1].run_id).training.set_index("epoch")
    seen = head[(head["split"] == "seen") & (head["metric"] == "head_accuracy")].set_index("epoch")["value"]
    np.testing.assert_allclose(seen.sort_index().to_numpy(), training["heldout_accuracy"].sort_index().to_numpy())


def test_class_means_events_for_every_layer_on_train_and_unseen_and_stored(finished):
    cfg, store, events = finished
    names = [layer["name"] for layer in events[0].layers]
    means = [e for e in events if isinstance(e, ClassMeans)]
    keys = {(e.epoch, e.layer, e.split) for e in means}
    assert keys == {(epoch, layer, split) for epoch in range(cfg.n_epochs + 1) for layer in names
                    for split in ("train", "unseen")}
    assert {e.split for e in means} == set(catalogue.class_mean_splits())   # what the split table says is recorded
    seen, unseen = events[0].seen, events[0].unseen
    for e in means:
        assert e.classes == (seen if e.split == "train" else unseen)
        assert e.gram.shape == (len(e.classes),) * 2 and np.allclose(e.gram, e.gram.T)
        assert abs(e.gram.sum(axis=1)).max() < 1e-6 * max(1.0, float(np.abs(e.gram).max()))   # centred means
    record = store.load(events[-1].run_id)
    stored = record.class_means
    assert record.class_means_problem is None and len(stored) == len(means)
    last = means[-1]
    row = stored[(stored["epoch"] == last.epoch) & (stored["layer"] == last.layer) & (stored["split"] == last.split)]
    np.testing.assert_array_equal(row["gram"].iloc[0], last.gram)
    assert row["classes"].iloc[0] == last.classes
    # the simplex deviation is the equiangularity of the same means
    train = [e for e in means if e.split == "train" and e.epoch == cfg.n_epochs]
    rows = record.metrics
    for e in train:
        value = rows[(rows["epoch"] == e.epoch) & (rows["layer"] == e.layer) & (rows["split"] == "train")
                     & (rows["metric"] == "nc2_equiangularity")]["value"].iloc[0]
        assert analysis.simplex(e.gram)["deviation"] == pytest.approx(value, rel=1e-9, abs=1e-12)


def test_terminal_phase_is_in_the_summary_and_is_the_first_perfect_epoch(finished):
    cfg, store, events = finished
    record = store.load(events[-1].run_id)
    rows = record.metrics
    acc = rows[(rows["metric"] == "head_accuracy") & (rows["split"] == "train")].set_index("epoch")["value"]
    perfect = sorted(int(e) for e, v in acc.items() if v == 1.0)
    assert perfect, "the run should fit its train sample (the fixture's settings)"
    assert analysis.terminal_phase(rows) == {0: perfect[0]}
    # the summary keeps the seeds as JSON keys (strings): the engine's, meta.json's and the record's agree
    assert events[-1].summary["terminal_phase"] == {"0": perfect[0]}
    assert record.meta["summary"]["terminal_phase"] == {"0": perfect[0]} == record.summary()["terminal_phase"]


def test_an_old_run_without_class_means_loads_with_a_reason(finished, tmp_path):
    _, store, events = finished
    source = store.load(events[-1].run_id).path
    copy = lab.RunStore(tmp_path / "old")
    shutil.copytree(source, copy.root / source.name)
    shutil.rmtree(copy.root / source.name / "arrays" / "class_means")
    record = copy.load(source.name)
    assert record.class_means.empty and list(record.class_means.columns) == ["seed", "epoch", "layer", "split",
                                                                              "classes", "gram"]
    assert "has no class means: it was recorded without them; run it again" in record.class_means_problem
    assert len(record.metrics) and record.summary()["status"] == "finished"


def test_strategy_none_has_train_rows_and_no_classifier_rows(tiny_config):
    cfg = tiny_config(strategy="none", epochs=0, metrics=_METRICS, train_sample_per_class=4)
    events = list(lab.run(cfg, store=False))
    assert isinstance(events[-1], RunFinished), getattr(events[-1], "message", events[-1])
    rows = [e for e in events if isinstance(e, LayerMetrics)]
    assert not any(set(e.values) & set(catalogue.metric_names(family="classifier_collapse")) for e in rows)
    assert {e.layer for e in rows if e.split == "train"} == {layer["name"] for layer in events[0].layers}
    assert events[-1].summary["terminal_phase"] == {}


def test_train_sample_off_measures_no_train_split(tiny_config):
    events = list(lab.run(tiny_config(epochs=1, train_sample_per_class=0), store=False))
    assert isinstance(events[-1], RunFinished)
    assert not [e for e in events if getattr(e, "split", None) == "train"]
    assert {e.split for e in events if isinstance(e, ClassMeans)} == {"unseen"}


def test_label_noise_uses_the_corrupted_labels_for_the_train_split(tiny_config, monkeypatch):
    from lab import finetune

    seen_labels, states = [], []
    real_train, real_measurable = collapse_eval.TrainCollapse.train, collapse_eval.TrainCollapse._measurable

    def train(self, state, epoch):
        states.append(state)
        return real_train(self, state, epoch)

    def measurable(self, y):
        seen_labels.append(y.cpu().numpy().copy())
        return real_measurable(self, y)

    monkeypatch.setattr(collapse_eval.TrainCollapse, "train", train)
    monkeypatch.setattr(collapse_eval.TrainCollapse, "_measurable", measurable)
    cfg = tiny_config(epochs=1, label_noise=0.5, train_sample_per_class=8)
    events = list(lab.run(cfg, store=False))
    assert isinstance(events[-1], RunFinished), getattr(events[-1], "message", events[-1])
    data = prepare_data(cfg)
    clean = np.asarray(data.train.targets)
    noisy, corrupted = finetune.corrupt_labels(clean, cfg.label_noise, len(data.split.seen), seed=cfg.seeds[0])
    np.testing.assert_array_equal(states[0].train_labels, noisy)            # the targets the network trains on
    expected = noisy[data.train_sample_indices]
    assert len(seen_labels) == cfg.n_epochs + 1
    for y in seen_labels:
        np.testing.assert_array_equal(y, expected)
    assert (expected != clean[data.train_sample_indices]).any()            # the noise reached the sample
    np.testing.assert_array_equal(data.train_sample.targets, clean[data.train_sample_indices])


def test_the_train_sample_is_fixed_and_a_small_class_gives_all_its_images(tiny_config):
    from lab.runs.data import train_sample

    data = prepare_data(tiny_config(train_sample_per_class=7))
    again = prepare_data(tiny_config(train_sample_per_class=7, seeds=(3,)))
    np.testing.assert_array_equal(data.train_sample_indices, again.train_sample_indices)     # split seed only
    counts = np.bincount(data.train_sample.targets, minlength=len(data.split.seen))
    assert (counts == 7).all()
    for i, j in enumerate(data.train_sample_indices[:5]):
        np.testing.assert_array_equal(data.train_sample[i][0].numpy(), data.train[int(j)][0].numpy())
    # a class with fewer training images than asked: all of them, no error
    small = data.train.sample_per_class(3, seed=0)
    sample, indices = train_sample(small, 10, seed=0)
    assert len(sample) == len(small) and (np.bincount(sample.targets) == 3).all()
    assert train_sample(small, 0, seed=0) == (None, None)
    assert prepare_data(tiny_config(train_sample_per_class=0)).train_sample is None
