"""The neural-collapse view (no browser): Papyan's panels against epoch from synthetic engine events, the terminal
phase mark, the reasons shown instead of panels, the simplex beside the ETF's and its epoch player; and the page's
scroll wheel left alone by every plot the app builds."""
from __future__ import annotations

import html

import holoviews as hv
import numpy as np
import panel as pn
import pytest
from bokeh.models import Plot, Toolbar

from lab import analysis
from lab import events as ev

hv.extension("bokeh")

from tests.fixtures.live_runs import HEAD, LAYERS, SEEN, UNSEEN, synthetic_run, train_accuracy  # noqa: E402


def _view(**run):
    from app.collapse import CollapseView
    from app.live._model import RunModel

    model = RunModel()
    view = CollapseView.for_live(lambda: model, collapsed=False)
    events = list(synthetic_run(**run))
    for event in events:
        model.apply(event)
        view.observe(event)
    view.refresh()
    return view, model, events


def _gram(events, layer, epoch, split, seed=0):
    return next(e.gram for e in events if e.kind == ev.ClassMeans.kind and
                (e.seed, e.epoch, e.layer, e.split) == (seed, epoch, layer, split))


def _curves(overlay):
    return [el for el in overlay if isinstance(el, hv.Curve)]


def _style(element, name):
    return hv.Store.lookup_options("bokeh", element, "style").kwargs[name]


def test_every_panel_is_built_and_renders():
    view, _, _ = _view(collapse=True, epochs=3)
    figures = view.figures()
    assert {"nc1", "equinorm", "equiangularity", "cosine_std", "self_duality", "ncc", "cosines", "ideal"} <= set(figures)
    for figure in figures.values():
        hv.render(figure)
    assert view.layers == list(LAYERS) and view.reasons() == []
    nc1 = hv.render(figures["nc1"])
    assert type(nc1.y_scale).__name__ == "LogScale"          # NC1 spans orders of magnitude


def test_lines_per_split_have_the_documented_dashes_and_classifier_lines_only_at_the_head():
    view, _, _ = _view(collapse=True)
    dashes = {"train sample": "solid", "held-out (seen)": "dashed", "unseen classes": "dotted"}
    for key in ("nc1", "equinorm"):
        curves = _curves(view.figures()[key])
        seen = set()
        for curve in curves:
            split = curve.dimension_values("split")[0]
            seen.add(split)
            assert _style(curve, "line_dash") == dashes[split]
        assert seen == set(dashes)
    equinorm = _curves(view.figures()["equinorm"])
    head_lines = [c for c in equinorm if "classifier" in c.dimension_values("measure")[0]]
    assert {c.dimension_values("layer")[0] for c in head_lines} == {HEAD}
    assert {c.dimension_values("split")[0] for c in head_lines} == {"train sample", "held-out (seen)"}
    assert len(equinorm) == len(LAYERS) * 3 + 2
    key = view._key.object
    assert "solid" not in key and all(name in key for name in ("train sample", "held-out (seen)", "unseen classes"))


def test_values_drawn_are_the_mean_over_seeds_of_the_runs_rows():
    view, model, _ = _view(collapse=True, seeds=(0, 1))
    curve = next(c for c in _curves(view.figures()["cosine_std"])
                 if c.dimension_values("layer")[0] == "block1" and c.dimension_values("split")[0] == "train sample")
    rows = model.metrics
    rows = rows[(rows["metric"] == "nc2_cosine_std") & (rows["layer"] == "block1") & (rows["split"] == "train")]
    expected = rows.groupby("epoch")["value"].mean().to_numpy()
    np.testing.assert_allclose(curve.dimension_values("value"), expected)


def test_the_terminal_phase_is_marked_on_every_panel_at_the_epoch_lab_gives():
    from app.base import plots

    view, model, _ = _view(collapse=True, epochs=3)
    expected = analysis.terminal_phase(model.metrics)
    assert expected == {0: 2} == view.terminal and train_accuracy(2) == 1.0
    for key in ("nc1", "equinorm", "equiangularity", "cosine_std", "self_duality", "ncc"):
        overlay = view.figures()[key]
        assert [line.data for line in overlay if isinstance(line, hv.VLine)] == [2]
        # no label on the panel (it ran over the lines of a panel this small): the card's key names the mark
        assert not [t for t in overlay if isinstance(t, hv.Text)]
    assert plots.TERMINAL_LABEL in view._key.object
    assert "seed 0: epoch 2" in view._notes.object


