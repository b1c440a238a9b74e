"""lab.metrics.logme and sfda against direct implementations of the papers' equations."""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.linalg

from lab.metrics import DegenerateFeaturesError, compute_layer, logme, sfda
from tests.fixtures.blobs import blobs as gaussian_blobs


def direct_logme(F: np.ndarray, y: np.ndarray, iters: int = 500, floor: float = 0.0) -> float:
    """You et al. (2021), Algorithm 1 written with the d x d matrices: A = αI + βFᵀF, m = βA⁻¹Fᵀy,
    γ = Σ βσ_i/(α + βσ_i), α = γ/mᵀm, β = (n − γ)/‖Fm − y‖², to convergence; evidence with log det A.
    ``floor`` bounds mᵀm and ‖Fm − y‖² from below (with d >= n the evidence has no interior maximum)."""
    n, d = F.shape
    sig = np.linalg.eigvalsh(F.T @ F)
    out = []
    for c in np.unique(y):
        t = (y == c).astype(float)
        alpha, beta = 1.0, 1.0
        for _ in range(iters):
            A = alpha * np.eye(d) + beta * F.T @ F
            m = beta * np.linalg.solve(A, F.T @ t)
            gamma = np.sum(beta * sig / (alpha + beta * sig))
            alpha, beta = gamma / max(m @ m, floor), (n - gamma) / max(np.sum((F @ m - t) ** 2), floor)
        A = alpha * np.eye(d) + beta * F.T @ F
        m = beta * np.linalg.solve(A, F.T @ t)
        ev = (n / 2 * np.log(beta) + d / 2 * np.log(alpha) - n / 2 * np.log(2 * np.pi)
              - beta / 2 * np.sum((F @ m - t) ** 2) - alpha / 2 * (m @ m) - 0.5 * np.linalg.slogdet(A)[1])
        out.append(ev / n)
    return float(np.mean(out))


def direct_sfda(X: np.ndarray, y: np.ndarray) -> float:
    """Shao et al. (2022) the paper's way: Fisher space from the generalised eigenproblem S_b w = λ S_w w
    (S_b = S_t − S_w, both shrunk), class scores through W Wᵀ, ConfMix, refit with the same λ."""
    classes, codes = np.unique(y, return_inverse=True)
    K, (n, d) = len(classes), X.shape
    priors = np.bincount(codes) / n

    def shrunk(S, lam):
        return (1 - lam) * S + lam * np.trace(S) / d * np.eye(d)

    def fit(X, lam):
        means = np.stack([X[codes == k].mean(0) for k in range(K)])
        Sw = sum(priors[k] * np.cov(X[codes == k].T, bias=True) for k in range(K))
        if lam is None:
            lam = max(math.exp(-5 * np.linalg.eigvalsh(Sw)[-1]), 1e-10)
        St = np.cov(X.T, bias=True)
        Sb = shrunk(St, lam) - shrunk(Sw, lam)
        evals, W = scipy.linalg.eigh(Sb, shrunk(Sw, lam))
        W = W[:, np.argsort(evals)[::-1]]
        coef = means @ W @ W.T
        scores = X @ coef.T - 0.5 * np.diag(means @ coef.T) + np.log(priors)
        p = np.exp(scores - scores.max(1, keepdims=True))
        return p / p.sum(1, keepdims=True), lam, means

    prob, lam, means = fit(X, None)
    soft = np.exp(prob) / np.exp(prob).sum(1, keepdims=True)
    others = np.stack([(means.sum(0) - means[k]) / (K - 1) for k in range(K)])
    q = soft[np.arange(n), codes][:, None]
    Xm = q * X + (1 - q) * others[codes]
    prob, _, _ = fit(Xm, lam)
    return float(prob[np.arange(n), codes].mean())


@pytest.fixture
def blobs():
    return gaussian_blobs(n_per_class=30, k=4, d=10, spread=1.0, noise=0.6)


def test_logme_matches_the_fixed_point_equations(blobs):
    X, y = blobs
    assert logme(X, y) == pytest.approx(direct_logme(X, y), rel=1e-7)
    wide = np.random.default_rng(1).normal(size=(30, 50))            # d > n: d − k zero eigenvalues of FᵀF
    labels = np.arange(30) % 3
    # no interior maximum: both approach the supremum (here α → ∞, the features carry nothing about y)
    assert logme(wide, labels) == pytest.approx(direct_logme(wide, labels, iters=1000, floor=30e-12), rel=1e-5)


def test_logme_ranks_separable_features_above_noise_and_ignores_scale(blobs):
    X, y = blobs
    noise = np.random.default_rng(2).normal(size=X.shape)
    assert logme(X, y) > logme(noise, y)
    assert logme(X * 1e3, y) == pytest.approx(logme(X, y), rel=1e-8)
    assert logme(X, y + 7) == pytest.approx(logme(X, y))                  # any integer labels


def test_sfda_matches_the_papers_fisher_space(blobs):
    X, y = blobs
    value = sfda(X, y)
    assert 0 < value <= 1
    assert value == pytest.approx(direct_sfda(X, y), rel=1e-8)
    small = X * 0.2                                                      # λ depends on the scale (paper's eq.)
    assert sfda(small, y) == pytest.approx(direct_sfda(small, y), rel=1e-8)


def test_sfda_with_more_features_than_images_works_in_the_row_space():
    rng = np.random.default_rng(3)
    y = np.repeat(np.arange(3), 8)
    X = rng.normal(size=(24, 60)) * 0.3 + np.eye(3, 60)[y] * 2
    assert sfda(X, y) == pytest.approx(direct_sfda(X, y), rel=1e-6)


def test_sfda_prefers_separable_features(blobs):
    X, y = blobs
    noise = np.random.default_rng(4).normal(size=X.shape)
    assert sfda(X, y) > sfda(noise, y) + 0.2


def test_bad_input(blobs):
    X, y = blobs
    for fn in (logme, sfda):
        with pytest.raises(DegenerateFeaturesError, match=f"{fn.__name__} is undefined for constant features"):
            fn(np.ones_like(X), y)
        with pytest.raises(ValueError, match="at least 2 classes"):
            fn(X, np.zeros_like(y))
        with pytest.raises(ValueError, match="same number of samples"):
            fn(X, y[:-1])


def test_compute_layer_measures_them_with_the_rest(blobs):
    X, y = blobs
    out = compute_layer(X, y, metrics=("logme", "sfda", "nc1"))
    assert out["logme"] == pytest.approx(logme(X, y)) and out["sfda"] == pytest.approx(sfda(X, y))
    with pytest.warns(UserWarning, match="layer 'dead': logme set to NaN"):
        dead = compute_layer(np.zeros_like(X), y, metrics=("logme",), layer="dead")
    assert math.isnan(dead["logme"])
