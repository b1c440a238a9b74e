"""kNN metrics from one pass (issue 14): values bit-identical to the per-metric implementation.

The reference below is a copy of lab/metrics/_neighbors.py and the kNN parts of
separability.py as of 98561c5 (one request per pass, numpy/torch selection), kept here so
the comparison does not depend on the code under test.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.neighbors import NearestNeighbors

from lab import metrics
from lab.metrics import _knn_kernel, _neighbors


# ------------------------------------------------------------------ reference (98561c5)

def _ref_select(M, k, *, largest, ordered):
    if k == 1:
        return M.max(dim=1, keepdim=True) if largest else M.min(dim=1, keepdim=True)
    a = M.numpy()
    n = a.shape[1]
    if k >= n:
        order = np.argsort(a, axis=1)
        idx = order[:, ::-1][:, :k] if largest else order[:, :k]
    else:
        idx = np.argpartition(a, n - k, axis=1)[:, n - k:] if largest else np.argpartition(a, k - 1, axis=1)[:, :k]
    i = torch.from_numpy(np.ascontiguousarray(idx, dtype=np.int64))
    v = M.gather(1, i)
    if ordered and k < n:
        v, o = torch.sort(v, dim=1, descending=largest, stable=True)
        i = i.gather(1, o)
    return v, i


def _ref_same_class_count(M, k, *, largest, row_codes, codes):
    a, n = M.numpy(), M.shape[1]
    pos = n - k if largest else k - 1
    part = np.partition(a, pos, axis=1)
    kth = part[:, pos:pos + 1]
    if largest:
        inside = a >= kth
        tied = part[:, :pos].max(axis=1, initial=-np.inf) == kth[:, 0]
    else:
        inside = a <= kth
        tied = part[:, pos + 1:].min(axis=1, initial=np.inf) == kth[:, 0]
    inside &= (row_codes[:, None] == codes[None, :]).numpy()
    count = torch.from_numpy(np.count_nonzero(inside, axis=1).astype(np.int64))
    if tied.any():
        rows = torch.from_numpy(np.flatnonzero(tied))
        _, i = _ref_select(M[rows], k, largest=largest, ordered=False)
        count[rows] = (codes[i] == row_codes[rows][:, None]).sum(dim=1)
    return count


def _ref_graph(X, metric, k, mode, codes=None):
    """One request, one blocked pass (float64 on CPU), as the per-metric functions did."""
    n = X.shape[0]
    Xc = X.to(torch.float64)
    sq = (Xc * Xc).sum(dim=1)
    norms = sq.sqrt()
    inv = torch.where(norms > 0, 1.0 / norms, torch.zeros_like(norms))
    rows = max(1, min(n, 256, (1 << 24) // max(n, 1)))
    whole = torch.from_numpy(Xc.numpy() @ Xc.numpy().T) if n * n <= (1 << 20) else None
    parts = []
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        b = torch.arange(stop - start)
        G = whole[start:stop] if whole is not None else torch.from_numpy(Xc[start:stop].numpy() @ Xc.numpy().T)
        if metric == "cosine":
            M = G.mul_(inv[None, :])
            M[b, start + b] = float("-inf")
        else:
            M = G.mul_(-2.0).add_(sq[None, :])
            M[b, start + b] = float("inf")
        if mode == "same_class":
            parts.append(_ref_same_class_count(M, k, largest=metric == "cosine", row_codes=codes[start:stop],
                                               codes=codes))
            continue
        v, i = _ref_select(M, k, largest=metric == "cosine", ordered=mode == "ordered")
        v = (v + sq[start:stop, None]).clamp_min_(0.0).sqrt_() if metric == "euclidean" else v * inv[start:stop, None]
        parts.append((v, i))
    if mode == "same_class":
        return torch.cat(parts)
    return torch.cat([v for v, _ in parts]), torch.cat([i for _, i in parts])


def _ref_vote(neighbor_codes, n_classes):
    n, _ = neighbor_codes.shape
    counts = torch.zeros(n, n_classes, dtype=torch.int64)
    counts.scatter_add_(1, neighbor_codes, torch.ones_like(neighbor_codes))
    best = counts.max(dim=1, keepdim=True).values
    is_top = counts.gather(1, neighbor_codes) == best
    first = is_top.to(torch.uint8).argmax(dim=1)
    return neighbor_codes.gather(1, first[:, None]).squeeze(1)


def ref_knn_accuracy(X, codes, n_classes, k, metric):
    _, i = _ref_graph(X, metric, k, "ordered")
    return float((_ref_vote(codes[i[:, :k]], n_classes) == codes).double().mean())


def ref_knn_purity(X, codes, k, metric):
    same = _ref_graph(X, metric, k, "same_class", codes)
    return float((same.double() / k).mean())


def ref_weighted(X, codes, n_classes, k, temperature):
    v, i = _ref_graph(X, "cosine", k, "set")
    weights = torch.softmax(v[:, :k] / temperature, dim=1)
    votes = torch.zeros(len(codes), n_classes, dtype=weights.dtype)
    votes.scatter_add_(1, codes[i[:, :k]], weights)
    return float((votes.argmax(dim=1) == codes).double().mean())


# ------------------------------------------------------------------ data

def _labels(n, n_classes, rng):
    y = rng.integers(0, n_classes, n)
    y[:2 * n_classes] = np.repeat(np.arange(n_classes), 2)       # every class has >= 2 members
    return y


def _dataset(kind, n, rng, dtype):
    if kind == "gaussian":
        X = rng.standard_normal((n, 12))
    elif kind == "corners":                    # {0,1}^4: many exact distance / similarity ties
        X = rng.integers(0, 2, (n, 4)).astype(float)
    elif kind == "duplicates":                 # repeated samples, some with different labels
        base = rng.standard_normal((n // 4, 6))
        X = base[rng.integers(0, len(base), n)]
    else:                                      # grid values and a zero vector (cosine 0)
        X = rng.integers(-2, 3, (n, 3)).astype(float)
        X[5] = 0.0
    return torch.from_numpy(X.astype(dtype))


@pytest.fixture(params=["compiled", "numpy"])
def path(request, monkeypatch):
    """Run the public functions through the compiled row kernel even at small N, or never."""
    monkeypatch.setattr(_neighbors, "_COMPILED_MIN_N", 0 if request.param == "compiled" else 10**9)
    return request.param


CASES = [(kind, dtype, seed) for kind in ("gaussian", "corners", "duplicates", "grid")
         for dtype, seed in ((np.float32, 1), (np.float64, 2))]


@pytest.mark.parametrize("kind,dtype,seed", CASES)
def test_knn_metrics_are_bit_identical_to_the_per_metric_implementation(path, kind, dtype, seed):
    rng = np.random.default_rng(seed)
    n, n_classes = int(rng.integers(150, 260)), 4
    y = _labels(n, n_classes, rng)
    X = _dataset(kind, n, rng, dtype)
    codes = torch.from_numpy(y)
    for metric in ("euclidean", "cosine"):
        for k in (1, 2, 5, 10):
            assert metrics.knn_accuracy(X, y, k=k, metric=metric) == ref_knn_accuracy(X, codes, n_classes, k, metric)
        smallest = int(np.bincount(y).min())
        for k in (1, 3, 40, smallest - 1, n - 1):
            assert metrics.knn_purity(X, y, k=k, metric=metric) == ref_knn_purity(X, codes, k, metric)
        assert metrics.knn_purity(X, y, metric=metric, protocol="paper") == ref_knn_purity(X, codes, smallest, metric)
    for k, temperature in ((1, 0.07), (5, 0.07), (20, 0.07), (20, 1.0), (7, 1e-3)):
        assert (metrics.weighted_knn_accuracy(X, y, k=k, temperature=temperature)
                == ref_weighted(X, codes, n_classes, k, temperature))
    # All three in one layer_report: one pass, the same values.
    params = {"knn_accuracy": {"k": 3, "metric": "cosine"}, "knn_purity": {"k": 9},
              "weighted_knn_accuracy": {"k": 15}}
    got = metrics.compute_layer(X, y, metrics=["knn_accuracy", "knn_purity", "weighted_knn_accuracy"], params=params)
    assert got == {"knn_accuracy": ref_knn_accuracy(X, codes, n_classes, 3, "cosine"),
                   "knn_purity": ref_knn_purity(X, codes, 9, "euclidean"),
                   "weighted_knn_accuracy": ref_weighted(X, codes, n_classes, 15, 0.07)}


def test_tie_data_takes_every_exact_fallback():
    """On tied data the kernel flags rows (tied 1-NN, k-th value tied outside the top k, a
    vote too close to call); those are redone by the original selection, and the results
    still equal the reference (previous test) -- here: the flags do occur."""
    rng = np.random.default_rng(3)
    n = 200
    X = _dataset("corners", n, rng, np.float64).numpy()
    codes = _labels(n, 3, rng).astype(np.int64)
    sq = (X * X).sum(1)
    inv = 1.0 / np.sqrt(np.where(sq > 0, sq, 1.0)) * (sq > 0)
    out = {name: np.zeros((1, n), dtype=dt) for name, dt in
           (("nn_idx", np.int64), ("nn_val", float), ("nn_tied", bool), ("cnt", np.int64), ("cnt_tied", bool),
            ("w_pred", np.int64), ("w_decided", bool))}
    one = np.array([0], dtype=np.int64)
    _knn_kernel.block_tasks(X @ X.T, sq, inv, codes, 0, True, True,
                            one, out["nn_idx"], out["nn_val"], out["nn_tied"],
                            one, np.array([10], dtype=np.int64), out["cnt"], out["cnt_tied"],
                            np.array([20], dtype=np.int64), np.array([0.07]), out["w_pred"], out["w_decided"], 3)
    assert out["nn_tied"].sum() > 10
    assert out["cnt_tied"].sum() > 10
    assert (~out["w_decided"]).sum() > 10
    # Untied rows: the same same-class count as a full sort.
    K = sq[None, :] - 2.0 * (X @ X.T)
    np.fill_diagonal(K, np.inf)
    for i in np.flatnonzero(~out["cnt_tied"][0]):
        nearest = np.argsort(K[i], kind="stable")[:10]
        assert out["cnt"][0, i] == np.sum(codes[nearest] == codes[i])


@pytest.mark.parametrize("seed", range(4))
def test_kth_value_and_same_class_count_without_and_with_a_bracket_miss(seed):
    rng = np.random.default_rng(seed)
    n = 3000
    x, y = np.empty(n + 1), np.empty(n + 1)
    for m in (1, 2, 17, 300, n):
        a = rng.integers(0, 7, m).astype(float) if seed % 2 else rng.standard_normal(m)
        r = int(rng.integers(0, m))
        assert _knn_kernel._kth_value(a, m, r, x, y) == np.sort(a)[r]
    codes = rng.integers(0, 5, n)
    K = rng.standard_normal(n)
    K[7] = np.inf                                                   # the sample itself
    sample, cand = np.empty(n), np.empty(n + 1, dtype=np.int64)
    biased = K.copy()                           # every sampled entry huge: for 1 << k << N the
    m = min(n, max(_knn_kernel._SAMPLE, int(4 * np.sqrt(n))))      # bracket misses the k-th value
    biased[(np.arange(m) * n) // m] = 1e9 + np.arange(m)
    for keys in (K, biased):
        for k in (1, 5, 600, 2999):
            same, tied = _knn_kernel._count_same(keys, k, codes, 2, sample, cand, x, y)
            order = np.argsort(keys, kind="stable")
            assert not tied
            assert same == np.sum(codes[order[:k]] == 2)


def test_default_path_at_larger_n_equals_scikit_learn_and_the_reference():
    """N above the compiled threshold with the default settings; untied float64 data, where
    scikit-learn's exact brute-force neighbours are the same sets."""
    rng = np.random.default_rng(5)
    n, n_classes = 2600, 5
    assert n >= _neighbors._COMPILED_MIN_N
    y = np.repeat(np.arange(n_classes), n // n_classes)
    X = rng.standard_normal((n, 24)) + rng.standard_normal((n_classes, 24))[y] * 0.4
    codes = torch.from_numpy(y)
    idx = NearestNeighbors(n_neighbors=n // n_classes, algorithm="brute").fit(X).kneighbors(return_distance=False)
    assert metrics.knn_accuracy(X, y) == float(np.mean(y[idx[:, 0]] == y))
    k = n // n_classes - 1
    same = torch.from_numpy((y[idx[:, :k]] == y[:, None]).sum(1))
    assert metrics.knn_purity(X, y) == float((same.double() / k).mean())      # the same mean of the counts
    report = metrics.layer_report({"a": torch.from_numpy(X)}, y, metrics=["knn_accuracy", "knn_purity",
                                                                           "weighted_knn_accuracy"], protocol="paper")
    X_t = torch.from_numpy(X)
    assert report.loc["a"].tolist() == [ref_knn_accuracy(X_t, codes, n_classes, 1, "euclidean"),
                                        ref_knn_purity(X_t, codes, n // n_classes, "euclidean"),
                                        ref_weighted(X_t, codes, n_classes, 20, 0.07)]


def test_threads_split_rows_without_changing_values(monkeypatch):
    monkeypatch.setattr(_neighbors, "_COMPILED_MIN_N", 0)
    rng = np.random.default_rng(6)
    n = 300
    y = _labels(n, 3, rng)
    X = _dataset("corners", n, rng, np.float32)
    names = ["knn_accuracy", "knn_purity", "weighted_knn_accuracy"]
    previous = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = metrics.compute_layer(X, y, metrics=names)
        torch.set_num_threads(3)
        three = metrics.compute_layer(X, y, metrics=names)
    finally:
        torch.set_num_threads(previous)
    assert one == three
