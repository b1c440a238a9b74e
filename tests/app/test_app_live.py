"""Component tests of the live view (no browser): engine events feed its streams, plots and text.

Also the pieces behind it: the run model that accumulates the events, and the dispatcher that hands
them from a worker thread to the session's document.
"""
from __future__ import annotations

import dataclasses
import threading

import holoviews as hv
import numpy as np
import panel as pn
import pytest
from bokeh.document import Document

from lab import events as ev

hv.extension("bokeh")

from tests.fixtures.live_runs import LAYERS, UNSEEN, synthetic_run  # noqa: E402


@pytest.fixture
def live():
    from app.live import LiveView

    return LiveView()


# ------------------------------------------------------------------ LiveView
def test_events_update_every_stream(live):
    live.consume(list(synthetic_run(epochs=2)))
    streams = live.streams
    assert {"curves:nmi", "curves:knn_accuracy", "curves:linear_probe_accuracy", "curves:nc1", "curves:cdnv",
            "heatmap", "projection", "training", "utilization"} <= set(streams)
    nmi = streams["curves:nmi"].data
    assert set(nmi["layer"]) == set(LAYERS) and set(nmi["epoch"]) == {0, 1, 2}
    assert nmi.loc[(nmi["epoch"] == 2) & (nmi["layer"] == "block1"), "mean"].item() == pytest.approx(0.4)
    nc1 = streams["curves:nc1"].data
    assert set(nc1["split"]) == {"unseen", "seen"}
    heat = streams["heatmap"].data["frame"]
    assert heat["value"].notna().sum() == len(LAYERS) * 3
    assert len(streams["projection"].data["frame"]) == 30
    assert list(streams["training"].data["epoch"]) == [0, 1, 2]
    assert streams["utilization"].data["relative"].notna().sum() == len(LAYERS)
    probe = live.probe()
    assert probe["status"] == "finished" and probe["metric_layers"] == len(LAYERS)
    assert "block2" in live._verdict.object and "held-out accuracy" in live._verdict.object


def test_streams_fill_incrementally(live):
    events = list(synthetic_run(epochs=1))
    live.consume(events[:1])                          # RunStarted: empty plots, every cell NaN
    assert live.streams["heatmap"].data["frame"]["value"].isna().all()
    first_metrics = next(i for i, e in enumerate(events) if e.kind == "layer_metrics")
    live.consume(events[1:first_metrics + 1])
    assert live.streams["heatmap"].data["frame"]["value"].notna().sum() == 1
    assert len(live.streams["curves:nmi"].data) == 1
    assert live.probe()["status"] == "running"


def test_aggregate_event_replaces_display_mean(live):
    events = list(synthetic_run(epochs=0, seeds=(0, 1)))
    live.consume(events[:-1])
    live.consume([ev.Aggregate("r1", epoch=0, layer="stem", split="unseen", mean={"nmi": 0.9}, std={"nmi": 0.05},
                               n_seeds=2), events[-1]])
    nmi = live.streams["curves:nmi"].data
    row = nmi[(nmi["epoch"] == 0) & (nmi["layer"] == "stem")]
    assert row["mean"].item() == pytest.approx(0.9) and row["std"].item() == pytest.approx(0.05)


def test_run_failed_becomes_a_visible_message_and_keeps_epochs(live):
    live.consume(list(synthetic_run(epochs=3, fail_at=2)))
    assert live.status == "failed"
    assert live._alert.visible
    assert "CUDA out of memory while training block2" in live._alert.object
    assert "What was computed stays visible" in live._alert.object
    assert "2 completed evaluation(s)" in live._alert.object
    assert set(live.streams["curves:nmi"].data["epoch"]) == {0, 1}


