"""A new metric is one catalogue entry and one function (docs/development.md, "Adding a metric").

A toy metric, registered for this module and removed after it, reaches every place that offers metrics:
``compute_layer``, a stored run of the real engine, the live view's curves fed with that run's events,
``measure_agreement``, an exported notebook and ``python -m lab run --help``, and every list that asks the
catalogue (the config's choices, the app's plot labels and log scales, the heatmap's and the Compare tab's
choices): it is registered after everything was imported, so a list copied at import would miss it. Nothing
outside the catalogue names it. Registered with ``default=True``, it is ``RunConfig()``'s, the command line's
and the Choose form's default.
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
    assert TOY.name not in catalogue.METRICS and TOY.name not in catalogue.metric_names()


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
    assert toy.name in catalogue.metric_names() and toy.name in catalogue.metric_names(family="separability")
    assert toy.name in catalogue.metric_names(compared=True) and toy.name in catalogue.metric_names(export=True)
    assert toy.name in catalogue.metric_names(report=True) and toy.name not in catalogue.metric_names(default=True)
    assert (toy.name, ("unseen",)) in catalogue.curve_specs()
    assert catalogue.metric_label(toy.name) == "class gap"
    with pytest.raises(ValueError, match="already in the catalogue"):
        catalogue.register_metric(toy)


def test_every_list_that_offers_metrics_offers_it_though_registered_after_import(toy, stored):
    import dataclasses

    from app.base import plots
    from app.compare.runs_panel import RunsPanel, compare_choices
    from app.live._streams import HEATMAP_METRICS
    from lab.config import FIELD_CHOICES

    # the config's accepted metrics and its per-family selections
    assert toy.name in FIELD_CHOICES["metrics"] and toy.name in list(FIELD_CHOICES["metrics"])
    config = lab.RunConfig(metrics=(toy.name, "nc1"))
    assert config.separability_metrics == (toy.name,) and config.unseen_metrics == (toy.name, "nc1")
    # the curves, the compared and the exported lists
    assert toy.name in dict(catalogue.curve_specs()) and toy.name in catalogue.metric_names(curve=True)
    assert toy.name in catalogue.metric_names(compared=True) and toy.name in catalogue.metric_names(export=True)
    # the app's plot styles: its label, and a log scale only where its entry asks for one
    assert plots.METRIC_LABELS[toy.name] == "class gap" and toy.name in list(plots.METRIC_LABELS)
    assert toy.name not in plots.LOG_METRICS
    logged = catalogue.register_metric(dataclasses.replace(TOY, name="class_gap_log", log_scale=True,
                                                           compared=False, export=False, curve=()))
    try:
        assert logged.name in plots.LOG_METRICS and logged.name in set(plots.LOG_METRICS)
    finally:
        catalogue.unregister_metric(logged.name)
    assert "class_gap_log" not in plots.LOG_METRICS and "class_gap_log" not in plots.METRIC_LABELS
    # the live heatmap's choices and the Compare tab's
    assert toy.name in HEATMAP_METRICS and toy.name in compare_choices()
    panel = RunsPanel(stored[0])
    assert toy.name in panel.param.compare_metric.objects
    panel.compare_metric = toy.name                      # a choice the selector accepts


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
    heatmap = [c.source for c in cells if c.cell_type == "code" and "HEATMAP_METRIC = " in c.source]
    assert len(heatmap) == 1 and "HEATMAP_METRIC = 'nmi' if 'nmi' in METRIC_NAMES" in heatmap[0]   # the g metric


def test_the_command_line_offers_it(toy, capsys):
    from lab.cli.entry import main

    with pytest.raises(SystemExit) as exit_:
        main(["run", "--help"])
    assert exit_.value.code == 0
    help_text = " ".join(capsys.readouterr().out.split())
    choices = help_text.split("Choices: ", 1)[1].split(".", 1)[0]
    assert toy.name in [name.strip() for name in choices.split(",")]


def test_a_default_metric_registered_after_import_is_every_default(capsys, monkeypatch, tmp_path):
    import dataclasses

    import lab.runs
    from app.choose.config_panel import ConfigPanel
    from lab.cli.entry import main

    def command_line_config(argv):
        """The config ``python -m lab run`` builds from ``argv`` (a fake engine takes it)."""
        got = {}

        def fake_run(config, store=None, cancel=None):
            got["config"] = config
            writer = store.create(config)
            yield RunFinished(writer.run_id, seconds=0.0)
            writer.finish("finished")

        monkeypatch.setattr(lab.runs, "run", fake_run)
        assert main(["run", "--runs-dir", str(tmp_path / "runs"), "--no-progress", *argv]) == 0
        return got["config"]

    before = lab.RunConfig().metrics
    chosen = catalogue.register_metric(dataclasses.replace(TOY, name="class_gap_default", default=True,
                                                           compared=False, export=False, curve=()))
    after = before + (chosen.name,)
    try:
        assert lab.RunConfig().metrics == after == catalogue.metric_names(default=True)
        assert lab.RunConfig.defaults()["metrics"] == after and lab.RunConfig.from_dict({}).metrics == after
        # the command line: its help names it among the defaults, and a run without --metrics measures it
        with pytest.raises(SystemExit):
            main(["run", "--help"])
        help_text = " ".join(capsys.readouterr().out.split())
        assert f"(default: {' '.join(after)})" in help_text
        assert command_line_config(["--dataset", "digits", "--backbone", "mlp"]).metrics == after
        # the Choose form: a fresh form, a preset applied and an emptied choice all send it
        panel = ConfigPanel()
        assert chosen.name in panel.param.metrics.objects and panel.metrics == list(after)
        assert panel.to_config().metrics == after
        panel.apply_preset(panel.preset)
        panel.metrics = []
        assert panel.to_config().metrics == after
    finally:
        catalogue.unregister_metric(chosen.name)
    assert lab.RunConfig().metrics == before == lab.RunConfig.defaults()["metrics"]
    assert ConfigPanel().to_config().metrics == before


def test_the_metrics_module_lists_ask_the_live_catalogue(toy):
    from lab import metrics

    # TOY is a separability entry measured by default in a layer report, from features and labels alone
    assert toy.name in metrics.DEFAULT_SEPARABILITY and toy.name in metrics.ALL_METRICS
    assert metrics.DEFAULT_SEPARABILITY == catalogue.metric_names(report=True, family="separability")
    assert metrics.DEFAULT_COLLAPSE == catalogue.metric_names(report=True, family="collapse")
    assert toy.name in lab.metrics.report.DEFAULT_SEPARABILITY and toy.name not in metrics.DEFAULT_COLLAPSE
    with pytest.raises(AttributeError, match="no attribute 'DEFAULT_TRANSFER'"):
        metrics.DEFAULT_TRANSFER


def test_the_collapse_view_names_a_classifier_measure_registered_after_import():
    import dataclasses

    import pandas as pd

    from app.collapse._rows import Source, problems

    source = Source(metrics=pd.DataFrame(columns=["seed", "epoch", "layer", "split", "metric", "value"]),
                    config={"strategy": "full", "metrics": ["nmi", "nc1"]})
    before = problems(source, finished=True)["classifier"]
    head = catalogue.register_metric(dataclasses.replace(TOY, name="class_gap_head", family="classifier_collapse",
                                                         needs=("labels", "head"), compared=False, export=False,
                                                         curve=()))
    try:
        said = problems(source, finished=True)["classifier"]
        assert "class_gap_head" in said and said.startswith("no classifier-side measure (")
        assert said.replace(", class_gap_head)", ")") == before
    finally:
        catalogue.unregister_metric(head.name)
    assert problems(source, finished=True)["classifier"] == before
