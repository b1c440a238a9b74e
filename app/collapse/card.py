"""The neural-collapse view of one run: Papyan, Han & Donoho's measures against epoch, and the simplex, seen.

:class:`CollapseView` shows, per chosen layer, NC1, the equinorm and equiangularity of the class means (and of the
classifier rows at the head input), the spread of the means' cosines, self-duality (NC3) and the disagreement with
the nearest class centre (NC4), the splits told apart by dash (training sample solid, held-out seen images dashed,
unseen classes dotted), the terminal-phase epoch marked on every panel. Below, at a chosen layer and epoch, the
cosine matrix of the centred class means beside the simplex ETF's, and for three classes the means in their plane; a
player steps through the epochs recorded. Below, the law of equi-separation (He & Su 2023; :mod:`._law`): log10 NC1
against depth at the player's epoch with the law's fitted line, and the law's r against epoch.

It reads a live run (:meth:`CollapseView.for_live`: the live view's run model, plus the
:class:`lab.events.ClassMeans` events :meth:`observe` keeps) or a stored one (:meth:`show_record`). Each plot is a
``hv.DynamicMap`` on a ``Pipe`` this view owns (``streams``); while folded it draws nothing. Session thread only.
"""
from __future__ import annotations

import html
from functools import partial
from typing import Callable

import holoviews as hv
import panel as pn
import param

from lab import analysis, catalogue
from lab import events as ev
from lab.errors import not_evaluated
from lab.text import join_words

from app.base import KEEP_SIZE, one_update, plots, wrap_row

from ._law import LawSection
from ._rows import (NO_CLASS_MEANS, PANELS, SPLITS, ClassMeansTable, Source, classifier_metrics, collapse_frame,
                    head_layer, measured_or_asked, problems, split_names, terminal_epochs)
from ._text import INTRO, SIMPLEX_INTRO, deviation_html, key_html, notes_html

__all__ = ["CollapseView"]

_PANEL_WIDTH = 360
WAITING = "waiting for the first class means…"
_DEFAULT_LAYERS = 4
_TITLE = "Neural collapse: training sample, held-out and unseen"
_SIMPLEX_SPLITS = catalogue.class_mean_splits()   # the splits the engine records class means of


def _card_title(metrics) -> str:
    """The card's title naming the splits measured (all three, or none yet: the full title)."""
    present = [s for s in SPLITS if len(metrics) and (metrics["split"] == s).any()]
    if not present or len(present) == len(SPLITS):
        return _TITLE
    return "Neural collapse: " + split_names(present)


def _simplex_intro(axis: str) -> str:
    return f"<b>The simplex, seen.</b> <span style='color:#555'>{SIMPLEX_INTRO.format(axis=axis)}</span>"


def _default_layers(layers: list[str], head: str | None) -> list[str]:
    """Up to four layers spread over the depth, the head input (or the last layer) among them."""
    if len(layers) <= _DEFAULT_LAYERS:
        return list(layers)
    picks = {round(i * (len(layers) - 1) / (_DEFAULT_LAYERS - 1)) for i in range(_DEFAULT_LAYERS)}
    chosen = [layers[i] for i in sorted(picks)]
    if head in layers and head not in chosen:
        chosen[-1] = head
    return chosen


