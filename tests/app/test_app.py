"""Component tests of the Panel app (no browser): starting runs, the runs table, the package.

The live view and the Choose form have files of their own (test_app_live.py, test_app_config.py).
"""
from __future__ import annotations

import time
from pathlib import Path

import holoviews as hv
import panel as pn
import pytest

hv.extension("bokeh")


@pytest.fixture
def live():
    from app.live import LiveView

    return LiveView()


# ------------------------------------------------------------------ RunControl
def test_bad_input_does_not_start_a_run(live):
    from app.live.run_controls import RunControl

    def bad():
        raise ValueError("unknown model 'resnet1800'; did you mean 'resnet18'?")

    control = RunControl(live, bad, store=None)
    assert control.start() is False
    assert not control.running
    assert live._alert.visible and "resnet1800" in live._alert.object


def test_second_run_queues_on_a_busy_device_and_stop_cancels_the_wait(live):
    import lab

    from app.base.resources import shared
    from app.live.run_controls import RunControl

    cfg = lab.RunConfig(dataset="digits", backbone="mlp:depth=2,width=16", epochs=1, n_unseen=3, device="cpu")
    control = RunControl(live, lambda: cfg, store=False)
    with shared().devices.hold("cpu", "another session's run"):
        assert control.start()
        deadline = time.monotonic() + 20
        while live.status != "queued" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert live.status == "queued"
        assert "busy with another run" in live._status_md.object
        control.stop()
        assert control.wait(20)
    assert live.status == "cancelled" and not control.running


@pytest.mark.parametrize("fields, message", [
    (dict(dataset="digits", backbone="resnet1800"), "unknown backbone 'resnet1800'; closest: 'resnet18'"),
    (dict(dataset="digits", backbone="mlp:depth=2,width=16", checkpoint="/nonexistent/w.safetensors"),
     "checkpoint '/nonexistent/w.safetensors': no such file"),
    (dict(dataset="folder:/nonexistent/images", backbone="mlp"), "dataset 'folder:/nonexistent/images'"),
])
def test_a_name_that_cannot_load_is_refused_before_the_run_starts(live, fields, message):
    import lab

    from app.live.run_controls import RunControl

    cfg = lab.RunConfig(epochs=1, **{"n_unseen": 3, **fields})
    control = RunControl(live, lambda: cfg, store=False)
    assert control.start() is False                # nothing loads, no thread, no run folder
    assert not control.running and control._thread is None
    assert live._alert.visible and message in live._alert.object
    assert live._alert.object.count("Cannot start") == 1 and "Traceback" not in live._alert.object


def test_a_refusal_after_a_failed_run_shows_the_refusal_not_the_old_failure(live):
    import lab

    from app.live.run_controls import RunControl

    failing = lab.RunConfig(epochs=1, dataset="digits", backbone="mlp", n_unseen=9)
    control = RunControl(live, lambda: failing, store=False)
    assert control.start() and control.wait(120) and live.status == "failed"
    typo = lab.RunConfig(epochs=1, dataset="digits", backbone="resnet1800", n_unseen=3)
    assert RunControl(live, lambda: typo, store=False).start() is False
    assert "Cannot start: unknown backbone 'resnet1800'" in live._alert.object, live._alert.object
    assert live.probe()["notice"].startswith("Cannot start"), live.probe()


def test_bad_input_to_the_engine_becomes_a_readable_alert(live):
    import lab

    from app.live.run_controls import RunControl

    cfg = lab.RunConfig(epochs=1, dataset="digits", backbone="mlp", n_unseen=9)
    control = RunControl(live, lambda: cfg, store=False)
    assert control.start()
    assert control.wait(120)
    assert live.status == "failed"
    assert live._alert.visible and "leaves fewer than 2 seen classes" in live._alert.object
    assert "Traceback" not in live._alert.object


def test_readable_error():
    from app.live.run_controls import readable_error

    assert readable_error(ValueError("bad checkpoint")) == "bad checkpoint"
    bug = readable_error(RuntimeError("boom"))     # a genuine bug: its traceback is kept in a named file
    assert bug.startswith("RuntimeError: boom. This looks like a bug") and "traceback is kept in" in bug


@pytest.mark.slow
def test_real_engine_run_feeds_the_live_view(tmp_path):
    import lab

    from app.layerscope import LayerScope

    store = lab.RunStore(tmp_path)
    scope = LayerScope(store=store)
    scope.config.apply_preset("Tiny demo (fast)")
    scope.config.param.update(unseen_per_class=12, seen_per_class=8, epochs=1, projection="pca",
                              backbone="mlp:depth=2,width=32")
    assert scope.control.start()
    assert scope.control.wait(600)
    probe = scope.live.probe()
    assert probe["status"] == "finished", probe
    assert probe["metric_layers"] >= 2 and probe["heatmap_cells"] >= 2 and probe["projection_points"] > 0
    assert len(scope.runs._table.value) == 1          # refreshed when the run ended


