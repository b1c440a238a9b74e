"""A study's figures carry how sure each answer is (g's bootstrap interval and best-layer share), and
compare the transferability scores measured before fine-tuning with the NMI each layer reaches after it.

The study's runs are real (an MLP on digits, run in this process and tagged as the study's cells, no
Dask); every number is checked against numpy/scipy on the stored rows, not against lab.analysis.
"""
from __future__ import annotations

import holoviews as hv
import holoviews.plotting.bokeh  # noqa: F401  (options need a backend)
import numpy as np
import pandas as pd
import pytest
from scipy import stats

import lab
from app import study_plots
from lab.analysis import ALL_CONDITIONS, rank_correlation
from lab.store import RunStore
from lab.study import Study, figures
from lab.study.records import tag_run

BASE = {"dataset": "digits", "img_size": 16, "backbone": "mlp:depth=5,width=16", "strategy": "full", "epochs": 1,
        "projection": "none", "unseen_per_class": 20, "seen_per_class": 12, "device": "cpu",
        "metrics": ["nmi", "knn_accuracy", "logme", "sfda", "nc1"], "save_weights": False}
AXES = {"lr": [0.01, 0.05], "seeds": [[0], [1]]}
CONFIDENCE = ("_low", "_high", "_best_share")

hv.extension("bokeh")


def _run_in_process(store, study):
    for cell in study.cells():
        events = list(lab.run(cell.config, store=store))
        assert events[-1].kind == "run_finished", events[-1]
        tag_run(events[0].run_id, study.name, cell.values, store=store)


@pytest.fixture(scope="module")
def study_store(tmp_path_factory):
    store = RunStore(tmp_path_factory.mktemp("study_figures") / "runs")
    study = Study("transfer", BASE, AXES)
    _run_in_process(store, study)
    return study, store


def _records(study, store):
    """{condition label: [RunRecord, ...]} of the study's runs, read back from the store."""
    out = {}
    for run_id in store.ids():
        rec = store.load(run_id)
        out.setdefault(f"lr={rec.meta['cell']['lr']}", []).append(rec)
    return out


def _segments(obj) -> list[pd.DataFrame]:
    return [el.dframe() for el in obj.traverse(lambda x: x, [hv.Segments])]


# ------------------------------------------------------------------------------ g's interval

def test_study_figures_carry_g_interval_and_best_share_of_the_stored_rows(study_store):
    study, store = study_store
    figs = figures(study, store=store)
    gen = figs["generalization"].set_index("group")
    for group, recs in _records(study, store).items():
        m = pd.concat([r.metrics for r in recs])
        last = m["epoch"].max()
        at = m[(m["epoch"] == last) & (m["split"] == "unseen")]
        means = {name: at.loc[at["metric"] == name].groupby("layer")["value"].mean()
                 for name in ("nmi", "nmi_low", "nmi_high", "nmi_best_share")}
        aliases = recs[0].meta.get("layer_aliases") or {}
        best = means["nmi"].idxmax()
        best = aliases.get(best, best)
        row = gen.loc[group]
        assert row["layer"] == best and row["g"] == pytest.approx(means["nmi"][best])
        # the interval and the share are the seeds' means of the stored bootstrap rows of g's layer
        assert row["g_low"] == pytest.approx(means["nmi_low"][best])
        assert row["g_high"] == pytest.approx(means["nmi_high"][best])
        assert row["best_share"] == pytest.approx(means["nmi_best_share"][best])
        assert row["g_low"] <= row["g_high"] and 0 < row["best_share"] <= 1
        curve = figs["layers"][figs["layers"]["group"] == group].set_index("layer")
        for layer in curve.index:
            assert curve.loc[layer, "low"] == pytest.approx(means["nmi_low"][layer])
            assert curve.loc[layer, "high"] == pytest.approx(means["nmi_high"][layer])
    # the status table shows each run's own interval
    status = study.status(store=store)
    for _, cell in status.iterrows():
        summary = store.load(cell["run_id"]).summary()
        assert (cell["g_low"], cell["g_high"], cell["best_share"]) == (
            summary["g_low"], summary["g_high"], summary["best_share"])


