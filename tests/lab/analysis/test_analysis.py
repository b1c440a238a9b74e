"""lab.analysis: seed aggregation, g and its best layer, layer order, accuracy vs g.

References are written out with numpy / scipy directly, on tables small enough to check by hand.
"""
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from lab import analysis


def _table(values: dict, *, metric="nmi", split="unseen") -> pd.DataFrame:
    """values: {(seed, epoch, layer): value}"""
    rows = [{"seed": s, "epoch": e, "layer": l, "split": split, "metric": metric, "value": v}
            for (s, e, l), v in values.items()]
    return pd.DataFrame(rows)


LAYERS = ["stem", "b1", "b2", "pre_logits"]


def test_aggregate_seeds_matches_numpy_with_ddof_1_and_skips_nan():
    rng = np.random.default_rng(0)
    vals = rng.random((3, 4))
    table = _table({(s, 0, l): vals[s, i] for s in range(3) for i, l in enumerate(LAYERS)})
    table.loc[(table["seed"] == 2) & (table["layer"] == "b2"), "value"] = np.nan
    agg = analysis.aggregate_seeds(table).set_index("layer")
    for i, layer in enumerate(LAYERS):
        col = vals[:, i] if layer != "b2" else vals[:2, i]
        assert agg.loc[layer, "mean"] == pytest.approx(np.mean(col), abs=0)
        assert agg.loc[layer, "std"] == pytest.approx(np.std(col, ddof=1), rel=1e-12)
        assert agg.loc[layer, "n"] == len(col)


def test_one_seed_has_no_std():
    agg = analysis.aggregate_seeds(_table({(0, 0, "a"): 0.3}))
    assert agg["n"].iloc[0] == 1 and np.isnan(agg["std"].iloc[0])


def test_g_is_the_max_of_the_seed_mean_curve_per_epoch():
    rng = np.random.default_rng(1)
    vals = rng.random((2, 3, 4))          # seed, epoch, layer
    table = _table({(s, e, l): vals[s, e, i] for s in range(2) for e in range(3) for i, l in enumerate(LAYERS)})
    gen = analysis.generalization(table, layers=LAYERS)
    assert list(gen["epoch"]) == [0, 1, 2]
    for e in range(3):
        curve = vals[:, e, :].mean(axis=0)
        best = int(np.argmax(curve))
        row = gen.iloc[e]
        assert row["layer"] == LAYERS[best]
        assert row["g"] == pytest.approx(curve[best], abs=1e-15)
        assert row["g_std"] == pytest.approx(np.std(vals[:, e, best], ddof=1), rel=1e-12)
        assert row["n_seeds"] == 2
        assert bool(row["is_final"]) == (best == 3)


def test_exact_ties_go_to_the_deeper_layer():
    table = _table({(0, 0, "stem"): 0.1, (0, 0, "b1"): 0.7, (0, 0, "b2"): 0.7, (0, 0, "pre_logits"): 0.2})
    assert analysis.generalization(table, layers=LAYERS)["layer"].iloc[0] == "b2"


def test_alias_reports_the_identical_deeper_tap_and_marks_it_final():
    # b2's pooled features are pre_logits (ResNet's last block): floating-point noise made b2 win.
    table = _table({(0, 0, "stem"): 0.1, (0, 0, "b1"): 0.3, (0, 0, "b2"): 0.5000001, (0, 0, "pre_logits"): 0.5})
    plain = analysis.generalization(table, layers=LAYERS).iloc[0]
    assert plain["layer"] == "b2" and not plain["is_final"]
    row = analysis.generalization(table, layers=LAYERS, aliases={"b2": "pre_logits"}).iloc[0]
    assert row["layer"] == "pre_logits" and row["is_final"]
    assert row["g"] == pytest.approx(0.5000001)


