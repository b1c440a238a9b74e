"""lab.analysis.bootstrap: resamples checked against scikit-learn per resample, coverage by simulation,
best-layer shares, and what lab.analysis.generalization makes of them (old runs without them included)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import normalized_mutual_info_score

from lab import analysis
from lab.analysis.intervals import nmi_from_contingency, resample_counts


def _two_layers(n_per_class=40, seed=0):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(3), n_per_class)
    good = np.where(rng.random(y.size) < 0.8, y, rng.integers(0, 3, y.size))      # clusters of a good layer
    poor = np.where(rng.random(y.size) < 0.4, y, rng.integers(0, 3, y.size))
    return y, {"a": {"nmi": poor, "knn_accuracy": rng.random(y.size) < 0.5},
               "b": {"nmi": good, "knn_accuracy": rng.random(y.size) < 0.9}}


def test_resample_counts_keep_every_class_size_and_are_seeded():
    y = np.array([5, 5, 5, 7, 7, 9, 9, 9, 9])
    counts = resample_counts(y, 50, seed=3)
    assert counts.shape == (50, 9) and (counts.sum(axis=1) == 9).all()
    for label in (5, 7, 9):
        assert (counts[:, y == label].sum(axis=1) == (y == label).sum()).all()
    assert (counts == resample_counts(y, 50, seed=3)).all() and (counts != resample_counts(y, 50, seed=4)).any()
    with pytest.raises(ValueError, match="at least 2 images in every class; class 7 has 1"):
        resample_counts(np.array([5, 5, 7]), 10)
    with pytest.raises(ValueError, match="n_resamples must be a positive integer; got 0"):
        resample_counts(y, 0)


def test_nmi_of_a_contingency_table_is_scikit_learns():
    rng = np.random.default_rng(1)
    for _ in range(20):
        y, c = rng.integers(0, 4, 60), rng.integers(0, 3, 60)
        table = np.zeros((4, 3))
        np.add.at(table, (y, c), 1)
        assert nmi_from_contingency(table) == pytest.approx(normalized_mutual_info_score(y, c), abs=1e-12)
    assert nmi_from_contingency(np.array([[5.0, 0], [0, 0]])) == 1.0            # one class, one cluster
    assert nmi_from_contingency(np.array([[5.0, 0], [5, 0]])) == 0.0            # one cluster


def test_intervals_and_shares_are_those_of_the_resamples_recomputed_one_by_one():
    y, samples = _two_layers()
    table = analysis.bootstrap(samples, y, layers=["a", "b"], n_resamples=60, seed=7)
    counts = resample_counts(y, 60, seed=7)
    per = {}
    for layer in "ab":
        nmis, accs = [], []
        for row in counts:
            pick = np.repeat(np.arange(y.size), row)                             # the resample's images
            nmis.append(normalized_mutual_info_score(y[pick], samples[layer]["nmi"][pick]))
            accs.append(samples[layer]["knn_accuracy"][pick].mean())
        per[layer] = {"nmi": np.array(nmis), "knn_accuracy": np.array(accs)}
    for row in table.itertuples():
        draws = per[row.layer][row.metric]
        assert (row.low, row.high) == pytest.approx(tuple(np.percentile(draws, [2.5, 97.5])), abs=1e-10)
        other = per["b" if row.layer == "a" else "a"][row.metric]
        wins = draws >= other if row.layer == "b" else draws > other           # ties go to the deeper b
        assert row.best_share == pytest.approx(wins.mean())
    full = table.set_index(["layer", "metric"])["value"]
    assert full["b", "nmi"] == pytest.approx(normalized_mutual_info_score(y, samples["b"]["nmi"]))


def test_the_interval_covers_the_true_accuracy_about_95_percent_of_the_time():
    rng = np.random.default_rng(2)
    p = np.array([0.6, 0.75, 0.9])                                               # per-class vote accuracy
    y = np.repeat(np.arange(3), 100)
    hits = []
    for trial in range(300):
        correct = rng.random(y.size) < p[y]
        row = analysis.bootstrap({"L": {"knn_accuracy": correct}}, y, seed=trial).iloc[0]
        hits.append(row.low <= p.mean() <= row.high)
    assert 0.90 <= np.mean(hits) <= 0.99


def test_the_nmi_interval_covers_the_population_nmi_given_the_fitted_partition():
    rng = np.random.default_rng(3)
    rows = np.array([[0.8, 0.1, 0.1], [0.15, 0.7, 0.15], [0.1, 0.2, 0.7]])      # p(cluster | class)
    truth = float(nmi_from_contingency(rows / 3))                                # equal class sizes
    y = np.repeat(np.arange(3), 150)
    hits = []
    for trial in range(200):
        clusters = np.array([rng.choice(3, p=rows[k]) for k in y])
        row = analysis.bootstrap({"L": {"nmi": clusters}}, y, seed=trial).iloc[0]
        hits.append(row.low <= truth <= row.high)
    # the plug-in NMI is biased upwards by O(1/n), which the percentile interval does not remove
    assert 0.85 <= np.mean(hits) <= 0.99


def test_ties_go_to_the_deeper_layer_aliases_to_their_deeper_tap_and_undefined_layers_are_left_out():
    y, samples = _two_layers()
    same = {"x": samples["b"], "y": samples["b"], "z": {}}
    share = analysis.bootstrap(same, y, layers=["x", "y", "z"], n_resamples=30).set_index(["layer", "metric"])
    assert share.loc[("y", "nmi"), "best_share"] == 1.0 and share.loc[("x", "nmi"), "best_share"] == 0.0
    assert "z" not in share.index.get_level_values("layer")
    folded = analysis.bootstrap({"deep": samples["a"], "tap": samples["b"]}, y, layers=["tap", "deep"],
                                aliases={"tap": "deep"}, n_resamples=30).set_index(["layer", "metric"])
    assert folded.loc[("deep", "nmi"), "best_share"] == 1.0                      # the tap's wins, as g reports them
    with pytest.raises(ValueError, match="one value per image \\(120\\); got shape \\(119,\\)"):
        analysis.bootstrap({"a": {"nmi": samples["a"]["nmi"][:-1]}}, y)


def _long(values_by_seed, confidence=True):
    """A run's long table: nmi per (seed, layer) at epoch 0, and the bootstrap rows."""
    rows = []
    for seed, (values, lows, highs, shares) in values_by_seed.items():
        for i, layer in enumerate(["a", "b"]):
            rows.append((seed, 0, layer, "unseen", "nmi", values[i]))
            if confidence:
                rows += [(seed, 0, layer, "unseen", "nmi_low", lows[i]), (seed, 0, layer, "unseen", "nmi_high", highs[i]),
                         (seed, 0, layer, "unseen", "nmi_best_share", shares[i])]
    return pd.DataFrame(rows, columns=["seed", "epoch", "layer", "split", "metric", "value"])


