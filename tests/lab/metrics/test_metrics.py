"""lab.metrics against independent references, on data where the answer is known."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from sklearn.cluster import KMeans
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import normalized_mutual_info_score
from sklearn.model_selection import LeaveOneOut, StratifiedKFold, cross_val_predict, cross_val_score
from sklearn.neighbors import KNeighborsClassifier, NearestNeighbors
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from lab import metrics
from lab.metrics._neighbors import _vote
from tests.fixtures.blobs import blobs


@pytest.fixture(autouse=True)
def _one_thread():
    # The CI box has 2 shared cores: OpenMP/BLAS thread spinning slows sklearn 10-20x.
    with threadpool_limits(limits=1):
        yield


def naive_nc1(X, y):
    """The definition, literally, in float64 with d x d matrices (small d only)."""
    X = np.asarray(X, dtype=np.float64)
    classes = np.unique(y)
    K = len(classes)
    mu = np.stack([X[y == c].mean(0) for c in classes])
    D = X - mu[np.searchsorted(classes, y)]
    Sw = D.T @ D / len(X)
    Mc = mu - mu.mean(0)
    Sb = Mc.T @ Mc / K
    return np.trace(Sw @ np.linalg.pinv(Sb, hermitian=True)) / K


def class_means(X, y):
    classes = np.unique(y)
    return classes, np.stack([X[y == c].mean(0) for c in classes])


# ------------------------------------------------------------------------------ separability

@pytest.mark.parametrize("as_tensor", [False, True])
def test_nmi_equals_sklearn_kmeans_nmi(as_tensor):
    X, y = blobs(spread=0.8, dtype=np.float32)
    ref = normalized_mutual_info_score(y, KMeans(4, n_init=10, random_state=0).fit(X).labels_)
    ref3 = normalized_mutual_info_score(y, KMeans(4, n_init=2, random_state=3).fit(X).labels_)
    Xin = torch.from_numpy(X) if as_tensor else X
    assert metrics.nmi(Xin, y) == ref
    assert metrics.nmi(Xin, y, n_init=2, seed=3) == ref3
    assert 0.2 < ref < 0.95   # a non-trivial case


@pytest.mark.parametrize("case", range(12))
def test_kmeans_labels_equal_sklearn_kmeans(case):
    """The lean k-means behind nmi returns KMeans' labels exactly: float32 / float64 / int
    input, far-from-origin data, few and many clusters, one and ten restarts."""
    from lab.metrics._kmeans import kmeans_labels

    rng = np.random.default_rng(case)
    n, d, k = int(rng.integers(30, 1500)), int(rng.integers(2, 300)), int(rng.integers(2, 9))
    dtype = (np.float32, np.float64, np.int64)[case % 3]
    centres = rng.normal(scale=rng.uniform(0.3, 3.0), size=(k, d))
    X = centres[rng.integers(0, k, n)] + rng.normal(size=(n, d))
    X = (X * 50 + 1000).astype(dtype) if case % 4 == 0 else X.astype(dtype)
    for n_init, seed in ((10, 0), (1, 42), (3, case)):
        ref = KMeans(k, n_init=n_init, random_state=seed).fit(X).labels_
        np.testing.assert_array_equal(kmeans_labels(X, k, n_init=n_init, seed=seed), ref)


@pytest.mark.parametrize("case", range(10))
def test_probe_fit_is_bit_identical_to_logistic_regression(case):
    """The lean probe behind linear_probe_accuracy returns LogisticRegression's coefficients
    exactly and the pipeline's accuracy: float32 / float64 / float16, 2-7 classes, several C."""
    from lab.metrics._probe import _fit_multinomial, probe_accuracy

    rng = np.random.default_rng(100 + case)
    n, d, k = int(rng.integers(60, 700)), int(rng.integers(2, 120)), int(rng.integers(2, 8))
    dtype = (np.float32, np.float64, np.float16)[case % 3]
    C = (1.0, 0.05, 20.0)[case % 3]
    centres = rng.normal(scale=rng.uniform(0.2, 2.0), size=(k, d))
    y = np.arange(n) % k
    X = (centres[y] + rng.normal(size=(n, d))).astype(dtype)
    test = (np.arange(n) // k) % 4 == 0                       # a quarter of every class
    train = ~test
    ref = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=1000)).fit(X[train], y[train])
    assert probe_accuracy(X[train], y[train], X[test], y[test], n_classes=k, C=C, max_iter=1000) \
        == ref.score(X[test], y[test])
    if k >= 3:
        A = ref[0].transform(X[train])
        A = A if A.dtype in (np.float32, np.float64) else A.astype(np.float64)
        W = _fit_multinomial(A, y[train], k, C=C, max_iter=1000).reshape((k, -1), order="F").astype(A.dtype)
        np.testing.assert_array_equal(W[:, :-1], ref[1].coef_)
        np.testing.assert_array_equal(W[:, -1], ref[1].intercept_)