def test_incomplete_evaluations_do_not_count():
    values = {(0, 0, l): v for l, v in zip(LAYERS, [0.1, 0.2, 0.3, 0.4])}
    values.update({(0, 1, "stem"): 0.9})                  # epoch 1 interrupted after one layer
    gen = analysis.generalization(_table(values), layers=LAYERS)
    assert list(gen["epoch"]) == [0]
    summary = analysis.run_summary(_table(values), layers=LAYERS)
    assert summary["epoch"] == 0 and summary["best_layer"] == "pre_logits" and summary["g"] == pytest.approx(0.4)


def test_a_first_epoch_in_progress_has_no_g_yet():
    values = {(0, 0, "stem"): 0.9, (0, 0, "b1"): 0.2}          # b2 and pre_logits not measured yet
    assert analysis.generalization(_table(values), layers=LAYERS).empty
    assert analysis.run_summary(_table(values), layers=LAYERS)["g"] is None


def test_incomplete_seed_is_left_out_of_the_mean():
    values = {(s, 0, l): v + s for s in range(2) for l, v in zip(LAYERS, [0.1, 0.2, 0.3, 0.4])}
    del values[(1, 0, "pre_logits")]
    row = analysis.generalization(_table(values), layers=LAYERS).iloc[0]
    assert row["n_seeds"] == 1 and row["g"] == pytest.approx(0.4)


def test_nan_layers_are_measured_but_never_best():
    values = {(0, 0, l): v for l, v in zip(LAYERS, [np.nan, 0.2, 0.3, np.nan])}
    row = analysis.generalization(_table(values), layers=LAYERS).iloc[0]
    assert row["layer"] == "b2"


def test_layer_order_keeps_listed_order_then_unknown_layers():
    table = _table({(0, 0, "b1"): 0.1, (0, 0, "extra"): 0.2, (0, 0, "stem"): 0.3})
    assert analysis.layer_order([{"name": "stem"}, {"name": "b1"}, {"name": "b2"}], table) == ["stem", "b1", "extra"]
    assert analysis.layer_order(None, table) == ["b1", "extra", "stem"]


def test_layer_curve_relative_depth_and_last_complete_epoch():
    values = {(s, e, l): 0.1 * i + e + s for s in range(2) for e in range(2) for i, l in enumerate(LAYERS)}
    values[(0, 2, "stem")] = 5.0                         # incomplete epoch 2
    curve = analysis.layer_curve(_table(values), layers=LAYERS)
    assert list(curve["layer"]) == LAYERS
    assert list(curve["depth"]) == pytest.approx([0, 1 / 3, 2 / 3, 1])
    assert curve["mean"].iloc[0] == pytest.approx(1.5)  # epoch 1, mean of seeds 0 and 1


def test_heldout_accuracy_uses_the_last_epoch_with_a_value():
    training = pd.DataFrame({"seed": [0, 1, 0, 1, 0], "epoch": [1, 1, 2, 2, 3],
                             "heldout_accuracy": [0.5, 0.6, 0.7, 0.9, np.nan]})
    acc, epoch = analysis.heldout_accuracy(training)
    assert epoch == 2 and acc == pytest.approx(0.8)


def test_accuracy_vs_g_matches_scipy_and_bootstrap_brackets_it():
    rng = np.random.default_rng(3)
    table = pd.DataFrame({"heldout_accuracy": rng.random(7), "g": rng.random(7)})
    out = analysis.accuracy_vs_g(table, n_boot=300)
    assert out["n"] == 7
    assert out["spearman"] == pytest.approx(stats.spearmanr(table["heldout_accuracy"], table["g"]).statistic)
    assert out["kendall"] == pytest.approx(stats.kendalltau(table["heldout_accuracy"], table["g"]).statistic)
    for key in ("spearman", "kendall"):
        lo, hi = out[f"{key}_ci"]
        assert -1 <= lo <= hi <= 1


def test_accuracy_vs_g_refuses_to_conclude_from_too_few_runs():
    out = analysis.accuracy_vs_g(pd.DataFrame({"heldout_accuracy": [0.9, 0.8], "g": [0.5, 0.6]}))
    assert out["n"] == 2 and np.isnan(out["spearman"]) and np.isnan(out["kendall"])
