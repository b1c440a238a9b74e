"""A study's summary epoch (last, best by the unseen g, or a given one) on hand-made tables, and the group
functions read at it; intervals over seeds checked against scipy's one-sample t test."""
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from lab import analysis

LAYERS = ["a", "b", "c"]
# unseen NMI per (epoch, layer) of one seed: g = max over layers = 0.5, 0.9, 0.9, 0.7 at epochs 0..3
NMI = {0: [0.1, 0.5, 0.2], 1: [0.3, 0.9, 0.4], 2: [0.9, 0.2, 0.1], 3: [0.2, 0.3, 0.7]}


def _run(nmi=NMI, seed=0, shift=0.0, nc1=None):
    rows = [{"seed": seed, "epoch": e, "layer": layer, "split": "unseen", "metric": "nmi", "value": v + shift}
            for e, values in nmi.items() for layer, v in zip(LAYERS, values)]
    rows += [{"seed": seed, "epoch": e, "layer": layer, "split": "seen", "metric": "nc1",
              "value": (nc1 or 1.0) * (e + 1)} for e in nmi for layer in LAYERS]
    return pd.DataFrame(rows)


def test_summary_epoch_last_best_with_ties_to_the_earlier_and_given():
    run = _run()
    assert analysis.summary_epoch(run, "last", layers=LAYERS) == 3
    assert analysis.summary_epoch(run, "best", layers=LAYERS) == 1          # epochs 1 and 2 tie at 0.9
    assert analysis.summary_epoch(run, 2, layers=LAYERS) == 2
    # an epoch missing one layer is not complete: neither last nor givable
    partial = run[~((run["epoch"] == 3) & (run["layer"] == "c"))]
    assert analysis.summary_epoch(partial, "last", layers=LAYERS) == 2
    with pytest.raises(ValueError, match=r"run 'r1' has no complete evaluation at epoch 3; it has epochs 0, 1, 2\."):
        analysis.summary_epoch(partial, 3, layers=LAYERS, run="r1")
    assert analysis.summary_epoch(run.iloc[:0], "best", layers=LAYERS) is None


@pytest.mark.parametrize("bad", ["first", -1, 1.5, True, None])
def test_a_bad_summary_says_what_it_takes(bad):
    with pytest.raises(ValueError, match=r"summary must be 'last' .* 'best' .* or an epoch .* Got"):
        analysis.check_summary(bad)


def test_summary_labels():
    assert [analysis.summary_label(s) for s in ("last", "best", 4)] == [
        "last epoch", "best epoch by unseen g", "epoch 4"]


def test_group_functions_read_each_run_at_its_summary_epoch():
    # run 2 peaks at epoch 3, run 1 at epoch 1: "best" pools run 1's epoch 1 with run 2's epoch 3
    other = {0: [0.1, 0.1, 0.1], 1: [0.2, 0.2, 0.2], 2: [0.3, 0.3, 0.3], 3: [0.4, 0.8, 0.6]}
    groups = {"g": [_run(), _run(other)]}
    layers = {"g": LAYERS}
    default = analysis.group_curves(groups, layers)
    assert default.equals(analysis.group_curves(groups, layers, summary="last"))
    at_last = default.set_index("layer")["mean"]
    np.testing.assert_allclose(at_last[LAYERS], np.mean([NMI[3], other[3]], axis=0))
    best = analysis.group_curves(groups, layers, summary="best").set_index("layer")
    np.testing.assert_allclose(best.loc[LAYERS, "mean"], np.mean([NMI[1], other[3]], axis=0))
    assert (best["n"] == 2).all() and best.loc["b", "best"]
    given = analysis.group_curves(groups, layers, summary=2).set_index("layer")
    np.testing.assert_allclose(given.loc[LAYERS, "mean"], np.mean([NMI[2], other[2]], axis=0))
    # the 95 % interval over seeds is scipy's one-sample t interval of the two runs' values
    for i, layer in enumerate(LAYERS):
        ref = stats.ttest_1samp([NMI[1][i], other[3][i]], 0.0).confidence_interval(0.95)
        assert (best.loc[layer, "seed_low"], best.loc[layer, "seed_high"]) == pytest.approx((ref.low, ref.high))
    nc1 = analysis.group_curves(groups, layers, metric="nc1", split="seen", summary="best")
    np.testing.assert_allclose(nc1["mean"], 1.0 * np.mean([2, 4]))             # epoch 1 and epoch 3: nc1 = e + 1
    gen = analysis.group_generalization(groups, {"g": [None, None]}, layers, summary="best").iloc[0]
    assert gen["g"] == pytest.approx(np.mean([0.9, 0.8])) and gen["layer"] == "b" and gen["n_seeds"] == 2
    ref = stats.ttest_1samp([0.9, 0.8], 0.0).confidence_interval(0.95)
    assert (gen["g_seed_low"], gen["g_seed_high"]) == pytest.approx((ref.low, ref.high))


def test_heldout_accuracy_is_read_at_the_runs_summary_epoch_with_its_interval():
    runs = [_run(), _run(shift=0.01)]
    trainings = [pd.DataFrame({"seed": 0, "epoch": [1, 2, 3], "heldout_accuracy": [0.5 + d, 0.6 + d, 0.7 + d]})
                 for d in (0.0, 0.1)]
    gen = analysis.group_generalization({"g": runs}, {"g": trainings}, {"g": LAYERS}, summary=2).iloc[0]
    assert gen["heldout_accuracy"] == pytest.approx(0.65) and gen["heldout_n"] == 2
    ref = stats.ttest_1samp([0.6, 0.7], 0.0).confidence_interval(0.95)
    assert (gen["heldout_seed_low"], gen["heldout_seed_high"]) == pytest.approx((ref.low, ref.high))
    last = analysis.group_generalization({"g": runs}, {"g": trainings}, {"g": LAYERS}).iloc[0]
    assert last["heldout_accuracy"] == pytest.approx(0.75)


def test_at_summary_keeps_epoch_zero_and_labels_the_summary_rows_with_the_latest():
    runs = analysis.at_summary([_run(), _run()], [1, 3])
    assert [sorted(r["epoch"].unique()) for r in runs] == [[0, 3], [0, 3]]
    first = runs[0][(runs[0]["epoch"] == 3) & (runs[0]["metric"] == "nmi")]["value"].tolist()
    assert first == NMI[1]
    both_zero = analysis.at_summary([_run()], [0])
    assert sorted(both_zero[0]["epoch"].unique()) == [0] and len(both_zero[0]) == 6
    assert analysis.at_summary([_run()], [None]) == []
    with pytest.raises(ValueError, match="one epoch per run: got 2 runs and 1 epochs"):
        analysis.at_summary([_run(), _run()], [1])
