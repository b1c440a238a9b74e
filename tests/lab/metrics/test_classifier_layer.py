"""The classifier-side entries of the catalogue: compute_layer with head=... equals the direct functions, the
head is checked before anything is computed, and the class statistics are shared with the collapse family."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from lab import catalogue, metrics
from lab.metrics import collapse


def _problem(seed=0, K=4, d=6, n=15):
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=3.0, size=(K, d))
    X = np.concatenate([c + rng.normal(size=(n, d)) for c in centres])                # (N, d)
    y = np.repeat(np.arange(K) * 3 + 1, n)                                             # labels 1, 4, 7, 10
    W = rng.normal(size=(K, d))                                                        # (K, d)
    logits = X @ W.T + rng.normal(size=K)                                              # (N, K), bias included
    return X, y, W, logits


def test_compute_layer_with_a_head_equals_the_direct_functions():
    X, y, W, logits = _problem()
    names = ("nc2_cosine_std",) + catalogue.metric_names(family="classifier_collapse")
    for head in (metrics.Head(W, logits), (W, logits), {"weight": torch.from_numpy(W), "logits": logits}):
        row = metrics.compute_layer(X, y, metrics=names, head=head, on_degenerate="raise")
        nc2 = metrics.nc2_classifier(W)
        codes = np.searchsorted(np.unique(y), y)
        assert row == {
            "nc2_cosine_std": metrics.nc2_cosine_std(X, y),
            "nc2_classifier_equinorm": nc2["nc2_classifier_equinorm"],
            "nc2_classifier_equiangularity": nc2["nc2_classifier_equiangularity"],
            "nc3_self_duality": metrics.nc3_self_duality(X, y, W),
            "nc4_ncc_disagreement": metrics.nc4_ncc_disagreement(X, y, logits),
            "head_accuracy": float((logits.argmax(1) == codes).mean()),
        }


def test_the_classifier_family_reads_the_class_statistics_once(monkeypatch):
    X, y, W, logits = _problem(seed=1)
    calls = []
    real = collapse._ClassStats

    def counted(c):
        calls.append(1)
        return real(c)

    monkeypatch.setattr(collapse, "_ClassStats", counted)
    metrics.compute_layer(X, y, metrics=metrics.DEFAULT_COLLAPSE + catalogue.metric_names(family="classifier_collapse"),
                          head=(W, logits))
    assert len(calls) == 1


def test_a_bad_head_fails_before_any_metric_with_the_layer_named():
    X, y, W, logits = _problem(seed=2)
    with pytest.raises(ValueError, match=r"layer 'pre_logits': W must have shape \(K, d\) = \(4, 6\).*pass W.T"):
        metrics.compute_layer(X, y, metrics=["nc1", "nc3_self_duality"], head=(W.T, logits), layer="pre_logits")
    with pytest.raises(ValueError, match=r"predicted logits must have shape \(N, K\)"):
        metrics.compute_layer(X, y, metrics=["head_accuracy"], head=(W, logits[:, :3]))
    with pytest.raises(ValueError, match=r"head_accuracy needs the head's logits"):
        metrics.compute_layer(X, y, metrics=["head_accuracy"], head=(W, None))
    with pytest.raises(ValueError, match=r"nc3_self_duality needs 'head'"):
        metrics.compute_layer(X, y, metrics=["nc3_self_duality"])
    with pytest.raises(ValueError, match=r"head must be a lab.metrics.Head"):
        metrics.compute_layer(X, y, metrics=["nc3_self_duality"], head=W)


def test_a_zero_classifier_row_is_nan_with_a_warning():
    X, y, W, logits = _problem(seed=3)
    W[2] = 0.0
    with pytest.warns(metrics.DegenerateLayerWarning, match=r"nc2_classifier_equinorm set to NaN: .*row 2 of W"):
        row = metrics.compute_layer(X, y, metrics=["nc2_classifier_equinorm"], head=(W, logits), layer="h")
    assert np.isnan(row["nc2_classifier_equinorm"])


def test_class_gram_is_the_gram_of_the_centred_means():
    X, y, _, _ = _problem(seed=4)
    means = np.stack([X[y == k].mean(0) for k in np.unique(y)])                        # (K, d)
    M = (means - means.mean(0)).T                                                      # (d, K)
    np.testing.assert_allclose(metrics.class_gram(X, y), M.T @ M, rtol=1e-10, atol=1e-10)


def test_catalogue_splits_and_needs_of_the_new_entries():
    assert catalogue.METRICS["nc2_cosine_std"].family == "collapse"
    assert catalogue.METRICS["nc2_cosine_std"].splits == ("train", "seen", "unseen")
    for name in catalogue.metric_names(family="classifier_collapse"):
        info = catalogue.METRICS[name]
        assert info.needs == ("labels", "head") and info.splits == ("train", "seen"), name
    assert [m.name for m in catalogue.metrics_for("train")] == [
        *catalogue.metric_names(family="collapse"), *catalogue.metric_names(family="classifier_collapse")]
    with pytest.raises(ValueError, match=r"split must be one of 'train', 'seen', 'unseen'"):
        catalogue.metrics_for("test")