def test_the_heatmap_of_an_ended_run_shows_only_the_evaluations_it_made(live):
    """While a run goes, its heatmap keeps a column for each planned epoch; once it failed, was cancelled or
    interrupted, the columns of epochs it never reached go (they would stay empty)."""
    events = list(synthetic_run(epochs=3, fail_at=2))           # epochs 0 and 1 measured, then it fails
    live.consume(events[:-1])
    assert live.status == "running"
    assert sorted(set(live.streams["heatmap"].data["frame"]["epoch"])) == [0, 1, 2, 3]
    live.consume(events[-1:])
    assert live.status == "failed"
    frame = live.streams["heatmap"].data["frame"]
    assert sorted(set(frame["epoch"])) == [0, 1] and frame["value"].notna().all()
    heat = live.plots.render.heatmap(live.streams["heatmap"].data)
    assert hv.Store.lookup_options("bokeh", heat, "plot").kwargs["xlim"] == (-0.5, 1.5)
    live.consume(list(synthetic_run("r2", epochs=2))[:-1] + [ev.RunCancelled("r2", seconds=1.0)])
    assert sorted(set(live.streams["heatmap"].data["frame"]["epoch"])) == [0, 1, 2]      # all it planned, made


def test_cancelled_run_is_marked(live):
    events = list(synthetic_run(epochs=2))[:-1] + [ev.RunCancelled("r1", seconds=1.0)]
    live.consume(events)
    assert live.status == "cancelled"
    assert "Run cancelled" in live._alert.object and live._alert.alert_type == "warning"


def test_heatmap_metric_param_drives_the_heatmap(live):
    live.consume(list(synthetic_run(epochs=1)))
    live.heatmap_metric = "nc1"
    live.heatmap_split = "seen"
    data = live.streams["heatmap"].data
    assert (data["metric"], data["split"]) == ("nc1", "seen")
    cell = data["frame"].query("epoch == 1 and layer == 'stem'")["value"].item()
    assert cell == pytest.approx(5.0 / 2)


def test_projection_layer_and_epoch_params_drive_the_layout(live):
    live.consume(list(synthetic_run(epochs=2)))
    picker = live.picker
    assert picker.layer == "block2" and picker.epoch == 2          # the verdict's best layer, the newest epoch
    picker.player.value = "block1"        # the player's options are the run's layers
    assert picker.layer == "block1"
    assert "block1" in live.streams["projection"].data["title"]
    picker.epoch_select.value = 0
    assert picker.epoch == 0 and not picker.follow_latest
    assert "epoch 0" in live.streams["projection"].data["title"]


def test_the_layout_is_an_embedding_view_whose_selection_follows_the_player(live):
    live.consume(list(synthetic_run(epochs=2, seeds=(0, 1))))
    view = live.embedding
    assert (view.layer, view.n_points) == ("block2", 30) and live.probe()["projection_points"] == 30
    view._panels[0].box.event(bounds=(-10.0, -10.0, 0.0, 10.0))          # every point left of x = 0
    chosen = view.selection
    coords = live.model.projection("block2", 2, seed=0).coords
    assert chosen == np.flatnonzero(coords[:, 0] <= 0).tolist() and chosen
    live.picker.player.value = "block1"
    assert view.layer == "block1" and view.selection == chosen        # the same images, now at block1
    frame = view.selected_frame()
    np.testing.assert_allclose(frame[["x", "y"]], live.model.projection("block1", 2, seed=0).coords[chosen])
    live.picker.epoch_select.value = 0
    assert view.selected_frame()["epoch"].tolist() == [0] * len(chosen)
    live.reset()
    assert view.n_points == 0 and view.selection == []


def test_class_names_cannot_close_the_plot_script_tag(live):
    """Class names are folder names a user chose; in Jupyter the plot data sits in a <script>."""
    evil = "</script><script>alert(1)</script>"
    events = []
    for e in synthetic_run(epochs=0):
        if isinstance(e, ev.ProjectionReady):
            e = dataclasses.replace(e, class_names=[evil, "b", "c"])
        events.append(e)
    live.consume(events)
    data = live.streams["projection"].data
    shown = set(data["frame"]["class"]) | set(data["classes"])
    assert not any("<" in name or ">" in name for name in shown)
    assert "\uff1c/script\uff1e\uff1cscript\uff1ealert(1)\uff1c/script\uff1e" in shown    # still legible


