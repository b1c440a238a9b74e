"""lab.metrics: input checks (every message pinned), layer_report, degenerate layers, utilization."""
from __future__ import annotations

import math
import warnings
from functools import partial

import numpy as np
import pandas as pd
import pytest
import torch
from threadpoolctl import threadpool_limits

from lab import metrics
from lab.metrics import DegenerateFeaturesError, DegenerateLayerWarning
from tests.fixtures.blobs import blobs as gaussian_blobs


@pytest.fixture(autouse=True)
def _one_thread():
    with threadpool_limits(limits=1):
        yield


blobs = partial(gaussian_blobs, n_per_class=20, k=3, d=6, spread=1.0, dtype=np.float32, shuffle=False)


X0, Y0 = blobs()


# ------------------------------------------------------------------------------ input checks

def test_fewer_than_two_classes():
    with pytest.raises(ValueError, match=r"y must contain at least 2 classes; got 1 \(label 3\)"):
        metrics.nmi(X0, np.full(len(X0), 3))


def test_class_with_too_few_samples_names_label_and_count():
    y = Y0.copy()
    y[0] = 9                                       # class 9 has a single sample
    with pytest.raises(ValueError, match=r"nc1 needs at least 2 samples per class; class 9 has 1\."):
        metrics.nc1(X0, y)
    with pytest.raises(ValueError, match=r"cdnv needs at least 2 samples per class; class 9 has 1\."):
        metrics.cdnv(X0, y)
    with pytest.raises(ValueError, match=r"knn_purity with the default k needs at least 2 samples per class"):
        metrics.knn_purity(X0, y)
    assert 0 <= metrics.knn_accuracy(X0, y) <= 1   # a singleton class is fine for 1-NN


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_values(bad):
    X = X0.copy()
    X[4, 2] = bad
    X[7, 0] = bad
    with pytest.raises(ValueError, match=r"X contains non-finite values \(NaN or inf\) in 2 of 60 samples \(first at row 4\)"):
        metrics.nc1(X, Y0)


def test_length_mismatch():
    with pytest.raises(ValueError, match=r"X and y must have the same number of samples; got X with 60 rows and y with 59 labels"):
        metrics.knn_accuracy(X0, Y0[:-1])


def test_shape_and_dtype_errors():
    with pytest.raises(ValueError, match=r"X must be 2-D \(N samples, d features\); got shape \(60, 2, 3\)"):
        metrics.nc1(X0.reshape(60, 2, 3), Y0)
    with pytest.raises(ValueError, match=r"y must hold integer class labels; got dtype float64"):
        metrics.nc1(X0, Y0.astype(np.float64))
    with pytest.raises(ValueError, match=r"y must be 1-D \(N,\) class labels; got shape \(60, 1\)"):
        metrics.nc1(X0, Y0[:, None])


def test_k_too_large():
    with pytest.raises(ValueError, match=r"k=60 is too large for N=60 samples: leave-one-out leaves 59 other samples per query\. Use k <= 59\."):
        metrics.knn_accuracy(X0, Y0, k=60)
    with pytest.raises(ValueError, match=r"k=61 is too large for N=60 samples \(each sample is its own first neighbour\)\. Use k <= 60\."):
        metrics.knn_indices(X0, 61, include_self=True)
    with pytest.raises(ValueError, match=r"k must be a positive integer; got 0"):
        metrics.weighted_knn_accuracy(X0, Y0, k=0)
    with pytest.raises(ValueError, match=r"layer 'b3': k=100 is too large for N=60"):
        metrics.layer_report({"b3": X0}, Y0, metrics=["knn_purity"], params={"knn_purity": {"k": 100}})


def test_folds_too_large_or_too_small():
    y = Y0.copy()
    y[:17] = 5                                   # classes 0 (3 samples), 1, 2, 5
    with pytest.raises(ValueError, match=r"folds=5 is too large for the smallest class: class 0 has 3 samples .* Use folds <= 3"):
        metrics.linear_probe_accuracy(X0, y)
    with pytest.raises(ValueError, match=r"folds must be an integer >= 2; got 1"):
        metrics.linear_probe_accuracy(X0, Y0, folds=1)


