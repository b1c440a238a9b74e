"""Projections: deterministic PCA, the exact kNN graph handed to umap, seeded UMAP, the background projector."""
from __future__ import annotations

import time
from functools import partial

import numpy as np
import pytest
import torch

from lab import projection
from lab.projection import Projector, knn_graph, pca_layout, umap_layout
from tests.fixtures.blobs import blobs


_blobs = partial(blobs, n_per_class=30, k=3, d=8, spread=6.0, dtype=np.float32, shuffle=False, as_tensor=True)


def test_pca_matches_numpy_up_to_sign_and_is_deterministic():
    X, _ = _blobs()
    got = pca_layout(X)
    assert got.shape == (90, 2) and got.dtype == np.float32
    Xc = X.double().numpy() - X.double().numpy().mean(0)
    _, _, vt = np.linalg.svd(Xc, full_matrices=False)
    ref = Xc @ vt[:2].T
    np.testing.assert_allclose(np.abs(got), np.abs(ref), rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(got, pca_layout(X))
    # wide data (d > N) takes the Gram route and agrees
    W = torch.randn(10, 50, generator=torch.Generator().manual_seed(0))
    Wc = W.double().numpy() - W.double().numpy().mean(0)
    _, _, vt = np.linalg.svd(Wc, full_matrices=False)
    np.testing.assert_allclose(np.abs(pca_layout(W)), np.abs(Wc @ vt[:2].T), rtol=1e-4, atol=1e-4)


def test_pca_signs_follow_the_reference():
    X, _ = _blobs()
    first = pca_layout(X)
    flipped = pca_layout(-X, reference=first)          # -X has the same axes with opposite signs
    np.testing.assert_allclose(flipped, first, rtol=1e-4, atol=1e-4)


def test_knn_graph_includes_self_first_and_matches_brute_force():
    X, _ = _blobs()
    idx, dists = knn_graph(X, 6)
    assert idx.shape == dists.shape == (90, 6)
    assert np.array_equal(idx[:, 0], np.arange(90)) and np.all(dists[:, 0] == 0)
    assert np.all(np.diff(dists, axis=1) >= -1e-6)
    full = torch.cdist(X.double(), X.double()).numpy()
    np.testing.assert_allclose(dists[:, 1:], np.sort(full, axis=1)[:, 1:6], rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match=r"k must be between 2 and the number of points \(90\)"):
        knn_graph(X, 91)


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match=r"X must be 2-D \(N, d\)"):
        pca_layout(torch.zeros(3))
    with pytest.raises(ValueError, match="X must be a torch.Tensor or numpy array"):
        pca_layout([[1, 2]])


@pytest.mark.slow
def test_umap_is_seeded_uses_the_given_graph_and_separates_blobs():
    projection.warm_up(wait=True)                      # numba compiles once per process (~10 s here)
    assert projection.is_warm()
    X, y = _blobs(n_per_class=40)
    knn = knn_graph(X, 15)
    a = umap_layout(X, knn=knn, seed=0, n_epochs=100)
    b = umap_layout(X, knn=knn, seed=0, n_epochs=100)
    assert a.shape == (120, 2) and a.dtype == np.float32
    np.testing.assert_array_equal(a, b)
    # clusters stay apart: each point's nearest layout neighbour shares its class
    d = np.linalg.norm(a[:, None] - a[None], axis=2)
    np.fill_diagonal(d, np.inf)
    assert (y[d.argmin(1)] == y).mean() > 0.95
    # initialising from a previous layout keeps the picture close to it
    c = umap_layout(X + 0.01, knn=knn_graph(X + 0.01, 15), init=a, seed=0, n_epochs=30)
    corr = np.corrcoef(a[:, 0], c[:, 0])[0, 1]
    assert corr > 0.9
    with pytest.raises(ValueError, match=r"knn must have shape \(120, 15\)"):
        umap_layout(X, knn=knn_graph(X, 5), seed=0)


@pytest.mark.slow
def test_projector_runs_in_background_and_drops_stale_epochs():
    projection.warm_up(wait=True)
    X, _ = _blobs(n_per_class=40)
    proj = Projector(seed=0, n_epochs=50)
    try:
        for epoch in range(3):
            for layer in ("a", "b"):
                proj.submit(0, epoch, layer, X + epoch, previous_layer="a" if layer == "b" else None,
                            pca=pca_layout(X))
        results = proj.drain()
        keys = {(r.epoch, r.layer) for r in results}
        assert {(2, "a"), (2, "b")} <= keys                          # the newest epoch always lands
        assert len(results) + proj.dropped == 6
        assert all(r.coords.shape == (120, 2) and r.method == "umap" for r in results)
        assert proj.pending == 0 and not proj.errors
    finally:
        proj.close()


@pytest.mark.slow     # starts numba compilation in the background
def test_warm_up_starts_one_thread_and_returns_at_once():
    t = time.perf_counter()
    first = projection.warm_up()
    second = projection.warm_up()
    assert first is second and time.perf_counter() - t < 1.0


