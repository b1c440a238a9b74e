"""Which 2-D layout the live view shows: a layer and an epoch, and whether the run or the user chose them.

Until the user picks a layer, :class:`LayoutPicker` follows the run's best layer: the layer of g in the
verdict line (``RunModel.verdict()["layer"]``, from :func:`lab.analysis.latest_generalization`), so the
layout and the verdict always name the same layer. Before the first complete epoch there is no best layer
yet; it shows the deepest layer with a layout so far. A layer picked on the player (or set from Python)
stops the following; ticking "follow best layer" resumes it. The epoch follows the newest layout likewise.

In a notebook, Panel's view sends the kernel's own moves of the player and the epoch picker back; they are
dropped before they arrive (:func:`app.base._doclock.drop_echoes`), or a move made twice in quick succession
came back as the older layer after the newer and read as a pick.

The player offers only the layers with a layout (``RunModel.projection_layers()``: a run projects the layers of
its ``projection_layers``, every measured layer by default); picking another kept the previous layout on show.
Its options grow as the first epoch's layouts arrive.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable

import panel as pn
import param

from ..base._doclock import drop_echoes
from ..base._upstream_panel import widget_models
from ._model import RunModel

__all__ = ["LayoutPicker"]


def _player_title(layer) -> str:
    """The player's header. Panel's player view redraws its own value label only for frames set in the
    browser, so a value set from Python left the old layer's name there; the header is ours instead."""
    return "Layer" if layer in (None, "—") else f"Layer: {layer}"


