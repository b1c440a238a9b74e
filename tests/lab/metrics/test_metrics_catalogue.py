"""lab.metrics reads the catalogue: every entry names a function and options that compute_layer uses,
defaults live in one place, the shared work runs once per layer, scikit-learn's private helpers fall
back to the public API, and docstrings cite the repository's METRICS.md."""
from __future__ import annotations

import ast
import inspect
import re
import subprocess
import sys
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.cluster import KMeans
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from lab import catalogue, metrics
from lab.metrics import _context, _kmeans, _probe
from tests.fixtures.blobs import blobs as gaussian_blobs
from tests.fixtures.paths import REPO


@pytest.fixture(autouse=True)
def _one_thread():
    with threadpool_limits(limits=1):
        yield


blobs = partial(gaussian_blobs, n_per_class=20, k=3, d=6, spread=1.0, dtype=np.float32, shuffle=False)


X0, Y0 = blobs()


# ------------------------------------------------------------------------------ the catalogue's entries

def test_every_entry_names_a_function_that_resolves_and_takes_its_options():
    for info in catalogue.METRICS.values():
        function = _context.resolve(info.function)
        params = inspect.signature(function).parameters
        assert list(params)[0] == "layer", info.name
        assert set(info.options) <= set(params), info.name
        if info.repeatable:
            assert "repeat" in params, info.name
        if info.check:
            assert set(inspect.signature(_context.resolve(info.check)).parameters) == {"layer", *info.options}
        assert info.splits and set(info.splits) <= {"train", "seen", "unseen"}, info.name


def test_public_functions_take_their_defaults_from_the_catalogue():
    for info in catalogue.METRICS.values():
        public = getattr(metrics, info.name, None)
        if public is None:                      # the nc2 columns: one public nc2 returns both
            continue
        params = inspect.signature(public).parameters
        for option, default in info.options.items():
            assert params[option].default == default, (info.name, option)
    assert dict(catalogue.METRICS["linear_probe_accuracy"].options) == {"folds": 5, "C": 1.0, "seed": 0,
                                                                         "max_iter": 1000}


def test_catalogue_imports_without_torch():
    code = "import sys, lab.catalogue; assert 'torch' not in sys.modules and 'lab.metrics' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


def test_unresolvable_function_says_which():
    with pytest.raises(ValueError, match=r"the catalogue names the function 'lab.metrics.collapse:nope'"):
        _context.resolve("lab.metrics.collapse:nope")


def test_compute_layer_has_no_branch_on_metric_names():
    for function in (metrics.compute_layer, metrics.layer_report, _context.prepare, _context.evaluate):
        tree = ast.parse(inspect.getsource(function).lstrip())
        body = tree.body[0].body[1:]                                    # without the docstring
        named = {node.value for stmt in body for node in ast.walk(stmt)
                 if isinstance(node, ast.Constant) and node.value in catalogue.METRICS}
        assert not named, (function.__name__, named)


def test_a_new_entry_is_computed_without_touching_compute_layer():
    # a label-free entry (needs no y) and one needing an input compute_layer was not given
    spread = catalogue.MetricInfo("spread", "spread", "collapse", False, needs=(),
                                  function=f"{__name__}:spread_of_layer",
                                  options={"power": 2})
    head = catalogue.MetricInfo("head_norm", "head", "collapse", False, needs=("labels", "head"),
                                function=f"{__name__}:spread_of_layer")
    catalogue.register_metric(spread)
    catalogue.register_metric(head)
    try:
        _new_entries_are_computed()
    finally:
        catalogue.unregister_metric("spread")
        catalogue.unregister_metric("head_norm")
    assert "spread" not in catalogue.metric_names()


def _new_entries_are_computed():
    assert "spread" in catalogue.metric_names() and "spread" in catalogue.metric_names(family="collapse")
    row = metrics.compute_layer(X0, Y0, metrics=["nc1", "spread"], params={"spread": {"power": 1}})
    assert row["spread"] == pytest.approx(float(np.abs(X0 - X0.mean(0)).mean()))
    assert row["nc1"] == pytest.approx(metrics.nc1(X0, Y0), rel=1e-12)
    with pytest.raises(ValueError, match=r"layer 'b': head_norm needs 'head' besides the features and labels"):
        metrics.compute_layer(X0, Y0, metrics=["head_norm"], layer="b")


def test_registering_refuses_a_taken_name_a_second_g_and_removing_a_builtin():
    with pytest.raises(ValueError, match="'nmi' is already in the catalogue; unregister_metric"):
        catalogue.register_metric(catalogue.METRICS["nmi"])
    with pytest.raises(ValueError, match="says g=True, but g is 'nmi'"):
        catalogue.register_metric(catalogue.MetricInfo("other_g", "g2", "separability", True, g=True,
                                                       function=f"{__name__}:spread_of_layer"))
    with pytest.raises(ValueError, match="'knn_accuracy' already keeps"):
        catalogue.register_metric(catalogue.MetricInfo("votes", "votes", "separability", True, per_image="right",
                                                       function=f"{__name__}:spread_of_layer"))
    with pytest.raises(ValueError, match="only a registered metric can be removed"):
        catalogue.unregister_metric("nc1")
    assert "other_g" not in catalogue.METRICS and "votes" not in catalogue.METRICS
    assert catalogue.g_metric() == "nmi" and catalogue.per_image_metric("cluster") == "nmi"


