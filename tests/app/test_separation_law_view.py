"""The law of equi-separation in the neural-collapse card, from real runs (no browser): log10 NC1 against depth with
separation_law's line and numbers, r against epoch with the terminal-phase mark, both moved by the epoch player; the
reason in place of the plot when the law is absent; the split a run lacks named."""
from __future__ import annotations

import html

import holoviews as hv
import numpy as np
import pytest

import lab
from lab import analysis
from lab.store import RunStore

hv.extension("bokeh")

# the lesson's run made small: an equal-width MLP on digits with a training sample, the collapse family only
_SMALL = dict(dataset="digits", n_unseen=3, strategy="full", epochs=2, lr=2e-3, seen_per_class=8,
              unseen_per_class=8, train_sample_per_class=8, metrics=("nc1", "head_accuracy"), projection="none",
              seeds=(0,), batch_size=32)


def _record(tmp_path_factory, name, **fields):
    store = RunStore(tmp_path_factory.mktemp(name) / "runs")
    run_id = None
    for event in lab.run(lab.RunConfig(**{**_SMALL, **fields}), store=store):
        run_id = run_id or getattr(event, "run_id", None)
        assert event.kind != "run_failed", event
    return store.load(run_id)


@pytest.fixture(scope="module")
def deep_run(tmp_path_factory):
    return _record(tmp_path_factory, "law_deep", backbone="mlp:depth=4,width=32")


@pytest.fixture(scope="module")
def shallow_run(tmp_path_factory):
    return _record(tmp_path_factory, "law_shallow", backbone="mlp:depth=2,width=32")


def _view(record):
    from app.collapse import CollapseView

    view = CollapseView(collapsed=False)
    view.show_record(record)
    return view


def _by_type(overlay, kind):
    return [el for el in overlay if isinstance(el, kind)]


def _line(overlay, split_name):
    return next(c for c in _by_type(overlay, hv.Curve) if c.label.startswith(split_name))


def test_the_card_draws_both_panels_from_separation_laws_numbers(deep_run):
    from app.base.plots import SPLIT_NAMES

    view = _view(deep_run)
    figures = view.figures()
    assert {"law_depth", "law_r"} <= set(figures)
    for key in ("law_depth", "law_r"):
        hv.render(figures[key])
    epoch = view.shown_epoch()
    assert epoch == 2                                           # the player starts at the last epoch
    law = analysis.separation_law(deep_run)
    points = analysis.separation_law_points(deep_run, epoch=epoch)
    # 4 hidden layers and pre_logits, the last hidden layer being pre_logits: 4 distinct layers
    assert deep_run.meta["layer_aliases"] == {"fc4": "pre_logits"}
    assert view.law.layers == ["fc1", "fc2", "fc3", "pre_logits"]
    depth = figures["law_depth"]
    for split in ("train", "seen", "unseen"):
        row = law[(law["epoch"] == epoch) & (law["split"] == split)].iloc[0]
        line = _line(depth, SPLIT_NAMES[split])
        x, y = line.dimension_values(0), line.dimension_values(1)
        assert np.allclose(np.diff(y) / np.diff(x), row["slope"], rtol=1e-9)      # separation_law's slope
        mine = points[points["split"] == split]
        assert np.allclose(y, mine["fitted"], rtol=1e-12)
        assert f"×{row['ratio']:.2f} per layer" in line.label and f"r {row['r']:+.3f}" in line.label
        dots = next(s for s in _by_type(depth, hv.Scatter) if s.label == line.label)
        assert np.allclose(dots.dimension_values("log10 NC1"), mine["log10_nc1"], equal_nan=True)
    legend = [item.label["value"] for item in hv.render(depth).legend[0].items]
    assert any("per layer" in text and "r " in text for text in legend)
    r_curve = figures["law_r"]
    across = analysis.separation_law_across_seeds(deep_run)
    train = _line(r_curve, SPLIT_NAMES["train"])
    assert np.allclose(train.dimension_values("r"), across[across["split"] == "train"]["r"], equal_nan=True)
    # the terminal-phase mark of the collapse panels (red, at the run's terminal epoch), and the epoch shown
    marks = [v.data for v in _by_type(r_curve, hv.VLine) if v.opts.get().kwargs["color"] == "#b2182b"]
    terminal = analysis.terminal_phase(deep_run.metrics)[0]
    assert marks == [terminal] or (terminal is None and np.isnan(marks).all())
    assert any(t.text.strip().startswith("terminal phase") for t in _by_type(r_curve, hv.Text))
    assert [v.data for v in _by_type(r_curve, hv.VLine) if v.opts.get().kwargs["color"] == "#777777"] == [epoch]
    assert "train sample · held-out · unseen classes" in depth.opts.get().kwargs["title"]
    notes = view.law._notes.object
    for split in ("train sample", "held-out (seen)", "unseen classes"):
        assert split in notes
    assert "Not measured" not in notes


