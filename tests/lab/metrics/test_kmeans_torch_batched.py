"""The batched k-means of ``lab.metrics._kmeans_torch`` (all ``n_init`` restarts at once, the k-means++
draws made up front) against the restart-by-restart implementation it replaced, kept here verbatim
as the reference (``_ref_*``): the same labels on seeded data, the same draws, each restart its own
stopping point, and one read from the device per Lloyd iteration.
"""
from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch

from lab.metrics import _kmeans_torch
from lab.metrics._kmeans_torch import (
    _kmeans_plusplus, _lloyd, _lloyd_batched, _plusplus_draws, kmeans_labels_torch,
)
from tests.fixtures.blobs import blobs

pytestmark = pytest.mark.usefixtures("one_thread")      # conftest: torch on one thread


# ------------------------------------------------------------------ the reference: restart by restart

def _ref_kmeans_labels(X, n_clusters, *, n_init, seed, max_iter=300):
    X = X - X.mean(dim=0)
    tol = float(X.var(dim=0, unbiased=False).mean()) * 1e-4
    norms = torch.einsum("ij,ij->i", X, X)
    rng = np.random.RandomState(seed)
    best_labels, best_inertia = None, None
    for _ in range(n_init):
        centers = _ref_kmeans_plusplus(X, norms, n_clusters, rng)
        labels, inertia = _ref_lloyd(X, centers, max_iter=max_iter, tol=tol)
        if best_inertia is None or (inertia < best_inertia
                                    and not _kmeans_torch._same_clustering(labels, best_labels, n_clusters)):
            best_labels, best_inertia = labels, inertia
    return best_labels


def _ref_sq_distances(A, a_norms, X, norms):
    d = torch.addmm(a_norms[:, None], A, X.T, alpha=-2)
    return d.add_(norms).clamp_min_(0)


def _ref_kmeans_plusplus(X, norms, n_clusters, rng):
    n, device = X.shape[0], X.device
    n_local_trials = 2 + int(np.log(n_clusters))
    weights = np.ones(n, dtype=np.float32 if X.dtype == torch.float32 else np.float64)
    first = rng.choice(n, p=weights / weights.sum())
    ids = [torch.tensor([first], device=device)]
    closest = _ref_sq_distances(X[first:first + 1], norms[first:first + 1], X, norms)[0]
    pot = closest.sum(dtype=torch.float64)
    for _ in range(1, n_clusters):
        draws = torch.as_tensor(rng.uniform(size=n_local_trials), device=device) * pot
        cumulative = torch.cumsum(closest, 0, dtype=torch.float64)
        candidates = torch.searchsorted(cumulative, draws).clamp_(max=n - 1)
        to_candidates = _ref_sq_distances(X[candidates], norms[candidates], X, norms)
        torch.minimum(closest, to_candidates, out=to_candidates)
        pots = to_candidates.sum(dim=1, dtype=torch.float64)
        best = torch.argmin(pots)
        pot, closest = pots[best], to_candidates[best]
        ids.append(candidates[best].reshape(1))
    return X[torch.cat(ids)]