def test_option_errors():
    with pytest.raises(ValueError, match=r"protocol must be 'default' or 'paper'; got 'seed' instead"):
        metrics.nmi(X0, Y0, protocol="seed")
    with pytest.raises(ValueError, match=r"metric must be one of \('euclidean', 'cosine'\); got 'l1' instead"):
        metrics.knn_accuracy(X0, Y0, metric="l1")
    with pytest.raises(ValueError, match=r"temperature must be a positive number; got 0"):
        metrics.weighted_knn_accuracy(X0, Y0, temperature=0)
    with pytest.raises(ValueError, match=r"unknown metric 'nc3'; valid names are nmi, knn_accuracy, .*ncc_accuracy"):
        metrics.compute_layer(X0, Y0, metrics=["nc1", "nc3"])
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['kk'\] for 'knn_accuracy'; valid options are \['k', 'metric'\]"):
        metrics.compute_layer(X0, Y0, metrics=["knn_accuracy"], params={"knn_accuracy": {"kk": 3}})
    with pytest.raises(ValueError, match=r"repeats must be a positive integer; got 0"):
        metrics.layer_report({"a": X0}, Y0, repeats=0)


def test_layer_report_names_the_layer_with_non_finite_features():
    bad = X0.copy()
    bad[3, 3] = np.nan
    with pytest.raises(ValueError, match=r"layer 'blocks\.2': X contains non-finite values \(NaN or inf\) in 1 of 60 samples"):
        metrics.layer_report({"blocks.1": X0, "blocks.2": bad}, Y0)


# ------------------------------------------------------------------------------ degenerate layers

def test_dead_layer_gives_nan_with_warnings_naming_layer_and_metric():
    dead = np.full_like(X0, 0.5)
    with pytest.warns(DegenerateLayerWarning) as record:
        df = metrics.layer_report({"stem": X0, "dead": dead}, Y0, metrics=metrics.ALL_METRICS)
    messages = [str(w.message) for w in record]
    for name in ("nmi", "knn_accuracy", "knn_purity", "weighted_knn_accuracy", "nc1", "cdnv",
                 "nc2_equinorm", "nc2_equiangularity", "ncc_accuracy"):
        assert math.isnan(df.loc["dead", name])
        assert any(m.startswith(f"layer 'dead': {name} set to NaN: ") for m in messages), name
    assert all("'dead'" in m for m in messages)
    # defined for a constant non-zero layer: rank 1, probe = majority rate of each test fold
    assert df.loc["dead", "numerical_rank"] == pytest.approx(1.0)
    assert 0 < df.loc["dead", "linear_probe_accuracy"] <= 0.5
    assert df.loc["stem"].notna().all()


def test_dead_layer_messages_and_raise_mode():
    dead = np.zeros_like(X0)
    with pytest.raises(DegenerateFeaturesError, match=r"nmi is undefined for constant features: all 60 samples are identical \(a dead layer\)"):
        metrics.nmi(dead, Y0)
    with pytest.raises(DegenerateFeaturesError, match=r"nc1 is undefined: all 3 class means coincide"):
        metrics.nc1(dead, Y0)
    with pytest.raises(DegenerateFeaturesError, match=r"numerical_rank is undefined: every feature of class 0 is zero"):
        metrics.numerical_rank(dead, Y0)
    with pytest.raises(DegenerateFeaturesError, match=r"layer 'fc': nc1 is undefined"):
        metrics.compute_layer(dead, Y0, metrics=["nc1"], layer="fc", on_degenerate="raise")
    assert issubclass(DegenerateFeaturesError, ValueError)


def test_coinciding_class_means():
    # Classes 0 and 1 share one mean; class 2 differs: nc1 is finite, cdnv/ncc undefined.
    rng = np.random.default_rng(0)
    base = rng.normal(size=(10, 4))
    X = np.concatenate([base, -base, base + 5.0])            # means: 0, 0, 5
    X[:10] = base - base.mean(0)
    X[10:20] = -(base - base.mean(0))
    y = np.repeat([0, 1, 2], 10)
    assert np.isfinite(metrics.nc1(X, y))
    with pytest.raises(DegenerateFeaturesError, match=r"cdnv is undefined: the means of classes 0 and 1 coincide"):
        metrics.cdnv(X, y)
    with pytest.raises(DegenerateFeaturesError, match=r"ncc_accuracy is undefined: the means of classes 0 and 1 coincide"):
        metrics.ncc_accuracy(X, y)