def test_the_law_per_condition_is_numpys_fit_over_the_conditions_runs(study_store):
    study, store = study_store
    law = figures(study, store=store)["law"]
    assert set(law["split"]) == {"train", "seen", "unseen"}
    for group, recs in _records(study, store).items():
        for split in ("train", "seen", "unseen"):
            ratios, rs = [], []
            for rec in recs:                     # one seed per run: the condition's seeds are its runs
                aliases = rec.meta.get("layer_aliases") or {}
                layers = [layer["name"] for layer in rec.meta["layers"] if layer["name"] not in aliases]
                m = rec.metrics[(rec.metrics["metric"] == "nc1") & (rec.metrics["split"] == split)]
                at = m[m["epoch"] == m["epoch"].max()].groupby("layer")["value"].mean()
                x, y = np.arange(len(layers), dtype=float), np.log10(at[layers].to_numpy())
                ratios.append(10.0 ** np.polyfit(x, y, 1)[0])
                rs.append(np.corrcoef(x, y)[0, 1])
            row = law[(law["group"] == group) & (law["split"] == split)].iloc[0]
            assert row["n_seeds"] == 2 and row["n_layers"] == len(layers) == 5
            assert row["ratio"] == pytest.approx(np.mean(ratios), rel=1e-9)
            assert row["ratio_std"] == pytest.approx(np.std(ratios, ddof=1), rel=1e-9)
            assert row["r"] == pytest.approx(np.mean(rs), rel=1e-9)
            assert row["r_std"] == pytest.approx(np.std(rs, ddof=1), rel=1e-9)


def test_study_plots_draw_the_interval_and_the_text_says_it(study_store):
    study, store = study_store
    figs = figures(study, store=store)
    curves = study_plots.layer_depth_curves(figs)
    assert "bootstrap interval" in curves.opts.get().kwargs["title"]
    drawn = pd.concat(_segments(curves))
    layers = figs["layers"]
    # one vertical bar per (condition, layer) from low to high, at the layer's relative depth
    assert len(drawn) == len(layers)
    np.testing.assert_allclose(np.array(sorted(zip(drawn["x0"], drawn["y0"], drawn["y1"]))),
                               np.array(sorted(zip(layers["depth"], layers["low"], layers["high"]))))
    assert (drawn["x0"] == drawn["x1"]).all()
    gen = figs["generalization"]
    bars = pd.concat(_segments(study_plots.accuracy_vs_g(figs)))
    np.testing.assert_allclose(np.array(sorted(zip(bars["y0"], bars["y1"]))),
                               np.array(sorted(zip(gen["g_low"], gen["g_high"]))))
    text = study_plots.generalization_text(figs)
    for row in gen.itertuples():
        assert (f"at {row.layer}; best in {100 * row.best_share:.0f} % of resamples; "
                f"{row.g_low:.2f}-{row.g_high:.2f} (95 % bootstrap over the unseen images)") in text
    for obj in (curves, study_plots.accuracy_vs_g(figs), study_plots.transfer_vs_g(figs)):
        hv.render(obj, backend="bokeh")


