"""Which layout the live view shows: the verdict's best layer as epochs stream, until the user picks a layer.

Component tests (no browser): synthetic engine events go through ``LiveView.consume`` one at a time, as a
run streams them, or all at once, as when a finished run is replayed.
"""
from __future__ import annotations

import holoviews as hv
import pytest
from bokeh.document import Document

from app.base._upstream_panel import (apply_notebook_msg, register_notebook_view, unregister_notebook_view,
                                      widget_models)
from lab import events as ev
from tests.fixtures.live_runs import LAYERS, synthetic_run

hv.extension("bokeh")

PEAKS = {0: 1, 1: 2, 2: 3}          # the best layer moves deeper each epoch: block1, block2, pre_logits


def _moving_best():
    return list(synthetic_run(epochs=2, peak=PEAKS.__getitem__))


def _epoch_ends(events):
    """Positions just after each epoch's last event (its Generalization)."""
    return [i + 1 for i, e in enumerate(events) if e.kind == ev.Generalization.kind]


def _stream(live, events):
    for e in events:
        live.consume([e])


def _player_model(picker):
    """The Bokeh model of the player as the page has it (the view is rendered before the run)."""
    model, = widget_models(picker.player)
    return model


def _shown(live) -> dict:
    """The layer each part of the view names: the picker, the plot, its stream, the verdict line."""
    return {"picker": live.picker.layer, "plot": live.embedding.layer,
            "stream": live.streams["projection"].data["title"].split(" · ")[1],
            "verdict": live._verdict_data.get("layer")}


@pytest.fixture
def live():
    from app.live import LiveView

    view = LiveView()
    view.__panel__().get_root(Document())
    return view


def test_the_layout_follows_the_best_layer_as_epochs_stream(live):
    events = _moving_best()
    start = 0
    for epoch, end in enumerate(_epoch_ends(events)):
        _stream(live, events[start:end])
        start = end
        best = LAYERS[PEAKS[epoch]]
        assert _shown(live) == dict.fromkeys(("picker", "plot", "stream", "verdict"), best), epoch
        assert f">{best}</span>" in live._verdict.object             # the layer the verdict line names
        assert (live.picker.epoch, live.embedding.epoch) == (epoch, epoch)
        assert live.picker.player.value == best and live.picker.follow_best      # our moves are no pick
        assert live.probe()["layout_layer"] == best


def test_before_the_first_complete_epoch_it_shows_the_deepest_layout_so_far(live):
    events = _moving_best()
    layouts = [i for i, e in enumerate(events) if e.kind == ev.ProjectionReady.kind][:2]
    live.consume(events[:layouts[1] + 1])                 # stem and block1 laid out, block2 not measured yet
    assert live._verdict_data.get("layer") is None
    assert (live.picker.layer, live.embedding.layer) == ("block1", "block1")


def test_a_layer_picked_by_hand_stays_until_follow_best_layer_is_ticked(live):
    events = _moving_best()
    ends = _epoch_ends(events)
    live.consume(events[:ends[0]])          # in batches, as a session's queue hands them over (one at a time
    picker = live.picker                    # is the first test's; each event alone redraws every plot)
    picker.player._process_events({"value": 0})           # the browser moves the player to stem
    assert (picker.layer, picker.follow_best, live.embedding.layer) == ("stem", False, "stem")
    assert live.probe()["picked"].startswith("player frame 'stem'")      # what made the pick, for a failure's message
    live.consume(events[ends[0]:ends[1]])                 # the best layer moves on twice
    live.consume(events[ends[1]:])
    assert live._verdict_data["layer"] == "pre_logits"
    assert (picker.layer, live.embedding.layer, picker.player.value) == ("stem", "stem", "stem")
    assert picker.epoch == live.embedding.epoch == 2     # the epoch still follows the newest layout
    picker.follow_best = True                             # the "follow best layer" box
    assert _shown(live) == dict.fromkeys(("picker", "plot", "stream", "verdict"), "pre_logits")
    picker.layer = "block1"                               # set from Python: a pick as well
    assert (picker.follow_best, live.embedding.layer) == (False, "block1")
    assert live.probe()["picked"] == "layer 'block1' set from Python"
    picker.follow_best = True
    picker.player._process_events({"value": 0})           # the player picks stem again
    picker.follow_best = True                             # following moves the layout away from it
    picker.layer = "stem"                                 # then Python picks stem: its own pick, not the player's
    assert live.probe()["picked"] == "layer 'stem' set from Python"