def _ref_assign(X, centers):
    c_norms = torch.einsum("ij,ij->i", centers, centers)
    rows = max(1, (1 << 24) // centers.shape[0])
    return torch.cat([torch.addmm(c_norms, X[s:s + rows], centers.T, alpha=-2).argmin(dim=1)
                      for s in range(0, X.shape[0], rows)])


def _ref_sums(X, labels, n_clusters):
    sums = X.new_zeros((n_clusters, X.shape[1]))
    rows = max(1, (1 << 24) // n_clusters)
    arange = torch.arange(n_clusters, device=X.device)
    for s in range(0, X.shape[0], rows):
        onehot = (labels[s:s + rows, None] == arange).to(X.dtype)
        sums.addmm_(onehot.T, X[s:s + rows])
    return sums, torch.bincount(labels, minlength=n_clusters)


def _ref_relocate_empty(X, labels, centers_old, sums, counts):
    empty = torch.nonzero(counts == 0).flatten().tolist()
    distances = _ref_to_own_center(X, centers_old, labels)
    if float(distances.max()) == 0:
        return
    far = torch.topk(distances, len(empty)).indices.tolist()
    for new, idx in zip(empty, far):
        old = int(labels[idx])
        sums[old] -= X[idx]
        sums[new] = X[idx]
        counts[new] += 1
        counts[old] -= 1


def _ref_lloyd(X, centers, *, max_iter, tol):
    n_clusters = centers.shape[0]
    labels_old = None
    strict = False
    for _ in range(max_iter):
        labels = _ref_assign(X, centers)
        sums, counts = _ref_sums(X, labels, n_clusters)
        new = sums / counts.clamp_min(1)[:, None].to(X.dtype)
        shift = ((new - centers) ** 2).sum(dtype=torch.float64)
        changed = (labels != labels_old).any() if labels_old is not None else torch.ones((), device=X.device)
        n_empty, changed, shift_value = torch.stack(
            [(counts == 0).sum().double(), changed.double(), shift]).tolist()
        if n_empty:
            _ref_relocate_empty(X, labels, centers, sums, counts)
            new = sums / counts.clamp_min(1)[:, None].to(X.dtype)
            shift_value = float(((new - centers) ** 2).sum(dtype=torch.float64))
        centers = new
        if not changed:
            strict = True
            break
        if shift_value <= tol:
            break
        labels_old = labels
    if not strict:
        labels = _ref_assign(X, centers)
    inertia = float(_ref_to_own_center(X, centers, labels).sum(dtype=torch.float64))
    return labels, inertia


def _ref_to_own_center(X, centers, labels):
    rows = max(1, (1 << 24) // X.shape[1])
    return torch.cat([((X[s:s + rows] - centers[labels[s:s + rows]]) ** 2).sum(dim=1)
                      for s in range(0, X.shape[0], rows)])


# ------------------------------------------------------------------ helpers

def _centred(X):
    X = torch.from_numpy(X)
    X = X - X.mean(dim=0)
    return X, float(X.var(dim=0, unbiased=False).mean()) * 1e-4


@contextlib.contextmanager
def _count_reads():
    """Count the reads of tensor values by the host (``tolist``, ``item``, ``float``, ``int``, ``bool``):
    each is a synchronisation on a GPU."""
    names = ("tolist", "item", "__float__", "__int__", "__bool__", "__index__")
    saved = {name: getattr(torch.Tensor, name) for name in names}
    count = [0]

    def counting(original):
        def method(self, *args, **kwargs):
            count[0] += 1
            return original(self, *args, **kwargs)
        return method

    for name in names:
        setattr(torch.Tensor, name, counting(saved[name]))
    try:
        yield count
    finally:
        for name, original in saved.items():
            setattr(torch.Tensor, name, original)


# ------------------------------------------------------------------ the draws

def test_one_uniform_call_is_the_stream_of_many():
    """The claim the up-front draws rest on: RandomState gives the same numbers, and ends in the same
    state, whether K-1 calls of T or one call of (K-1)·T."""
    for seed, steps, trials in ((0, 99, 6), (7, 1, 2), (123, 49, 5)):
        a, b = np.random.RandomState(seed), np.random.RandomState(seed)
        many = np.concatenate([a.uniform(size=trials) for _ in range(steps)])
        one = b.uniform(size=steps * trials)
        assert np.array_equal(many, one)
        assert a.uniform() == b.uniform()                      # and the state after them is the same


@pytest.mark.parametrize("n_clusters", [1, 2, 7, 100])
def test_predrawn_draws_equal_sklearns_sequential_draws(n_clusters):
    n, n_init, seed = 500, 4, 11
    got_first, got_uniforms = _plusplus_draws(np.random.RandomState(seed), n, n_clusters, n_init, torch.float32)
    rng = np.random.RandomState(seed)
    trials = 2 + int(np.log(n_clusters))
    weights = np.ones(n, dtype=np.float32)
    assert got_first.shape == (n_init,) and got_uniforms.shape == (n_init, n_clusters - 1, trials)
    for r in range(n_init):                                    # restart r's draws follow restart r-1's
        assert got_first[r] == rng.choice(n, p=weights / weights.sum())
        for k in range(n_clusters - 1):
            assert np.array_equal(got_uniforms[r, k], rng.uniform(size=trials))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batched_plusplus_picks_each_restarts_centres(dtype, monkeypatch):
    X, _ = _centred(blobs(n_per_class=40, k=6, d=10, spread=1.0, seed=3, dtype=dtype)[0])
    norms = torch.einsum("ij,ij->i", X, X)
    rng = np.random.RandomState(5)
    ref = torch.stack([_ref_kmeans_plusplus(X, norms, 6, rng) for _ in range(5)])          # (R, K, d)
    first, uniforms = _plusplus_draws(np.random.RandomState(5), X.shape[0], 6, 5, X.dtype)
    assert torch.equal(_kmeans_plusplus(X, norms, 6, first, uniforms), ref)
    monkeypatch.setattr(_kmeans_torch, "_BLOCK", 2 * X.shape[0] * 3)     # groups of 2 restarts (T = 3)
    assert torch.equal(_kmeans_plusplus(X, norms, 6, first, uniforms), ref)


# ------------------------------------------------------------------ whole k-means against the reference

@pytest.mark.parametrize("seed", range(6))
def test_labels_equal_the_restart_by_restart_implementation(seed):
    rng = np.random.default_rng(seed)
    k, d = int(rng.integers(2, 12)), int(rng.integers(2, 64))
    dtype = (np.float32, np.float64)[seed % 2]
    for spread in (0.3, 4.0):                                  # overlapping, separated
        X, _ = blobs(n_per_class=int(rng.integers(10, 80)), k=k, d=d, spread=spread, seed=seed, dtype=dtype)
        Xt = torch.from_numpy(X)
        for n_init, kseed in ((10, seed), (1, 42), (3, 7)):
            got = kmeans_labels_torch(Xt, k, n_init=n_init, seed=kseed)
            assert got.dtype == torch.int64 and got.shape == (len(X),)
            assert torch.equal(got, _ref_kmeans_labels(Xt, k, n_init=n_init, seed=kseed))


def test_small_blocks_give_the_same_labels(monkeypatch):
    """Row blocks of the assignment, the sums and the inertia (and restart groups of k-means++) split
    the work, not the answer."""
    X, _ = blobs(n_per_class=50, k=5, d=9, spread=0.5, seed=4, dtype=np.float64)
    Xt = torch.from_numpy(X)
    whole = kmeans_labels_torch(Xt, 5, n_init=10, seed=0)
    monkeypatch.setattr(_kmeans_torch, "_BLOCK", 700)
    assert torch.equal(kmeans_labels_torch(Xt, 5, n_init=10, seed=0), whole)
    assert torch.equal(whole, _ref_kmeans_labels(Xt, 5, n_init=10, seed=0))


# ------------------------------------------------------------------ Lloyd: each restart its own stop

def _mixed_starts(X, y, k):
    """Starts that stop at different iterations: at the class means (at once), at k points of one
    class (many steps), with a centre far from every point (an empty cluster to re-seed), random points."""
    means = torch.stack([X[y == c].mean(dim=0) for c in range(k)])
    one_class = X[y == 0][:k]
    far = torch.cat([X[:k - 1], torch.full((1, X.shape[1]), 50.0, dtype=X.dtype)])
    random = X[torch.randperm(len(X), generator=torch.Generator().manual_seed(0))[:k]]
    return torch.stack([means, one_class, far, random])                                  # (4, K, d)


@pytest.mark.parametrize("max_iter, tol_scale", [(300, 1.0), (300, 1e3), (3, 1.0)])
def test_restarts_stopping_at_different_iterations_keep_their_own_result(max_iter, tol_scale):
    """Strict stops, tolerance stops (then a last assignment), max_iter: every restart of the batch
    ends as it does alone."""
    X, y = blobs(n_per_class=60, k=4, d=6, spread=1.2, seed=2, dtype=np.float64)
    X, tol = _centred(X)
    tol *= tol_scale
    starts = _mixed_starts(X, torch.from_numpy(y), 4)
    labels, inertia, n_iter = _lloyd_batched(X, starts, max_iter=max_iter, tol=tol)
    assert labels.shape == (4, len(X)) and len(inertia) == len(n_iter) == 4
    if max_iter == 300:
        assert len(set(n_iter)) >= 3, n_iter                  # the restarts did stop apart
    else:
        assert max(n_iter) == max_iter
    for r in range(4):
        ref_labels, ref_inertia = _ref_lloyd(X, starts[r], max_iter=max_iter, tol=tol)
        assert torch.equal(labels[r], ref_labels), r
        assert inertia[r] == pytest.approx(ref_inertia, rel=1e-12), r
        alone_labels, alone_inertia = _lloyd(X, starts[r], max_iter=max_iter, tol=tol)
        assert torch.equal(alone_labels, labels[r]) and alone_inertia == pytest.approx(inertia[r], rel=1e-12)


def test_lloyd_reads_the_device_once_per_iteration():
    """One transfer per iteration for all running restarts, plus the inertias at the end (no empty
    cluster here, so no relocation's reads); k-means++ reads nothing back."""
    X, y = blobs(n_per_class=60, k=4, d=6, spread=1.2, seed=2, dtype=np.float32)
    X, tol = _centred(X)
    starts = _mixed_starts(X, torch.from_numpy(y), 4)[[0, 1, 3]]
    with _count_reads() as reads:
        _, _, n_iter = _lloyd_batched(X, starts, max_iter=300, tol=tol)
    assert len(set(n_iter)) >= 2 and reads[0] == max(n_iter) + 1
    norms = torch.einsum("ij,ij->i", X, X)
    first, uniforms = _plusplus_draws(np.random.RandomState(0), X.shape[0], 4, 10, X.dtype)
    with _count_reads() as reads:
        _kmeans_plusplus(X, norms, 4, first, uniforms)
    assert reads[0] == 0
