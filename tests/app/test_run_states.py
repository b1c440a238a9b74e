"""The views of runs that are not happy paths (cancelled early, monitored loops): no false word, no empty axes."""
from __future__ import annotations

import html


def test_compare_layouts_of_a_run_cancelled_before_its_first_evaluation_say_why(cancelled_run):
    from app.compare import RunsPanel

    store, run_id = cancelled_run
    panel = RunsPanel(store)
    panel.select([run_id])
    note = html.unescape(panel._layout_note.object)
    assert f"run {run_id!r} was cancelled before its first evaluation" in note, note
    assert "run it with projection" not in note and "recorded without" not in note


def test_the_overlay_says_a_selected_run_has_no_evaluations_instead_of_empty_axes(cancelled_run):
    from app.compare import RunsPanel

    store, run_id = cancelled_run
    panel = RunsPanel(store)
    panel.select([run_id])
    assert panel.selected == [run_id] and panel.compare_frame().empty
    note = html.unescape(panel._compare_note.object)
    assert panel._compare_note.visible and not panel._compare_box.visible
    assert f"run {run_id!r} was cancelled before its first evaluation" in note and "has no evaluations" in note
    panel.select([])                                 # nothing selected: the empty plot asks for a selection again
    assert not panel._compare_note.visible and panel._compare_box.visible


def test_a_run_stored_without_layouts_says_so_in_one_sentence_instead_of_explorer_controls(tmp_path):
    """Embeddings off (projection "none"): Compare's explorer and Run & watch's layout give one sentence saying the
    run was stored without its layouts and how to get them, not a player, "Colour by" and "Layer" that do
    nothing; a run with layouts shows its explorer again."""
    from lab.store import RunStore

    from app.compare import RunsPanel
    from tests.fixtures import states

    store = RunStore(tmp_path / "runs")
    with states.one_thread():
        bare = states.embeddings_off(store)
        laid_out = states.finished(store)
    said = (f"run {bare!r} was stored without its 2-D layouts (embeddings off: its Layout was 'none'); run it "
            f"again with Layout 'pca' or 'umap' to explore them here.")
    panel = RunsPanel(store)
    assert not panel._explorer.visible                          # nothing selected: no explorer to work
    panel.select([bare])
    assert html.unescape(panel._layout_note.object) == said
    assert not panel._explorer.visible and panel.embedding.n_points == 0
    panel.select([laid_out])
    assert panel._explorer.visible and panel.embedding.n_points > 0
    live = _followed(store, bare)
    assert not live._explorer.visible                           # the layer player and the explorer
    assert live._no_layouts.visible and said in html.unescape(live._no_layouts.object)
    live = _followed(store, laid_out)
    assert live._explorer.visible and not live._no_layouts.visible and live.embedding.n_points > 0


def _followed(store, run_id):
    from app.live import LiveView

    view = LiveView()
    view.follow(run_id, store=store)
    assert view._following.wait(120)            # a hang guard: the run is finished, the follower replays it
    return view


def _plot_opts(element) -> dict:
    import holoviews as hv
    import holoviews.plotting.bokeh  # noqa: F401  (the options are the bokeh backend's)

    return hv.Store.lookup_options("bokeh", element, "plot").kwargs


def test_a_monitored_run_counted_in_steps_is_labelled_step_everywhere_it_is_drawn(monitored_run):
    import holoviews as hv

    from app.explorer import StoredLayouts
    from app.layerscope import LayerScope

    store, run_id = monitored_run
    assert store.load(run_id).meta["axis"] == "step"
    view = _followed(store, run_id)
    assert view.model.axis == "step" and view.status == "finished"
    heat = view.plots.heatmap_pane.object[()]
    assert _plot_opts(heat)["xlabel"] == "step" and "layer × step" in _plot_opts(heat)["title"]
    curves = [o.object[()] for o in view.plots.curves_box.objects if isinstance(getattr(o, "object", None), hv.DynamicMap)]
    assert curves
    for overlay in curves:                      # the latest evaluation's hover names it a step
        tips = [tip for el in overlay if isinstance(el, hv.Scatter) for tool in _plot_opts(el)["tools"]
                if hasattr(tool, "tooltips") for tip in tool.tooltips]
        assert ("step", "@epoch") in tips and ("epoch", "@epoch") not in tips
    assert view.picker.epoch_select.label == "Step" and view.embedding._epoch_w.label == "Step"
    assert "· step 8" in view.embedding._panels[0].pipe.data["title"]
    assert ", step 8," in view._verdict.object
    training = view.plots.render.training(view.streams["training"].data, which="accuracy", seeds=[0])
    assert all(curve.kdims[0].pprint_label == "step" for curve in training), training
    # the collapse card's and the agreement table's words too (the simplex, the law, their notes and titles)
    view.collapse.collapsed = False
    card = view.collapse
    words = [card._simplex_intro.object, card._deviation.object, card.law._intro.object, card.law._notes.object,
             *card.law.sentences(), card.streams["simplex"].data["title"], view.agreement._pane.object]
    assert all("epoch" not in html.unescape(str(w)).lower() for w in words), words
    assert "step 8" in card._deviation.object and card.player.name == "Step"
    # CKA to its first evaluation (a loop's first step need not be 0), not "to epoch 0"
    cka = view.plots.render.cka(view.streams["cka_initial"].data, layers=list(view.model.layers))
    assert "CKA to the first evaluation" in _plot_opts(cka)["title"] and "epoch" not in _plot_opts(cka)["title"]
    assert all("epoch" not in el.vdims[0].pprint_label for el in cka)
    # a stored run's views read the axis from its meta: the Compare tab's layouts and collapse card
    layouts = StoredLayouts(store.load(run_id), store=store)
    assert layouts.axis == "step" and "· step 8" in layouts.layout(layouts.default_layer).title
    scope = LayerScope(store=store)
    scope.runs.select([run_id])
    assert scope.runs.embedding._epoch_w.label == "Step" and scope.run_collapse.source.axis == "step"