# ------------------------------------------------------------------------------ report

def test_layer_report_matches_single_metrics():
    X1, _ = blobs(seed=1)
    feats = {"layer1": torch.from_numpy(X0), "layer2": X1}
    with warnings.catch_warnings():
        warnings.simplefilter("error")            # no degenerate warnings on healthy layers
        df = metrics.layer_report(feats, torch.from_numpy(Y0), metrics=metrics.ALL_METRICS, repeats=2)
    assert isinstance(df, pd.DataFrame)
    assert df.index.name == "layer" and list(df.index) == ["layer1", "layer2"]
    assert list(df.columns) == ["nmi", "nmi_std", *metrics.ALL_METRICS[1:]]
    for layer, X in (("layer1", X0), ("layer2", X1)):
        row = df.loc[layer]
        n0, n1 = metrics.nmi(X, Y0, seed=0), metrics.nmi(X, Y0, seed=1)
        assert row["nmi"] == pytest.approx((n0 + n1) / 2, abs=1e-15)
        assert row["nmi_std"] == pytest.approx(np.std([n0, n1], ddof=1), abs=1e-15)
        assert row["knn_accuracy"] == metrics.knn_accuracy(X, Y0)
        assert row["knn_purity"] == metrics.knn_purity(X, Y0)
        assert row["weighted_knn_accuracy"] == metrics.weighted_knn_accuracy(X, Y0)
        assert row["linear_probe_accuracy"] == metrics.linear_probe_accuracy(X, Y0)
        assert row["nc1"] == pytest.approx(metrics.nc1(X, Y0), rel=1e-12)
        assert row["cdnv"] == pytest.approx(metrics.cdnv(X, Y0), rel=1e-12)
        assert row["numerical_rank"] == pytest.approx(metrics.numerical_rank(X, Y0), rel=1e-12)
        nc2 = metrics.nc2(X, Y0)
        assert row["nc2_equinorm"] == pytest.approx(nc2["equinorm"], rel=1e-12)
        assert row["nc2_equiangularity"] == pytest.approx(nc2["equiangularity"], rel=1e-12)
        assert row["ncc_accuracy"] == metrics.ncc_accuracy(X, Y0)


def test_compute_layer_defaults_options_and_aliases():
    row = metrics.compute_layer(X0, Y0)
    assert tuple(row) == metrics.DEFAULT_SEPARABILITY + metrics.DEFAULT_COLLAPSE
    assert all(isinstance(v, float) for v in row.values())
    row = metrics.compute_layer(X0, Y0, metrics=["knn_accuracy", "knn_purity", "nc2"],
                                params={"knn_accuracy": {"k": 5, "metric": "cosine"}, "knn_purity": {"k": 3}})
    assert list(row) == ["knn_accuracy", "knn_purity", "nc2_equinorm", "nc2_equiangularity"]
    assert row["knn_accuracy"] == metrics.knn_accuracy(X0, Y0, k=5, metric="cosine")
    assert row["knn_purity"] == metrics.knn_purity(X0, Y0, k=3)
    assert metrics.DEFAULT_SEPARABILITY == ("nmi", "knn_accuracy", "knn_purity", "linear_probe_accuracy")
    assert metrics.DEFAULT_COLLAPSE == ("nc1", "cdnv", "numerical_rank", "nc2_equinorm", "nc2_equiangularity",
                                        "nc2_cosine_std", "ncc_accuracy")


def test_public_surface():
    for name in metrics.__all__:
        assert getattr(metrics, name) is not None
        obj = getattr(metrics, name)
        if callable(obj) and not isinstance(obj, type):
            assert obj.__doc__ and "Returns" in obj.__doc__, name


# ------------------------------------------------------------------------------ utilization

def _tiny_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2, bias=False))


