"""Seeds as replicates: the interval of a mean over seeds against scipy's one-sample t test."""
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from lab.analysis import aggregate_seeds
from lab.analysis.replicates import replicate_interval, with_replicate_interval


@pytest.mark.parametrize("values", [[0.5, 0.6, 0.7], [0.1, 0.9], [0.3, 0.31, 0.29, 0.5, 0.2]])
def test_interval_is_the_one_sample_t_interval(values):
    row = replicate_interval(values)
    ref = stats.ttest_1samp(values, 0.0).confidence_interval(0.95)
    assert row["n"] == len(values)
    assert row["mean"] == pytest.approx(np.mean(values))
    assert row["std"] == pytest.approx(np.std(values, ddof=1))
    assert (row["low"], row["high"]) == pytest.approx((ref.low, ref.high))


def test_one_seed_or_none_has_no_interval_and_non_finite_values_are_left_out():
    one = replicate_interval([0.4, np.nan])
    assert one["n"] == 1 and one["mean"] == 0.4 and np.isnan(one["low"]) and np.isnan(one["high"])
    none = replicate_interval([])
    assert none["n"] == 0 and np.isnan(none["mean"])
    with pytest.raises(ValueError, match="between 0 and 1"):
        replicate_interval([1, 2], level=95)


def test_frame_of_seed_means_gets_the_same_interval_per_row():
    rng = np.random.default_rng(0)
    rows = [{"seed": s, "epoch": 0, "layer": layer, "split": "unseen", "metric": "nmi", "value": rng.random()}
            for layer in ("a", "b") for s in range(3)] + [
           {"seed": 0, "epoch": 0, "layer": "c", "split": "unseen", "metric": "nmi", "value": 0.5}]
    metrics = pd.DataFrame(rows)
    out = with_replicate_interval(aggregate_seeds(metrics, by=("layer",))).set_index("layer")
    for layer in ("a", "b"):
        ref = replicate_interval(metrics.loc[metrics["layer"] == layer, "value"])
        assert (out.loc[layer, "seed_low"], out.loc[layer, "seed_high"]) == pytest.approx((ref["low"], ref["high"]))
    assert np.isnan(out.loc["c", "seed_low"])
