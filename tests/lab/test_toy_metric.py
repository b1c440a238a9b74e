"""A new metric is one catalogue entry and one function (docs/development.md, "Adding a metric").

A toy metric, registered for this module and removed after it, reaches every place that offers metrics:
``compute_layer``, a stored run of the real engine, the live view's curves fed with that run's events,
``measure_agreement``, an exported notebook and ``python -m lab run --help``. Nothing outside the
catalogue names it.
"""
from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import pytest
import torch

import lab
from lab import catalogue
from lab.catalogue import MetricInfo
from lab.events import LayerMetrics, RunFinished
from tests.fixtures.paths import REPO

TOY = MetricInfo("class_gap", "class gap", "separability", True, default=False,
                 function="tests.lab.test_toy_metric:class_gap_of_layer",
                 curve=("unseen",), compared=True, export=True,
                 doc="mean distance between class means over the mean distance of an image to its class mean")


def class_gap_of_layer(layer) -> float:
    """The toy's function: mean distance between class means / mean distance to the own class mean."""
    X, codes = layer.checked.X.double(), layer.checked.codes                     # (N, d), (N,)
    means = torch.stack([X[codes == k].mean(0) for k in torch.unique(codes)])     # (K, d)
    within = (X - means[codes]).norm(dim=1).mean()
    return float(torch.pdist(means).mean() / within)


def _reference(X: np.ndarray, y: np.ndarray) -> float:
    means = np.stack([X[y == k].mean(0) for k in np.unique(y)])
    within = np.linalg.norm(X - means[np.searchsorted(np.unique(y), y)], axis=1).mean()
    pairs = [np.linalg.norm(means[i] - means[j]) for i in range(len(means)) for j in range(i + 1, len(means))]
    return float(np.mean(pairs) / within)


@pytest.fixture(scope="module")
def toy():
    catalogue.register_metric(TOY)
    try:
        yield TOY
    finally:
        catalogue.unregister_metric(TOY.name)
    assert TOY.name not in catalogue.METRICS and TOY.name not in catalogue.METRIC_NAMES


@pytest.fixture(scope="module")
def stored(toy, tmp_path_factory):
    from tests.fixtures.configs import TINY

    store = lab.RunStore(tmp_path_factory.mktemp("runs"))
    config = lab.RunConfig(**{**TINY, "epochs": 1, "metrics": ("nmi", "knn_accuracy", toy.name)})
    events = list(lab.run(config, store=store))
    assert isinstance(events[-1], RunFinished), getattr(events[-1], "message", events[-1])
    return store, events


def test_the_docs_show_this_entry_and_this_function():
    doc = (REPO / "docs" / "development.md").read_text(encoding="utf-8")
    source = Path(__file__).read_text(encoding="utf-8")
    entry = source[source.index("TOY = "):source.index("\n\n\ndef class_gap_of_layer")]
    assert entry in doc and inspect.getsource(class_gap_of_layer) in doc


def test_the_catalogue_lists_it_where_its_entry_says(toy):
    assert toy.name in catalogue.METRIC_NAMES and toy.name in catalogue.SEPARABILITY_METRICS
    assert toy.name in catalogue.AGREEMENT_METRICS and toy.name in catalogue.EXPORT_METRICS
    assert toy.name in catalogue.REPORT_METRICS and toy.name not in catalogue.DEFAULT_METRICS
    assert (toy.name, ("unseen",)) in catalogue.curve_specs()
    assert catalogue.metric_label(toy.name) == "class gap"
    with pytest.raises(ValueError, match="already in the catalogue"):
        catalogue.register_metric(toy)


def test_compute_layer_computes_it(toy):
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(loc=3 * k, size=(15, 5)) for k in range(3)]).astype(np.float32)
    y = np.repeat(np.arange(3), 15)
    row = lab.metrics.compute_layer(X, y, metrics=["nmi", toy.name])
    assert list(row) == ["nmi", toy.name]
    assert row[toy.name] == pytest.approx(_reference(X.astype(np.float64), y), rel=1e-9)


def test_a_run_measures_and_stores_it_at_every_layer_and_epoch(stored, toy):
    store, events = stored
    layers = [layer["name"] for layer in events[0].layers]
    streamed = [e for e in events if isinstance(e, LayerMetrics) and toy.name in e.values]
    assert {(e.epoch, e.layer) for e in streamed} == {(epoch, layer) for epoch in (0, 1) for layer in layers}
    rows = store.load(events[-1].run_id).metrics
    mine = rows[rows["metric"] == toy.name]
    assert set(mine["split"]) == {"unseen"} and set(mine["layer"]) == set(layers)
    assert np.isfinite(mine["value"]).all() and (mine["value"] > 0).all()


def test_the_live_view_draws_its_curve(stored, toy):
    from app.live._model import RunModel
    from app.live._streams import curve_specs, curves_data

    model = RunModel()
    for event in stored[1]:
        model.apply(event)
    specs = dict(curve_specs(model))
    assert specs[toy.name] == ("unseen",) and set(specs) == {"nmi", "knn_accuracy", toy.name}
    frame = curves_data(model, toy.name, specs[toy.name])
    assert set(frame["epoch"]) == {0, 1} and set(frame["layer"]) == set(model.layers)
    assert np.isfinite(frame["mean"]).all()


def test_the_agreement_table_compares_it(stored, toy):
    store, events = stored
    table = lab.analysis.measure_agreement(events[-1].run_id, store=store)
    assert list(table.index) == ["nmi", "knn_accuracy", toy.name]
    assert table.loc[toy.name, "label"] == "class gap"
    assert table.loc[toy.name, "best_layer"] in {layer["name"] for layer in events[0].layers}


def test_an_exported_notebook_draws_it(stored, toy, tmp_path):
    import nbformat

    store, events = stored
    path = lab.export.to_notebook(events[-1].run_id, tmp_path / "toy.ipynb", store=store)
    cells = nbformat.read(path, as_version=4).cells
    curves = [c.source for c in cells if c.cell_type == "code" and "CURVE_METRICS = " in c.source]
    assert len(curves) == 1 and f"'{toy.name}'" in curves[0]


def test_the_command_line_offers_it(toy, capsys):
    from lab.cli.entry import main

    with pytest.raises(SystemExit) as exit_:
        main(["run", "--help"])
    assert exit_.value.code == 0
    help_text = " ".join(capsys.readouterr().out.split())
    choices = help_text.split("Choices: ", 1)[1].split(".", 1)[0]
    assert toy.name in [name.strip() for name in choices.split(",")]