def test_runs_stored_without_the_bootstrap_show_no_band_and_no_error(study_store, tmp_path):
    study, store = study_store
    old = RunStore(tmp_path / "runs")
    for run_id in store.ids():
        rec = store.load(run_id)
        w = old.create(rec.config)
        w.update_meta(layers=rec.meta["layers"], layer_aliases=rec.meta.get("layer_aliases") or {})
        m = rec.metrics
        w.append_metrics(m[~m["metric"].str.endswith(CONFIDENCE)].to_dict("records"))
        for row in rec.training.to_dict("records"):
            w.append_training(row)
        w.finish("finished")
        tag_run(w.run_id, study.name, rec.meta["cell"], store=old)
    figs = figures(study, store=old)
    gen = figs["generalization"]
    assert gen["g"].notna().all() and gen[["g_low", "g_high", "best_share"]].isna().all(axis=None)
    assert figs["layers"][["low", "high", "best_share"]].isna().all(axis=None)
    assert figs["transfer"]["points"][["nmi_low", "nmi_high"]].isna().all(axis=None)
    curves, points = study_plots.layer_depth_curves(figs), study_plots.accuracy_vs_g(figs)
    assert _segments(curves) == [] and _segments(points) == []
    assert "bootstrap" not in curves.opts.get().kwargs["title"]
    assert "resamples" not in study_plots.generalization_text(figs)
    assert study.status(store=old)[["g_low", "g_high", "best_share"]].isna().all(axis=None)
    for obj in (curves, points, study_plots.transfer_vs_g(figs)):
        hv.render(obj, backend="bokeh")


def test_tag_run_tags_the_run_where_it_is_stored(study_store, tmp_path):
    study, store = study_store
    copy = RunStore(tmp_path / "runs")
    rec = store.load(store.ids()[0])
    w = copy.create(rec.config)
    w.finish("finished")
    tag_run(w.run_id, "other", {"lr": 1}, store=copy)
    assert (copy.load(w.run_id).meta["study"], copy.load(w.run_id).meta["cell"]) == ("other", {"lr": 1})
    tag_run(copy.load(w.run_id), "third", {"lr": 2})                  # a record: tagged where it is stored
    assert copy.load(w.run_id).meta["study"] == "third"


# ------------------------------------------------------------------------------ transferability vs g

def test_transfer_points_are_the_stored_scores_before_and_the_nmi_after_fine_tuning(study_store):
    study, store = study_store
    transfer = figures(study, store=store)["transfer"]
    assert transfer["scores"] == ["logme", "sfda", "knn_accuracy"]
    points = transfer["points"]
    for group, recs in _records(study, store).items():
        m = pd.concat([r.metrics for r in recs])
        aliases = recs[0].meta.get("layer_aliases") or {}
        part = points[points["group"] == group].set_index("layer")
        layers = [layer["name"] for layer in recs[0].meta["layers"]]
        assert list(part.index) == [name for name in layers if name not in aliases]
        before = m[(m["epoch"] == 0) & (m["split"] == "seen")]
        after = m[(m["epoch"] == m["epoch"].max()) & (m["split"] == "unseen") & (m["metric"] == "nmi")]
        for layer in part.index:
            assert part.loc[layer, "nmi"] == pytest.approx(after.loc[after["layer"] == layer, "value"].mean())
            for score in transfer["scores"]:
                rows = before[(before["layer"] == layer) & (before["metric"] == score)]
                assert len(rows) == 2 and part.loc[layer, score] == pytest.approx(rows["value"].mean())


def test_transfer_correlations_are_scipys_spearman_with_an_independent_bootstrap(study_store):
    study, store = study_store
    transfer = figures(study, store=store)["transfer"]
    points, table = transfer["points"], transfer["correlations"]
    groups = list(dict.fromkeys(points["group"]))
    assert list(table["scope"].unique()) == [*groups, ALL_CONDITIONS]
    assert len(table) == 3 * (len(groups) + 1)
    for row in table.itertuples():
        part = points if row.scope == ALL_CONDITIONS else points[points["group"] == row.scope]
        x, y = part[row.score].to_numpy(float), part["nmi"].to_numpy(float)
        assert row.n == len(part) >= 5
        rho = stats.spearmanr(x, y).statistic
        assert row.spearman == pytest.approx(rho, nan_ok=True)
        # the percentile bootstrap over points, recomputed with scipy in a loop over the same resamples
        picks = np.random.default_rng(0).integers(0, len(x), size=(2000, len(x)))
        boots = np.array([stats.spearmanr(x[p], y[p]).statistic if np.ptp(x[p]) > 0 and np.ptp(y[p]) > 0 else np.nan
                          for p in picks])
        boots = boots[np.isfinite(boots)]
        assert (row.spearman_low, row.spearman_high) == pytest.approx(tuple(np.percentile(boots, [2.5, 97.5])))
    text = study_plots.transfer_text(figures(study, store=store))
    overall = table[(table["score"] == "logme") & (table["scope"] == ALL_CONDITIONS)].iloc[0]
    assert (f"- LogME, all (condition, layer) points (n = {overall.n}): ρ = {overall.spearman:.2f} "
            f"(95 % bootstrap {overall.spearman_low:.2f} to {overall.spearman_high:.2f})") in text


