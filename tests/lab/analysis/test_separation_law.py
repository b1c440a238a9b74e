"""lab.analysis.separation_law against a plain numpy fit, its bad input, and D = K · NC1 (docs/METRICS.md)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lab import analysis

LAYERS = [f"fc{i}" for i in range(1, 7)]


def _table(values, *, layers=LAYERS, seed=0, epoch=0, split="train", metric="nc1") -> pd.DataFrame:
    """Long metrics rows of one evaluation, one value per layer, as RunRecord.metrics has them."""
    return pd.DataFrame({"seed": seed, "epoch": epoch, "layer": list(layers), "split": split, "metric": metric,
                         "value": np.asarray(values, dtype=float)})


def _only_row(law: pd.DataFrame) -> pd.Series:
    assert len(law) == 1, law
    return law.iloc[0]


@pytest.mark.parametrize("q", [0.5, 0.83, 1.4])
def test_exact_geometric_sequence_gives_its_ratio_and_r_of_one(q):
    row = _only_row(analysis.separation_law(_table(3.7 * q ** np.arange(6.0)), layers=LAYERS, aliases={}))
    assert row["ratio"] == pytest.approx(q, rel=1e-9)
    assert row["slope"] == pytest.approx(np.log10(q), rel=1e-9)
    assert row["r"] == pytest.approx(-1.0 if q < 1 else 1.0, abs=1e-9)
    assert row["n_layers"] == 6 and row["reason"] is None


def test_noisy_sequence_gives_numpys_polyfit_and_corrcoef():
    rng = np.random.default_rng(4)
    values = 10.0 ** (0.5 - 0.15 * np.arange(6) + rng.normal(scale=0.08, size=6))
    row = _only_row(analysis.separation_law(_table(values), layers=LAYERS, aliases={}))
    x, y = np.arange(6.0), np.log10(values)
    slope, _ = np.polyfit(x, y, 1)
    assert row["slope"] == pytest.approx(slope, rel=1e-9)
    assert row["ratio"] == pytest.approx(10.0 ** slope, rel=1e-9)
    assert row["r"] == pytest.approx(np.corrcoef(x, y)[0, 1], rel=1e-9)
    assert -1.0 < row["r"] < -0.9                      # noisy, still a law


def test_layers_follow_the_runs_order_not_the_tables():
    values = 2.0 * 0.6 ** np.arange(6.0)
    shuffled = _table(values).iloc[[3, 0, 5, 1, 4, 2]]
    row = _only_row(analysis.separation_law(shuffled, layers=[{"name": n} for n in LAYERS], aliases={}))
    assert row["ratio"] == pytest.approx(0.6, rel=1e-9) and row["r"] == pytest.approx(-1.0, abs=1e-9)


def test_identical_taps_count_once_as_the_deeper_tap():
    layers = [*LAYERS, "pre_logits"]
    values = [*(0.7 ** np.arange(6.0)), 0.7 ** 5]        # fc6 is pre_logits: one tensor, two names
    aliases = {"fc6": "pre_logits"}
    row = _only_row(analysis.separation_law(_table(values, layers=layers), layers=layers, aliases=aliases))
    assert row["n_layers"] == 6
    assert row["ratio"] == pytest.approx(0.7, rel=1e-9) and row["r"] == pytest.approx(-1.0, abs=1e-9)
    twice = _only_row(analysis.separation_law(_table(values, layers=layers), layers=layers, aliases={}))
    assert twice["n_layers"] == 7 and twice["r"] > -1.0 + 1e-6    # counted twice, the line bends


def test_a_run_record_brings_its_layers_and_identical_taps():
    from types import SimpleNamespace

    layers = [*LAYERS, "pre_logits"]
    values = [*(0.7 ** np.arange(6.0)), 0.7 ** 5]
    record = SimpleNamespace(run_id="r", metrics=_table(values, layers=layers),
                             meta={"layers": [{"name": n} for n in layers], "layer_aliases": {"fc6": "pre_logits"}})
    row = _only_row(analysis.separation_law(record))
    assert row["n_layers"] == 6 and row["ratio"] == pytest.approx(0.7, rel=1e-9)


@pytest.mark.parametrize("bad", [np.nan, np.inf, 0.0, -1.0])
def test_a_layer_without_a_finite_positive_nc1_is_left_out_and_named(bad):
    values = 0.5 ** np.arange(6.0)
    values[2] = bad
    row = _only_row(analysis.separation_law(_table(values), layers=LAYERS, aliases={}))
    assert row["n_layers"] == 5
    assert "fc3" in row["reason"] and "left out" in row["reason"]
    # the others keep their depth: still exactly the sequence 0.5 ** l
    assert row["ratio"] == pytest.approx(0.5, rel=1e-9) and row["r"] == pytest.approx(-1.0, abs=1e-9)


def test_two_layers_are_no_law():
    row = _only_row(analysis.separation_law(_table([1.0, 0.5], layers=["a", "b"]), layers=["a", "b"], aliases={}))
    assert np.isnan(row["slope"]) and np.isnan(row["ratio"]) and np.isnan(row["r"])
    assert row["n_layers"] == 2 and "at least 3" in row["reason"] and "\n" not in row["reason"]


def test_too_few_finite_layers_after_leaving_some_out_is_no_law():
    row = _only_row(analysis.separation_law(_table([1.0, np.nan, 0.5, np.inf], layers=LAYERS[:4]),
                                            layers=LAYERS[:4], aliases={}))
    assert np.isnan(row["ratio"]) and row["n_layers"] == 2
    assert "fc2" in row["reason"] and "fc4" in row["reason"] and "at least 3" in row["reason"]


def test_identical_taps_do_not_make_up_the_third_layer():
    layers = ["a", "b", "pre_logits"]
    law = analysis.separation_law(_table([1.0, 0.5, 0.5], layers=layers), layers=layers,
                                  aliases={"b": "pre_logits"})
    assert np.isnan(_only_row(law)["r"]) and _only_row(law)["n_layers"] == 2


def test_a_split_the_run_lacks_gives_no_rows():
    old = pd.concat([_table(0.5 ** np.arange(6.0), split="seen"), _table(0.9 ** np.arange(6.0), split="unseen")])
    law = analysis.separation_law(old, layers=LAYERS, aliases={})
    assert list(law["split"]) == ["seen", "unseen"]
    assert analysis.separation_law(old, split="train", layers=LAYERS, aliases={}).empty
    assert list(analysis.separation_law(old, split=["train", "unseen"], layers=LAYERS, aliases={})["split"]) == ["unseen"]
    assert list(law.columns) == analysis.SEPARATION_LAW_COLUMNS


def test_one_row_per_seed_epoch_and_split_and_only_nc1_is_read():
    parts = [_table(q ** np.arange(6.0), seed=s, epoch=e, split=sp)
             for s, q in ((0, 0.5), (1, 0.6)) for e in (0, 2) for sp in ("unseen", "train")]
    parts.append(_table(np.ones(6), metric="nmi"))
    law = analysis.separation_law(pd.concat(parts), layers=LAYERS, aliases={})
    assert list(zip(law["seed"], law["epoch"], law["split"])) == [
        (s, e, sp) for s in (0, 1) for e in (0, 2) for sp in ("train", "unseen")]
    assert np.allclose(law["ratio"], np.repeat([0.5, 0.6], 4))
    one = analysis.separation_law(pd.concat(parts), seed=1, split="train", layers=LAYERS, aliases={})
    assert list(one["seed"]) == [1, 1] and np.allclose(one["ratio"], 0.6)


def test_across_seeds_is_the_seed_aggregation_of_each_seeds_law():
    parts = [_table(q ** np.arange(6.0), seed=s) for s, q in enumerate((0.5, 0.6, 0.8))]
    parts.append(_table([1.0, 0.5], layers=["fc1", "fc2"], seed=3))        # no law: left out of the mean
    metrics = pd.concat(parts)
    per_seed = analysis.separation_law(metrics, layers=LAYERS, aliases={})
    row = _only_row(analysis.separation_law_across_seeds(metrics, layers=LAYERS, aliases={}))
    ratios = np.array([0.5, 0.6, 0.8])
    assert row["ratio"] == pytest.approx(ratios.mean(), rel=1e-9)
    assert row["ratio_std"] == pytest.approx(ratios.std(ddof=1), rel=1e-9)
    assert row["slope"] == pytest.approx(np.log10(ratios).mean(), rel=1e-9)
    assert row["r"] == pytest.approx(-1.0, abs=1e-9) and row["n_seeds"] == 3
    expected = analysis.aggregate_seeds(per_seed.melt(id_vars=["seed", "epoch", "split"], value_vars=["r"],
                                                      var_name="metric"), by=("epoch", "split", "metric"))
    assert row["r_std"] == pytest.approx(float(expected["std"].iloc[0]), abs=1e-12)
    # the table separation_law returned gives the same rows without fitting again (the collapse card's use)
    pd.testing.assert_frame_equal(analysis.law_across_seeds(per_seed),
                                  analysis.separation_law_across_seeds(metrics, layers=LAYERS, aliases={}))
    with pytest.raises(ValueError, match="already fitted; give split, layers and aliases to that call"):
        analysis.separation_law_across_seeds(per_seed, layers=LAYERS)


def test_points_are_the_fitted_values_and_the_line_is_numpys_polyfit():
    rng = np.random.default_rng(7)
    values = 10.0 ** (0.3 - 0.2 * np.arange(6) + rng.normal(scale=0.05, size=6))
    values[2] = np.nan
    table = _table(values, epoch=3)
    points = analysis.separation_law_points(table, layers=LAYERS, aliases={}, epoch=3)
    assert list(points.columns) == analysis.SEPARATION_LAW_POINT_COLUMNS
    assert list(points["layer"]) == LAYERS and list(points["index"]) == list(range(6))
    kept = np.isfinite(values)
    assert list(points["in_fit"]) == list(kept) and np.isnan(points["log10_nc1"].iloc[2])
    np.testing.assert_allclose(points["log10_nc1"][kept], np.log10(values[kept]), rtol=1e-12)
    slope, intercept = np.polyfit(np.arange(6.0)[kept], np.log10(values[kept]), 1)
    np.testing.assert_allclose(points["fitted"], intercept + slope * np.arange(6.0), rtol=1e-9)
    law = _only_row(analysis.separation_law(table, layers=LAYERS, aliases={}))
    assert np.diff(points["fitted"]).mean() == pytest.approx(law["slope"], rel=1e-9)
    assert analysis.separation_law_points(table, layers=LAYERS, aliases={}, epoch=4).empty


def test_points_count_identical_taps_once_and_have_no_line_without_the_law():
    layers = ["fc1", "fc2", "fc3", "pre_logits"]
    table = _table([8.0, 4.0, 2.0, 2.0], layers=layers)
    points = analysis.separation_law_points(table, layers=layers, aliases={"fc3": "pre_logits"})
    assert list(points["layer"]) == ["fc1", "fc2", "pre_logits"]
    assert np.isnan(analysis.separation_law_points(table.iloc[:2], layers=layers, aliases={})["fitted"]).all()


def test_an_empty_table_gives_an_empty_frame_with_the_columns():
    assert list(analysis.separation_law(pd.DataFrame(), aliases={}).columns) == analysis.SEPARATION_LAW_COLUMNS
    assert analysis.separation_law_across_seeds(pd.DataFrame(), aliases={}).empty


# -------------------------------------------------------------------------------- D = K · NC1 (He & Su 2023)

def _fuzziness(X: np.ndarray, y: np.ndarray, *, average: bool = False) -> float:
    """He & Su's separation fuzziness D = tr(SS_w SS_b⁺), scatter matrices summed over the samples (``average``:
    both divided by the number of samples, as in the paper's notation)."""
    mu = X.mean(axis=0)                                                  # global mean of the samples
    d = X.shape[1]
    ss_w, ss_b = np.zeros((d, d)), np.zeros((d, d))
    for k in np.unique(y):
        Xk = X[y == k]
        mk = Xk.mean(axis=0)
        ss_w += (Xk - mk).T @ (Xk - mk)                                  # (d, d)
        ss_b += len(Xk) * np.outer(mk - mu, mk - mu)                     # (d, d)
    if average:
        ss_w, ss_b = ss_w / len(X), ss_b / len(X)
    return float(np.trace(ss_w @ np.linalg.pinv(ss_b, rcond=1e-10, hermitian=True)))