def test_curve_titles_name_only_the_splits_a_run_measured(monitored_run, tiny_run):
    import holoviews as hv
    import holoviews.plotting.bokeh  # noqa: F401  (the curves' options are the bokeh backend's)

    from app.live._streams import curve_specs

    def titles(view):
        return {_plot_opts(o.object[()])["title"].split("\n")[0] for o in view.plots.curves_box.objects
                if isinstance(getattr(o, "object", None), hv.DynamicMap)}

    store, run_id = monitored_run
    monitored = titles(_followed(store, run_id))           # no seen images were given to the Monitor
    assert "log10 NC1 (unseen)" in monitored and "log10 CDNV (unseen)" in monitored
    assert not any("seen)" in t.replace("(unseen)", "") for t in monitored), monitored
    store, run_id, _ = tiny_run
    trained = _followed(store, run_id)                      # the engine measures its held-out seen images
    assert dict(curve_specs(trained.model))["nc1"] == ("unseen", "seen")
    assert "log10 NC1 (unseen & seen)" in titles(trained)


def _gaps(view) -> dict:
    """The training plots hidden, each with the sentence the note shows for it."""
    import re

    text = html.unescape(view.training.gap.object) if view.training.gap.visible else ""
    sentences = re.findall(r"<i>(.*?)</i>", text)
    hidden = [which for which, pane in view.training.slots.items() if pane not in view.training.panes.objects]
    return {which: next(s for s in sentences if ("loss" in s) == (which == "loss")) for which in hidden}


def test_training_plots_that_stay_empty_give_way_to_a_sentence_saying_why(monitored_run, cancelled_run, tiny_run):
    store, run_id = monitored_run                   # the loop passed neither train_loss nor train_accuracy
    gaps = _gaps(_followed(store, run_id))
    assert "the loop passed no train_loss to evaluate" in gaps["loss"] and "train_loss=loss" in gaps["loss"]
    assert "the loop passed no train_accuracy to evaluate" in gaps["accuracy"]
    store, run_id = cancelled_run
    gaps = _gaps(_followed(store, run_id))
    assert "the run was cancelled before its first training epoch ended" in gaps["loss"]
    store, run_id, _ = tiny_run                     # trained one epoch: its accuracy curve (epochs 0 and 1) is drawn
    view = _followed(store, run_id)
    assert list(_gaps(view)) == ["loss"] and "one value per seed" in _gaps(view)["loss"]
    assert view.training.panes.objects == [view.training.slots["accuracy"]]


def test_the_sidebar_says_what_a_watched_run_was_configured_with_and_whose_its_settings_are(monitored_run):
    from app.layerscope import LayerScope

    store, run_id = monitored_run
    scope = LayerScope(store=store)
    assert not scope.watched_settings.visible
    scope.watch(run_id)
    assert scope.live._following.wait(120)
    text = html.unescape(scope.watched_settings.object)
    assert scope.watched_settings.visible and f"Watching run {run_id}" in text.replace("<code>", "").replace(
        "</code>", "")
    config = store.load(run_id).config_dict
    assert f"dataset: <code>{config['dataset']}</code>" in text and f"backbone: <code>{config['backbone']}</code>" in text
    assert "seen classes: <code>none measured</code>" in text
    assert "they are for the next run you start here" in text
    assert scope.config.to_config().dataset not in text             # the form's preset is not claimed for it
    scope.live.stop_following()                                       # a run started here replaces it
    scope.live.reset("Starting…")
    assert not scope.watched_settings.visible


