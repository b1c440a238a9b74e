"""lab.analysis.simplex against numpy, and terminal_phase on a metrics table."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lab import analysis


def _centred_means(K, d, seed=0):
    M = np.random.default_rng(seed).normal(size=(d, K))               # (d, K) class means
    return M - M.mean(axis=1, keepdims=True)                          # centred: μ_k − μ_G


@pytest.mark.parametrize("K", [2, 3, 5, 8])
def test_cosines_and_deviation_against_numpy(K):
    M = _centred_means(K, 7, seed=K)
    out = analysis.simplex(M.T @ M)
    n = np.linalg.norm(M, axis=0)
    cos = (M.T @ M) / np.outer(n, n)
    np.testing.assert_allclose(out["cosines"], cos, rtol=1e-12, atol=1e-12)
    ideal = np.where(np.eye(K, dtype=bool), 1.0, -1.0 / (K - 1))
    np.testing.assert_array_equal(out["ideal"], ideal)
    off = ~np.eye(K, dtype=bool)
    assert out["deviation"] == pytest.approx(np.abs(cos - ideal)[off].mean(), rel=1e-12)
    assert out["coords"].shape == (K, 2)


def test_deviation_is_nc2_equiangularity_of_the_means():
    import lab.metrics

    rng = np.random.default_rng(3)
    X = np.concatenate([rng.normal(loc=c, size=(10, 6)) for c in rng.normal(scale=3, size=(4, 6))])
    y = np.repeat(np.arange(4), 10)
    out = analysis.simplex(lab.metrics.class_gram(X, y))
    assert out["deviation"] == pytest.approx(lab.metrics.nc2(X, y)["equiangularity"], rel=1e-9)


def test_coords_reproduce_the_pairwise_distances_for_three_classes():
    M = _centred_means(3, 10, seed=1)
    coords = analysis.simplex(M.T @ M)["coords"]
    want = np.linalg.norm(M[:, :, None] - M[:, None, :], axis=0)                       # (3, 3)
    got = np.linalg.norm(coords[:, None, :] - coords[None, :, :], axis=2)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_a_simplex_etf_has_zero_deviation():
    K = 4
    M = np.eye(K) - 1.0 / K                                                            # the ETF's vertices
    out = analysis.simplex(M.T @ M)
    assert out["deviation"] == pytest.approx(0.0, abs=1e-12)
    np.testing.assert_allclose(out["cosines"], out["ideal"], atol=1e-12)


@pytest.mark.parametrize("bad", [np.zeros((3, 2)), np.zeros((1, 1)), np.full((2, 2), np.nan)])
def test_bad_gram_says_what_was_expected(bad):
    with pytest.raises(ValueError, match="gram"):
        analysis.simplex(bad)


def test_terminal_phase_per_seed():
    rows = [{"seed": s, "epoch": e, "layer": layer, "split": split, "metric": "head_accuracy", "value": v}
            for s, accs in ((0, [0.2, 0.9, 1.0, 1.0]), (1, [0.1, 0.5, 0.8, 0.99]))
            for e, v in enumerate(accs) for layer, split in (("pre_logits", "train"), ("pre_logits", "seen"))]
    rows.append({"seed": 1, "epoch": 1, "layer": "fc1", "split": "train", "metric": "head_accuracy", "value": 1.0})
    frame = pd.DataFrame(rows)
    assert analysis.terminal_phase(frame) == {0: 2, 1: None}
    assert analysis.terminal_phase(frame.iloc[:0]) == {}
