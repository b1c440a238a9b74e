"""lab.metrics.cka and CKAAccumulator against a dense numpy HSIC, their invariances and bad input."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from lab import metrics
from lab.metrics import CKAAccumulator, DegenerateFeaturesError, DegenerateLayerWarning, cka


def dense_hsic(K: np.ndarray, L: np.ndarray, unbiased: bool) -> float:
    """HSIC written from the papers, with n x n matrices (Song et al. 2012; Kornblith et al. 2019)."""
    n = K.shape[0]
    if not unbiased:
        H = np.eye(n) - np.ones((n, n)) / n
        return float(np.trace(K @ H @ L @ H) / (n - 1) ** 2)
    Kt, Lt = K.copy(), L.copy()
    np.fill_diagonal(Kt, 0.0)
    np.fill_diagonal(Lt, 0.0)
    one = np.ones(n)
    return float((np.trace(Kt @ Lt) + (one @ Kt @ one) * (one @ Lt @ one) / ((n - 1) * (n - 2))
                  - 2.0 / (n - 2) * (one @ Kt @ Lt @ one)) / (n * (n - 3)))


def dense_cka(X, Y, unbiased: bool) -> float:
    K, L = X @ X.T, Y @ Y.T
    return dense_hsic(K, L, unbiased) / np.sqrt(dense_hsic(K, K, unbiased) * dense_hsic(L, L, unbiased))


@pytest.fixture
def pair():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 6)) + 3.0                  # an offset: the estimators are translation invariant
    Y = np.tanh(X @ rng.normal(size=(6, 9))) + 0.3 * rng.normal(size=(40, 9))
    return X, Y


@pytest.mark.parametrize("unbiased", [True, False])
@pytest.mark.parametrize("shape_y", [9, 80])           # d <= n (feature path) and d > n (Gram path)
def test_cka_matches_the_dense_reference(unbiased, shape_y):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(40, 6)) + 3.0
    Y = np.tanh(X @ rng.normal(size=(6, shape_y))) + 0.3 * rng.normal(size=(40, shape_y))
    assert cka(X, Y, unbiased=unbiased) == pytest.approx(dense_cka(X, Y, unbiased), rel=1e-10, abs=1e-12)
    assert cka(torch.from_numpy(X).float(), torch.from_numpy(Y).float(), unbiased=unbiased) == pytest.approx(
        dense_cka(X, Y, unbiased), abs=1e-5)


@pytest.mark.parametrize("unbiased", [True, False])
def test_invariances(pair, unbiased):
    X, Y = pair
    rng = np.random.default_rng(2)
    Q, _ = np.linalg.qr(rng.normal(size=(9, 9)))
    base = cka(X, Y, unbiased=unbiased)
    assert cka(X, X, unbiased=unbiased) == pytest.approx(1.0, abs=1e-12)
    assert cka(X, Y @ Q, unbiased=unbiased) == pytest.approx(base, abs=1e-10)           # orthogonal transform
    assert cka(1e-6 * X, 3e5 * Y, unbiased=unbiased) == pytest.approx(base, abs=1e-10)  # isotropic scaling
    assert cka(Y, X, unbiased=unbiased) == pytest.approx(base, abs=1e-12)               # symmetric
    Q6, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    assert cka(X, X @ Q6 * 7.0 + 5.0, unbiased=unbiased) == pytest.approx(1.0, abs=1e-10)


def test_very_different_scales_give_a_number_not_nan(pair):
    X, Y = pair
    value = cka(X * 1e150, Y * 1e-150)
    assert np.isfinite(value) and value == pytest.approx(cka(X, Y), abs=1e-9)
    value32 = cka(torch.from_numpy(X * 1e-30).float(), torch.from_numpy(Y * 1e30).float())
    assert np.isfinite(value32)


def test_unbiased_is_near_zero_for_independent_features_where_the_biased_one_is_not():
    rng = np.random.default_rng(3)
    X, Y = rng.normal(size=(200, 150)), rng.normal(size=(200, 150))
    assert abs(cka(X, Y)) < 0.03
    assert cka(X, Y, unbiased=False) > 0.3


def test_bad_input_says_what_is_wrong(pair):
    X, Y = pair
    with pytest.raises(ValueError, match="same number of rows.*got 40 and 39"):
        cka(X, Y[:39])
    with pytest.raises(ValueError, match="at least 4 samples; got 3.*unbiased=False"):
        cka(X[:3], Y[:3])
    assert np.isfinite(cka(X[:3], Y[:3], unbiased=False))
    with pytest.raises(DegenerateFeaturesError, match="constant features: all 40 samples of Y"):
        cka(X, np.ones_like(Y))
    with pytest.raises(ValueError, match="non-finite"):
        cka(X, np.where(Y > 1, np.nan, Y))


# ---------------------------------------------------------------------------------------------- minibatch


def test_one_minibatch_of_everything_is_the_full_batch_unbiased_value(pair):
    X, Y = pair
    acc = CKAAccumulator(2)
    acc.update([X, Y])
    out = acc.result()
    assert out.shape == (2, 2)
    assert np.diag(out) == pytest.approx([1.0, 1.0])
    assert out[0, 1] == pytest.approx(dense_cka(X, Y, True), rel=1e-10)


def test_minibatch_hsic_is_the_mean_of_the_dense_per_batch_hsic(pair):
    X, Y = pair
    batches = np.array_split(np.arange(40), 4)
    acc = CKAAccumulator(1, 1)
    for b in batches:
        acc.update([X[b]], [Y[b]])
    xy = np.mean([dense_hsic(X[b] @ X[b].T, Y[b] @ Y[b].T, True) for b in batches])
    xx = np.mean([dense_hsic(X[b] @ X[b].T, X[b] @ X[b].T, True) for b in batches])
    yy = np.mean([dense_hsic(Y[b] @ Y[b].T, Y[b] @ Y[b].T, True) for b in batches])
    assert acc.result()[0, 0] == pytest.approx(xy / np.sqrt(xx * yy), rel=1e-10)
    assert acc.batches == 4 and acc.n_samples == 40


def test_the_minibatch_estimate_approaches_the_full_batch_unbiased_value():
    rng = np.random.default_rng(4)
    n = 3000
    Z = rng.normal(size=(n, 8))
    layers = [Z @ rng.normal(size=(8, 16)), np.tanh(Z @ rng.normal(size=(8, 32))),
              np.maximum(Z @ rng.normal(size=(8, 24)), 0) + rng.normal(size=(n, 24))]
    acc = CKAAccumulator(3, names_a=["a", "b", "c"])
    order = rng.permutation(n)
    for batch in np.array_split(order, n // 250):
        acc.update([torch.from_numpy(f[batch]) for f in layers])
    full = np.array([[cka(a, b) for b in layers] for a in layers])
    assert np.allclose(acc.result(), full, atol=0.02)


def test_cross_accumulator_and_layer_checks(pair):
    X, Y = pair
    acc = CKAAccumulator(2, 1)
    acc.update({"x": X, "y": Y}, [Y])
    assert acc.result().shape == (2, 1)
    with pytest.raises(ValueError, match="feats_b exactly when"):
        acc.update([X, Y])
    with pytest.raises(ValueError, match="must hold 2 layers"):
        acc.update([X], [Y])
    with pytest.raises(ValueError, match="same images; got row counts \\[39, 40\\]"):
        acc.update([X, Y[:39]], [Y])
    with pytest.raises(ValueError, match="at least 4 images.*got 3"):
        acc.update([X[:3], Y[:3]], [Y[:3]])
    with pytest.raises(ValueError, match="needs at least one update"):
        CKAAccumulator(1).result()
    with pytest.raises(ValueError, match="n_layers_a must be a positive integer"):
        CKAAccumulator(0)


def test_a_constant_layer_is_nan_with_the_reason(pair):
    X, Y = pair
    acc = CKAAccumulator(2, names_a=["conv", "dead"])
    for b in np.array_split(np.arange(40), 2):
        acc.update([X[b], np.zeros((len(b), 3))])
    with pytest.warns(DegenerateLayerWarning, match="'dead'.*constant"):
        out = acc.result()
    assert out[0, 0] == pytest.approx(1.0) and np.isnan(out[1]).all() and np.isnan(out[:, 1]).all()
    assert "dead" in acc.undefined


def test_public_names():
    assert metrics.cka is cka and metrics.CKAAccumulator is CKAAccumulator
    assert {"cka", "CKAAccumulator", "logme", "sfda"} <= set(metrics.__all__)