def test_rank_correlation_is_undefined_or_without_interval_where_too_few_points():
    out = rank_correlation([0.1, 0.2], [0.3, 0.4])
    assert out["n"] == 2 and np.isnan(out["spearman"])
    out = rank_correlation([0.1, 0.2, 0.3, np.nan], [0.3, 0.1, 0.2, 0.5], min_interval_n=5)
    assert out["n"] == 3 and out["spearman"] == pytest.approx(stats.spearmanr([0.1, 0.2, 0.3], [0.3, 0.1, 0.2]).statistic)
    assert np.isnan(out["spearman_ci"]).all()
    assert np.isnan(rank_correlation([1, 1, 1, 1], [1, 2, 3, 4])["spearman"])


def test_a_study_without_transferability_scores_says_so_in_one_line(tmp_path):
    store = RunStore(tmp_path / "runs")
    study = Study("plain", {**BASE, "backbone": "mlp:depth=2,width=8", "metrics": ["nmi"]}, {"seeds": [[0]]})
    _run_in_process(store, study)
    figs = figures(study, store=store)
    assert figs["transfer"]["scores"] == [] and figs["transfer"]["correlations"].empty
    text = study_plots.transfer_text(figs)
    assert "\n" not in text and "did not measure transferability scores" in text
    plot = study_plots.transfer_vs_g(figs)
    assert isinstance(plot, hv.Text) and plot.text == text


def test_the_transfer_plot_draws_each_points_interval_over_seeds_and_n(study_store):
    study, store = study_store
    figs = figures(study, store=store)
    points = figs["transfer"]["points"]
    score = figs["transfer"]["scores"][0]
    plot = study_plots.transfer_vs_g(figs)
    assert "95 % interval over seeds" in plot.opts.get().kwargs["title"]
    bars = [e.dframe() for e in plot[0].traverse(lambda x: x, [hv.ErrorBars])]
    drawn = pd.concat(bars, ignore_index=True).sort_values([score, "nmi"]).reset_index(drop=True)
    want = points[np.isfinite(points[score].astype(float))].sort_values([score, "nmi"]).reset_index(drop=True)
    assert len(drawn) == len(want) and (want["n"] == 2).all()
    np.testing.assert_allclose(drawn["nmi"] - drawn["nmi_neg"], want["nmi_seed_low"], rtol=1e-12)
    np.testing.assert_allclose(drawn["nmi"] + drawn["nmi_pos"], want["nmi_seed_high"], rtol=1e-12)
    labels = {s.label for s in plot[-1].traverse(lambda x: x, [hv.Scatter])}
    assert labels == {f"{g} (n=2)" for g in points["group"].unique()}


