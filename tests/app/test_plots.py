"""app.plots (the figures notebooks and the app share), lab.export.tables (what they draw) and lab.progress.

The stored values are a known function of (seed, epoch, layer), so every mean and std is checked
against numpy on the same numbers, not against lab.analysis itself.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import holoviews as hv
import holoviews.plotting.bokeh  # noqa: F401  (options need a backend, as hv.extension loads in a notebook)
import numpy as np
import pandas as pd
import pytest
from bokeh.models import HoverTool

import lab
from app import plots
from lab import catalogue
from lab.export import tables
from lab.progress import run_with_progress
from lab.store import RunStore

REPO = Path(__file__).resolve().parents[2]
LAYERS = ["stem", "blocks.0", "blocks.1", "pre_logits"]
SEEDS = (0, 1, 2)
EPOCHS = 2
CLASSES = ["</script><b>x</b>", "{brace}", "plain"]


def _value(metric: str, seed: int, epoch: int, i: int) -> float:
    """NMI peaks at blocks.1 (index 2) at every epoch; NC1 spans decades; seeds differ."""
    if metric == "nmi":
        return 0.2 + 0.1 * [0, 1, 3, 2][i] + 0.05 * epoch + 0.01 * seed
    return 10.0 ** (1 - i) * (1 + 0.1 * seed) / (1 + epoch)


def _run(store, name, *, accuracy=True):
    cfg = lab.RunConfig(name=name, dataset="digits", backbone="mlp", strategy="full", epochs=EPOCHS,
                        seeds=list(SEEDS), n_unseen=3, projection="pca")
    w = store.create(cfg)
    w.update_meta(layers=[{"name": n, "kind": "vector", "dim": 8} for n in LAYERS],
                  split={"seen": ["s0", "s1"], "unseen": CLASSES})
    rng = np.random.default_rng(0)
    for seed in SEEDS:
        for epoch in range(EPOCHS + 1):
            w.append_metrics([{"seed": seed, "epoch": epoch, "layer": layer, "split": split, "metric": metric,
                               "value": _value(metric, seed, epoch, i)}
                              for i, layer in enumerate(LAYERS) for split in ("unseen", "seen")
                              for metric in ("nmi", "nc1")])
            w.append_training({"seed": seed, "epoch": epoch,
                               "heldout_accuracy": 0.5 + 0.1 * epoch + 0.01 * seed if accuracy else None})
            w.append_utilization([{"seed": seed, "epoch": epoch, "layer": layer, "absolute": (i + 1) * (epoch + seed),
                                   "relative": 0.1 * (i + 1)} for i, layer in enumerate(LAYERS)])
            w.save_projection(seed, epoch, "blocks.1", "pca", rng.normal(size=(6, 2)), np.arange(6) % 3,
                              np.arange(6), class_names=CLASSES)
        w.append_contribution([{"seed": seed, "layer": layer, "metric": "heldout_accuracy_delta",
                                "value": -0.1 * i - 0.01 * seed} for i, layer in enumerate(LAYERS)])
    w.finish("finished")
    return store.load(w.run_id)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    store = RunStore(tmp_path_factory.mktemp("plots") / "runs")
    a = _run(store, "same name")
    b = _run(store, "same name", accuracy=False)
    return {a.run_id: a, b.run_id: b}


def _reference(metric, split_epoch):
    """numpy mean and std (ddof=1) over seeds of the stored values at one epoch, per layer."""
    values = np.array([[_value(metric, s, split_epoch, i) for i in range(len(LAYERS))] for s in SEEDS])
    return values.mean(axis=0), values.std(axis=0, ddof=1)


# ------------------------------------------------------------------------------ lab.export.tables

def test_labels_and_status_table(runs):
    labels = tables.run_labels(runs)
    assert sorted(labels.values()) == sorted(f"same name ({rid})" for rid in runs)
    status = tables.status_table(runs)
    assert list(status.columns) == tables.STATUS_COLUMNS
    assert status["best_layer"].tolist() == ["blocks.1", "blocks.1"]
    mean, std = _reference("nmi", EPOCHS)
    np.testing.assert_allclose(status["g"], mean[2])
    np.testing.assert_allclose(status["g_std"], std[2])
    with pytest.raises(ValueError, match="runs must be a dict of lab RunRecords"):
        tables.run_labels(42)


def test_layer_and_curve_tables_match_numpy(runs):
    table = tables.layer_table(runs)
    assert list(table.columns[:3]) == ["run", "epoch", "layer"] and set(table.columns[3:]) == {"nmi", "nc1"}
    assert (table["epoch"] == EPOCHS).all() and table["layer"].tolist() == LAYERS * 2
    for metric in ("nmi", "nc1"):
        mean, std = _reference(metric, EPOCHS)
        np.testing.assert_allclose(table[metric].to_numpy(), np.tile(mean, 2))
        curve = tables.curve_table(runs, metric, epoch=1)
        m1, s1 = _reference(metric, 1)
        np.testing.assert_allclose(curve["mean"], np.tile(m1, 2))
        np.testing.assert_allclose(curve["std"], np.tile(s1, 2))
        assert curve["depth"].tolist() == [0, 1 / 3, 2 / 3, 1] * 2 and (curve["n"] == len(SEEDS)).all()
    seen = tables.layer_table(runs, split="seen", epoch=0)
    np.testing.assert_allclose(seen["nc1"], np.tile(_reference("nc1", 0)[0], 2))


def test_generalization_table_agrees_with_the_summary(runs):
    gen = tables.generalization_table(runs)
    assert list(gen.columns) == tables.GENERALIZATION_COLUMNS and len(gen) == 2 * (EPOCHS + 1)
    for run_id, run in runs.items():
        rows = gen[gen["run_id"] == run_id].set_index("epoch")
        for epoch in range(EPOCHS + 1):
            mean, std = _reference("nmi", epoch)
            assert rows.loc[epoch, "g_layer"] == "blocks.1"
            assert rows.loc[epoch, "g"] == pytest.approx(mean[2]) and rows.loc[epoch, "g_std"] == pytest.approx(std[2])
        summary = run.summary()
        assert rows.loc[summary["epoch"], "g"] == summary["g"]
        assert rows.loc[summary["epoch"], "g_layer"] == summary["best_layer"]
    with_acc = gen[gen["run_id"] == next(iter(runs))].set_index("epoch")["seen_accuracy"]
    np.testing.assert_allclose(with_acc, [np.mean([0.5 + 0.1 * e + 0.01 * s for s in SEEDS]) for e in range(3)])
    assert gen[gen["run_id"] == list(runs)[1]]["seen_accuracy"].isna().all()


def test_epoch_utilization_and_contribution_tables(runs):
    run = next(iter(runs.values()))
    epochs = tables.epoch_table(run, "nc1", split="seen")
    assert len(epochs) == (EPOCHS + 1) * len(LAYERS) and epochs["layer"].tolist()[:4] == LAYERS
    np.testing.assert_allclose(epochs[epochs["epoch"] == 1]["mean"], _reference("nc1", 1)[0])
    util = tables.utilization_table(run)
    assert util["layer"].tolist() == LAYERS
    np.testing.assert_allclose(util["absolute"], [(i + 1) * np.mean([EPOCHS + s for s in SEEDS]) for i in range(4)])
    contrib = tables.contribution_table(run)
    np.testing.assert_allclose(contrib["mean"], [-0.1 * i - 0.01 for i in range(4)])


# --------------------------------------------------------------------------------------- app.plots

def test_labels_and_log_scales_come_from_the_catalogue():
    assert dict(plots.METRIC_LABELS) == {m.name: m.label for m in catalogue.METRICS.values()}
    assert plots.LOG_METRICS == {m.name for m in catalogue.METRICS.values() if m.log_scale} == {"nc1", "cdnv", "nc3_self_duality"}
    assert plots.metric_label("nc1") == "NC1" and plots.metric_label("custom") == "custom"


def test_split_names_and_styles_are_keyed_on_the_catalogues_split_table():
    from app.base._plot_style import _by_split

    assert dict(plots.SPLIT_NAMES) == {s.name: s.label for s in catalogue.SPLIT_TABLE}
    assert tuple(plots.SPLIT_DASH_COLLAPSE) == tuple(plots.SPLIT_MARKERS) == catalogue.SPLITS
    assert list(plots.SPLIT_DASH_COLLAPSE.values()) == ["solid", "dashed", "dotted"]
    assert list(plots.SPLIT_MARKERS.values()) == ["circle", "square", "triangle"]
    assert tuple(_by_split(unseen="x", train="y")) == ("train", "unseen")          # in the table's order
    with pytest.raises(ValueError, match="split styles must be keyed on 'train', 'seen', 'unseen'. Got 'heldout'"):
        _by_split(heldout="dashed")


def test_plot_title_is_inert_and_short():
    title = plots.plot_title("</script>{x}" + "a" * 100, 20)
    assert "<" not in title and ">" not in title and len(title) <= 22
    assert title.startswith("＜/script＞{{x}}") and title.endswith("…")


def test_layer_curves_draw_mean_and_error_bars_per_run(runs):
    overlay = plots.layer_curves(runs, "nmi", epoch=1)
    bars = [el for el in overlay if isinstance(el, hv.ErrorBars)]
    curves = [el for el in overlay if isinstance(el, hv.Curve)]
    assert len(bars) == len(curves) == 2
    mean, std = _reference("nmi", 1)
    for curve, bar in zip(curves, bars):
        np.testing.assert_allclose(curve.dimension_values("nmi"), mean)
        np.testing.assert_allclose(bar.dimension_values("up"), std)
        assert curve.dimension_values("x").tolist() == [0, 1, 2, 3]      # one architecture: by layer
    assert overlay.opts.get().kwargs["xticks"] == list(enumerate(LAYERS))
    # log metrics are drawn as log10, the error bars reaching log10(mean ± std)
    log = plots.layer_curves(runs, "nc1")
    curve = next(el for el in log if isinstance(el, hv.Curve))
    bar = next(el for el in log if isinstance(el, hv.ErrorBars))
    mean, std = _reference("nc1", EPOCHS)
    np.testing.assert_allclose(curve.dimension_values("nc1"), np.log10(mean))
    np.testing.assert_allclose(bar.dimension_values("up"), np.log10(mean + std) - np.log10(mean))
    assert curve.get_dimension("nc1").label == "log10 NC1"
    empty = plots.layer_curves(runs, "knn_accuracy")
    assert "no knn_accuracy" in empty.opts.get().kwargs["title"]


def test_layer_curves_draw_the_bootstrap_band_where_a_run_recorded_one(runs, tmp_path):
    assert not any(isinstance(el, hv.Area) for el in plots.layer_curves(runs, "nmi"))   # recorded without it
    store = RunStore(tmp_path / "runs")
    cfg = lab.RunConfig(name="banded", dataset="digits", backbone="mlp", strategy="none", n_unseen=3)
    w = store.create(cfg)
    w.update_meta(layers=[{"name": n, "kind": "vector", "dim": 8} for n in LAYERS])
    rows = []
    for i, layer in enumerate(LAYERS):
        value = _value("nmi", 0, 0, i)
        rows += [{"seed": 0, "epoch": 0, "layer": layer, "split": "unseen", "metric": metric, "value": v}
                 for metric, v in (("nmi", value), ("nmi_low", value - 0.05), ("nmi_high", value + 0.02),
                                   ("nmi_best_share", float(i == 2)))]
    w.append_metrics(rows)
    w.finish("finished")
    banded = {w.run_id: store.load(w.run_id), **runs}
    overlay = plots.layer_curves(banded, "nmi", epoch=0)
    areas = [el for el in overlay if isinstance(el, hv.Area)]
    assert len(areas) == 1                                       # only the run that has one
    mean = np.array([_value("nmi", 0, 0, i) for i in range(4)])
    np.testing.assert_allclose(areas[0].dimension_values(1), mean - 0.05)
    np.testing.assert_allclose(areas[0].dimension_values(2), mean + 0.02)
    assert overlay.opts.get().kwargs["title"].endswith("; band 95 % bootstrap")
    gen = tables.generalization_table(banded).set_index("run_id")
    assert gen.loc[w.run_id, "best_share"] == 1.0 and gen.loc[w.run_id, "g_low"] == pytest.approx(mean[2] - 0.05)
    assert gen.drop(index=w.run_id)[["g_low", "g_high", "best_share"]].isna().all(axis=None)


def test_heatmap_epoch_curves_and_projection(runs):
    run = next(iter(runs.values()))
    heat = plots.layer_epoch_heatmap(run, "nc1", "seen", label="a {label}")
    assert isinstance(heat, hv.HeatMap)
    values = heat.data.set_index(["epoch", "layer"])["value"]
    assert values[(1, "blocks.0")] == pytest.approx(np.log10(_reference("nc1", 1)[0][1]))
    assert heat.opts.get().kwargs["title"].startswith("a {{label}}: log10 NC1 (seen)")
    epochs = sorted(set(heat.data["epoch"]))                 # whole cells: half a cell beyond the ends
    assert heat.opts.get().kwargs["xlim"] == (epochs[0] - 0.5, epochs[-1] + 0.5)
    lines = plots.epoch_curves(run, "nmi", split="unseen")
    latest = [el for el in lines if isinstance(el, hv.Curve)][-1]
    np.testing.assert_allclose(latest.dimension_values("nmi"), _reference("nmi", EPOCHS)[0])
    points = plots.projection_plot(run, "blocks.1")
    assert isinstance(points, hv.Points) and len(points) == 6
    assert set(points.dimension_values("class")) == {plots.plot_text(c) for c in CLASSES}
    assert not any("<" in c for c in points.dimension_values("class"))
    missing = plots.projection_plot(run, "stem")
    assert isinstance(missing, hv.Text) and "no stored layout" in missing.text


def test_accuracy_vs_g_falls_back_to_epochs(runs):
    gen = tables.generalization_table(runs)
    overlay = plots.accuracy_vs_g(gen)
    scatters = [el for el in overlay if isinstance(el, hv.Scatter)]
    assert len(scatters) == 1 and scatters[0].kdims[0].name == "seen_accuracy"   # the run without accuracy drops
    only_epochs = plots.accuracy_vs_g(gen.assign(seen_accuracy=np.nan))
    assert [el.kdims[0].name for el in only_epochs if isinstance(el, hv.Scatter)] == ["epoch", "epoch"]


# ------------------------------------------------------------------------------------- lab.progress

@pytest.mark.slow
def test_run_with_progress_returns_the_stored_run_and_raises_on_failure(tmp_path):
    store = RunStore(tmp_path / "runs")
    cfg = lab.RunConfig(dataset="digits", backbone="mlp:depth=2,width=16", strategy="linear", epochs=1, seeds=[0],
                        n_unseen=2, unseen_per_class=10, seen_per_class=5, metrics=["nmi"], projection="none",
                        save_weights=False, device="cpu")
    run_id = run_with_progress(cfg, store=store)
    assert store.load(run_id).status == "finished" and len(store.load(run_id).training) == 2
    bad = cfg.replace(backbone="no_such_backbone_xyz")
    with pytest.raises(RuntimeError, match=r"run \S+ failed: .*unknown backbone"):
        run_with_progress(bad, store=store)
    failed = run_with_progress(bad.to_dict(), store=store, check=False)
    assert store.load(failed).status == "failed"


def test_tables_and_progress_import_no_plotting_library():
    code = ("import sys, lab.export.tables, lab.progress, lab.export; "
            "bad = [m for m in ('panel', 'bokeh', 'holoviews', 'hvplot', 'app') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    res = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr


def test_the_overlay_title_holds_for_runs_counted_in_epochs_or_in_steps():
    """A run counted in optimizer steps is overlaid with others: its curve is at its last evaluation, not epoch."""
    frame = pd.DataFrame({"run": ["a", "a", "b", "b"], "layer": ["fc1", "fc2"] * 2, "layer_index": [0, 1] * 2,
                          "value": [0.2, 0.4, 0.3, 0.5]})
    title = hv.Store.lookup_options("bokeh", plots.compare_curves(frame, metric="nmi", split="unseen"),
                                    "plot").kwargs["title"]
    assert title.endswith("· last evaluation of each run") and "epoch" not in title


def test_training_curves_tick_whole_evaluations_not_half_epochs():
    frame = pd.DataFrame({"seed": 0, "epoch": [0, 1, 2, 3], "train_loss": [np.nan, 0.9, 0.5, 0.3],
                          "train_accuracy": [np.nan, 0.5, 0.7, 0.9], "heldout_accuracy": [0.2, 0.5, 0.6, 0.8]})
    for which in ("loss", "accuracy"):
        figure = hv.render(plots.training_curves(frame, seeds=[0], which=which))
        assert list(figure.xaxis[0].ticker.ticks) == [0, 1, 2, 3], which


DEEP = [f"blocks.{i}.mlp" for i in range(48)] + ["pre_logits"]     # a 48-layer MLP's taps and its head input


def _printed(axis) -> list[str]:
    """The factors a categorical axis prints: those its formatter's ``shown`` keeps (the browser runs its code,
    ``shown.includes(tick) ? tick : ''``)."""
    from bokeh.models import CustomJSTickFormatter

    assert isinstance(axis.formatter, CustomJSTickFormatter) and "shown.includes(tick)" in axis.formatter.code
    return list(axis.formatter.args["shown"])


@pytest.mark.parametrize("length, axis", [(380, "x"), (900, "x"), (320, "y"), (1600, "y")])
def test_layer_ticks_keep_what_fits_and_start_at_the_input(length, axis):
    ticks = plots.layer_ticks(DEEP, length, axis=axis)
    fit = (length - 80) // plots.TICK_PITCH[axis]
    assert 1 <= len(ticks) <= fit
    assert ticks[0] == (0, DEEP[0])
    steps = {b[0] - a[0] for a, b in zip(ticks, ticks[1:])}
    assert len(steps) == 1 and all(DEEP[i] == name for i, name in ticks)     # every k-th layer, its own name
    assert len(ticks) > min(fit, len(DEEP)) // 2       # not thinned more than needed
    assert plots.layer_ticks(DEEP[:3], 380) == [(0, DEEP[0]), (1, DEEP[1]), (2, DEEP[2])]   # few: all of them
    with pytest.raises(ValueError, match="axis must be one of x, y; got 'z'"):
        plots.layer_ticks(DEEP, 380, axis="z")


def test_every_layer_axis_of_a_deep_run_prints_what_fits_and_hovers_every_name():
    n = len(DEEP)
    frame = pd.DataFrame({"split": "unseen", "epoch": 0, "layer": DEEP, "mean": np.linspace(0, 1, n),
                          "std": np.nan})
    curves = hv.render(plots.metric_curves(frame, metric="nmi", splits=("unseen",), layers=DEEP, n_epochs=0,
                                           width=380, responsive=True))
    axis = curves.xaxis[0]
    printed = [axis.major_label_overrides[t] for t in axis.ticker.ticks]
    assert len(printed) <= (380 - 80) // plots.TICK_PITCH["x"] and printed[0] == DEEP[0]
    hover, = curves.select(type=HoverTool)
    assert ("layer", "@layer_name") in hover.tooltips
    shown = [list(r.data_source.data["layer_name"]) for r in hover.renderers]
    assert shown and all(names == DEEP for names in shown)           # every name, in the markers' hover

    heat = hv.render(plots.heatmap(pd.DataFrame({"epoch": 0, "layer": DEEP, "value": 0.5}), metric="nmi",
                                   split="unseen", layers=DEEP, height=320, responsive=True))
    assert list(heat.y_range.factors) == DEEP                        # every cell keeps its row
    shown = _printed(heat.yaxis[0])
    assert shown[0] == DEEP[0] and len(shown) <= (320 - 80) // plots.TICK_PITCH["y"]
    assert set(heat.renderers[0].data_source.data["layer"]) == set(DEEP)       # the hover's layer column
    assert heat.select(type=HoverTool)

    bars = hv.render(plots.utilization_bars(pd.DataFrame({"layer": DEEP, "relative": 0.1, "epoch": 1}),
                                            layers=DEEP, width=360, responsive=True))
    shown = _printed(bars.xaxis[0])
    assert shown[0] == DEEP[0] and len(shown) <= (360 - 80) // plots.TICK_PITCH["x"]
    assert list(bars.x_range.factors) == DEEP and bars.select(type=HoverTool)


def test_a_shallow_run_still_prints_every_layer():
    layers = ["fc1", "fc2", "pre_logits"]
    heat = hv.render(plots.heatmap(pd.DataFrame({"epoch": 0, "layer": layers, "value": 0.5}), metric="nmi",
                                   split="unseen", layers=layers))
    assert _printed(heat.yaxis[0]) == layers
    frame = pd.DataFrame({"split": "unseen", "epoch": 0, "layer": layers, "mean": [0.1, 0.2, 0.3], "std": np.nan})
    curves = hv.render(plots.metric_curves(frame, metric="nmi", splits=("unseen",), layers=layers, n_epochs=0))
    assert [curves.xaxis[0].major_label_overrides[t] for t in curves.xaxis[0].ticker.ticks] == layers