def test_hover_thumbnails_come_from_the_thumbnail_source(live):
    from app.base._thumbs import ThumbnailSource

    live.set_thumbnails(ThumbnailSource(lambda i, size=32: f"data:image/png;base64,{i}"))
    live.consume(list(synthetic_run(epochs=0)))
    frame = live.streams["projection"].data["frame"]
    assert frame["thumb"].iloc[3] == "data:image/png;base64,3"


def test_metrics_not_requested_get_no_curve(live):
    live.consume(list(synthetic_run(epochs=0, metrics=["nmi", "nc1"])))
    assert {k for k in live.streams if k.startswith("curves:")} == {"curves:nmi", "curves:nc1"}


def test_a_run_whose_layouts_will_be_rasterized_starts_the_kernels_warm_up_when_it_starts(live, monkeypatch):
    """Datashader's kernels are compiled when a run that needs them starts, not for runs drawn as glyphs."""
    import app.live.view as view_module

    started = []
    monkeypatch.setattr(view_module, "warm_up_in_background", lambda: started.append(True))
    live.consume(list(synthetic_run("small", epochs=1, n=30)))
    assert started == []                        # 30 unseen images: glyphs, no kernels needed
    live.embedding.rasterize_above = 29
    live.consume(list(synthetic_run("large", epochs=1, n=30)))
    assert started == [True]                    # once, at its RunStarted


def test_a_second_run_starts_from_a_clean_slate(live):
    live.consume(list(synthetic_run("r1", epochs=2)))
    live.consume(list(synthetic_run("r2", layers=("x", "y"), epochs=0)))
    assert live.model.run_id == "r2"
    assert set(live.streams["curves:nmi"].data["layer"]) == {"x", "y"}


def test_two_live_views_do_not_share_state():
    from app.live import LiveView

    a, b = LiveView(), LiveView()
    a.consume(list(synthetic_run("ra", epochs=1)))
    b.consume(list(synthetic_run("rb", layers=("only", "two"), epochs=0)))
    assert a.model is not b.model
    assert a.streams["curves:nmi"] is not b.streams["curves:nmi"]
    assert set(a.streams["curves:nmi"].data["layer"]) == set(LAYERS)
    assert set(b.streams["curves:nmi"].data["layer"]) == {"only", "two"}
    a.heatmap_metric = "cdnv"
    assert b.heatmap_metric == "nmi"
    assert a._layout is not b._layout and a._alert is not b._alert


def test_views_render_to_bokeh(live):
    from bokeh.document import Document

    live.__panel__().get_root(Document())
    live.consume(list(synthetic_run(epochs=1, seeds=(0, 1))))     # updates rendered plots in place
    assert live.probe()["heatmap_cells"] == len(LAYERS) * 2


def _confidence(run_id, seed, epoch, layers=LAYERS):
    """Bootstrap rows of one evaluation: nmi in [0.1 i, 0.1 i + 0.05] (undefined at the first layer), kNN [0.4, 0.6]."""
    return [ev.LayerConfidence(run_id, seed=seed, epoch=epoch, layer=layer,
                               values={"nmi_low": float("nan") if i == 0 else 0.1 * i + 0.01 * seed,
                                       "nmi_high": float("nan") if i == 0 else 0.1 * i + 0.05 + 0.01 * seed,
                                       "knn_accuracy_low": 0.4, "knn_accuracy_high": 0.6})
            for i, layer in enumerate(layers)]


def _interval_area(overlay):
    """The bootstrap band of a metric-vs-layer overlay (the Area whose second value is 'high')."""
    [area] = [el for el in overlay if isinstance(el, hv.Area) and el.vdims[-1].name == "high"]
    return area