def test_the_player_moves_both_panels(deep_run):
    from app.base.plots import SPLIT_NAMES

    view = _view(deep_run)
    assert view.player_epochs() == [0, 1, 2] and view.player.end == 2
    law = analysis.separation_law(deep_run)
    for index in (0, 1):
        view.epoch_index = index
        epoch = view.shown_epoch()
        figures = view.figures()
        row = law[(law["epoch"] == epoch) & (law["split"] == "train")].iloc[0]
        line = _line(figures["law_depth"], SPLIT_NAMES["train"])
        assert f"r {row['r']:+.3f}" in line.label
        assert f"epoch {epoch}" in figures["law_depth"].opts.get().kwargs["title"]
        cursor = [v.data for v in _by_type(figures["law_r"], hv.VLine) if v.opts.get().kwargs.get("alpha") == 0.6]
        assert cursor == [epoch]
        assert f"epoch <b>{epoch}</b>" in view._epoch_label.object


def test_a_two_layer_run_shows_separation_laws_reason_not_empty_axes(shallow_run):
    view = _view(shallow_run)
    figures = view.figures()
    assert "law_depth" not in figures and "law_r" not in figures
    sentences = view.law.sentences()
    law = analysis.separation_law(shallow_run)
    reason = law["reason"].iloc[-1]
    assert reason.startswith("no law: 2 layer(s)")
    assert sentences[0] == f"No law of equi-separation at epoch 2: {reason.removeprefix('no law: ')}."
    assert sentences[1].startswith("No r at any epoch: 2 layer(s)")          # "no law" said once
    shown = [box.objects for box in (view.law._depth_box, view.law._r_box)]
    assert [len(objects) for objects in shown] == [1, 1]
    assert html.escape(sentences[0]) in shown[0][0].object and html.escape(sentences[1]) in shown[1][0].object
    # the notes do not say it again for each split
    assert reason.removeprefix("no law: ") not in html.unescape(view.law._notes.object)
    assert "nc1" in figures                                      # the rest of the card is drawn


def test_a_run_without_nc1_says_so_in_one_sentence(deep_run):
    from app.collapse._law import NO_NC1

    no_nc1 = RunStore(deep_run.path.parent).load(deep_run.run_id)
    no_nc1.metrics = deep_run.metrics[deep_run.metrics["metric"] != "nc1"]
    view = _view(no_nc1)
    assert view.law.sentences() == [NO_NC1]
    assert "law_depth" not in view.figures() and "law_r" not in view.figures()


def test_a_run_without_the_train_split_says_which_split_is_missing(deep_run):
    old = RunStore(deep_run.path.parent).load(deep_run.run_id)
    old.metrics = deep_run.metrics[deep_run.metrics["split"] != "train"]    # as a run recorded before the sample
    view = _view(old)
    depth = view.figures()["law_depth"]
    title = depth.opts.get().kwargs["title"]
    assert "train" not in title and title.endswith("held-out · unseen classes")
    assert "Not measured in this run: train sample" in view.law._notes.object
    assert not any(c.label.startswith("train") for c in _by_type(depth, hv.Curve))
    assert view._card.title == "Neural collapse: held-out and unseen"
    assert _view(deep_run)._card.title == "Neural collapse: training sample, held-out and unseen"


def _with_nc1(record, layers, value):
    """A copy of ``record`` whose NC1 at ``layers`` on every split at its last epoch is ``value``."""
    copy = RunStore(record.path.parent).load(record.run_id)
    metrics = record.metrics.copy()
    last = metrics["epoch"].max()
    at = (metrics["metric"] == "nc1") & metrics["layer"].isin(layers) & (metrics["epoch"] == last)
    metrics.loc[at, "value"] = value
    copy.metrics = metrics
    return copy


