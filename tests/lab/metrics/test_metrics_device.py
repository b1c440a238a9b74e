"""The torch backend of k-means (nmi) and the linear probe against scikit-learn itself.

The torch paths (``lab.metrics._kmeans_torch``, ``_probe_torch``) run where the features are, so
that a GPU run copies no layer to the host; on CPU they are exercised here and compared with
``KMeans`` and ``make_pipeline(StandardScaler(), LogisticRegression())`` on generated data: well
separated blobs, overlapping blobs, a few classes with few points.
"""
from __future__ import annotations

import contextlib
import warnings
from functools import partial

import numpy as np
import pytest
import torch
from sklearn.cluster import KMeans
from sklearn.cluster._kmeans import _is_same_clustering
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score
from sklearn.model_selection import StratifiedKFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from lab import metrics
from lab.metrics._kmeans_torch import _lloyd, _same_clustering, kmeans_labels_torch
from lab.metrics._probe_torch import fit_probe
from lab.metrics.separability import _nmi_torch
from tests.fixtures.blobs import blobs as gaussian_blobs


@pytest.fixture(autouse=True)
def _one_thread():
    # 2 shared cores: thread spinning slows small problems 10-20x
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    with threadpool_limits(limits=1):
        yield
    torch.set_num_threads(previous)


blobs = partial(gaussian_blobs, dtype=np.float32)     # float32 by default: the features' dtype on a device


@contextlib.contextmanager
def features_stay_tensors():
    """Fail if a 2-D floating tensor (features, or a copy of them) goes to numpy or to the CPU."""
    saved = {name: getattr(torch.Tensor, name) for name in ("numpy", "cpu", "__array__", "tolist")}

    def guard(name):
        original = saved[name]

        def method(self, *args, **kwargs):
            if self.is_floating_point() and self.dim() == 2:
                raise AssertionError(f"a {tuple(self.shape)} floating tensor left its device via .{name}()")
            return original(self, *args, **kwargs)
        return method

    for name in saved:
        setattr(torch.Tensor, name, guard(name))
    try:
        yield
    finally:
        for name, original in saved.items():
            setattr(torch.Tensor, name, original)


# ------------------------------------------------------------------------------ k-means


