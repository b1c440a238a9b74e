"""lab.metrics.label_free (rankme, alpha_req, twonn_id, lidar) against plain numpy transcriptions of
METRICS.md, against scikit-dimension's TwoNN and reptrix's alpha-ReQ fit, on known cases, and on bad input."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.spatial.distance
import torch

from lab.metrics import DegenerateFeaturesError
from lab.metrics import _two_nearest
from lab.metrics.label_free import alpha_req, lidar, rankme, twonn_id

EPS = 1e-7


# ----------------------------------------------------------------------------- transcriptions
def np_rankme(X: np.ndarray) -> float:
    """exp(−Σ p log p), p = σ / Σσ + 1e-7 over the singular values of the uncentred X (Garrido et al. 2023)."""
    s = np.linalg.svd(X, compute_uv=False)
    p = s / s.sum() + EPS
    return float(np.exp(-(p * np.log(p)).sum()))


def np_alpha_req(X: np.ndarray) -> float:
    """reptrix's get_powerlaw on the centred covariance spectrum: WLS of log λ_i on (−log i, 1), ranks 6..100,
    weights 1/i; the range ends at the last non-zero eigenvalue but one when fewer than 100 are non-zero."""
    n, d = X.shape
    Xc = X - X.mean(axis=0)
    lam = np.sort(np.linalg.eigvalsh(Xc.T @ Xc if n >= d else Xc @ Xc.T))[::-1] / (n - 1)
    rank = int((lam > lam[0] * max(n, d) * np.finfo(np.float64).eps).sum())
    last = 99 if rank >= 100 else rank - 2
    ranks = np.arange(6, last + 2, dtype=np.float64)
    y = np.log(lam[5:last + 1])[:, None]
    x = np.stack([-np.log(ranks), np.ones_like(ranks)], axis=1)
    w = (1.0 / ranks)[:, None]
    return float(np.linalg.solve(x.T @ (x * w), (w * x).T @ y)[0, 0])


def np_two_nearest(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """r1, r2 by direct differences (scipy's cdist computes sqrt(Σ (a − b)²))."""
    D = scipy.spatial.distance.cdist(X, X)
    np.fill_diagonal(D, np.inf)
    D.sort(axis=1)
    return D[:, 0], D[:, 1]


def np_twonn(X: np.ndarray) -> float:
    """Facco et al. 2017 as scikit-dimension: keep floor(0.9 N) smallest μ = r2/r1, F_i = i/N, fit through 0;
    images with r1 = 0 are left out (N counts the others)."""
    r1, r2 = np_two_nearest(X)
    keep = r1 > 0
    mu = np.sort(r2[keep] / r1[keep])
    n = len(mu)
    k = (9 * n) // 10
    x = np.log(mu[:k])
    y = -np.log(1.0 - np.arange(k) / n)
    return float((x @ y) / (x @ x))


def inv_sqrt(A: np.ndarray) -> np.ndarray:
    w, U = np.linalg.eigh(A)
    return (U / np.sqrt(w)) @ U.T


def np_lidar(V: np.ndarray) -> float:
    """Thilak et al. 2024: Σ_w^(−1/2) Σ_b Σ_w^(−1/2), δ = 1e-4 tr(Σ_w)/d, entropy rank with +1e-7."""
    n, q, d = V.shape
    means = V.mean(axis=1)
    Sb = np.cov(means, rowvar=False, bias=False)
    Sw = np.mean([np.cov(V[i], rowvar=False, bias=False) for i in range(n)], axis=0)
    Sw = Sw + 1e-4 * np.trace(Sw) / d * np.eye(d)
    W = inv_sqrt(Sw)
    lam = np.clip(np.linalg.eigvalsh(W @ Sb @ W), 0.0, None)
    p = lam / lam.sum() + EPS
    return float(np.exp(-(p * np.log(p)).sum()))


# ----------------------------------------------------------------------------- data
def subspace(n: int, k: int, d: int, seed: int = 0) -> np.ndarray:
    """n isotropic Gaussian points spanning a random k-dimensional subspace of R^d."""
    rng = np.random.default_rng(seed)
    basis = np.linalg.qr(rng.normal(size=(d, k)))[0]                     # (d, k) orthonormal
    return rng.normal(size=(n, k)) @ basis.T


def power_law(n: int, d: int, alpha: float, seed: int = 0) -> np.ndarray:
    """Features whose covariance eigenvalues are i^(−alpha), in a random basis."""
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, d)) * np.arange(1, d + 1) ** (-alpha / 2)
    return Z @ np.linalg.qr(rng.normal(size=(d, d)))[0].T + 3.0          # an offset: alpha centres