def test_a_new_run_follows_the_best_layer_again(live):
    live.consume(list(synthetic_run("r1", epochs=1)))
    live.picker.player.value = "stem"
    live.consume(list(synthetic_run("r2", epochs=1, peak=lambda epoch: 1)))
    assert live.picker.follow_best and _shown(live)["plot"] == "block1"


def test_a_replayed_run_opens_on_its_best_layer(live):
    live.consume(_moving_best())                          # a finished run's events in one batch
    assert _shown(live) == dict.fromkeys(("picker", "plot", "stream", "verdict"), "pre_logits")
    live.consume(list(synthetic_run("r2", epochs=2, peak=lambda epoch: 0)))
    assert _shown(live) == dict.fromkeys(("picker", "plot", "stream", "verdict"), "stem")


@pytest.mark.slow
def test_a_stored_run_replayed_opens_where_the_compare_tab_does(tiny_run):
    """The engine's own events of a stored run: the live view, the store's summary and the Compare tab's
    explorer name one best layer."""
    from app.explorer.embedding import EmbeddingView
    from app.live import LiveView

    store, run_id, events = tiny_run
    best = store.load(run_id).summary()["best_layer"]
    live = LiveView()
    live.consume(events)
    assert live.picker.layer == live.embedding.layer == best
    assert EmbeddingView(store=store, run_id=run_id).layer == best


def test_the_player_label_names_the_layer_shown(live):
    """Panel's player view refreshes its own value label only for frames set in the browser: after a move
    from Python it named the previous layer while the slider and plot had moved on (seen in JupyterLab)."""
    events = _moving_best()
    ends = _epoch_ends(events)
    live.consume(events[:ends[0]])
    model = _player_model(live.picker)
    assert model.options[model.value] == "block1"
    assert not model.show_value and model.title == "Layer: block1"
    live.consume(events[ends[0]:ends[1]])                 # moved from Python, to block2
    assert (model.options[model.value], model.title) == ("block2", "Layer: block2")
    live.picker.player._process_events({"value": 0})      # moved in the browser
    assert model.title == "Layer: stem"


def _projecting(events, layers):
    """``events`` of a run that lays out only ``layers`` (a config's projection_layers)."""
    return [e for e in events if e.kind != ev.ProjectionReady.kind or e.layer in layers]


def test_the_player_offers_only_the_layers_the_run_laid_out(live):
    projected = ["block1", "pre_logits"]
    events = _projecting(_moving_best(), projected)
    first_layout = next(i for i, e in enumerate(events) if e.kind == ev.ProjectionReady.kind)
    live.consume(events[:first_layout + 1])
    picker = live.picker
    assert picker.player.options == ["block1"] and picker.param.layer.objects == ["block1"]
    assert _player_model(picker).end == 0                  # the page's player has one frame
    live.consume(events[first_layout + 1:])                 # the other layouts arrive: the options grow
    assert picker.player.options == projected and picker.param.layer.objects == projected
    assert _player_model(picker).options == projected and _player_model(picker).end == 1
    assert (live._verdict_data["layer"], picker.layer, live.embedding.layer) == ("pre_logits",) * 3
    picker.player._process_events({"value": 0})            # the browser moves the player to its first frame
    assert (picker.layer, live.embedding.layer) == ("block1", "block1")
    with pytest.raises(ValueError, match="stem"):
        picker.layer = "stem"                              # measured, never laid out: not a choice
    assert live.embedding.layer == "block1"