@pytest.mark.parametrize("case", range(6))
def test_kmeans_partition_equals_sklearn_on_separated_blobs(case):
    rng = np.random.default_rng(case)
    k, d = int(rng.integers(2, 9)), int(rng.integers(2, 200))
    dtype = (np.float32, np.float64)[case % 2]
    X, y = blobs(n_per_class=int(rng.integers(20, 150)), k=k, d=d, spread=4.0, seed=case, dtype=dtype)
    for n_init, seed in ((10, 0), (1, 42)):
        ref = KMeans(k, n_init=n_init, random_state=seed).fit(X).labels_
        got = kmeans_labels_torch(torch.from_numpy(X), k, n_init=n_init, seed=seed)
        assert got.dtype == torch.int64 and got.device.type == "cpu"
        assert adjusted_rand_score(ref, got.numpy()) == 1.0           # equal up to a permutation
        assert metrics.nmi(X, y, n_init=n_init, seed=seed, backend="torch") == pytest.approx(
            normalized_mutual_info_score(y, ref), abs=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nmi_within_002_of_sklearn_on_overlapping_blobs(dtype):
    ours, theirs = [], []
    for seed in range(8):
        X, y = blobs(n_per_class=60, k=5, d=16, spread=0.45, seed=seed, dtype=dtype)
        ours.append(metrics.nmi(torch.from_numpy(X), y, seed=seed, backend="torch"))
        theirs.append(normalized_mutual_info_score(y, KMeans(5, n_init=10, random_state=seed).fit(X).labels_))
    assert 0.1 < np.mean(theirs) < 0.8                                 # genuinely overlapping
    assert abs(np.mean(ours) - np.mean(theirs)) <= 0.02


def test_kmeans_with_few_points():
    for seed in range(5):
        X, y = blobs(n_per_class=4, k=3, d=5, spread=1.0, seed=seed, dtype=np.float64)
        ref = KMeans(3, n_init=10, random_state=seed).fit(X).labels_
        got = kmeans_labels_torch(torch.from_numpy(X), 3, n_init=10, seed=seed).numpy()
        assert adjusted_rand_score(ref, got) == 1.0


def test_kmeans_far_from_origin_in_float32():
    """float32 distances by |a|² - 2a·b + |b|² lose the differences unless X is centred first, as KMeans does."""
    for seed in range(3):
        X, _ = blobs(n_per_class=50, k=4, d=8, spread=0.5, seed=seed)
        X += np.float32(1e4)
        ref = KMeans(4, n_init=10, random_state=seed).fit(X).labels_
        got = kmeans_labels_torch(torch.from_numpy(X), 4, n_init=10, seed=seed).numpy()
        assert adjusted_rand_score(ref, got) == 1.0


def test_kmeans_is_reproducible_and_seeded():
    X, _ = blobs(n_per_class=50, k=6, d=10, spread=0.4, seed=1)
    Xt = torch.from_numpy(X)
    a = kmeans_labels_torch(Xt, 6, n_init=1, seed=3)
    assert torch.equal(a, kmeans_labels_torch(Xt, 6, n_init=1, seed=3))
    assert any(not torch.equal(a, kmeans_labels_torch(Xt, 6, n_init=1, seed=s)) for s in range(4, 9))


def test_lloyd_relocates_an_empty_cluster_as_sklearn():
    """A centre far from every point gets no point; both move it to the point farthest from its centre."""
    X, _ = blobs(n_per_class=30, k=3, d=4, spread=3.0, seed=2, dtype=np.float64)
    init = np.concatenate([X[:2], np.full((1, 4), 50.0)])             # the third attracts nothing
    ref = KMeans(3, init=init, n_init=1).fit(X)
    mean = X.mean(axis=0)
    tol = float(np.var(X, axis=0).mean()) * 1e-4
    labels, inertia = _lloyd(torch.from_numpy(X - mean), torch.from_numpy(init - mean), max_iter=300, tol=tol)
    assert len(np.unique(ref.labels_)) == 3                          # the empty cluster was re-seeded
    assert adjusted_rand_score(ref.labels_, labels.numpy()) == 1.0
    assert inertia == pytest.approx(ref.inertia_, rel=1e-9)


def test_same_clustering_matches_sklearn():
    rng = np.random.default_rng(0)
    for _ in range(50):
        a = rng.integers(0, 4, 30).astype(np.int32)
        b = rng.permutation(4)[a] if rng.random() < 0.5 else rng.integers(0, 4, 30)
        b = b.astype(np.int32)
        assert _same_clustering(torch.from_numpy(a).long(), torch.from_numpy(b).long(), 4) == \
            _is_same_clustering(a, b, 4)


def test_nmi_torch_equals_sklearn_including_limit_cases():
    rng = np.random.default_rng(0)
    cases = [(rng.integers(0, 4, 200), rng.integers(0, 5, 200)) for _ in range(10)]
    y = np.repeat(np.arange(3), 10)
    cases += [(y, y), (y, (y + 1) % 3), (y, np.zeros_like(y)), (np.zeros(5, int), np.zeros(5, int)),
              (y, np.arange(30) % 2)]
    for a, b in cases:
        ka, kb = int(a.max()) + 1, int(b.max()) + 1
        got = _nmi_torch(torch.from_numpy(a), torch.from_numpy(b), ka, kb)
        assert got == pytest.approx(normalized_mutual_info_score(a, b), abs=1e-12)


# ------------------------------------------------------------------------------ linear probe

PROBE_CASES = [  # (n_per_class, K, d, spread, C)
    (60, 4, 20, 0.3, 1.0),       # overlapping classes
    (80, 2, 30, 0.2, 1.0),       # two classes: scikit-learn's binomial model
    (40, 6, 50, 0.5, 0.1),       # strong regularisation
    (5, 3, 8, 0.5, 1.0),         # a few classes with few points
    (50, 3, 10, 3.0, 10.0),      # well separated, weak regularisation
]


@pytest.mark.parametrize(("per_class", "k", "d", "spread", "C"), PROBE_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_probe_accuracy_within_002_of_sklearn_pipeline(per_class, k, d, spread, C, dtype):
    folds = min(5, per_class)
    diffs = []
    for seed in range(3):
        X, y = blobs(n_per_class=per_class, k=k, d=d, spread=spread, seed=seed, dtype=dtype)
        cv = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
        pipe = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=1000))
        ref = cross_val_score(pipe, X, y, cv=cv).mean()
        got = metrics.linear_probe_accuracy(torch.from_numpy(X), y, folds=folds, C=C, seed=seed, backend="torch")
        assert isinstance(got, float)
        diffs.append(got - ref)
    assert abs(np.mean(diffs)) <= 0.02