# ------------------------------------------------------------------ RunsPanel
def _stored_run(make_run, store, name="demo"):
    return make_run(target=store, name=name, layers=["fc1", "fc2", "pre_logits"], epochs=1,
                    nmi=lambda seed, epoch, i: 0.1 * i + epoch,
                    training=lambda seed, epoch: None if epoch == 0 else {
                        "train_loss": 1.0, "train_accuracy": 0.5, "heldout_accuracy": 0.5, "heldout_loss": 1.0,
                        "resilience": None, "seconds": 1.0})


def test_runs_panel_lists_compares_exports_and_deletes(tmp_path, make_run):
    import json

    import lab

    from app.compare.runs_panel import RunsPanel

    store = lab.RunStore(tmp_path / "runs")
    ids = [_stored_run(make_run, store, "first"), _stored_run(make_run, store, "second")]
    panel = RunsPanel(store)
    assert set(panel._table.value["run_id"]) == set(ids)
    panel.search = "second"
    assert list(panel._table.current_view["name"]) == ["second"]
    panel.search = ""
    panel.select(ids)
    assert sorted(panel.selected) == sorted(ids)
    frame = panel.compare_stream.data["frame"]
    assert set(frame["layer"]) == {"fc1", "fc2", "pre_logits"} and frame["value"].max() == pytest.approx(1.2)
    path = panel.export()
    nb = json.loads(path.read_text())
    assert nb["cells"] and panel._download.visible and panel._download.file == str(path)
    panel.select([ids[0]])
    panel._ask_delete()
    assert panel._confirm_row.visible and "Delete 1 run?" in panel._confirm_text.object
    panel._do_delete()
    assert list(panel._table.value["run_id"]) == [ids[1]]
    assert not panel._confirm_row.visible


@pytest.mark.slow
def test_compare_tab_explores_the_layouts_of_a_selected_run(tiny_run, make_run):
    from app.compare.runs_panel import RunsPanel

    store, run_id, _ = tiny_run
    panel = RunsPanel(store)
    panel.select([run_id])
    view = panel.embedding
    assert view.layer == store.load(run_id).summary()["best_layer"] and view.n_points > 0
    view.selection = [int(view._valid[0])]
    assert len(view.selected_frame(layer="fc2")) == 1
    bare = make_run(target=store, name="no layouts", projection="none")
    panel.refresh()
    panel.select([bare])
    assert "was stored without its 2-D layouts" in panel._layout_note.object and view.n_points == 0
    assert not panel._explorer.visible
    store.delete(bare)


def _run_with_embeddings(store, name, *, rotate=0.0, images=None, embeddings=True):
    """A hand-written run with last-epoch embeddings of 40 unseen images at fc1, fc2 (a function of fc1 plus
    ``rotate`` x noise) and pre_logits (constant: CKA undefined there)."""
    import numpy as np

    import lab

    w = store.create(lab.RunConfig(name=name, dataset="digits", backbone="mlp", epochs=1, n_unseen=3))
    w.update_meta(layers=[{"name": n, "kind": "vector", "dim": 6} for n in ("fc1", "fc2", "pre_logits")])
    rng = np.random.default_rng(0)
    base = rng.normal(size=(40, 6))
    feats = {"fc1": base, "fc2": np.tanh(base @ rng.normal(size=(6, 6))) + rotate * rng.normal(size=(40, 6)),
             "pre_logits": np.ones((40, 6))}
    for epoch in (0, 1):
        w.append_metrics([{"seed": 0, "epoch": epoch, "layer": layer, "split": "unseen", "metric": "nmi",
                           "value": 0.1 * i} for i, layer in enumerate(feats)])
        for layer, X in feats.items():
            if embeddings:
                w.save_embeddings(0, epoch, layer, X, np.arange(40) % 3, np.arange(40) if images is None else images)
    w.finish("finished")
    return w.run_id