def test_paper_protocol_reproduces_seed_code():
    """Transcription of dyballa/generalization ``compute_nmis`` on a fixed dataset."""
    X, y = blobs(n_per_class=30, k=5, d=16, spread=0.7, seed=7, dtype=np.float32)
    which_classes, which_labels, max_n_per_unseen = list(range(5)), y, 30

    # --- seed code (k-means, NNk1, NNk500 with 500 -> images per class)
    knn = NearestNeighbors(algorithm="auto", n_neighbors=max_n_per_unseen)
    km = KMeans(n_clusters=len(which_classes), random_state=42, n_init="auto")
    km.fit(X)
    seed_nmi = normalized_mutual_info_score(which_labels, km.labels_)
    knn.fit(X)
    graph = knn.kneighbors_graph()
    nn_idxs = np.array([graph.indices[graph.indptr[i]:graph.indptr[i + 1]] for i in range(graph.shape[0])])
    ylabels = np.asarray(which_labels)
    nn_labels = ylabels[nn_idxs]
    seed_nnk1 = (ylabels == nn_labels[:, 0]).sum() / len(ylabels)
    seed_nnk500 = np.mean((ylabels[:, None] == nn_labels).sum(1) / max_n_per_unseen)

    assert metrics.nmi(X, y, protocol="paper") == seed_nmi
    assert metrics.knn_accuracy(X, y) == seed_nnk1
    assert metrics.knn_purity(X, y, protocol="paper") == pytest.approx(seed_nnk500, abs=1e-12)
    row = metrics.compute_layer(X, y, metrics=("nmi", "knn_accuracy", "knn_purity"), protocol="paper")
    assert row == {"nmi": seed_nmi, "knn_accuracy": seed_nnk1, "knn_purity": pytest.approx(seed_nnk500, abs=1e-12)}
    assert 0.3 < seed_nmi < 0.95 and 0.3 < seed_nnk1 < 1.0


@pytest.mark.parametrize(("k", "n_classes"), [(1, 3), (3, 2), (5, 2)])
def test_knn_accuracy_equals_sklearn_leave_one_out(k, n_classes):
    # Two classes and odd k: no vote ties, where sklearn's rule (lowest label) differs from ours.
    X, y = blobs(n_per_class=30, k=n_classes, d=5, spread=0.8, seed=k)
    pred = cross_val_predict(KNeighborsClassifier(n_neighbors=k), X, y, cv=LeaveOneOut())
    assert metrics.knn_accuracy(X, y, k=k) == np.mean(pred == y)


def test_knn_vote_ties_go_to_nearest_tied_class():
    # neighbours nearest first: votes 2-2-1 between classes 2 and 1; class 2 holds the nearest.
    nbrs = torch.tensor([[2, 1, 0, 1, 2], [1, 1, 2, 2, 0], [0, 2, 2, 1, 1]])
    assert _vote(nbrs, 3).tolist() == [2, 1, 2]
    # Public path: sample 0 (class 0) has neighbours class 2 at 1.0, class 1 at 2.0.
    X = np.array([[0.0], [1.0], [-2.0], [10.0], [11.0], [-12.0]])
    y = np.array([0, 2, 1, 0, 2, 1])
    # With k=2 every sample's two neighbours are of two different classes: it predicts the nearest.
    dists, idx = metrics.knn_indices(X, 2)
    expected = np.mean(y[idx[:, 0].numpy()] == y)
    assert metrics.knn_accuracy(X, y, k=2) == expected