class LayoutPicker(pn.viewable.Viewer):
    """The layer player, the epoch picker and the two "follow" boxes of the live view's layout.

    Parameters
    ----------
    model : callable
        ``model()`` is the :class:`~app.live._model.RunModel` of the run shown (it changes with each run).
    best : callable
        ``best()`` is the best layer of the verdict line now, or None before one is measured.
    on_pick : callable
        Called with no argument after the user (or Python) changed what is shown; :meth:`follow`'s
        changes are returned to its caller instead.
    """

    layer = param.Selector(default=None, objects=[], allow_None=True, check_on_set=True,
                           doc="Layer whose layout is shown, one of the layers with a layout. Setting it is a pick "
                               "by hand: follow_best turns off.")
    epoch = param.Integer(default=None, allow_None=True,
                          doc="Epoch of the layout shown. Setting it turns follow_latest off unless it is the newest.")
    follow_best = param.Boolean(default=True, doc="Show the best layer of the verdict line as epochs arrive; off "
                                                  "once a layer is picked by hand, on again for each new run.")
    follow_latest = param.Boolean(default=True, doc="Show the newest epoch's layout as it arrives.")

    def __init__(self, model: Callable[[], RunModel], best: Callable[[], str | None], on_pick: Callable[[], None],
                 **params):
        super().__init__(**params)
        self._model, self._best, self._on_pick = model, best, on_pick
        self._auto = False          # True while the picker itself sets its params or widgets
        self.picked: str | None = None      # what made the last pick by hand (the probe reports it)
        self._player_pick: str | None = None    # set while a frame of the player picks the layer
        self.player = self._make_player(["—"])
        self._player_slot = pn.Row(self.player, margin=0)
        self.epoch_select = pn.widgets.Select(label="Epoch", options=[], width=90)
        self.epoch_select.param.watch(self._on_epoch_widget, "value")
        follow = dict(margin=(4, 10), css_classes=["ls-follow"])
        self._follow_latest_w = pn.widgets.Checkbox.from_param(self.param.follow_latest, label="follow newest epoch",
                                                               **follow)
        self._follow = pn.Column(
            pn.widgets.Checkbox.from_param(self.param.follow_best, label="follow best layer", **follow),
            self._follow_latest_w, margin=(20, 0, 0, 0))
        self.param.watch(self._on_layer, "layer")
        self.param.watch(self._on_epoch, "epoch")
        self.param.watch(self._on_follow, ["follow_best", "follow_latest"])
        self._layout = pn.Row(self._player_slot, self.epoch_select, self._follow, margin=0)

    @contextmanager
    def _picking(self):
        self._auto = True
        try:
            yield
        finally:
            self._auto = False

    def _make_player(self, layers: list[str]) -> pn.widgets.DiscretePlayer:
        """A layer player for one run (its options grow with the layers laid out, see :meth:`offer`)."""
        player = pn.widgets.DiscretePlayer(label=_player_title(layers[-1]), options=list(layers), value=layers[-1],
                                           show_value=False, interval=1200, loop_policy="loop",
                                           show_loop_controls=False, width=300, margin=(5, 10),
                                           css_classes=["ls-layer-player"])
        player.param.watch(self._on_player, "value")
        return player

    # ------------------------------------------------------------------ driven by the live view
    def start(self) -> None:
        """A new run: no layer laid out nor shown yet, and both boxes ticked (a pick named the last run's layers)."""
        with self._picking():
            self.param.layer.objects = []
            self.param.update(layer=None, epoch=None, follow_best=True, follow_latest=True)
        self.picked = None
        axis = getattr(self._model(), "axis", "epoch")         # "step" for a loop counted in optimizer steps
        self.epoch_select.label = axis.capitalize()
        self._follow_latest_w.label = f"follow newest {axis}"

    def build_player(self) -> None:
        """The player of the run's layers with a layout (the live view builds it in a redraw turn, like the plots)."""
        self.param.layer.objects = self._model().projection_layers()
        self.player = self._make_player(list(self.param.layer.objects) or ["—"])
        self._player_slot.objects = [self.player]
        self.sync_widgets()

    def offer(self) -> list[str]:
        """Offer the layers with a layout now (the player's options and :attr:`layer`'s choices); returns them."""
        available = self._model().projection_layers()
        self._drop_echoes()
        if available != list(self.param.layer.objects):
            with self._picking():
                self.param.layer.objects = available
                # options and value in one update: the browser gets the new list and the index in it together
                value = self.layer if self.layer in available else (available[-1] if available else "—")
                self.player.param.update(options=available or ["—"], value=value)
        return available

    def follow(self) -> bool:
        """Move to the best layer and the newest epoch where following; True when the layer or epoch changed."""
        before = (self.layer, self.epoch)
        available = self.offer()
        with self._picking():
            if self.follow_best or self.layer is None:
                best = self._best()
                self.layer = best if best in available else (available[-1] if available else None)
            self.epoch = self._epoch_for(self.layer)
        self.sync_widgets()
        return (self.layer, self.epoch) != before

    def sync_widgets(self) -> None:
        """Show :attr:`layer` and :attr:`epoch` on the player and the epoch picker."""
        self._drop_echoes()
        with self._picking():
            if self.layer in self.player.options:
                self.player.value = self.layer
            epochs = self._model().projection_epochs(self.layer) if self.layer else []
            self.epoch_select.param.update(options=epochs, value=self.epoch if self.epoch in epochs
                                           else (epochs[-1] if epochs else None))

    def _drop_echoes(self) -> None:
        """Before the picker moves the player or the epoch: its moves coming back from a notebook's browser are
        no pick."""
        for widget in (self.player, self.epoch_select):
            for model in widget_models(widget):
                drop_echoes(model, "value")

    def _epoch_for(self, layer: str | None) -> int | None:
        epochs = self._model().projection_epochs(layer) if layer else []
        if not epochs:
            return None
        return epochs[-1] if self.follow_latest or self.epoch not in epochs else self.epoch

    # ------------------------------------------------------------------ the user's picks
    def _on_player(self, event) -> None:
        event.obj.label = _player_title(event.new)      # also for frames the browser played
        if not self._auto and event.new in self.param.layer.objects:
            self._player_pick = f"player frame {event.new!r} (options {list(event.obj.options)})"
            try:
                self.layer = event.new
            finally:
                self._player_pick = None

    def _on_layer(self, event) -> None:
        if self._auto:
            return
        self.picked = self._player_pick or f"layer {event.new!r} set from Python"
        with self._picking():
            self.follow_best = False
            self.epoch = self._epoch_for(event.new)
        self.sync_widgets()
        self._on_pick()

    def _on_epoch_widget(self, event) -> None:
        if not self._auto and event.new is not None:
            self.epoch = int(event.new)

    def _on_epoch(self, event) -> None:
        if self._auto:
            return
        latest = self._model().projection_epochs(self.layer) if self.layer else []
        with self._picking():
            self.follow_latest = bool(latest) and event.new == latest[-1]
        self.sync_widgets()
        self._on_pick()

    def _on_follow(self, event) -> None:
        if not self._auto and event.new and self.follow():      # ticked: catch up at once
            self._on_pick()

    def __panel__(self):
        return self._layout