def test_curves_draw_the_bootstrap_band_of_the_latest_epoch(live):
    from bokeh.document import Document

    events = list(synthetic_run(epochs=1, seeds=(0, 1)))
    live.__panel__().get_root(Document())
    live.consume(events[:-1])
    before = live.plots.render.curves(live.streams["curves:nmi"].data, metric="nmi", splits=("unseen",))
    assert len(_interval_area(before)) == 0 and "bootstrap" not in before.opts.get().kwargs["title"]
    live.consume(_confidence("r1", 0, 1) + _confidence("r1", 1, 1) + _confidence("r1", 0, 0) + events[-1:])
    data = live.streams["curves:nmi"].data                       # sent because the nmi_low rows arrived
    latest = data[data["epoch"] == 1].set_index("layer")
    assert latest.loc["block1", "low"] == pytest.approx(0.105) and latest.loc["block1", "high"] == pytest.approx(0.155)
    assert np.isnan(latest.loc["stem", "low"])                  # undefined at that layer: no bound
    area = _interval_area(live.plots.render.curves(data, metric="nmi", splits=("unseen",)))
    # the latest epoch's mean over the two seeds' bounds, only at the layers where both are finite
    np.testing.assert_allclose(area.dimension_values("layer_pos"), [1, 2, 3])
    np.testing.assert_allclose(area.dimension_values("nmi"), [0.105, 0.205, 0.305])
    np.testing.assert_allclose(area.dimension_values("high"), [0.155, 0.255, 0.355])
    assert np.isfinite(area.dimension_values("nmi")).all()
    knn = _interval_area(live.plots.render.curves(live.streams["curves:knn_accuracy"].data, metric="knn_accuracy",
                                             splits=("unseen",)))
    np.testing.assert_allclose(knn.dimension_values("knn_accuracy"), [0.4] * len(LAYERS))
    assert "95 % bootstrap" in live.plots.render.curves(data, metric="nmi", splits=("unseen",)).opts.get().kwargs["title"]
    nc1 = live.plots.render.curves(live.streams["curves:nc1"].data, metric="nc1", splits=("unseen", "seen"))
    assert [el.vdims[-1].name for el in nc1 if isinstance(el, hv.Area)] == ["upper", "upper"]   # seeds' ± std only


def _with_cka_initial(events, layers=LAYERS):
    """The run's unseen LayerMetrics with cka_initial: 1 - 0.1 i epoch (+ 0.02 seed after epoch 0); the last layer
    constant after epoch 0 (NaN, as the engine records an undefined CKA)."""
    out = []
    for e in events:
        if isinstance(e, ev.LayerMetrics) and e.split == "unseen":
            i = layers.index(e.layer)
            value = 1.0 if e.epoch == 0 else (float("nan") if i == len(layers) - 1
                                              else 1.0 - 0.1 * i * e.epoch + 0.02 * e.seed)
            e = dataclasses.replace(e, values={**e.values, "cka_initial": value})
        out.append(e)
    return out


def test_cka_to_epoch_0_is_drawn_next_to_utilization_with_what_was_measured(live):
    from bokeh.document import Document

    from app.compare.similarity_plots import CKA_INITIAL_CAPTION

    live.__panel__().get_root(Document())
    live.consume(_with_cka_initial(list(synthetic_run(epochs=2, seeds=(0, 1)))))
    data = live.streams["cka_initial"].data
    cell = data[(data["epoch"] == 2) & (data["layer"] == "block1")]
    assert cell["mean"].item() == pytest.approx(1.0 - 0.2 + 0.01) and cell["n"].item() == 2   # mean of both seeds
    assert data.loc[(data["epoch"] == 2) & (data["layer"] == "pre_logits"), "n"].item() == 0
    overlay = live.plots.render.cka(data, layers=list(LAYERS))
    latest = [el for el in overlay if isinstance(el, hv.Curve)][-1]
    np.testing.assert_allclose(latest.dimension_values("cka_initial")[:3], [1.01, 0.81, 0.61])
    assert np.isnan(latest.dimension_values("cka_initial")[3])            # a gap, not a point
    caption = live.training.cka_caption.object
    assert caption.startswith(CKA_INITIAL_CAPTION) and "1 = unchanged up to rotation and scale" in caption
    assert "Not defined at epoch 2 for pre_logits (constant features" in caption
    assert live.training.cka.object is not None
    row = next(o for o in live.plots.details.objects[2].objects if isinstance(o, pn.Column)
               and live.training.utilization_box in o)
    after = row.objects[row.objects.index(live.training.utilization_box) + 1]
    assert live.training.cka in after.objects                                # next to the utilization plot
    live.consume(list(synthetic_run("r2", epochs=0)))                     # no training: nothing moved
    assert "cka_initial" in live.streams
    frozen = [e for e in synthetic_run("r3", epochs=0)]
    frozen[0] = dataclasses.replace(frozen[0], config={**frozen[0].config, "strategy": "none"})
    live.consume(frozen)
    assert "cka_initial" not in live.streams and live.training.cka.object is None