def test_a_replayed_run_offers_its_laid_out_layers_and_a_new_run_its_own(live):
    live.consume(_projecting(_moving_best(), ["stem", "block2"]))
    assert live.picker.player.options == ["stem", "block2"]
    live.consume(list(synthetic_run("r2", epochs=1)))
    assert live.picker.player.options == list(LAYERS)



class _NotebookComm:
    """A notebook's comm to the browser, open: what Panel pushes is kept, as the browser would receive it."""

    def __new__(cls):
        from pyviz_comms import Comm

        class Open(Comm):
            def __init__(self):
                super().__init__()
                self._comm, self.sent = True, []

            def send(self, data=None, metadata=None, buffers=None):
                self.sent.append(data)

        return Open()


def _browser_sends(live, ref, model=None, **props):
    """A message from a notebook's browser through Panel's comm handler: a real PATCH-DOC setting ``props`` on
    the player's model, as Panel's comm manager sends it (the kernel's own changes come back this way too)."""
    from bokeh.document.events import ModelChangedEvent
    from bokeh.protocol import Protocol

    model = model if model is not None else _player_model(live.picker)
    patch = Protocol().create("PATCH-DOC", [ModelChangedEvent(model.document, model, name, value)
                                            for name, value in props.items()])

    class Manager:
        def assemble(self, msg):
            return patch

    apply_notebook_msg(live.__panel__(), ref, Manager(), {"content": {}})


def test_in_a_notebook_the_kernels_own_moves_coming_back_are_no_pick():
    """Panel's notebook view sends the kernel's changes back to the kernel; two moves in quick succession came
    back as the older then the newer layer, and the older one read as a pick: the layout stopped following
    the best layer (seen in the JupyterLab browser test). The user's own frame is still a pick."""
    from app.base._doclock import install
    from app.live import LiveView

    install()
    live, doc, comm = LiveView(), Document(), _NotebookComm()
    root = live.__panel__().get_root(doc, comm)
    doc.add_root(root)                                        # as Panel's notebook display does
    ref = root.ref["id"]
    register_notebook_view(ref, live.__panel__(), root, doc, comm)
    try:
        events = _moving_best()
        ends = _epoch_ends(events)
        live.consume(events[:ends[0]])
        model = _player_model(live.picker)
        first = model.value                                   # block1's frame, as the page got it
        live.consume(events[ends[0]:ends[1]])                 # then block2's, before the first came back
        assert [model.options[i] for i in (first, model.value)] == ["block1", "block2"]
        for frame in (first, model.value):                    # both come back, the older first
            _browser_sends(live, ref, value=frame)
            picker = live.picker
            assert (picker.layer, picker.follow_best, live.embedding.layer) == ("block2", True, "block2")
            assert (model.options[model.value], model.title) == ("block2", "Layer: block2")
        live.consume(events[ends[1]:])                        # and it goes on following
        assert _shown(live) == dict.fromkeys(("picker", "plot", "stream", "verdict"), "pre_logits")
        _browser_sends(live, ref, value=model.value)          # that move's echo, like the earlier ones
        _browser_sends(live, ref, value=first)                # the user's frame: block1, shown before
        assert (live.picker.layer, live.picker.follow_best, live.embedding.layer) == ("block1", False, "block1")
        assert model.title == "Layer: block1"
    finally:
        unregister_notebook_view(ref)