def test_knn_purity_equals_neighbour_fraction():
    X, y = blobs(n_per_class=25, k=3, d=6, spread=0.8, seed=2)
    for k in (1, 7, 24):
        _, idx = NearestNeighbors(n_neighbors=k).fit(X).kneighbors()
        ref = np.mean((y[idx] == y[:, None]).sum(1) / k)
        assert metrics.knn_purity(X, y, k=k) == pytest.approx(ref, abs=1e-14)
    # default k = smallest class size - 1
    _, idx = NearestNeighbors(n_neighbors=24).fit(X).kneighbors()
    assert metrics.knn_purity(X, y) == pytest.approx(np.mean((y[idx] == y[:, None]).mean(1)), abs=1e-14)


def numpy_dinov2_weighted_knn(X, y, k=20, T=0.07):
    """Direct numpy transcription of DINOv2's KnnModule (leave-one-out on one set)."""
    Xn = X / np.linalg.norm(X, axis=1, keepdims=True)
    sim = Xn @ Xn.T
    np.fill_diagonal(sim, -np.inf)
    idx = np.argsort(-sim, axis=1, kind="stable")[:, :k]
    topk = np.take_along_axis(sim, idx, axis=1)
    w = np.exp(topk / T)
    w = w / w.sum(1, keepdims=True)                       # softmax(topk / T)
    onehot = np.eye(y.max() + 1)[y[idx]]                  # (N, k, K)
    probas = (onehot * w[:, :, None]).sum(1)
    return np.mean(probas.argmax(1) == y)


@pytest.mark.parametrize(("k", "T"), [(20, 0.07), (5, 0.5)])
def test_weighted_knn_equals_numpy_dinov2(k, T):
    X, y = blobs(n_per_class=40, k=4, d=10, spread=0.5, seed=3)
    ref = numpy_dinov2_weighted_knn(X, y, k=k, T=T)
    assert metrics.weighted_knn_accuracy(X, y, k=k, temperature=T) == ref
    assert 0.3 < ref < 1.0


def test_linear_probe_equals_sklearn_pipeline():
    X, y = blobs(n_per_class=30, k=3, d=12, spread=0.5, seed=4, dtype=np.float32)
    cv = StratifiedKFold(n_splits=3, shuffle=True, random_state=1)
    pipe = make_pipeline(StandardScaler(), LogisticRegression(C=0.5, max_iter=1000))
    ref = cross_val_score(pipe, X, y, cv=cv).mean()
    assert metrics.linear_probe_accuracy(torch.from_numpy(X), y, folds=3, C=0.5, seed=1) == ref
    assert 0.4 < ref < 1.0


def test_knn_indices_match_sklearn_and_umap_layout():
    X, y = blobs(n_per_class=20, k=3, d=6, seed=5, dtype=np.float32)
    ref_d, ref_i = NearestNeighbors(n_neighbors=7).fit(X).kneighbors()
    dists, idx = metrics.knn_indices(torch.from_numpy(X), 7, block_rows=11)   # several blocks
    assert idx.dtype == torch.int64 and dists.dtype == torch.float32
    np.testing.assert_array_equal(idx.numpy(), ref_i)
    np.testing.assert_allclose(dists.numpy(), ref_d, rtol=1e-5)
    # include_self: self first at distance 0, then the same neighbours (UMAP's precomputed_knn)
    d_self, i_self = metrics.knn_indices(X, 8, include_self=True)
    np.testing.assert_array_equal(i_self[:, 0].numpy(), np.arange(len(X)))
    assert float(d_self[:, 0].abs().max()) == 0.0
    np.testing.assert_array_equal(i_self[:, 1:].numpy(), ref_i)
    # cosine
    ref_cd, ref_ci = NearestNeighbors(n_neighbors=5, metric="cosine").fit(X).kneighbors()
    cd, ci = metrics.knn_indices(X, 5, metric="cosine")
    np.testing.assert_array_equal(ci.numpy(), ref_ci)
    np.testing.assert_allclose(cd.numpy(), ref_cd, atol=1e-6)


def test_collapsed_classes_known_values():
    rng = np.random.default_rng(0)
    means = rng.normal(size=(4, 6))
    y = np.repeat(np.arange(4), 10)
    X = means[y]                                          # every sample at its class mean
    assert metrics.nc1(X, y) == pytest.approx(0.0, abs=1e-20)   # float64 rounding of the means only
    assert metrics.cdnv(X, y) == pytest.approx(0.0, abs=1e-20)
    assert metrics.nc1(X.astype(np.float32), y) == 0.0              # float32 data: means are exact
    assert metrics.nmi(X, y) == 1.0
    assert metrics.knn_accuracy(X, y) == 1.0
    assert metrics.knn_purity(X, y) == 1.0
    assert metrics.ncc_accuracy(X, y) == 1.0
    assert metrics.numerical_rank(X, y) == pytest.approx(1.0, abs=1e-12)