def test_a_nan_layer_is_left_out_and_named_and_too_many_make_the_law_absent(deep_run):
    view = _view(_with_nc1(deep_run, ["fc2"], np.nan))
    assert "law_depth" in view.figures()                      # 3 layers left: the law, with the layer named
    assert "NC1 not finite and positive at fc2 (nan): left out" in view.law._notes.object
    view = _view(_with_nc1(deep_run, ["fc2", "fc3"], np.nan))
    assert "law_depth" not in view.figures() and "law_r" in view.figures()   # r of the other epochs is drawn
    sentence = view.law.sentences()[0]
    assert sentence.startswith("No law of equi-separation at epoch 2: 2 layer(s)")
    assert "fc2 (nan), fc3 (nan)" in sentence
    view.epoch_index = 1                                      # an epoch with every layer: the plot is back
    assert "law_depth" in view.figures() and view.law.sentences() == []


def test_a_live_run_draws_the_law_as_evaluations_arrive():
    from app.collapse import CollapseView
    from app.live._model import RunModel
    from tests.fixtures.live_runs import LAYERS, synthetic_run

    model = RunModel()
    view = CollapseView.for_live(lambda: model, collapsed=False)
    seen_epochs = []
    for event in synthetic_run(collapse=True, epochs=3):
        model.apply(event)
        view.observe(event)
        if event.kind in ("generalization", "run_finished"):      # after each evaluation
            view.refresh()
            seen_epochs.append(view.shown_epoch())
    assert seen_epochs[0] == 0 and seen_epochs[-1] == 3 and seen_epochs == sorted(seen_epochs)   # the player follows
    assert view.law.layers == list(LAYERS)
    law = analysis.separation_law(model.metrics, layers=list(LAYERS), aliases={})
    row = law[(law["epoch"] == 3) & (law["split"] == "train")].iloc[0]
    line = _line(view.figures()["law_depth"], "train sample")
    assert f"r {row['r']:+.3f}" in line.label


def test_on_a_page_the_player_moves_the_drawn_law(deep_run):
    from bokeh.document import Document
    from bokeh.models import Legend

    from app.collapse import CollapseView

    view = CollapseView(collapsed=True)
    doc = Document()
    root = view.__panel__().get_root(doc)
    view.show_record(deep_run)
    view.collapsed = False
    law = analysis.separation_law(deep_run)

    def legend_labels():
        return {item.label["value"] for legend in root.select({"type": Legend}) for item in legend.items}

    for index in (2, 0):
        view.epoch_index = index
        row = law[(law["epoch"] == index) & (law["split"] == "unseen")].iloc[0]
        assert f"unseen classes: ×{row['ratio']:.2f} per layer, r {row['r']:+.3f}" in legend_labels()


def test_the_notes_of_a_law_without_reasons_read_plainly(deep_run):
    """A law with nothing left out has no reason: its note ends with the numbers (pandas reads a missing
    reason back as NaN, which once printed '; nan')."""
    view = _view(deep_run)
    law = analysis.separation_law(deep_run).assign(reason=np.nan)
    notes = view.law.notes_html(law, view.shown_epoch())
    assert "per layer over" in notes and "r = " in notes
    assert "nan" not in notes.lower()


def test_a_run_counted_in_steps_says_step_on_both_panels(monitored_run):
    store, run_id = monitored_run
    view = _view(store.load(run_id))
    law = view.law
    assert len(law.law), "the monitored loop's MLP measures NC1 on enough layers for the law"
    depth, r = law._depth_data(law.epoch)["title"], law._r_data(law.epoch)["title"]
    assert depth.startswith("log10 NC1 against depth · step ") and r.startswith("r against step"), (depth, r)
    rendered = hv.render(law._render_r(law._r_data(law.epoch)))
    assert rendered.xaxis[0].axis_label == "step"


def test_the_card_reads_a_reasons_code_and_words_never_its_prose(deep_run):
    """Whether a row's law is absent comes from its reason's code, and the card shows the reason's words: it
    strips no "no law: " off a sentence."""
    import pandas as pd

    view = _view(deep_run)
    epoch = view.shown_epoch()
    law = analysis.separation_law(deep_run)
    law = law[(law["epoch"] == epoch) & (law["seed"] == view.law.seed)].copy()
    assert len(law) >= 2
    absent = analysis.LawReason([(analysis.LawCode.TOO_FEW_LAYERS, "words the card does not parse")])
    noted = analysis.LawReason([(analysis.LawCode.NOT_MEASURED, "NC1 not measured at fc9")])
    law["reason"] = pd.Series([absent, noted, *[None] * (len(law) - 2)], index=law.index, dtype=object)
    law.loc[law.index[0], ["slope", "ratio", "r"]] = np.nan
    notes = html.unescape(view.law.notes_html(law, epoch))
    assert f"{epoch}: no law (words the card does not parse)." in notes
    assert "; NC1 not measured at fc9." in notes
    assert "no law: " not in notes