def spread_of_layer(layer, *, power=2):
    """A label-free test metric: mean |x - mean|^power of the features."""
    X = layer.X.double()
    return float(((X - X.mean(0)).abs() ** power).mean())


def test_label_free_context_never_reads_labels():
    layer = _context.LayerContext(X0, None)
    assert spread_of_layer(layer, power=2) > 0 and "checked" not in layer.__dict__


# ------------------------------------------------------------------------------ shared work, once per layer

def test_shared_work_runs_once_per_layer(monkeypatch):
    from lab.metrics import _context as ctx_module
    from lab.metrics import collapse

    calls = {"check": 0, "neighbors": 0, "stats": 0, "host": 0}
    real_check, real_graphs, real_stats = ctx_module._check_inputs, ctx_module._neighbor_graphs, collapse._ClassStats
    real_numpy = _context._Checked.X_numpy

    def count(key, real):
        def wrapped(*args, **kwargs):
            calls[key] += 1
            return real(*args, **kwargs)
        return wrapped

    monkeypatch.setattr(ctx_module, "_check_inputs", count("check", real_check))
    monkeypatch.setattr(ctx_module, "_neighbor_graphs", count("neighbors", real_graphs))
    monkeypatch.setattr(collapse, "_ClassStats", count("stats", real_stats))
    monkeypatch.setattr(_context._Checked, "X_numpy", count("host", real_numpy))
    values, samples = metrics.compute_layer(X0, Y0, metrics=metrics.ALL_METRICS, backend="sklearn", repeats=2,
                                            return_samples=True, return_margins=True)
    assert calls["check"] == calls["neighbors"] == calls["stats"] == 1
    assert calls["host"] <= 3            # nmi + probe share one; logme and sfda read X directly on CPU
    assert set(samples) == {"nmi", "knn_accuracy", "margin", "cdnv_pairs"}
    assert values["knn_accuracy"] == metrics.knn_accuracy(X0, Y0)


def test_neighbours_asked_for_after_the_pass_is_an_error():
    layer = _context.LayerContext(X0, Y0)
    layer.want_neighbors("a", ("euclidean", 1, "ordered"))
    layer.neighbors("a")
    with pytest.raises(RuntimeError, match=r"neighbours for 'b' were asked for after the neighbour pass ran"):
        layer.want_neighbors("b", ("euclidean", 2, "ordered"))


def test_nc2_is_the_dict_of_its_two_columns():
    row = metrics.compute_layer(X0, Y0, metrics=["nc2"])
    assert metrics.nc2(X0, Y0) == {"equinorm": row["nc2_equinorm"], "equiangularity": row["nc2_equiangularity"]}


# ------------------------------------------------------------------------------ scikit-learn's private helpers

def test_kmeans_falls_back_to_kmeans_when_a_private_signature_changes(monkeypatch):
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(loc=c, size=(40, 5)) for c in (0.0, 3.0, 6.0)]).astype(np.float32)
    private = _kmeans.kmeans_labels(X, 3, n_init=4, seed=1)

    def changed(X, sample_weight, centers_init, *, max_iter, tol, n_threads, new_required):   # a future signature
        raise AssertionError("never reached: the call lacks new_required")

    monkeypatch.setattr(_kmeans, "_kmeans_single_lloyd", changed)
    public = _kmeans.kmeans_labels(X, 3, n_init=4, seed=1)
    np.testing.assert_array_equal(public, KMeans(3, init="k-means++", n_init=4, random_state=1).fit(X).labels_)
    np.testing.assert_array_equal(public, private)
    assert not _kmeans._takes(changed, "X", "sample_weight", "centers_init", "max_iter", "verbose", "tol",
                              "n_threads")


def test_probe_falls_back_to_the_pipeline_when_the_private_loss_changes(monkeypatch):
    X, y = blobs(n_per_class=30, k=4, d=5, seed=2)
    train, test = np.arange(len(y)) % 3 != 0, np.arange(len(y)) % 3 == 0
    args = (X[train], y[train], X[test], y[test])
    private = _probe.probe_accuracy(*args, n_classes=4, C=1.0, max_iter=1000)

    class ChangedLoss(_probe.HalfMultinomialLoss):
        def loss_gradient(self, y_true, raw_prediction, *, weights, n_threads=1):   # renamed argument
            raise AssertionError("never reached: the call passes sample_weight")

    monkeypatch.setattr(_probe, "HalfMultinomialLoss", ChangedLoss)
    public = _probe.probe_accuracy(*args, n_classes=4, C=1.0, max_iter=1000)
    pipeline = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=1000)).fit(X[train], y[train])
    assert public == pipeline.score(X[test], y[test]) == private


# ------------------------------------------------------------------------------ docstrings cite the repository

def _docstrings(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node)
            if doc:
                yield getattr(node, "name", path.name), doc


def test_no_docstring_in_lab_names_a_path_outside_the_repository():
    outside = re.compile(r"(?<![\w.])(/(?:work|home|tmp|Users|mnt)/\S+|\.\./shared\b|\bshared/METRICS\.md)")
    found = [f"{path.relative_to(REPO)}:{name}: {m.group(0)}"
             for path in sorted((REPO / "lab").rglob("*.py"))
             for name, doc in _docstrings(path)
             for m in outside.finditer(doc)]
    assert not found, "docstrings cite files outside the repository (cite docs/METRICS.md):\n" + "\n".join(found)