def test_identical_distributions_known_values():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(600, 5))
    y = np.repeat(np.arange(3), 200)
    assert metrics.nmi(X, y) < 0.02
    assert abs(metrics.knn_accuracy(X, y) - 1 / 3) < 0.06
    assert abs(metrics.knn_purity(X, y) - 199 / 599) < 0.03


# ------------------------------------------------------------------------------ collapse

@pytest.mark.parametrize(("d", "k"), [(10, 4), (3, 6), (40, 5)])
def test_nc1_equals_naive_float64_pinv(d, k):
    X, y = blobs(n_per_class=30, k=k, d=d, spread=1.0, seed=d)
    ref = naive_nc1(X, y)
    assert metrics.nc1(X, y) == pytest.approx(ref, rel=1e-8)
    assert metrics.nc1(torch.from_numpy(X.astype(np.float32)), y) == pytest.approx(ref, rel=1e-5)


def test_nc1_invariances():
    X, y = blobs(n_per_class=25, k=4, d=9, spread=1.0, seed=11)
    base = metrics.nc1(X, y)
    relabel = np.array([30, 7, -2, 12])[y]                 # other label values, other order
    perm = np.random.default_rng(0).permutation(len(y))
    assert metrics.nc1(X, relabel) == pytest.approx(base, rel=1e-12)
    assert metrics.nc1(X[perm], y[perm]) == pytest.approx(base, rel=1e-12)
    for scale in (1e-3, 7.0, 1e4):
        assert metrics.nc1(X * scale, y) == pytest.approx(base, rel=1e-10)
        assert metrics.cdnv(X * scale, y) == pytest.approx(metrics.cdnv(X, y), rel=1e-10)


def test_nc1_exact_at_d_100000():
    # nc1 is invariant to an isometric embedding: embed an 8-d problem in R^100000.
    X, y = blobs(n_per_class=15, k=3, d=8, spread=1.0, seed=12)
    Q, _ = np.linalg.qr(np.random.default_rng(0).normal(size=(100_000, 8)))   # orthonormal columns
    big = torch.from_numpy(X @ Q.T)                                               # (45, 100000)
    assert metrics.nc1(big, y) == pytest.approx(naive_nc1(X, y), rel=1e-8)


def test_cdnv_equals_naive():
    X, y = blobs(n_per_class=20, k=4, d=7, seed=13)
    classes, mu = class_means(X, y)
    var = np.array([((X[y == c] - m) ** 2).sum(1).mean() for c, m in zip(classes, mu)])
    ref = np.mean([(var[i] + var[j]) / (2 * ((mu[i] - mu[j]) ** 2).sum())
                   for i in range(4) for j in range(4) if i != j])
    assert metrics.cdnv(X, y) == pytest.approx(ref, rel=1e-12)


def test_numerical_rank_equals_numpy_and_rank_one_is_one():
    X, y = blobs(n_per_class=12, k=3, d=20, seed=14)        # d > n_k: the n_k x n_k Gram path
    ref = np.mean([np.linalg.norm(X[y == c], "fro") ** 2 / np.linalg.norm(X[y == c], 2) ** 2 for c in range(3)])
    assert metrics.numerical_rank(X, y) == pytest.approx(ref, rel=1e-10)
    X2, y2 = blobs(n_per_class=30, k=3, d=5, seed=15)       # d <= n_k: the d x d Gram path
    ref2 = np.mean([np.linalg.norm(X2[y2 == c], "fro") ** 2 / np.linalg.norm(X2[y2 == c], 2) ** 2 for c in range(3)])
    assert metrics.numerical_rank(X2, y2) == pytest.approx(ref2, rel=1e-10)
    rng = np.random.default_rng(0)
    y1 = np.repeat(np.arange(3), 10)
    X1 = rng.normal(size=(30, 1)) * rng.normal(size=(3, 16))[y1]   # class k rows = a_i * v_k
    assert metrics.numerical_rank(X1, y1) == pytest.approx(1.0, abs=1e-12)