def test_utilization_distance_from_initial_weights():
    model = _tiny_model()
    initial = {k: v.detach().clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        model[0].weight.add_(0.1)                 # 12 entries moved by 0.1
        model[0].bias.sub_(0.2)                   # 3 entries moved by 0.2
    df = metrics.utilization(model, initial, {"block1": "0", "act": None, "head": model[2]})
    assert list(df.index) == ["block1", "head"] and df.index.name == "layer"
    expected = math.sqrt(12 * 0.1**2 + 3 * 0.2**2)
    init_norm = math.sqrt(float((initial["0.weight"] ** 2).sum() + (initial["0.bias"] ** 2).sum()))
    assert df.loc["block1", "utilization"] == pytest.approx(expected, rel=1e-6)
    assert df.loc["block1", "relative_utilization"] == pytest.approx(expected / init_norm, rel=1e-6)
    assert df.loc["block1", "n_params"] == 15 and df.loc["block1", "module"] == "0"
    assert df.loc["head", "utilization"] == 0.0 and df.loc["head", "module"] == "2"


def test_utilization_errors():
    model = _tiny_model()
    initial = {k: v.detach().clone() for k, v in model.state_dict().items()}
    with pytest.raises(ValueError, match=r"module 'blocks\.9' \(layer 'b9'\) is not in the model"):
        metrics.utilization(model, initial, {"b9": "blocks.9"})
    with pytest.raises(ValueError, match=r"module '1' \(layer 'act'\) has no parameters"):
        metrics.utilization(model, initial, {"act": "1"})
    with pytest.raises(ValueError, match=r"initial_state has no entry '0\.bias' \(layer 'block1'\)"):
        metrics.utilization(model, {"0.weight": initial["0.weight"]}, {"block1": "0"})


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_inputs_are_never_modified(dtype):
    X, y = blobs(seed=3)
    X = X.astype(dtype)
    before = X.copy()
    metrics.compute_layer(X, y, metrics=metrics.ALL_METRICS)
    metrics.compute_layer(torch.from_numpy(X), y, metrics=metrics.ALL_METRICS)
    metrics.knn_indices(X, 3, include_self=True)
    np.testing.assert_array_equal(X, before)


def test_utilization_of_a_module_given_as_the_model():
    # lab.runs passes the tap module itself with its own state dict and the empty name.
    model = _tiny_model()
    block = model[0]
    initial = {k: v.detach().clone() for k, v in block.state_dict().items()}
    with torch.no_grad():
        block.bias.add_(1.0)
    row = metrics.utilization(block, initial, {"block1": ""}).loc["block1"]
    assert row["utilization"] == pytest.approx(math.sqrt(3.0)) and row["n_params"] == 15


def test_memory_is_bounded_by_blocks():
    from lab.metrics._neighbors import _block_rows
    from lab.metrics.collapse import _BLOCK_ELEMENTS, _rows_per_block

    assert _block_rows(50_000) * 50_000 <= 1 << 24          # one N-wide slice of the distance matrix
    assert _block_rows(1000) == 256                          # cache-sized blocks even when N is small
    assert _rows_per_block(100_000) * 100_000 <= _BLOCK_ELEMENTS
    X, y = blobs(n_per_class=30, seed=4)
    whole = metrics.knn_indices(X, 5)
    for rows in (1, 7, 89):
        part = metrics.knn_indices(X, 5, block_rows=rows)
        assert torch.equal(part.indices, whole.indices)


def test_option_errors_name_the_layer():
    with pytest.raises(ValueError, match=r"layer 'l3': C must be a positive number; got -1"):
        metrics.layer_report({"l3": X0}, Y0, metrics=["linear_probe_accuracy"],
                             params={"linear_probe_accuracy": {"C": -1}})
    with pytest.raises(ValueError, match=r"layer 'l3': n_init must be a positive integer; got 0"):
        metrics.layer_report({"l3": X0}, Y0, metrics=["nmi"], params={"nmi": {"n_init": 0}})


def test_thread_setting_is_restored():
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        metrics.compute_layer(X0, Y0, metrics=metrics.DEFAULT_COLLAPSE)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(previous)
