"""The label-free family as catalogue entries: compute_layer without labels gives the direct functions'
values, and an undefined case is NaN with a warning that names the layer, the metric and the reason."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from lab import catalogue
from lab.metrics import DegenerateLayerWarning, alpha_req, compute_layer, layer_report, lidar, rankme, twonn_id

_FAMILY = ("rankme", "alpha_req", "twonn_id")


def _features(n=200, d=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g) * torch.linspace(3.0, 0.1, d)          # (n, d) decaying spectrum


def test_the_family_is_in_the_catalogue_needs_no_labels_and_is_measured_on_unseen_and_seen():
    assert catalogue.metric_names(family="label_free") == ("rankme", "alpha_req", "twonn_id", "lidar")
    for name in _FAMILY:
        info = catalogue.METRICS[name]
        assert info.family == "label_free" and info.needs == () and info.default
        assert info.splits == ("seen", "unseen")
    assert catalogue.METRICS["lidar"].needs == ("views",) and catalogue.METRICS["lidar"].splits == ("unseen",)
    assert not catalogue.METRICS["lidar"].default and "lidar" not in catalogue.metric_names(default=True)
    # the directions the literature reads (docs/METRICS.md): more dimensions used is better for RankMe and
    # LiDAR, a slower spectral decay (smaller alpha) and a lower intrinsic dimension for the other two
    label_free = catalogue.metric_names(family="label_free")
    assert [catalogue.METRICS[m].higher_is_better for m in label_free] == [True, False, False, True]
    assert {m.name for m in catalogue.metrics_for("seen")} >= set(_FAMILY)


def test_compute_layer_without_labels_equals_the_direct_functions():
    X = _features()
    got = compute_layer(X, None, metrics=_FAMILY, layer="fc1")
    assert list(got) == list(_FAMILY)
    assert got == {"rankme": rankme(X), "alpha_req": alpha_req(X), "twonn_id": twonn_id(X)}
    # the same with labels given (the run passes them) and from numpy
    y = np.arange(len(X)) % 4
    assert compute_layer(X.numpy(), y, metrics=_FAMILY) == pytest.approx(got, rel=1e-12)


def test_lidar_entry_reads_the_views_and_refuses_without_them():
    V = _features(n=60 * 3, d=16, seed=1).reshape(60, 3, 16)                      # (n, q, d)
    assert compute_layer(V[:, 0], None, metrics=("lidar",), views=V) == {"lidar": lidar(V)}
    with pytest.raises(ValueError, match=r"layer 'x': lidar needs 'views'"):
        compute_layer(V[:, 0], None, metrics=("lidar",), layer="x")


def test_a_metric_that_needs_labels_still_refuses_none():
    with pytest.raises(ValueError):
        compute_layer(_features(), None, metrics=("rankme", "nmi"))


@pytest.mark.parametrize("case, X, nan, reason", [
    ("two images", torch.tensor([[1.0, 2.0, 3.0], [0.0, 1.0, 5.0]]), ("alpha_req", "twonn_id"),
     {"alpha_req": "at least 10 eigenvalues", "twonn_id": "at least 3 images"}),
    ("duplicates", torch.cat([_features(n=20, d=30, seed=4)] * 2), ("twonn_id",),
     {"twonn_id": "duplicates of another"}),
    ("constant", torch.ones(30, 8), ("alpha_req", "twonn_id"),
     {"alpha_req": "constant features", "twonn_id": "constant features"}),
])
def test_undefined_cases_are_nan_with_a_one_line_reason_naming_layer_and_metric(case, X, nan, reason):
    with pytest.warns(DegenerateLayerWarning) as record:
        got = compute_layer(X, None, metrics=_FAMILY, layer="dead")
    assert [m for m in _FAMILY if np.isnan(got[m])] == list(nan), case
    messages = [str(w.message) for w in record if issubclass(w.category, DegenerateLayerWarning)]
    for metric in nan:
        line = next(m for m in messages if m.startswith(f"layer 'dead': {metric} set to NaN: "))
        assert reason[metric] in line and "\n" not in line
    # RankMe is defined in each case: one direction (constant non-zero features) is rank 1
    assert np.isfinite(got["rankme"])
    if case == "constant":
        assert got["rankme"] == pytest.approx(1.0, abs=1e-4)      # up to the 1e-7 entropy terms


def test_all_zero_features_have_no_rankme():
    with pytest.warns(DegenerateLayerWarning, match=r"rankme set to NaN: .*all-zero features"):
        got = compute_layer(torch.zeros(10, 4), None, metrics=("rankme",), layer="zero")
    assert np.isnan(got["rankme"])


def test_on_degenerate_raise_raises_with_the_layer_named():
    from lab.metrics import DegenerateFeaturesError

    with pytest.raises(DegenerateFeaturesError, match=r"layer 'dead': .*constant features"):
        compute_layer(torch.ones(30, 8), None, metrics=("twonn_id",), layer="dead", on_degenerate="raise")


def test_layer_report_tabulates_the_family_per_layer_without_labels():
    feats = {"a": _features(seed=2), "b": _features(seed=3, d=24)}
    table = layer_report(feats, None, metrics=_FAMILY)
    assert list(table.columns) == list(_FAMILY) and list(table.index) == ["a", "b"]
    assert table.loc["b", "twonn_id"] == twonn_id(feats["b"])