# ------------------------------------------------------------------ RunModel (the events behind the view)
def test_eta_comes_from_the_pace_of_training_epochs():
    from app.live._model import RunModel

    events = list(synthetic_run(epochs=3))
    model = RunModel()
    model.apply(events[0])
    model.started_at = 0.0
    assert model.eta_seconds(now=1.0) is None                     # nothing evaluated yet
    model.apply(ev.EpochFinished("r1", seed=0, epoch=0, train_loss=None, train_accuracy=None,
                                 heldout_accuracy=0.1, seconds=1.0))
    model._epoch_times[-1] = 2.0                                   # epoch 0 (evaluation only) ended at t=2
    model.apply(ev.Progress("r1", stage="train", done=5, total=10, seed=0, epoch=1))
    # half of epoch 1 in 10 s -> 20 s per epoch; 3 evaluations left, half of one done
    assert model.eta_seconds(now=12.0) == pytest.approx(20.0 * 2.5)
    assert 0 < model.fraction_done() < 0.5


def test_summary_table_is_lab_analysis_with_ddof_1():
    from app.live._model import RunModel

    from lab import analysis

    model = RunModel()
    for e in synthetic_run(epochs=1, seeds=(0, 1)):
        model.apply(e)
    table = model.summary_table()
    row = table[(table.metric == "nmi") & (table.split == "unseen") & (table.epoch == 1) & (table.layer == "stem")]
    assert row["std"].item() == pytest.approx(np.std([0.25, 0.26], ddof=1)) and row["n"].item() == 2
    expected = analysis.aggregate_seeds(model.metrics, by=("metric", "split", "epoch", "layer"))
    merged = table.merge(expected, on=["metric", "split", "epoch", "layer"], suffixes=("", "_analysis"))
    assert len(merged) == len(table) == len(expected)
    assert (merged["mean"] == merged["mean_analysis"]).all() and (merged["n"] == merged["n_analysis"]).all()
    assert list(table[(table.metric == "nmi") & (table.epoch == 0) & (table.split == "unseen")]["layer"]) == list(LAYERS)


def test_verdict_states_only_what_was_measured():
    from app.live._model import RunModel, verdict_html

    from lab import analysis

    model = RunModel()
    for e in synthetic_run(epochs=2, seeds=(0, 1)):
        model.apply(e)
    v = model.verdict()
    expected = analysis.latest_generalization(model.metrics, layers=list(LAYERS))
    assert (v["layer"], v["g"], v["g_std"], v["epoch"]) == ("block2", expected["g"], expected["g_std"], 2)
    assert v["g_std"] == pytest.approx(np.std([0.5, 0.51], ddof=1))
    assert v["is_final"] is False and v["final_layer"] == "pre_logits"
    assert v["heldout_accuracy"] == pytest.approx(0.7) and v["accuracy_epoch"] == 2
    text = verdict_html(v)
    assert "<span class='ls-best-layer'>block2</span>" in text and "g = NMI 0.505 ± 0.007, epoch 2, 2 seeds" in text
    assert "seen-class held-out accuracy <b>70.0 %</b> (epoch 2)" in text
    assert text.endswith("the best layer is not the final representation (pre_logits)")
    # no conclusion about seen accuracy against g from one run
    assert "seen accuracy does not say" not in text and "not the last layer" not in text