def views_of(images: np.ndarray, q: int, noise: float, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return images[:, None, :] + noise * rng.normal(size=(images.shape[0], q, images.shape[1]))


# ----------------------------------------------------------------------------- transcriptions agree
@pytest.mark.parametrize("shape", [(300, 40), (30, 100)])                 # N ≥ d and N < d (the N × N Gram)
def test_rankme_matches_transcription(shape):
    X = np.random.default_rng(2).normal(size=shape) + 0.5
    assert rankme(X) == pytest.approx(np_rankme(X), rel=1e-6)
    assert rankme(torch.from_numpy(X).float()) == pytest.approx(np_rankme(X.astype(np.float32)), rel=1e-5)


def test_rankme_of_rank_deficient_features_matches_transcription():
    X = subspace(500, 5, 64)
    assert rankme(X) == pytest.approx(np_rankme(X), rel=1e-6)


@pytest.mark.parametrize("shape", [(3000, 200), (60, 300), (150, 120)])   # ranges 6..100, to rank 59 - 1, N < d
def test_alpha_req_matches_transcription(shape):
    X = power_law(*shape, alpha=1.2, seed=3)
    assert alpha_req(X) == pytest.approx(np_alpha_req(X), rel=1e-6)


def test_alpha_req_matches_reptrix_fit():
    reptrix_alpha = pytest.importorskip("reptrix.alpha")
    X = power_law(3000, 200, alpha=1.2, seed=4)
    lam = np.sort(np.linalg.eigvalsh(np.cov(X, rowvar=False)))[::-1]
    # reptrix fits the same weighted least squares (weights in float32) on the range given
    expected = reptrix_alpha.get_powerlaw(lam, np.arange(5, 100))[0]
    assert alpha_req(X) == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("data", ["subspace", "offset", "float32"])
def test_twonn_matches_transcription(data):
    X = {"subspace": lambda: subspace(1200, 5, 64),
         "offset": lambda: subspace(800, 3, 20, seed=5) * 1e-3 + 50.0,   # small spread, large norm
         "float32": lambda: subspace(700, 8, 30, seed=6).astype(np.float32)}[data]()
    assert twonn_id(X) == pytest.approx(np_twonn(X.astype(np.float64)), rel=1e-6)


def test_twonn_agrees_with_scikit_dimension():
    skdim = pytest.importorskip("skdim")
    X = subspace(1200, 5, 64)
    # its distances come from |a|² − 2a·b + |b|² and it uses (i + 1)/N since 0.5: agree to 1 %
    assert twonn_id(X) == pytest.approx(skdim.id.TwoNN().fit(X).dimension_, rel=0.01)


def test_lidar_matches_transcription():
    V = views_of(subspace(200, 6, 24) + 1.0, q=4, noise=0.2)
    assert lidar(V) == pytest.approx(np_lidar(V), rel=1e-6)
    assert lidar(torch.from_numpy(V)) == pytest.approx(np_lidar(V), rel=1e-6)


def test_lidar_with_more_features_than_views_matches_transcription():
    V = views_of(np.random.default_rng(7).normal(size=(12, 60)), q=3, noise=0.3)   # d = 60 > n·q = 36
    assert lidar(V) == pytest.approx(np_lidar(V), rel=1e-6)


# ----------------------------------------------------------------------------- exact neighbours
@pytest.mark.parametrize("data", ["gaussian", "tight clusters", "integer lattice", "duplicates", "three"])
@pytest.mark.parametrize("strip", [256, 7])
def test_two_nearest_is_exact(data, strip, monkeypatch):
    """Every path: float32 candidates proven, float64 re-search (tight clusters), direct differences
    (ties on a lattice), several strips and partial groups (strip 7)."""
    rng = np.random.default_rng(8)
    X = {"gaussian": lambda: rng.normal(size=(900, 33)),
         "tight clusters": lambda: (10 * rng.normal(size=(15, 40)))[rng.integers(0, 15, 500)]
         + 1e-5 * rng.normal(size=(500, 40)),
         "integer lattice": lambda: rng.integers(0, 3, size=(400, 6)).astype(np.float64),
         "duplicates": lambda: np.repeat(rng.normal(size=(100, 8)), 3, axis=0),
         "three": lambda: rng.normal(size=(3, 4))}[data]()
    monkeypatch.setattr(_two_nearest, "_STRIP_ROWS", strip)
    r1, r2 = _two_nearest.two_nearest(torch.from_numpy(X))
    e1, e2 = np_two_nearest(X)
    np.testing.assert_allclose(r1.numpy(), e1, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(r2.numpy(), e2, rtol=1e-12, atol=1e-12)


def test_twonn_strip_memory_is_bounded(monkeypatch):
    """The largest distance block is one strip of rows × N, never N × N."""
    shapes = []
    real = _two_nearest.matmul

    def spy(A, B, out=None):
        shapes.append((A.shape[0], B.shape[1]))
        return real(A, B, out)

    monkeypatch.setattr(_two_nearest, "matmul", spy)
    twonn_id(np.random.default_rng(9).normal(size=(1000, 16)))
    assert max(a * b for a, b in shapes) <= 256 * 1000


# ----------------------------------------------------------------------------- known cases
def test_isotropic_subspace_gives_its_dimension():
    X = subspace(4000, 5, 64, seed=10)
    assert twonn_id(X) == pytest.approx(5.0, rel=0.05)
    assert rankme(X) == pytest.approx(5.0, rel=0.02)


def test_power_law_spectrum_gives_its_exponent():
    assert alpha_req(power_law(4000, 256, alpha=1.5, seed=11)) == pytest.approx(1.5, abs=0.05)


def test_lidar_grows_with_the_directions_images_spread_in():
    """Views = image + small isotropic noise: LiDAR is about the number of directions the images spread in
    (the noise is whitened away), within [1, min(n − 1, d)]."""
    small = lidar(views_of(subspace(400, 3, 32, seed=12), q=4, noise=0.05))
    large = lidar(views_of(subspace(400, 12, 32, seed=12), q=4, noise=0.05))
    assert 1.0 <= small < large <= 32
    assert small == pytest.approx(3.0, rel=0.1)
    assert large == pytest.approx(12.0, rel=0.1)


def test_rankme_of_identical_non_zero_images_is_one():
    assert rankme(np.tile([1.0, 2.0, 3.0], (10, 1))) == pytest.approx(1.0, abs=1e-4)


def test_numpy_and_torch_inputs_agree():
    X = np.random.default_rng(13).normal(size=(300, 20))
    for fn in (rankme, alpha_req, twonn_id):
        assert fn(torch.from_numpy(X)) == pytest.approx(fn(X), rel=1e-12), fn.__name__
    V = views_of(X[:100], q=3, noise=0.1)
    assert lidar(torch.from_numpy(V)) == pytest.approx(lidar(V), rel=1e-12)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_matches_cpu():
    X = torch.from_numpy(power_law(3000, 128, alpha=1.3, seed=14)).float()
    V = torch.from_numpy(views_of(subspace(300, 6, 48), q=4, noise=0.2)).float()
    for fn, arg in ((rankme, X), (alpha_req, X), (twonn_id, X), (lidar, V)):
        assert fn(arg.cuda()) == pytest.approx(fn(arg), rel=1e-6), fn.__name__


# ----------------------------------------------------------------------------- undefined and bad input
def test_twonn_with_two_images_is_undefined():
    with pytest.raises(DegenerateFeaturesError, match="at least 3 images"):
        twonn_id(np.eye(2, 5))


def test_twonn_leaves_out_duplicates_and_counts_them():
    X = subspace(200, 4, 12, seed=15)
    X = np.concatenate([X, X[:10]])                                       # 10 images twice: 20 with r1 = 0
    with pytest.warns(UserWarning, match="left out 20 of 210 images"):
        value = twonn_id(X)
    assert value == pytest.approx(np_twonn(X), rel=1e-6)


def test_twonn_of_mostly_duplicates_is_undefined_and_counts_them():
    X = np.concatenate([np.repeat(np.eye(3, 4)[:2], 5, axis=0), np.ones((1, 4))])   # 10 duplicates + 1
    with pytest.raises(DegenerateFeaturesError, match="10 of the 11 images are duplicates"):
        twonn_id(X)


@pytest.mark.parametrize("fn", [alpha_req, twonn_id])
def test_constant_features_are_undefined(fn):
    with pytest.raises(DegenerateFeaturesError, match="constant features"):
        fn(np.full((50, 8), 2.5))


def test_lidar_of_constant_features_is_undefined():
    with pytest.raises(DegenerateFeaturesError, match="constant features"):
        lidar(np.full((20, 3, 8), 2.5))


def test_rankme_of_zero_features_is_undefined():
    with pytest.raises(DegenerateFeaturesError, match="all-zero features"):
        rankme(np.zeros((10, 4)))


def test_alpha_req_with_too_few_eigenvalues_is_undefined():
    with pytest.raises(DegenerateFeaturesError, match="at least 10 eigenvalues in its fit range"):
        alpha_req(np.random.default_rng(16).normal(size=(12, 50)))      # 11 non-zero eigenvalues: 5 in range


@pytest.mark.parametrize("shape", [(1, 4, 8), (5, 1, 8)])
def test_lidar_needs_two_images_and_two_views(shape):
    with pytest.raises(DegenerateFeaturesError, match="at least 2 images with at least 2 views"):
        lidar(np.random.default_rng(17).normal(size=shape))


def test_lidar_of_identical_views_is_undefined():
    V = np.repeat(np.random.default_rng(18).normal(size=(10, 1, 6)), 3, axis=1)
    with pytest.raises(DegenerateFeaturesError, match="views of each of the 10 images are identical"):
        lidar(V)


def test_lidar_of_coinciding_view_means_is_undefined():
    noise = np.random.default_rng(19).normal(size=(1, 2, 6))
    V = np.concatenate([noise, -noise], axis=1).repeat(5, axis=0)           # every image's mean is 0
    with pytest.raises(DegenerateFeaturesError, match="view-means of all 5 images coincide"):
        lidar(V)


@pytest.mark.parametrize("bad", [np.zeros((4, 5)), np.zeros(8)])
def test_lidar_rejects_views_that_are_not_three_dimensional(bad):
    with pytest.raises(ValueError, match=r"views must be 3-D \(n images, q views, d features\); got shape"):
        lidar(bad)


def test_lidar_rejects_non_finite_views():
    V = np.ones((4, 2, 3))
    V[2, 1, 0] = np.nan
    with pytest.raises(ValueError, match=r"non-finite values .* in 1 of 8 views \(first: image 2, view 1\)"):
        lidar(V)


@pytest.mark.parametrize("fn", [rankme, alpha_req, twonn_id])
def test_non_finite_or_wrong_shape_features_are_rejected(fn):
    X = np.random.default_rng(20).normal(size=(30, 4))
    X[3, 1] = np.inf
    with pytest.raises(ValueError, match="non-finite values"):
        fn(X)
    with pytest.raises(ValueError, match=r"X must be 2-D \(N samples, d features\); got shape \(30,\)"):
        fn(np.ones(30))