def test_the_studies_tab_shows_the_intervals_and_the_transfer_comparison(study_store, tmp_path, monkeypatch):
    import yaml

    from app.studies.studies_panel import StudiesPanel

    study, store = study_store
    (tmp_path / "transfer.yaml").write_text(yaml.safe_dump(study.to_dict()))
    monkeypatch.setenv("LAB_STUDIES_DIR", str(tmp_path))
    panel = StudiesPanel(store, spec="transfer.yaml")
    layout = panel.__panel__()
    figs = figures(study, store=store)
    assert panel.transfer_text.object == study_plots.transfer_text(figs) and "LogME" in panel.transfer_text.object
    assert isinstance(panel.plots["transfer"].object, hv.Layout) and len(panel.plots["transfer"].object) == 3
    assert study_plots.generalization_text(figs) in panel.ranks.object and "resamples" in panel.ranks.object
    assert {"g_low", "g_high", "best_share"} <= set(panel.table.value.columns)
    assert panel._transfer_box in layout.objects and panel.transfer_text in layout.objects
    assert panel.plots["transfer"] in panel._transfer_box.objects and panel._transfer_box.visible


def test_confidence_text_says_only_what_was_measured():
    from lab.analysis import confidence_text

    assert confidence_text(0.781, 0.8349, 0.8125) == "best in 81 % of resamples; 0.78-0.83"
    assert confidence_text(0.781, 0.8349) == "0.78-0.83"
    assert confidence_text(np.nan, 0.83, 0.5) == confidence_text(None, None, None) == ""


def test_the_shipped_which_layer_study_measures_the_transferability_scores(repo_root):
    study = Study.from_file(repo_root / "studies" / "which_layer.yaml")
    for cell in study.cells():
        assert {"logme", "sfda"} <= set(cell.config.metrics)
        # before fine-tuning, with the seen kNN accuracy as their baseline
        assert {"logme", "sfda", "knn_accuracy"} <= set(cell.config.seen_metrics(0))


@pytest.mark.slow
def test_the_exported_study_notebook_shows_the_transfer_table(study_store, tmp_path):
    import nbformat

    from lab.export import notebook_tables, study_to_notebook

    study, store = study_store
    path = study_to_notebook(study, tmp_path / "study.ipynb", store=store, execute=True, timeout=300)
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert not [o for c in code for o in c.outputs if o.output_type == "error"]
    shown, figs = notebook_tables(nb), figures(study, store=store)
    pd.testing.assert_frame_equal(shown["transfer_vs_g"], figs["transfer"]["correlations"], check_exact=True)
    pd.testing.assert_frame_equal(shown["transfer_points"], figs["transfer"]["points"], check_exact=True)
    pd.testing.assert_frame_equal(shown["generalization"], figs["generalization"], check_exact=True)
    pd.testing.assert_frame_equal(shown["law"], figs["law"], check_exact=True)
    printed = "".join(o.get("text", "") for c in code for o in c.outputs if o.output_type == "stream")
    assert study_plots.transfer_text(figs) in printed and study_plots.generalization_text(figs) in printed
    cell = next(c for c in code if "study-transfer" in c.metadata.get("tags", []))
    assert any(o.output_type == "execute_result" for o in cell.outputs)


def test_study_show_prints_the_transfer_correlations(study_store, capsys):
    from lab.__main__ import main
    from lab.study import save_spec

    study, store = study_store
    save_spec(study, store=store)
    assert main(["study", "show", study.name, "--runs-dir", str(store.root)]) == 0
    out = capsys.readouterr().out
    assert "transferability scores at epoch 0" in out
    table = figures(study, store=store)["transfer"]["correlations"]
    row = table[(table["score"] == "sfda") & (table["scope"] == ALL_CONDITIONS)].iloc[0]
    line = next(line for line in out.splitlines() if line.split()[:3] == ["sfda", "all", "conditions"])
    assert line.split()[3:5] == [str(row.n), f"{row.spearman:.3f}"]
    assert "law of equi-separation per condition" in out
    law = figures(study, store=store)["law"]
    first = law.iloc[0]
    line = next(line for line in out.splitlines() if line.split()[:2] == [first["group"], first["split"]])
    assert line.split()[2:5] == [str(first["epoch"]), f"{first['ratio']:.3f}", f"{first['ratio_std']:.3f}"]