def test_verdict_reports_a_tap_with_the_final_features_as_the_final_representation():
    from app.live._model import RunModel, verdict_html

    model = RunModel()
    events = list(synthetic_run(epochs=1))
    for e in events:
        if e.kind == "generalization":
            e.aliases = {"block2": "pre_logits"}         # block2's features are pre_logits' (engine's taps)
        model.apply(e)
    v = model.verdict()
    assert v["layer"] == "pre_logits" and v["is_final"] is True and v["g"] == pytest.approx(0.45)
    text = verdict_html(v)
    assert "ls-best-layer'>pre_logits<" in text and "(g = NMI 0.450, epoch 1, 1 seed)" in text
    assert text.endswith("the best layer is the final representation (pre_logits)")


def test_verdict_quotes_the_bootstrap_share_and_interval_of_the_best_layer():
    from app.live._model import RunModel, verdict_html

    from lab.events import LayerConfidence

    model = RunModel()
    for e in synthetic_run(epochs=1):
        model.apply(e)
    assert "resamples" not in verdict_html(model.verdict())          # a run without the bootstrap
    for i, layer in enumerate(LAYERS):
        model.apply(LayerConfidence("r", seed=0, epoch=1, layer=layer,
                                    values={"nmi_low": 0.1 * i, "nmi_high": 0.1 * i + 0.05,
                                            "nmi_best_share": 0.81 if layer == "block2" else 0.19 / (len(LAYERS) - 1)}))
    v = model.verdict()
    assert v["layer"] == "block2" and v["best_share"] == pytest.approx(0.81)
    low = 0.1 * list(LAYERS).index("block2")
    text = verdict_html(v)        # one parenthesis: g, epoch, seeds, then how sure
    assert text.startswith(f"<b>Best layer for unseen classes: <span class='ls-best-layer'>block2</span></b> (g = ")
    assert f"seed; best in 81 % of resamples; {low:.2f}-{low + 0.05:.2f})" in text and ") (" not in text


def test_verdict_while_seeds_are_still_running():
    from app.live._model import RunModel, verdict_html

    model = RunModel()
    events = [e for e in synthetic_run(epochs=1, seeds=(0, 1)) if e.kind != "run_finished"]
    cut = next(i for i, e in enumerate(events) if getattr(e, "seed", None) == 1)
    for e in events[:cut]:
        model.apply(e)
    assert verdict_html({}, running=True).startswith("<span style='color:#666'>Verdict: waiting")
    text = verdict_html(model.verdict(), running=True)
    assert "epoch 1, 1 of 2 seeds so far" in text


# ------------------------------------------------------------------ dispatcher
class _FakeDoc(Document):
    """A Bokeh document posing as a server session's: it collects scheduled callbacks."""

    def __init__(self):
        super().__init__()
        self.scheduled = []
        self.lock = threading.Lock()

    @property
    def session_context(self):
        return object()

    def add_next_tick_callback(self, cb):
        with self.lock:
            self.scheduled.append(cb)

    def add_timeout_callback(self, cb, ms):
        self.add_next_tick_callback(cb)


def test_dispatcher_batches_items_from_a_worker_thread_onto_the_document():
    from app.base._dispatch import DocDispatcher

    doc, applied = _FakeDoc(), []
    dispatcher = DocDispatcher(applied.append, doc=doc, min_interval=0.0)
    worker = threading.Thread(target=lambda: [dispatcher.push(i) for i in range(50)])
    worker.start()
    worker.join()
    assert applied == []                    # nothing ran on the worker thread
    while doc.scheduled:
        doc.scheduled.pop(0)()
    assert [x for batch in applied for x in batch] == list(range(50))
    assert len(applied) < 50                # batched