@pytest.mark.parametrize(("k", "C"), [(2, 1.0), (4, 0.5), (7, 0.05)])
def test_probe_probabilities_close_to_sklearn(k, C):
    X, y = blobs(n_per_class=100, k=k, d=12, spread=0.4, seed=k)
    train, test = np.arange(len(y)) % 4 != 0, np.arange(len(y)) % 4 == 0
    ref = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=1000)).fit(X[train], y[train])
    probe = fit_probe(torch.from_numpy(X[train]), torch.from_numpy(y[train]), n_classes=k, C=C, max_iter=1000)
    P = probe.predict_proba(torch.from_numpy(X[test])).numpy()
    np.testing.assert_allclose(P, ref.predict_proba(X[test]), atol=2e-3)
    # solved tightly, both reach the same optimum: the objective (binary included) is scikit-learn's
    tight = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=10_000, tol=1e-10))
    tight.fit(X[train].astype(np.float64), y[train])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        probe = fit_probe(torch.from_numpy(X[train]), torch.from_numpy(y[train]), n_classes=k, C=C,
                          max_iter=10_000, tol=1e-9)
    np.testing.assert_allclose(probe.predict_proba(torch.from_numpy(X[test])).numpy(),
                               tight.predict_proba(X[test].astype(np.float64)), atol=1e-5)


def test_probe_standardises_with_the_training_fold_and_keeps_constant_features():
    X, y = blobs(n_per_class=30, k=3, d=6, spread=1.0, seed=0, dtype=np.float64)
    X[:, 2] = 7.0                                                   # constant: scale 1, as StandardScaler
    scaler = StandardScaler().fit(X[:60])
    probe = fit_probe(torch.from_numpy(X[:60]), torch.from_numpy(y[:60]), n_classes=3, C=1.0, max_iter=1000)
    np.testing.assert_allclose(probe.mean.numpy(), scaler.mean_, rtol=1e-12)
    np.testing.assert_allclose(probe.scale.numpy(), scaler.scale_, rtol=1e-12)


def test_probe_warns_when_max_iter_is_too_small():
    X, y = blobs(n_per_class=40, k=4, d=20, spread=0.5, seed=0)
    with pytest.warns(ConvergenceWarning, match="raise max_iter"):
        fit_probe(torch.from_numpy(X), torch.from_numpy(y), n_classes=4, C=1.0, max_iter=2)


# ------------------------------------------------------------------------------ dispatch and device