def test_compare_tab_shows_the_cka_of_two_runs_layer_by_layer(tmp_path):
    import numpy as np

    import lab
    from lab.metrics import cka

    from app.compare.runs_panel import RunsPanel

    store = lab.RunStore(tmp_path / "runs")
    a, b = _run_with_embeddings(store, "a"), _run_with_embeddings(store, "b", rotate=0.5)
    panel = RunsPanel(store)
    panel.select([a])
    assert panel._cka_pane.object is None and "Select two runs" in panel._cka_note.object
    panel.select([a, b])
    heat = panel._cka_pane.object
    rows, cols = (store.load(run_id) for run_id in panel.selected)
    expected = {(row, col): cka(rows.embeddings(0, 1, row)[0].astype(np.float64),
                                cols.embeddings(0, 1, col)[0].astype(np.float64))
                for row in ("fc1", "fc2") for col in ("fc1", "fc2")}
    shown = {(r, c): v for r, c, v in zip(heat.dimension_values("row"), heat.dimension_values("column"),
                                          heat.dimension_values("cka"))}
    assert shown.keys() == expected.keys()                    # the constant layer's cells are left empty, not NaN
    for key, value in expected.items():
        assert shown[key] == pytest.approx(value, abs=1e-9)
    assert shown[("fc1", "fc1")] == pytest.approx(1.0) and shown[("fc2", "fc2")] < 0.99
    assert "layer of" in heat.opts.get().kwargs["ylabel"]
    assert "first run (rows)" in panel._cka_note.object
    assert "CKA not defined (constant features), left empty: pre_logits (rows); pre_logits (columns)." \
        in panel._cka_note.object
    other_images = _run_with_embeddings(store, "c", images=np.arange(40)[::-1])
    bare = _run_with_embeddings(store, "d", embeddings=False)
    panel.refresh()
    panel.select([a, other_images])
    assert panel._cka_pane.object is None
    assert "No layer × layer CKA for these two runs" in panel._cka_note.object
    assert "stored for different images" in panel._cka_note.object and "\n" not in panel._cka_note.object
    panel.select([a, bare])
    assert panel._cka_pane.object is None and f"run {bare!r} stored no embeddings" in \
        panel._cka_note.object.replace("&#x27;", "'")


def test_export_failure_is_a_message_not_a_traceback(tmp_path):
    import lab

    from app.compare.runs_panel import RunsPanel

    store = lab.RunStore(tmp_path / "runs")
    panel = RunsPanel(store)
    panel.selected = ["no-such-run"]
    assert panel.export() is None
    assert panel.message.startswith("Export failed")


# ------------------------------------------------------------------ package
def test_app_package_exports_the_top_level_component(tmp_path):
    import lab

    import app

    scope = app.LayerScope(store=lab.RunStore(tmp_path))
    assert isinstance(scope, pn.viewable.Viewer)
    assert isinstance(scope.__panel__(), pn.layout.Row)
    assert set(app.__all__) >= {"LayerScope", "LiveView", "ConfigPanel", "RunsPanel"}
    from app import plots, similarity_plots, study_plots      # what exported notebooks import

    assert [m.__name__ for m in (plots, similarity_plots, study_plots)] == [
        "app.base.plots", "app.compare.similarity_plots", "app.studies.study_plots"]


# ------------------------------------------------------------------ Studies tab
def test_shipped_specs_are_the_repositorys_studies_folder(monkeypatch):
    """The specs shipped in studies/ at the repository root, wherever the Studies package sits in app/."""
    from app.studies import shipped_specs

    monkeypatch.delenv("LAB_STUDIES_DIR", raising=False)
    root = Path(__file__).resolve().parents[2] / "studies"
    assert shipped_specs() == {p.name: p for p in [*root.glob("*.yaml"), *root.glob("*.yml")]} != {}


def test_switching_study_specs_shows_the_new_specs_cells(tmp_path, monkeypatch):
    from app.studies.studies_panel import StudiesPanel
    from lab.store import RunStore

    base = "base: {dataset: digits, backbone: mlp, epochs: 1}\n"
    (tmp_path / "a_two.yaml").write_text("name: two\n" + base + "axes: {lr: [0.001, 0.01]}\n")
    (tmp_path / "b_three.yaml").write_text("name: three\n" + base + "axes: {label_noise: [0.0, 0.2, 0.4]}\n")
    monkeypatch.setenv("LAB_STUDIES_DIR", str(tmp_path))
    panel = StudiesPanel(RunStore(tmp_path / "runs"))
    layout = panel.__panel__()
    panel.spec = "a_two.yaml"
    first = panel.table
    assert len(first.value) == 2 and "lr" in first.value.columns
    panel.spec = "b_three.yaml"
    # other axes: the page gets a table of the new spec's columns and rows, not the old one patched
    assert panel.table is not first
    assert len(panel.table.value) == 3 and "label_noise" in panel.table.value.columns
    assert "lr" not in panel.table.value.columns
    assert panel._table_slot.objects == [panel.table] and panel._table_slot in layout.objects
    assert "**three** — 3 runs" in panel.message.object