def test_fit_subset_keeps_each_class_share_and_is_deterministic():
    from lab.projection.budget import fit_subset

    labels = np.repeat([0, 1, 2], [500, 300, 200])
    picked = fit_subset(labels, 100, seed=3)
    assert picked.shape == (100,) and np.all(np.diff(picked) > 0)
    assert np.bincount(labels[picked]).tolist() == [50, 30, 20]
    np.testing.assert_array_equal(picked, fit_subset(labels, 100, seed=3))
    assert not np.array_equal(picked, fit_subset(labels, 100, seed=4))
    np.testing.assert_array_equal(fit_subset(labels, 5000), np.arange(1000))      # under budget: every point
    rare = np.repeat([0, 1, 2], [990, 5, 5])                     # shares 9.9, 0.05, 0.05 of 10
    assert np.bincount(rare[fit_subset(rare, 10)]).tolist() == [8, 1, 1]


@pytest.mark.slow
def test_a_budgeted_umap_fits_the_sample_and_places_every_other_point():
    from lab.projection.budget import fit_subset

    projection.warm_up(wait=True)
    X, y = _blobs(n_per_class=150, k=4)                                    # 600 points, fitted on 200
    init = pca_layout(X)
    got = umap_layout(X, labels=y, fit_points=200, init=init, seed=0, n_epochs=60)
    assert got.shape == (600, 2) and np.isfinite(got).all()
    # the fit is of the stratified sample alone: fitting those 200 points by themselves gives their rows
    fit = fit_subset(y, 200, seed=0)
    alone = umap_layout(X[fit], init=init[fit], seed=0, n_epochs=60)
    np.testing.assert_array_equal(got[fit], alone)
    # the 400 placed by transform land in their own class's cluster
    rest = np.setdiff1d(np.arange(600), fit)
    d = np.linalg.norm(got[rest][:, None] - got[fit][None], axis=2)
    assert (y[fit][d.argmin(1)] == y[rest]).mean() > 0.95
    with pytest.raises(ValueError, match=r"knn must have shape \(200, 15\)"):
        umap_layout(X, labels=y, fit_points=200, knn=knn_graph(X, 15))


@pytest.mark.slow
def test_the_projector_lays_out_the_focused_layer_first_then_its_neighbours():
    projection.warm_up(wait=True)
    X, y = _blobs(n_per_class=30)
    layers = ["a", "b", "c", "d", "e"]
    proj = Projector(seed=0, n_epochs=20, fit_points=60, layers=layers)
    try:
        proj.focus(0, "d")
        for layer in layers:                                         # measured input -> output
            proj.submit(0, 0, layer, X, labels=y, pca=pca_layout(X))
        results = proj.drain()
        assert [key[2] for key in proj.started] == ["d", "c", "e", "b", "a"]
        assert all(r.coords.shape == (90, 2) and np.isfinite(r.coords).all() for r in results)
        assert not proj.errors
    finally:
        proj.close()


def test_without_cuml_a_cuda_device_falls_back_to_umap_learn_with_one_warning_line():
    import importlib.util
    import subprocess
    import sys

    if importlib.util.find_spec("cuml") is not None:
        pytest.skip("cuML is installed here")
    code = ("from lab.projection.budget import umap_backend\n"
            "print(umap_backend('cuda'), umap_backend('cuda:0'), umap_backend('cpu'))")
    proc = subprocess.run([sys.executable, "-W", "always", "-c", code], capture_output=True, text=True,
                          timeout=300, cwd=str(__import__("pathlib").Path(__file__).resolve().parents[3]))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["umap-learn", "umap-learn", "umap-learn"]
    warned = [line for line in proc.stderr.splitlines() if "cuML's UMAP is not available" in line]
    assert len(warned) == 1 and "umap-learn" in warned[0]


@pytest.mark.slow
def test_umap_kernels_are_cached_on_disk_and_give_the_layout_of_uncached_ones(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    from lab.projection._umap_import import import_umap

    umap = import_umap()
    X, _ = _blobs(n_per_class=20)
    knn = knn_graph(X, 15)
    cached = umap_layout(X, knn=knn, seed=0, n_epochs=40)
    # the kernels a fit runs carry numba's on-disk cache, and it has been written
    for fn in (umap.layouts._nb_optimize_layout_euclidean_single_epoch, umap.umap_.smooth_knn_dist):
        assert type(fn._cache).__name__ == "FunctionCache", fn
        assert any(Path(fn._cache._cache_path).glob(f"*{fn.py_func.__name__}*.nbi"))
    # its parallel twin shares the code, hence numba's cache key: it stays uncached
    assert type(umap.layouts._nb_optimize_layout_euclidean_single_epoch_parallel._cache).__name__ == "NullCache"
    # LAB_NUMBA_CACHE=0: compiled in memory as umap ships, the same layout bit for bit
    np.save(tmp_path / "X.npy", X.numpy())
    code = ("import sys, numpy as np, torch\n"
            "from lab.projection import umap_layout, knn_graph\n"
            "from lab.projection._umap_import import import_umap\n"
            "umap = import_umap()\n"
            "X = torch.from_numpy(np.load(sys.argv[1]))\n"
            "np.save(sys.argv[2], umap_layout(X, knn=knn_graph(X, 15), seed=0, n_epochs=40))\n"
            "print(type(umap.layouts._nb_optimize_layout_euclidean_single_epoch._cache).__name__)\n")
    env = dict(__import__("os").environ, LAB_NUMBA_CACHE="0")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "X.npy"), str(tmp_path / "plain.npy")],
                          capture_output=True, text=True, timeout=600, env=env,
                          cwd=str(Path(__file__).resolve().parents[3]))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["NullCache"]
    np.testing.assert_array_equal(np.load(tmp_path / "plain.npy"), cached)