def test_the_run_summary_terminal_phase_is_used_when_the_run_has_one():
    from app.collapse._rows import Source, terminal_epochs

    _, model, _ = _view(collapse=True)
    assert terminal_epochs(Source(metrics=model.metrics, summary={"terminal_phase": {"0": 1}})) == {0: 1}


def test_strategy_none_shows_the_reason_instead_of_the_classifier_panels():
    view, _, _ = _view(collapse=True, strategy="none")
    reason = "no trained head (strategy none): classifier-side measures are not defined"
    assert view.reasons() == [reason]
    figures = view.figures()
    assert "self_duality" not in figures and "ncc" not in figures
    texts = [o.object for o in view._panels.objects if isinstance(o, pn.pane.HTML)]
    assert len(texts) == 2 and all(reason in text for text in texts)
    assert not [c for c in _curves(figures["equinorm"]) if "classifier" in c.dimension_values("measure")[0]]


def test_an_old_run_says_what_it_lacks_never_an_error():
    view, _, _ = _view()                       # recorded before the training sample and the class means
    assert any(text.startswith("this run has no training-set sample: it was recorded without it") for text in view.reasons())
    assert "this run has no class means" in view._deviation.object
    figures = view.figures()
    assert "nc1" in figures and "cosines" not in figures
    for figure in figures.values():
        hv.render(figure)
    # the panels of measures it did not take give the reason, not empty axes
    assert not {"equinorm", "equiangularity", "cosine_std"} & set(figures)
    reasons = " ".join(html.unescape(o.object) for o in view._panels.objects if isinstance(o, pn.pane.HTML))
    assert "not measured: nc2_equinorm is not among this run's metrics" in reasons
    assert "not measured: nc2_cosine_std is not among this run's metrics" in reasons


def test_a_stored_run_without_class_means_gives_its_record_s_reason(make_run, store):
    from app.collapse import CollapseView

    record = store.load(make_run(seen={"nc1": 1.0}))
    view = CollapseView(collapsed=False)
    view.show_record(record)
    assert record.class_means_problem and html.escape(record.class_means_problem) in view._deviation.object
    assert any("no training-set sample" in text for text in view.reasons())


def test_the_simplex_heatmaps_are_lab_s_matrices():
    view, _, events = _view(collapse=True, epochs=3)
    assert (view.simplex_layer, view.simplex_split, view.simplex_epochs()) == (HEAD, "train", [0, 1, 2, 3])
    expected = analysis.simplex(_gram(events, HEAD, 3, "train"))        # the player starts at the latest epoch
    figures = view.figures()
    k = len(SEEN)
    cosines = figures["cosines"].dimension_values("cosine", flat=True).reshape(k, k)
    ideal = figures["ideal"].dimension_values("cosine", flat=True).reshape(k, k)
    np.testing.assert_allclose(cosines, expected["cosines"])
    np.testing.assert_allclose(ideal, expected["ideal"])
    assert f"{expected['deviation']:.4f}" in view._deviation.object
    assert "plane" not in figures                      # two seen classes: no triangle


def test_three_classes_are_drawn_in_their_plane_beside_the_equilateral_triangle():
    view, _, events = _view(collapse=True, epochs=2)
    view.simplex_split = "unseen"
    view.simplex_layer = "block1"
    result = analysis.simplex(_gram(events, "block1", 2, "unseen"))
    plane = view.figures()["plane"]
    points = next(el for el in plane if isinstance(el, hv.Points))
    np.testing.assert_allclose(np.column_stack([points.dimension_values("x"), points.dimension_values("y")]),
                               result["coords"])
    assert list(points.dimension_values("class")) == UNSEEN
    ideal = [el for el in plane if isinstance(el, hv.Path)][0].array()
    sides = np.linalg.norm(np.diff(ideal, axis=0), axis=1)
    np.testing.assert_allclose(sides, sides[0])        # equilateral
    assert view._plane_pane.visible
    hv.render(plane)