class CollapseView(pn.viewable.Viewer):
    """Neural collapse of one run against epoch, and the class means' simplex at a chosen layer and epoch.

    Examples
    --------
    >>> view = CollapseView(collapsed=False)
    >>> view.show_record(lab.RunStore().load(run_id))       # doctest: +SKIP
    >>> view.figures()["nc1"]                                # the HoloViews element of a panel  # doctest: +SKIP
    """

    layers = param.ListSelector(default=[], objects=[], doc="Layers whose class-means measures are drawn.")
    simplex_layer = param.Selector(default=None, objects=[], allow_None=True,
                                   doc="Layer whose class means the simplex plots show.")
    simplex_split = param.Selector(default="train", objects=list(_SIMPLEX_SPLITS),
                                   doc="Images whose class means the simplex plots show.")
    epoch_index = param.Integer(default=0, bounds=(0, None),
                                doc="Position of the simplex plots' and the law's epoch among the epochs recorded "
                                    "(the player's).")
    collapsed = param.Boolean(default=True, doc="Folded: nothing is drawn until the card is opened.")

    def __init__(self, **params):
        super().__init__(**params)
        self._live: Callable | None = None
        self.source = Source()
        self.class_means = ClassMeansTable()
        self._class_means_problem: str | None = None
        self._finished = False
        self.streams: dict[str, hv.streams.Pipe] = {}
        self._structure = None
        self._dirty = True
        self.terminal: dict[int, int | None] = {}
        self.notes: dict[str, str | None] = {}
        self._intro = pn.pane.HTML(f"<span style='color:#555'>{INTRO}</span>", sizing_mode="stretch_width")
        self._key = pn.pane.HTML("", sizing_mode="stretch_width", css_classes=["ls-collapse-key-pane"])
        self._notes = pn.pane.HTML("", sizing_mode="stretch_width", css_classes=["ls-collapse-notes"])
        self._layers_w = pn.widgets.MultiChoice.from_param(self.param.layers, name="Layers drawn", width=420)
        # the panels side by side, wrapping: Bokeh layouts (app.base.wrap_row), not a pn.FlexBox, which blanks plots
        self._panels = wrap_row()
        self._simplex_intro = pn.pane.HTML(_simplex_intro("epoch"), sizing_mode="stretch_width")
        self._layer_w = pn.widgets.Select.from_param(self.param.simplex_layer, name="Layer", width=180)
        # not from_param: its options and value change together (options changed first reach a page as no value,
        # which the parameter refuses)
        self._split_w = pn.widgets.RadioButtonGroup(options=list(_SIMPLEX_SPLITS), value=self.simplex_split,
                                                    width=150, margin=(28, 10, 10, 10))
        self._split_w.param.watch(self._on_split_widget, "value")
        self.param.watch(lambda e: setattr(self._split_w, "value", e.new), "simplex_split")
        self.player = pn.widgets.Player(label="Epoch", start=0, end=0, value=0, interval=800, loop_policy="once",
                                        show_loop_controls=False, width=330, css_classes=["ls-simplex-player"])
        self.player.link(self, value="epoch_index", bidirectional=True)
        self._epoch_label = pn.pane.HTML("", margin=(30, 10))
        self._deviation = pn.pane.HTML("", sizing_mode="stretch_width")
        # each plot keeps its own axes (panes that share dimension names would link them)
        self._cos_pane = pn.pane.HoloViews(None, sizing_mode="fixed", linked_axes=False, styles=KEEP_SIZE)
        self._ideal_pane = pn.pane.HoloViews(None, sizing_mode="fixed", linked_axes=False, styles=KEEP_SIZE)
        self._plane_pane = pn.pane.HoloViews(None, sizing_mode="fixed", linked_axes=False)
        # shown for three classes by its box: a served HoloViews pane passes a change of its own `visible` to the Bokeh
        # pane inside, which then copies the figure's stylesheets into a parameter that only takes strings (TypeError)
        self._plane_box = pn.Column(self._plane_pane, visible=False, margin=0, styles=KEEP_SIZE)
        self._simplex_classes = None
        self.law = LawSection()
        self._choosing = False
        self.param.watch(self._on_layers, "layers")
        self.param.watch(lambda _e: self._on_simplex_choice(follow=True), ["simplex_layer", "simplex_split"])
        self.param.watch(lambda _e: self._send_epoch(), "epoch_index")
        self.param.watch(self._on_fold, "collapsed")
        # a run that ended before measuring anything: one sentence in place of the rest
        self._nothing = pn.pane.HTML("", visible=False, sizing_mode="stretch_width", css_classes=["ls-collapse-nothing"])
        self._measured = pn.Column(
            self._key, self._notes, self._layers_w, self._panels,
            self._simplex_intro,
            pn.Row(self._layer_w, self._split_w, self.player, self._epoch_label),
            self._deviation,
            wrap_row(self._cos_pane, self._ideal_pane, self._plane_box),
            self.law.panel,
            sizing_mode="stretch_width", margin=0,
        )
        body = pn.Column(self._intro, self._nothing, self._measured, sizing_mode="stretch_width")
        self._card = pn.Card(body, title=_TITLE,
                             collapsed=self.collapsed, sizing_mode="stretch_width", css_classes=["ls-collapse"])
        self._card.link(self, collapsed="collapsed", bidirectional=True)

    # ------------------------------------------------------------------ sources
    @classmethod
    def for_live(cls, model: Callable, **params) -> "CollapseView":
        """A view of the live run whose :class:`~app.live._model.RunModel` ``model()`` returns (read at each
        :meth:`refresh`); the live view hands it every event through :meth:`observe`."""
        view = cls(**params)
        view._live = model
        return view

    def observe(self, event) -> bool:
        """Keep what the view needs of one live event (a new run, the class means); True when it changed them."""
        kind = getattr(event, "kind", None)
        if kind == ev.RunStarted.kind:
            self.class_means, self._class_means_problem, self._finished = ClassMeansTable(), None, False
            return True
        if kind == ev.ClassMeans.kind:
            self.class_means.add(event)
            return True
        if kind in ev.TERMINAL_KINDS:
            self._finished = True
            return True
        return False

    def show_record(self, record) -> None:
        """Show a stored run (a :class:`lab.store.RunRecord`)."""
        self._live = None
        meta = record.meta or {}
        config = record.config_dict if isinstance(getattr(record, "config_dict", None), dict) else {}
        summary = dict(meta.get("summary") or {})
        self.source = Source(metrics=record.metrics, layers=list(analysis.layer_order(meta.get("layers"),
                                                                                    record.metrics)),
                             config=config, summary=summary,
                             seeds=sorted({int(s) for s in record.metrics["seed"]}) if len(record.metrics) else [],
                             run_id=record.run_id, aliases=dict(meta.get("layer_aliases") or {}),
                             axis=str(meta.get("axis") or "epoch"), status=getattr(record, "status", None))
        self.class_means, self._class_means_problem = ClassMeansTable.from_record(record)
        self._finished = True
        self._structure = None
        self.refresh()

    def clear(self) -> None:
        """Forget the run shown."""
        self.source, self.class_means, self._class_means_problem = Source(), ClassMeansTable(), None
        self._finished, self._structure, self._simplex_classes = False, None, None
        self.streams = {}
        self.law.clear()
        self._panels.objects = []
        for pane in (self._cos_pane, self._ideal_pane, self._plane_pane):
            pane.object = None
        self._key.object = self._notes.object = self._deviation.object = ""
        self._dirty = True

    def _read_live(self) -> None:
        m = self._live()
        self.source = Source(metrics=m.metrics, layers=list(m.layers), config=dict(m.config), summary=dict(m.summary),
                             seeds=list(m.seeds), run_id=m.run_id, aliases=dict(getattr(m, "aliases", None) or {}),
                             axis=getattr(m, "axis", "epoch"), status=getattr(m, "status", None))

    # ------------------------------------------------------------------ refresh
    def refresh(self) -> None:
        """Redraw from the source (a live run: read its model now); folded, only remember to."""
        if self._live is not None:
            self._read_live()
        if self.collapsed:
            self._dirty = True
            return
        self._dirty = False
        src = self.source
        nothing = self._finished and not len(src.metrics)
        self._nothing.param.update(visible=nothing, object="" if not nothing else (
            "<i>" + html.escape(not_evaluated(src.run_id, "neural-collapse measures", src.status or "finished"))
            + ".</i>"))
        self._measured.visible = not nothing
        self.player.name = src.axis.capitalize()
        self._simplex_intro.object = _simplex_intro(src.axis)
        if nothing:             # no panel, simplex or law: they would be empty axes
            self._panels.objects, self._structure, self.streams = [], None, {}
            return
        self.notes = problems(src, finished=self._finished)
        self._card.title = _card_title(src.metrics)
        self.terminal = terminal_epochs(src)
        head = head_layer(src.metrics, src.layers)
        measured = set(src.metrics["layer"]) if len(src.metrics) else set()
        options = [name for name in src.layers if name in measured] or list(src.layers)
        if list(self.param.layers.objects) != options:
            keep = [name for name in self.layers if name in options]
            self.param.layers.objects = options
            self._choosing = True          # the refresh below draws the new choice
            try:
                self.layers = keep or _default_layers(options, head)
            finally:
                self._choosing = False
        classifier = self.notes.get("classifier") is None
        measured_splits = [s for s in SPLITS if len(src.metrics) and (src.metrics["split"] == s).any()]
        self._key.object = key_html(list(self.layers), classifier=classifier, splits=measured_splits or SPLITS)
        self._notes.object = notes_html(self.notes, self.terminal)
        structure = (tuple(self.layers), head, classifier, len(src.seeds) or 1,
                     frozenset(measured_or_asked(src)))
        if structure != self._structure:
            self._build_panels(structure)
        else:
            for panel in PANELS:
                if f"panel:{panel.key}" in self.streams:
                    self.streams[f"panel:{panel.key}"].send(self._panel_data())
        self.law.update(src, self.terminal, waiting=not self._finished and not len(src.metrics))
        self._refresh_simplex_choices()

    def _panel_data(self) -> dict:
        seeds = self.source.seeds or sorted(self.terminal) or [0]
        return {"frame": collapse_frame(self.source.metrics),
                "terminal": [self.terminal.get(int(seed)) for seed in seeds]}

    def _build_panels(self, structure) -> None:
        layers, head, classifier, _n_seeds, measured = structure
        self._structure = structure
        data = self._panel_data()
        objects = []
        for panel in PANELS:
            metrics = tuple(m for m in panel.metrics if classifier or m not in classifier_metrics())
            # a classifier-only panel of a run without classifier-side measures, or a panel none of whose metrics
            # the run measures: the reason, not empty axes
            reason = (self.notes.get("classifier") if not metrics else
                      None if set(metrics) & measured else
                      f"not measured: {join_words(metrics)} {'is' if len(metrics) == 1 else 'are'} not among this "
                      f"run's metrics")
            if reason:
                objects.append(pn.pane.HTML(f"<div style='width:{_PANEL_WIDTH}px;padding:40px 10px;color:#555'>"
                                            f"<b>{html.escape(panel.title)}</b><br>{html.escape(reason)}</div>",
                                            css_classes=["ls-collapse-reason"], styles=KEEP_SIZE))
                continue
            self.streams[f"panel:{panel.key}"] = pipe = hv.streams.Pipe(data=data)
            render = partial(self._render_panel, panel=panel, metrics=metrics, layers=list(layers), head=head)
            objects.append(pn.pane.HoloViews(hv.DynamicMap(render, streams=[pipe]), sizing_mode="fixed",
                                             margin=4, linked_axes=False, css_classes=["ls-collapse-panel"],
                                             styles=KEEP_SIZE))
        self._panels.objects = objects

    def _render_panel(self, data, panel, metrics, layers, head):
        return plots.collapse_curves(data["frame"], metrics=metrics, layers=layers, head=head,
                                     classifier=classifier_metrics(), splits=SPLITS, terminal=data["terminal"],
                                     title=panel.title, log=panel.log, width=_PANEL_WIDTH, axis=self.source.axis)

    def _on_layers(self, *_events) -> None:
        if not self.collapsed and self._structure is not None and not self._choosing:
            self.refresh()

    def _on_fold(self, event) -> None:
        if not event.new and self._dirty:
            with one_update():      # unfolded in the browser: every panel at once
                self.refresh()

    # ------------------------------------------------------------------ the simplex
    def _refresh_simplex_choices(self) -> None:
        layers = self.class_means.layers(self.source.layers)
        if list(self.param.simplex_layer.objects) != layers:
            keep = self.simplex_layer if self.simplex_layer in layers else None
            # on a page the Select widget takes its first option when its options change: choose after it
            self.param.simplex_layer.objects = layers
            head = head_layer(self.source.metrics, self.source.layers)
            wanted = keep or (head if head in layers else (layers[-1] if layers else None))
            if self.simplex_layer != wanted:
                self.simplex_layer = wanted
                return          # the watcher redraws
        self._on_simplex_choice(follow=True)

    def _on_split_widget(self, event) -> None:
        if event.new in _SIMPLEX_SPLITS:
            self.simplex_split = event.new

    def _fit_splits(self) -> bool:
        """Offer only the splits with class means at the chosen layer (a button for another would show nothing);
        True when the split chosen had to change (its watcher then redraws)."""
        present = self.class_means.splits(self.simplex_layer)
        splits = [s for s in _SIMPLEX_SPLITS if s in present] or list(_SIMPLEX_SPLITS)
        if list(self._split_w.options) == splits:
            return False
        moved = self.simplex_split not in splits
        self._split_w.param.update(options=splits, value=splits[0] if moved else self.simplex_split)
        if moved:
            self.simplex_split = splits[0]
        return moved

    def simplex_epochs(self) -> list[int]:
        """The epochs with class means at the chosen layer and split (what the player steps through)."""
        return self.class_means.epochs(self.simplex_layer, self.simplex_split)

    def player_epochs(self) -> list[int]:
        """The epochs the player steps through: those with class means at the chosen layer and split, else (a run
        without class means) those with NC1, for the law."""
        return self.simplex_epochs() or self.law.epochs()

    def shown_epoch(self) -> int | None:
        """The player's epoch (None before anything is measured)."""
        epochs = self.player_epochs()
        return epochs[min(self.epoch_index, len(epochs) - 1)] if epochs else None

    def _on_simplex_choice(self, follow: bool = False) -> None:
        """Fit the player to the epochs recorded; ``follow``: a player at the last epoch moves to the new last."""
        if self._fit_splits():
            return
        epochs = self.player_epochs()
        at_end = self.epoch_index >= self.player.end
        end = max(len(epochs) - 1, 0)
        self.player.param.update(end=end, disabled=len(epochs) < 2)
        index = end if (follow and at_end) or self.epoch_index > end else self.epoch_index
        if index != self.epoch_index:
            self.epoch_index = index        # the watcher sends
        else:
            self._send_epoch()

    def _send_epoch(self) -> None:
        """Move the simplex plots and the law to the player's epoch."""
        self._send_simplex()
        if not self.collapsed:
            self.law.show(self.shown_epoch())

    def simplex_result(self) -> dict | None:
        """:func:`lab.analysis.simplex` of the class means shown (with classes, seed and epoch), or None."""
        epochs = self.simplex_epochs()
        if not epochs or self.simplex_layer is None:
            return None
        epoch = epochs[min(self.epoch_index, len(epochs) - 1)]
        result = self.class_means.simplex(self.simplex_layer, epoch, self.simplex_split)
        return None if result is None else {**result, "epoch": epoch}

    def _send_simplex(self) -> None:
        if self.collapsed:
            self._dirty = True
            return
        result = self.simplex_result()
        epoch = None if result is None else result["epoch"]
        shown = self.shown_epoch()
        self._epoch_label.object = "" if shown is None else f"{self.source.axis} <b>{shown}</b>"
        self._deviation.object = deviation_html(result, self.simplex_layer, epoch, self.simplex_split,
                                                axis=self.source.axis)
        if not len(self.class_means):
            waiting = not self._finished and not len(self.source.metrics)
            reason = self._class_means_problem or (WAITING if waiting else NO_CLASS_MEANS)
            self._deviation.object = f"<span class='ls-collapse-note' style='color:#555'>{html.escape(reason)}</span>"
        if result is None:
            return
        k = len(result["classes"])
        data = {"cosines": result["cosines"], "coords": result["coords"], "classes": result["classes"],
                "title": f"cosines of the centred means · {self.source.axis} {epoch}"}
        if tuple(result["classes"]) != self._simplex_classes:   # other classes: new plots (their axes are the classes)
            self._simplex_classes = tuple(result["classes"])
            self.streams["simplex"] = pipe = hv.streams.Pipe(data=data)
            self._cos_pane.object = hv.DynamicMap(self._render_cosines, streams=[pipe])
            self._ideal_pane.object = plots.cosine_heatmap(result["ideal"], result["classes"],
                                                           title=f"simplex ETF (K = {k}): −1/(K−1) = {-1 / (k - 1):.3f}")
            self._plane_pane.object = hv.DynamicMap(self._render_plane, streams=[pipe]) if k == 3 else None
            self._plane_box.visible = k == 3
        else:
            self.streams["simplex"].send(data)

    @staticmethod
    def _render_cosines(data):
        return plots.cosine_heatmap(data["cosines"], data["classes"], title=data["title"])

    @staticmethod
    def _render_plane(data):
        return plots.simplex_plane(data["coords"], data["classes"],
                                   title="3 means in their plane (dashed: ETF)")

    # ------------------------------------------------------------------ for tests and the walk of every plot
    def figures(self) -> dict[str, hv.Element]:
        """The HoloViews element each plot shows now, by key ("nc1", …, "cosines", "ideal", "plane")."""
        out = {}
        for obj in self._panels.objects:
            if isinstance(obj, pn.pane.HoloViews) and isinstance(obj.object, hv.DynamicMap):
                dmap = obj.object
                out[dmap.callback.callable.keywords["panel"].key] = dmap[()]
        for key, pane in (("cosines", self._cos_pane), ("ideal", self._ideal_pane), ("plane", self._plane_pane)):
            if pane.object is not None:
                out[key] = pane.object[()] if isinstance(pane.object, hv.DynamicMap) else pane.object
        out.update(self.law.figures())
        return out

    def reasons(self) -> list[str]:
        """The one-line reasons shown in place of panels or beside them."""
        return [text for text in self.notes.values() if text]

    def __panel__(self):
        return self._card