def test_torch_backend_keeps_features_on_their_device():
    X, y = blobs(n_per_class=30, k=3, d=10, spread=0.6, seed=0)
    Xt = torch.from_numpy(X)
    with features_stay_tensors():
        with pytest.raises(AssertionError, match="left its device"):    # the guard itself works
            Xt.numpy()
        # (on CPU the kNN pass reads numpy views of X by design, so only these two are watched)
        values = metrics.compute_layer(Xt, y, metrics=("nmi", "linear_probe_accuracy"), backend="torch", repeats=2)
        a = metrics.nmi(Xt, y, backend="torch")
        b = metrics.linear_probe_accuracy(Xt, y, backend="torch")
    assert all(isinstance(v, float) for v in values.values()) and isinstance(a, float) and isinstance(b, float)
    with features_stay_tensors(), pytest.raises(AssertionError, match="left its device"):
        metrics.nmi(Xt, y, backend="sklearn")                          # scikit-learn needs a host copy


def test_auto_backend_on_cpu_is_scikit_learn_exactly():
    X, y = blobs(n_per_class=30, k=4, d=12, spread=0.5, seed=3)
    Xt = torch.from_numpy(X)
    ref = normalized_mutual_info_score(y, KMeans(4, n_init=10, random_state=0).fit(X).labels_)
    assert metrics.nmi(Xt, y) == metrics.nmi(Xt, y, backend="sklearn") == ref
    cv = StratifiedKFold(n_splits=5, shuffle=True, random_state=0)
    pipe = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=1000))
    assert metrics.linear_probe_accuracy(Xt, y) == cross_val_score(pipe, X, y, cv=cv).mean()


def test_compute_layer_torch_backend_agrees_and_returns_clusters():
    X, y = blobs(n_per_class=40, k=4, d=16, spread=0.5, seed=5)
    names = ("nmi", "knn_accuracy", "linear_probe_accuracy", "nc1")
    ref, ref_samples = metrics.compute_layer(X, y, metrics=names, return_samples=True)
    got, samples = metrics.compute_layer(torch.from_numpy(X), y, metrics=names, return_samples=True,
                                         backend="torch")
    assert got["nmi"] == pytest.approx(ref["nmi"], abs=0.02)
    assert got["linear_probe_accuracy"] == pytest.approx(ref["linear_probe_accuracy"], abs=0.02)
    assert got["knn_accuracy"] == ref["knn_accuracy"] and got["nc1"] == ref["nc1"]
    assert isinstance(samples["nmi"], np.ndarray) and samples["nmi"].dtype == np.int64
    assert adjusted_rand_score(samples["nmi"], ref_samples["nmi"]) == pytest.approx(1.0, abs=0.05)


def test_bad_backend_names_the_allowed_values():
    X, y = blobs()
    for call in (lambda: metrics.nmi(X, y, backend="gpu"),
                 lambda: metrics.linear_probe_accuracy(X, y, backend="gpu"),
                 lambda: metrics.compute_layer(X, y, backend="gpu")):
        with pytest.raises(ValueError, match=r"backend must be one of 'auto', 'sklearn', 'torch'; got 'gpu'"):
            call()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_features_use_the_torch_path_on_the_device():
    X, y = blobs(n_per_class=200, k=5, d=64, spread=0.5, seed=0)
    Xc, yc = torch.from_numpy(X).cuda(), torch.from_numpy(y).cuda()
    clusters = kmeans_labels_torch(Xc, 5, n_init=10, seed=0)
    assert clusters.device.type == "cuda"
    assert torch.equal(clusters, kmeans_labels_torch(Xc, 5, n_init=10, seed=0))     # reproducible
    with features_stay_tensors():                                     # "auto" on CUDA: nothing to the host
        nmi = metrics.nmi(Xc, yc)
        probe = metrics.linear_probe_accuracy(Xc, yc)
    assert nmi == pytest.approx(metrics.nmi(X, y), abs=0.02)
    assert probe == pytest.approx(metrics.linear_probe_accuracy(X, y), abs=0.02)
    assert metrics.nmi(Xc, yc, backend="sklearn") == metrics.nmi(X, y)
