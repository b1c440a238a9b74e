"""The answer per image in the app (issue 35): the explorer's arrival-layer colours and forgotten filter, the
measures of a selection over all images, and the measures' best layers under the live view's verdict.

Every number the views show must be lab.analysis's: each test compares the view with the lab function on a
real tiny run (it measures kNN accuracy, so it has a per-image record), and a run without the record turns the
controls off with lab's one-line reason.
"""
from __future__ import annotations

import html
import json
import shutil

import holoviews as hv
import numpy as np
import pandas as pd
import pytest

from lab import analysis

hv.extension("bokeh")

pytestmark = pytest.mark.slow          # the session's tiny run costs seconds


@pytest.fixture
def view(tiny_run):
    from app.explorer.embedding import EmbeddingView

    store, run_id, _ = tiny_run
    return EmbeddingView(store=store, run_id=run_id)


def _shown(view) -> tuple[int, int]:
    """(seed, epoch) of the evaluation the view reads: its layouts' seed, its left plot's epoch."""
    return view._source.seed, view._panels[0].key[1]


def _table(tiny_run, view) -> pd.DataFrame:
    store, run_id, _ = tiny_run
    seed, epoch = _shown(view)
    return analysis.image_table(run_id, epoch, seed=seed, store=store)


def _highlighted(view, side: int = 0) -> list[int]:
    p = view._panels[side]
    return sorted(view._render_highlight(p, p.pipe.data).dframe()["index"].tolist())


def test_arrival_colours_are_image_tables_arrival_layer_in_layer_order(tiny_run, view):
    from app.base import plots

    assert not view._bar.color_w.disabled and view._panels[0].pipe.data["by"] == "class"
    view.color_by = "arrival layer"
    data = view._panels[0].pipe.data
    table = _table(tiny_run, view)
    layers = table.attrs["layers"]
    assert data["by"] == "arrival" and data["colors"] == plots.arrival_colors(layers)
    expected = table["arrival_layer"].reindex(data["frame"]["index"]).fillna("never").tolist()
    assert data["frame"]["arrival"].astype(str).tolist() == expected
    assert list(data["frame"]["arrival"].cat.categories) == [*layers, "never"]
    # the legend: the layers input -> output, then never, each with image_table's count
    legend = view._bar.legend.object
    assert view._bar.legend.visible
    places = [legend.index(f"</span> {name} {n}</span>") for name, n in analysis.arrival_counts(table).items()]
    assert places == sorted(places)
    # the glyphs' colour mapper lists the same categories in the same order
    element = view._render_base(view._panels[0], data)
    mapper = hv.render(element).renderers[0].glyph.fill_color.transform
    assert list(mapper.factors) == [*layers, "never"]
    # another epoch: that evaluation's answers
    view.epoch = 0
    assert _shown(view)[1] == 0
    expected = _table(tiny_run, view)["arrival_layer"].reindex(view._panels[0].frame["index"]).fillna("never")
    assert view._panels[0].pipe.data["frame"]["arrival"].astype(str).tolist() == expected.tolist()
    view.color_by = "class"
    assert view._panels[0].pipe.data["by"] == "class" and not view._bar.legend.visible


def test_the_forgotten_filter_selects_image_tables_forgotten_rows_at_every_layer(tiny_run, view):
    table = _table(tiny_run, view)
    forgotten = table.index[table["forgotten"].fillna(False).to_numpy(bool)].tolist()
    button = view._bar.forgotten_w
    assert button.label.endswith(f"({len(forgotten)})") and button.disabled == (not forgotten)
    view.select_forgotten()
    assert view.selection == forgotten
    if forgotten:
        assert _highlighted(view) == forgotten
        view.side_by_side = True
        view.layer_b = table.attrs["final_layer"]
        assert _highlighted(view, 1) == forgotten               # the same images at the final layer
    assert f"{len(forgotten)} of {len(table)} images forgotten" in view._bar.note.object


def test_the_selection_curve_is_selection_measures_on_the_record(tiny_run, view):
    store, run_id, _ = tiny_run
    seed, epoch = _shown(view)
    rec = store.load(run_id)
    record, names = rec.image_record(seed, epoch), rec.meta["split"]["unseen"]
    assert view.measures.frame is None and not view.measures._pane.visible      # nothing selected yet
    chosen = view._valid[::3].tolist()
    view.selection = chosen
    expected = analysis.selection_measures(record, chosen, class_names=names)
    pd.testing.assert_frame_equal(view.measures.frame, expected)
    assert view.measures._pane.visible
    for measure in ("share_right", "nmi", "mean_margin"):     # the curve drawn: the selection's values, then all
        view.measures.measure = measure
        overlay = view.measures._render(view.measures._pipe.data)
        curves = [e for e in overlay if isinstance(e, hv.Curve)]
        np.testing.assert_allclose(curves[0].dimension_values("value"), expected[f"all_{measure}"])
        np.testing.assert_allclose(curves[1].dimension_values("value"), expected[measure])
    # view.selection_report() is lab's, read from the store
    report = view.selection_report()
    lab_report = analysis.selection_report(run_id, chosen, epoch, seed=seed, store=store)
    pd.testing.assert_frame_equal(report, lab_report)
    assert report.attrs == lab_report.attrs
    # a one-class selection: the notes say why NMI and CDNV are missing
    labels = record.labels
    one = np.flatnonzero(labels == labels[0])[:3].tolist()
    view.selection = one
    assert view.measures.frame["nmi"].isna().all() and "one class" in view.measures._text.object
    view.selection = []
    assert view.measures.frame is None