@pytest.mark.parametrize("K,per_class,d", [(3, 40, 12), (5, 25, 8), (10, 12, 30)])
def test_separation_fuzziness_is_K_times_nc1_for_balanced_classes(K, per_class, d):
    import lab.metrics

    rng = np.random.default_rng(K)
    centres = rng.normal(scale=2.0, size=(K, d))
    X = np.concatenate([c + rng.normal(size=(per_class, d)) for c in centres])
    y = np.repeat(np.arange(K), per_class)
    assert _fuzziness(X, y) == pytest.approx(K * lab.metrics.nc1(X, y), rel=1e-9)
    # averaged scatter matrices (1/n each, He & Su's notation) give the same D: the normalisations cancel
    assert _fuzziness(X, y, average=True) == pytest.approx(_fuzziness(X, y), rel=1e-9)


def test_the_relation_needs_balanced_classes():
    import lab.metrics

    rng = np.random.default_rng(0)
    sizes = [10, 40, 90]
    X = np.concatenate([c + rng.normal(size=(n, 6)) for c, n in zip(rng.normal(scale=2.0, size=(3, 6)), sizes)])
    y = np.repeat(np.arange(3), sizes)
    assert _fuzziness(X, y) != pytest.approx(3 * lab.metrics.nc1(X, y), rel=1e-3)


def test_a_stored_run_as_a_user_loads_it(tiny_run):
    store, run_id, _ = tiny_run
    record = store.load(run_id)
    law = analysis.separation_law(record)
    nc1 = record.metrics[record.metrics["metric"] == "nc1"]
    assert len(law) == len(nc1.groupby(["seed", "epoch", "split"]))
    assert set(law["split"]) == set(nc1["split"])
    # depth=2: fc1, fc2 and pre_logits, which is fc2's tensor: two distinct layers, so no law at any evaluation
    assert record.meta.get("layer_aliases") == {"fc2": "pre_logits"}
    assert law["ratio"].isna().all() and (law["n_layers"] <= 2).all()
    assert law["reason"].str.contains("at least 3").all()