def test_a_flush_walks_the_document_once_and_sends_a_model_it_made_with_its_last_values(monkeypatch):
    """Bokeh walks a document's models after every change that adds one; a flush of the dispatcher walks it once,
    at its end, and a model added and then changed within the flush reaches the page whole, with its last value
    (frozen without the hold, the change before the walk would raise no event and the page would keep "draft")."""
    import json

    from bokeh.document.models import DocumentModelManager
    from bokeh.models import Column, Div
    from bokeh.protocol import Protocol

    from app.base._dispatch import DocDispatcher
    from app.base._upstream_panel import connected_pages

    doc, root, sent, walks = _FakeDoc(), Column(), [], []
    doc.add_root(root)
    # as a server session does: each event sent is serialized when it is triggered
    doc.on_change(lambda event: sent.append(json.dumps(Protocol().create("PATCH-DOC", [event]).content)))
    monkeypatch.setitem(connected_pages(), doc, True)     # a page is open: Panel sends the held events

    def apply(batch):
        for i in batch:
            div = Div(text="draft")
            root.children = [*root.children, div]
            div.text = f"item {i}"

    recompute = DocumentModelManager.recompute
    monkeypatch.setattr(DocumentModelManager, "recompute", lambda self: walks.append(1) or recompute(self))
    dispatcher = DocDispatcher(apply, doc=doc, min_interval=0.0)
    for i in range(5):
        dispatcher.push(i)
    while doc.scheduled:
        doc.scheduled.pop(0)()
    assert len(walks) == 1
    assert [div.text for div in root.children] == [f"item {i}" for i in range(5)]
    patch = "\n".join(sent)
    assert all(f"item {i}" in patch for i in range(5)) and "draft" not in patch, patch


def test_a_flush_that_adds_no_model_does_not_walk_the_document(monkeypatch):
    """A flush that only sends new values to the models the page has (a progress bar, a plot's data) leaves the
    document's models as they are, and Bokeh's walk of them is skipped; one that adds a model walks once and the
    document knows the new model; one that drops a model walks and forgets it."""
    from bokeh.document.models import DocumentModelManager
    from bokeh.models import Column, ColumnDataSource, Div

    from app.base._dispatch import DocDispatcher
    from app.base._upstream_panel import connected_pages

    doc, root, source, walks = _FakeDoc(), Column(), ColumnDataSource({"x": [0]}), []
    root.children = [Div(text="0"), Div(text="source", tags=[source])]
    doc.add_root(root)
    monkeypatch.setitem(connected_pages(), doc, True)
    recompute = DocumentModelManager.recompute
    monkeypatch.setattr(DocumentModelManager, "recompute", lambda self: walks.append(1) or recompute(self))
    steps = {"values": lambda: (setattr(root.children[0], "text", "1"), setattr(source, "data", {"x": [0, 1]})),
             "add": lambda: setattr(root, "children", [*root.children, Div(text="new")]),
             "drop": lambda: setattr(root, "children", root.children[:2])}
    dispatcher = DocDispatcher(lambda batch: [steps[step]() for step in batch], doc=doc, min_interval=0.0)
    counted = {}
    for step in ("values", "add", "drop", "values"):
        before = len(walks)
        dispatcher.push(step)
        while doc.scheduled:
            doc.scheduled.pop(0)()
        counted[step] = len(walks) - before
        if step == "add":
            added = root.children[-1]
            assert doc.get_model_by_id(added.id) is added
    assert counted == {"values": 0, "add": 1, "drop": 1}
    assert doc.get_model_by_id(added.id) is None
    assert root.children[0].text == "1" and source.data["x"] == [0, 1]
    assert not doc.models._freeze_count and "invalidate" not in vars(doc.models)


def test_the_verdict_is_computed_again_only_when_what_it_is_computed_from_changes(monkeypatch):
    """After every event the verdict equals one computed afresh; g is computed only for events that bring g's rows,
    a layer, a training row or the seeds (a run's progress events and its other metrics bring none)."""
    from lab import analysis
    from app.live._model import RunModel
    from tests.fixtures.live_runs import synthetic_run

    calls = []
    original = analysis.latest_generalization
    monkeypatch.setattr(analysis, "latest_generalization", lambda *a, **k: calls.append(1) or original(*a, **k))
    events = list(synthetic_run(epochs=3, seeds=(0, 1), collapse=True))
    model, fresh = RunModel(), RunModel()
    for event in events:
        model.apply(event)
        fresh.apply(event)
        fresh._verdict = None                       # forget: computed from scratch
        assert model.verdict() == fresh.verdict(), event.kind
        model.verdict()                              # asked again with nothing new: not computed again
    assert model.verdict()["g"] is not None
    computed_by_model = len(calls) - len(events)    # fresh computed once per event
    assert 0 < computed_by_model < len(events) / 2, (computed_by_model, len(events))