def test_generalization_carries_the_best_layers_interval_and_pools_seeds():
    m = _long({0: ([0.5, 0.7], [0.4, 0.6], [0.6, 0.8], [0.1, 0.9]),
               1: ([0.5, 0.8], [0.4, 0.7], [0.6, 0.9], [0.3, 0.7])})
    one = analysis.latest_generalization(m[m["seed"] == 0], layers=["a", "b"])
    assert (one["layer"], one["g_low"], one["g_high"], one["best_share"]) == ("b", 0.6, 0.8, 0.9)
    both = analysis.latest_generalization(m, layers=["a", "b"])
    assert both["g"] == pytest.approx(0.75) and both["best_share"] == pytest.approx(0.8)   # all resamples pooled
    assert (both["g_low"], both["g_high"]) == (pytest.approx(0.65), pytest.approx(0.85))
    curve = analysis.layer_curve(m, layers=["a", "b"])
    assert curve["low"].tolist() == pytest.approx([0.4, 0.65]) and curve["high"].tolist() == pytest.approx([0.6, 0.85])
    summary = analysis.run_summary(m, layers=["a", "b"])
    assert summary["best_share"] == both["best_share"]


def test_runs_recorded_before_the_bootstrap_still_give_g_with_no_interval():
    old = _long({0: ([0.5, 0.7], None, None, None)}, confidence=False)
    gen = analysis.generalization(old, layers=["a", "b"])
    assert gen.loc[0, "g"] == 0.7 and gen[["g_low", "g_high", "best_share"]].isna().all(axis=None)
    assert analysis.latest_generalization(old, layers=["a", "b"])["best_share"] is None
    assert analysis.layer_curve(old, layers=["a", "b"])[["low", "high"]].isna().all(axis=None)