def test_a_move_the_kernel_makes_while_it_handles_the_browsers_message_is_its_own():
    """Ticking "follow best layer" in a notebook moves the player back to the best layer while Panel applies the
    tick's message, and the best layer moves on before that move comes back: it is the kernel's own all the same
    (such a move, as by a Run click that starts a run, read as a pick in the JupyterLab test on a loaded machine:
    Panel sends it in its own push, where the model's change callbacks never run)."""
    from app.base._doclock import install
    from app.live import LiveView

    install()
    live, doc, comm = LiveView(), Document(), _NotebookComm()
    root = live.__panel__().get_root(doc, comm)
    doc.add_root(root)
    ref = root.ref["id"]
    register_notebook_view(ref, live.__panel__(), root, doc, comm)
    try:
        events = _moving_best()
        ends = _epoch_ends(events)
        live.consume(events[:ends[0]])                        # the best layer: block1
        model = _player_model(live.picker)
        _browser_sends(live, ref, value=model.value)          # that move's echo
        _browser_sends(live, ref, value=0)                    # the user's frame: stem
        assert (live.picker.layer, live.picker.follow_best) == ("stem", False)
        box = live.picker._follow.objects[0]                  # "follow best layer"
        box_model, = widget_models(box)
        tick = {"active": True} if "active" in box_model.properties() else {"value": True}
        _browser_sends(live, ref, model=box_model, **tick)    # the kernel moves back to block1 inside it
        moved = model.value
        assert (live.picker.layer, live.picker.follow_best, model.options[moved]) == ("block1", True, "block1")
        live.consume(events[ends[0]:ends[1]])                 # then on to block2, before that move came back
        for frame in (moved, model.value):                    # both moves come back
            _browser_sends(live, ref, value=frame)
            assert (live.picker.layer, live.picker.follow_best) == ("block2", True)
    finally:
        unregister_notebook_view(ref)


def test_a_kernel_change_seen_in_its_callback_and_in_panels_patch_is_recorded_once():
    """The kernel's changes of a property whose echoes are dropped are recorded from the model's change callback
    and from the patches Panel sends; recorded twice, one change's echo left a copy behind, and the user's pick of
    that value while the kernel's next change was on its way read as an echo."""
    from types import SimpleNamespace

    from bokeh.models import Slider

    from app.base._doclock import _ECHOING, _record_sent, drop_echoes

    slider = Slider(start=0, end=9, value=0)
    drop_echoes(slider, "value")
    sent = _ECHOING[slider.id]

    def kernel_sets(value):
        slider.value = value                                  # the change callback sees it
        _record_sent(SimpleNamespace(content={"events": [     # then Panel's patch carries it to the browser
            {"kind": "ModelChanged", "model": {"id": slider.id}, "attr": "value", "new": value}]}))

    kernel_sets(1)
    assert sent.is_echo(1)                                    # its echo
    kernel_sets(2)                                            # the next change, not yet back
    assert not sent.is_echo(1)                                # the user's pick of 1


def test_a_change_made_while_a_message_is_applied_is_the_kernels_whichever_push_sends_it():
    """A notebook document's held changes leave with the next push, on whichever thread makes it: a change made
    while one thread applied a browser's message (no change callback runs for it then) may be sent by another
    thread's push after the message. Counted only when sent during a message, its echo read as the user's pick
    (the JupyterLab test on a loaded machine: follow best layer unticked, the layout at fc2)."""
    from types import SimpleNamespace

    from bokeh.models import Slider

    from app.base._doclock import _ECHOING, _receiving, _record_sent, drop_echoes

    slider = Slider(start=0, end=9, value=0)
    drop_echoes(slider, "value")
    sent = _ECHOING[slider.id]

    def pushed(value):
        _record_sent(SimpleNamespace(content={"events": [
            {"kind": "ModelChanged", "model": {"id": slider.id}, "attr": "value", "new": value}]}))

    with _receiving(None):                  # this thread applies a browser's message
        slider.value = 3                    # the kernel moves the slider meanwhile
    pushed(3)                               # and a later push, outside the message, carries the move
    assert sent.is_echo(3)                  # its echo is the kernel's own
    slider.value = 4                        # a change outside any message: the callback records it
    pushed(4)                               # the push carries it: recorded once
    assert sent.is_echo(4) and not sent.is_echo(4)      # its echo; then the user's own pick of 4