def test_the_sidebar_says_a_watched_run_that_failed_before_it_started_resolved_no_settings(tmp_path):
    """It failed before its RunStarted (a tap its backbone lacks): no "Reading its settings…" for ever, but that it
    failed before it started, with the settings it was given as its store keeps them."""
    from lab.store import RunStore

    from app.layerscope import LayerScope
    from tests.fixtures import states

    store = RunStore(tmp_path / "runs")
    with states.one_thread():
        failed = states.failed_before_first_evaluation(store)
    scope = LayerScope(store=store)
    scope.watch(failed)
    assert scope.live._following.wait(120)
    assert scope.live.status == "failed" and not scope.live.model.config      # no RunStarted: no settings there
    text = html.unescape(scope.watched_settings.object)
    assert "Reading its settings" not in text
    assert "It failed before it started: it resolved no layers or classes." in text, text
    config = store.load(failed).config_dict
    assert f"backbone: <code>{config['backbone']}</code>" in text and "layers: <code>fc1, fc9</code>" in text
    assert "classes:" not in text                                   # none were resolved
    assert "they are for the next run you start here" in text


def test_a_monitored_runs_explorer_shows_thumbnails_of_the_images_it_was_given(monitored_run):
    import numpy as np
    import torch

    from app.layerscope import LayerScope
    from tests.fixtures.small_loop import digits_split

    store, run_id = monitored_run
    kept = store.load(run_id).thumbnails()                  # the Monitor's unseen digits, 16 px: kept as they are
    unseen, _, _ = digits_split()
    assert kept.shape == (40, 16, 16, 1) and kept.dtype == np.uint8
    assert np.array_equal(kept[..., 0], unseen._gather(torch.arange(40))[:, 0].numpy())
    view = _followed(store, run_id)
    view.embedding.hovered = 3                              # the Run & watch explorer
    assert "data:image/png;base64," in view.embedding._hover_card.object
    scope = LayerScope(store=store)                         # the Compare tab's explorer of the stored run
    scope.runs.select([run_id])
    scope.runs.embedding.hovered = 3
    assert "data:image/png;base64," in scope.runs.embedding._hover_card.object


def test_a_run_that_ended_before_measuring_anything_shows_one_sentence_not_empty_plots(cancelled_run):
    import panel as pn

    from app.layerscope import LayerScope

    store, run_id = cancelled_run
    view = _followed(store, run_id)
    assert view.status == "cancelled" and view.model.layers          # its layers are known, nothing was measured
    assert not [o for o in view.plots.curves_box.objects if isinstance(o, pn.pane.HoloViews)]
    assert "ended before any layer was measured" in " ".join(str(o.object) for o in view.plots.curves_box.objects)
    assert not view.plots.details.visible                                  # no heatmap, layout, training: no dead player
    said = f"run {run_id!r} was cancelled before its first evaluation: it measured nothing, so it has no neural-collapse"
    for card in (view.collapse, LayerScope(store=store).run_collapse):  # Run & watch's card, and Compare's
        if card is not view.collapse:
            card.show_record(store.load(run_id))
        card.collapsed = False
        assert card._nothing.visible and not card._measured.visible
        assert said in html.unescape(card._nothing.object)
        assert not card.figures().get("nc1")


def test_a_run_still_training_or_ended_after_one_evaluation_says_why_its_training_plots_are_empty(tmp_path):
    """Held mid-epoch 1 (epoch 0 measured): no loss yet, one accuracy point; failed in epoch 1: the same, ended."""
    import time

    from lab.store import RunStore
    from tests.fixtures import states

    store = RunStore(tmp_path / "runs")
    with states.one_thread():
        failed = states.failed_diverged(store)
        with states.running_mid_epoch(store) as running:
            from app.live import LiveView

            view = LiveView()
            view.follow(running, store=store, every=0.2)
            deadline = time.monotonic() + 120                   # a hang guard, not a timing
            while view.model.epochs_done < 1:
                assert time.monotonic() < deadline, view.probe()
                time.sleep(0.1)
            view.stop_following(wait=30)                        # its thread applies the events: let it end
            assert view.status == "running"
            gaps = _gaps(view)
            assert gaps["loss"].startswith("No training loss yet: it comes when the first training epoch ends")
            assert gaps["accuracy"].startswith("No seen-accuracy curve yet")
            # utilization at the first evaluation is 0 by definition: a sentence, not bars of height 0
            assert not view.training.utilization_box.visible
            assert "No layer utilization yet" in view.training.gap.object
            # CKA to the first evaluation is 1 there by definition: a sentence, not a flat line
            assert not view.training.cka_box.visible
            assert "No CKA curve yet: each layer's CKA to its first evaluation is 1" in html.unescape(
                view.training.gap.object)
    view = _followed(store, failed)
    gaps = _gaps(view)
    assert "the run failed before its first training epoch ended" in gaps["loss"]
    assert gaps["accuracy"].startswith("No seen-accuracy curve: the held-out images were measured at one evaluation")
    assert not view.training.utilization_box.visible
    assert "No layer utilization: the run failed before its first training epoch ended." in view.training.gap.object
    assert not view.training.cka_box.visible
    assert "No CKA to the first evaluation: the run failed before its first training epoch ended." in html.unescape(
        view.training.gap.object)