def test_without_a_record_the_controls_are_off_with_labs_reason(tiny_run, tmp_path):
    """A run recorded before the per-image record existed (the tiny run without its record), and arrays."""
    import lab

    from app.explorer.embedding import EmbeddingView
    from lab.errors import NoImageRecordError

    store, run_id, _ = tiny_run
    old = lab.RunStore(tmp_path / "runs")
    shutil.copytree(store.root / run_id, old.root / run_id)
    shutil.rmtree(old.root / run_id / "tables" / "images")
    view = EmbeddingView(store=old, run_id=run_id)
    seed, epoch = _shown(view)
    reason = analysis.image_record_problem(run_id, seed=seed, epoch=epoch, store=old)
    assert reason and "has no per-image record: it was recorded without it; run it again" in reason
    bar = view._bar
    assert bar.color_w.disabled and bar.forgotten_w.disabled
    assert bar.color_w.description == reason and html.escape(reason) in bar.note.object
    view.color_by = "arrival layer"                          # set from Python anyway: the points keep their classes
    assert view._panels[0].pipe.data["by"] == "class" and not bar.legend.visible
    with pytest.raises(ValueError, match="no per-image answers here"):
        view.select_forgotten()
    view.selection = [int(view._valid[0])]
    assert view.measures.frame is None and not view.measures._layout.visible
    with pytest.raises(NoImageRecordError):
        view.selection_report()
    arrays = EmbeddingView.from_arrays(np.random.default_rng(0).normal(size=(20, 2)), np.arange(20) % 2)
    assert arrays._bar.color_w.disabled and "not from a stored run" in arrays._bar.note.object
    with pytest.raises(ValueError, match="not from a stored run"):
        arrays.selection_report()


def test_the_live_view_reads_the_agreement_and_the_record_when_an_evaluation_completes(tiny_run, monkeypatch):
    from app.live import LiveView

    store, run_id, events = tiny_run
    live = LiveView()
    live.store = store
    calls = []
    real = analysis.measure_agreement
    monkeypatch.setattr(analysis, "measure_agreement", lambda *a, **k: calls.append(a) or real(*a, **k))
    first = next(i for i, e in enumerate(events) if e.kind == "epoch_finished")
    live.consume(events[:first])                 # every layer of the first evaluation, not yet complete
    assert live.agreement.table is None and not calls
    live.consume(events[first:])
    assert len(calls) == 1                        # once per batch that completes an evaluation, not per layer
    expected = analysis.measure_agreement(run_id, store=store)
    pd.testing.assert_frame_equal(live.agreement.table, expected)
    text = live.agreement._pane.object
    assert "Best layer by each measure, this evaluation" in text
    for name, row in expected.iterrows():
        share = f"{100 * row['best_share']:.0f} %" if np.isfinite(row["best_share"]) else ""
        assert f"<tr data-measure='{name}'><td>{row['label']}</td><td>{row['best_layer']}</td>" \
               f"<td style='text-align:right'>{share}</td>" in text
    # the layout's answers are the record's, and the live view hands out lab's selection report
    view = live.embedding
    assert view._bar.ok and view._bar.answers.epoch == view._panels[0].key[1]
    view.selection = view._valid[:5].tolist()
    seed, epoch = _shown(view)
    pd.testing.assert_frame_equal(live.selection_report(),
                                  analysis.selection_report(run_id, view.selection, epoch, seed=seed, store=store))
    live.reset()
    assert live.agreement.table is None and not view._bar.ok


def test_compare_export_carries_the_explorers_selection(tiny_run):
    from app.compare.runs_panel import RunsPanel

    store, run_id, _ = tiny_run
    panel = RunsPanel(store)
    panel.select([run_id])
    panel.embedding.selection = panel.embedding._valid[:4].tolist()
    path = panel.export()
    cell = next(c for c in json.loads(path.read_text())["cells"] if "images" in c["metadata"].get("tags", []))
    assert f"SELECTION = {panel.embedding.selection}" in "".join(cell["source"])
    assert "4 selected images" in panel.message