def test_the_player_steps_through_the_epochs_recorded():
    view, _, events = _view(collapse=True, epochs=3)
    assert isinstance(view.player, pn.widgets.Player) and (view.player.start, view.player.end) == (0, 3)
    for step in (0, 1, 2):
        view.player.value = step
        assert view.simplex_result()["epoch"] == step
        expected = analysis.simplex(_gram(events, HEAD, step, "train"))["cosines"]
        shown = view.figures()["cosines"].dimension_values("cosine", flat=True).reshape(len(SEEN), len(SEEN))
        np.testing.assert_allclose(shown, expected)
        assert f"epoch <b>{step}</b>" in view._epoch_label.object


def test_a_folded_view_draws_nothing_until_opened():
    from app.collapse import CollapseView
    from app.live._model import RunModel

    model = RunModel()
    view = CollapseView.for_live(lambda: model)
    for event in synthetic_run(collapse=True):
        model.apply(event)
        view.observe(event)
    view.refresh()
    assert view.figures() == {}
    view.collapsed = False
    assert "nc1" in view.figures() and "cosines" in view.figures()


def test_the_live_view_feeds_its_collapse_section():
    from app.live import LiveView

    live = LiveView()
    live.consume(list(synthetic_run(collapse=True, epochs=2)))
    live.collapse.collapsed = False
    assert len(live.collapse.class_means) == 2 * len(LAYERS) * 3
    assert live.collapse.terminal == {0: 2} and "nc1" in live.collapse.figures()
    live.reset()
    assert len(live.collapse.class_means) == 0


# ------------------------------------------------------------------ the scroll wheel scrolls the page
def _assert_wheel_zoom_off(obj, where):
    model = hv.render(obj)
    scrolls = [toolbar.active_scroll for toolbar in model.select({"type": Toolbar})]
    assert scrolls and all(s is None for s in scrolls), f"{where}: active scroll {scrolls}"
    backends = [figure.output_backend for figure in model.select({"type": Plot})]
    assert backends and set(backends) == {"canvas"}, f"{where}: drawn with {backends}"    # HoloViews' default: webgl


def test_no_plot_the_app_builds_zooms_on_the_mouse_wheel_or_draws_with_webgl(store, make_run):
    from app.base import plots
    from app.compare import similarity_plots
    from app.layerscope import LayerScope
    from app.studies import study_plots

    run_id = make_run(seen={"nc1": 1.0, "cdnv": 0.5}, epochs=2,
                      training=lambda seed, epoch: {"train_loss": 1.0, "train_accuracy": 0.5,
                                                    "heldout_accuracy": 0.5, "heldout_loss": 1.0, "seconds": 1.0})
    scope = LayerScope(store=store)
    scope.live.consume(list(synthetic_run(collapse=True, epochs=2)))
    scope.live.collapse.collapsed = False
    scope.live.collapse.simplex_split = "unseen"          # three classes: the plane too
    scope.runs.select([run_id])
    scope.run_collapse.collapsed = False
    panes = [p for p in scope.__panel__().select(pn.pane.HoloViews) if p.object is not None]
    assert len(panes) >= 12
    for pane in panes:
        _assert_wheel_zoom_off(pane.object, type(pane.object).__name__)
    record = store.load(run_id)
    for name, figure in {
        "layer_curves": plots.layer_curves([record], "nmi"), "layer_epoch_heatmap": plots.layer_epoch_heatmap(record),
        "epoch_curves": plots.epoch_curves(record, "nmi"), "projection_plot": plots.projection_plot(record, "fc1"),
        "accuracy_vs_g": plots.accuracy_vs_g(plots.tables.generalization_table([record])),
        "cka_to_initial": similarity_plots.cka_to_initial(record),
        "study figures": study_plots.layer_depth_curves({}),
    }.items():
        _assert_wheel_zoom_off(figure, name)