def test_the_simplex_offers_only_the_splits_with_class_means(monitored_run):
    """A loop given unseen images only: its class means are of the unseen classes; no "train" button showing
    nothing."""
    import holoviews.plotting.bokeh  # noqa: F401  (the card's plots are the bokeh backend's)

    view = _followed(*monitored_run)
    view.collapse.collapsed = False
    assert view.collapse.simplex_split == "unseen"
    assert view.collapse.simplex_result() is not None
    assert list(view.collapse._split_w.options) == ["unseen"]


def test_a_run_of_one_training_epoch_gives_its_loss_in_a_sentence_not_a_line_of_one_point(tmp_path):
    from lab.store import RunStore
    from tests.fixtures import states

    store = RunStore(tmp_path / "runs")
    with states.one_thread():
        run_id = states.embeddings_off(store)                   # TINY, one epoch
        seeds = states.finished(store, seeds=(0, 1, 2))         # one epoch each: a line of one point per seed
    view = _followed(store, run_id)
    loss = float(view.model.training["train_loss"].dropna().iloc[0])
    assert _gaps(view) == {"loss": f"Training loss {loss:.3g} at epoch 1: one value, no curve."}
    view = _followed(store, seeds)
    losses = view.model.training.dropna(subset=["train_loss"])
    said = ", ".join(f"{v:.3g} (seed {s})" for s, v in zip(losses["seed"], losses["train_loss"]))
    assert _gaps(view) == {"loss": f"Training loss {said} at epoch 1: one value per seed, no curve."}


def test_a_run_read_at_once_says_how_long_it_took_not_how_long_reading_it_took():
    """A run followed from the store arrives in one batch: the status line gives the run's own duration (its end
    event's), not the moment between its first and last event here."""
    from app.live import LiveView
    from tests.fixtures.live_runs import synthetic_run

    view = LiveView()
    view.consume(list(synthetic_run()))                  # its RunFinished says 3 s
    assert view.status == "finished" and view.model.seconds == 3.0
    assert "after 3 s" in view._status_md.object


def test_a_run_without_a_seen_split_offers_no_seen_heatmap(monitored_run, tiny_run):
    view = _followed(*monitored_run)                        # a loop given unseen images only
    assert view.heatmap_split == "unseen" and not view._heatmap_split_w.visible
    store, run_id, _ = tiny_run
    assert _followed(store, run_id)._heatmap_split_w.visible


def test_a_run_that_failed_before_it_started_leaves_nothing_of_the_run_shown_before(tmp_path, tiny_run):
    """It failed on a layer its backbone lacks, before its RunStarted: the collapse card says so, not what the run
    shown before it left in it (its layers, its simplex)."""
    import holoviews.plotting.bokeh  # noqa: F401  (the card's plots are the bokeh backend's)

    from lab.store import RunStore
    from tests.fixtures import states

    store = RunStore(tmp_path / "runs")
    with states.one_thread():
        failed = states.failed_before_first_evaluation(store)
    view = _followed(*tiny_run[:2])
    view.collapse.collapsed = False
    view.follow(failed, store=store)
    assert view._following.wait(120)
    assert view.status == "failed" and view.collapse._nothing.visible and not view.collapse._measured.visible
    assert f"run {failed!r} failed before its first evaluation" in html.unescape(view.collapse._nothing.object)


def test_a_refused_run_keeps_its_reason_when_the_last_runs_worker_settles_afterwards():
    """Run pressed with a mistyped name just after Stop: the cancelled run's worker may settle after the refusal;
    the page must still say why nothing started (the status line and the alert), not the cancelled run's end."""
    from app.live import LiveView
    from lab import events as ev
    from tests.fixtures.live_runs import synthetic_run

    view = LiveView()
    events = [e for e in synthetic_run(epochs=2) if e.kind in (ev.RunStarted.kind, ev.LayerMetrics.kind)][:3]
    view.consume(events + [ev.RunCancelled(events[0].run_id, message="stopped by the user", seconds=1.0)])
    view.set_message("Cannot start: unknown backbone 'resnet1800'", status="idle", alert="danger")
    view.settle()                                    # the cancelled run's worker ends now
    assert view.status == "cancelled"
    assert "Cannot start: unknown backbone" in html.unescape(view._status_md.object)
    assert view._alert.visible and view._alert.object.startswith("Cannot start") and view._alert.alert_type == "danger"
    view.reset()                                     # a run starts: the refusal is over
    assert "Cannot start" not in view._status_md.object and not view._alert.visible