def test_nc2_simplex_etf_is_zero_and_matches_naive():
    K, d = 5, 8
    etf = np.zeros((K, d))
    etf[:, :K] = (np.eye(K) - np.ones((K, K)) / K) * np.sqrt(K / (K - 1))
    rng = np.random.default_rng(0)
    noise = rng.normal(size=(10, d))
    X = np.concatenate([m + np.concatenate([noise, -noise]) for m in etf + 3.0])   # exact means, offset
    y = np.repeat(np.arange(K), 20)
    out = metrics.nc2(X, y)
    assert out["equinorm"] == pytest.approx(0.0, abs=1e-12)
    assert out["equiangularity"] == pytest.approx(0.0, abs=1e-12)

    X, y = blobs(n_per_class=20, k=4, d=6, seed=16)
    _, mu = class_means(X, y)
    c = mu - mu.mean(0)
    norms = np.linalg.norm(c, axis=1)
    cos = (c @ c.T) / np.outer(norms, norms)
    iu = np.triu_indices(4, 1)
    out = metrics.nc2(X, y)
    assert out["equinorm"] == pytest.approx(norms.std(ddof=1) / norms.mean(), rel=1e-10)
    assert out["equiangularity"] == pytest.approx(np.abs(cos[iu] + 1 / 3).mean(), rel=1e-10)


def test_ncc_accuracy_equals_naive():
    X, y = blobs(n_per_class=30, k=4, d=5, spread=0.6, seed=17)
    _, mu = class_means(X, y)
    pred = ((X[:, None, :] - mu[None]) ** 2).sum(-1).argmin(1)
    ref = np.mean(pred == y)
    assert metrics.ncc_accuracy(X, y) == ref
    assert 0.4 < ref < 1.0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_gpu_agrees_with_cpu():
    X, y = blobs(n_per_class=30, k=4, d=16, spread=0.8, dtype=np.float32)
    cpu = metrics.compute_layer(torch.from_numpy(X), y, metrics=metrics.ALL_METRICS)
    gpu = metrics.compute_layer(torch.from_numpy(X).cuda(), torch.from_numpy(y).cuda(), metrics=metrics.ALL_METRICS)
    # k-means and the probe run in torch on CUDA (tests/lab/metrics/test_metrics_device.py): equal up to rounding
    device_paths = ("nmi", "linear_probe_accuracy")
    assert {m: gpu[m] for m in device_paths} == pytest.approx({m: cpu[m] for m in device_paths}, abs=0.02)
    rest = [m for m in cpu if m not in device_paths]
    assert {m: gpu[m] for m in rest} == pytest.approx({m: cpu[m] for m in rest}, rel=1e-5)


@pytest.mark.parametrize("metric", ["euclidean", "cosine"])
def test_same_class_count_with_ties_is_a_valid_top_k(metric):
    """knn_purity counts via the k-th value only; with many exact ties (duplicates on a
    corners of a hypercube: equal norms, so distances and cosines are exact) every row's
    count must be one that some top-k selection gives."""
    from lab.metrics._neighbors import _neighbor_graphs

    rng = np.random.default_rng(3)
    X = torch.from_numpy(rng.choice([-1.0, 1.0], size=(120, 4)))
    codes = torch.from_numpy(rng.integers(0, 3, size=120))
    k = 17
    got = _neighbor_graphs(X, {"p": (metric, k, "same_class")}, codes=codes, block_rows=50)["p"].numpy()
    Xn, cn = X.numpy(), codes.numpy()
    if metric == "euclidean":
        key = ((Xn[:, None, :] - Xn[None, :, :]) ** 2).sum(-1)
    else:
        key = -(Xn @ Xn.T) / 4.0                # minus the cosine
    np.fill_diagonal(key, np.inf)
    n_ambiguous = 0
    for i in range(len(Xn)):
        kth = np.sort(key[i])[k - 1]
        sure = key[i] < kth                    # in every top k
        tied = key[i] == kth                   # some of these fill the remaining slots
        same = cn == cn[i]
        slots = k - sure.sum()
        lo = (sure & same).sum() + max(0, slots - (tied & ~same).sum())
        hi = (sure & same).sum() + min(slots, (tied & same).sum())
        assert lo <= got[i] <= hi
        n_ambiguous += lo < hi
    assert n_ambiguous > 10                    # the tie path was exercised
