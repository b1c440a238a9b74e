"""Compose a study in the page: start from a shipped spec or a blank one, add axes and seeds, see its cells,
its time and its YAML, then save it as a spec or launch it.

The composer holds the study's parts in ``param`` parameters (``axes``, ``seeds``, ``order``...);
:meth:`StudyComposer.to_study` turns them into a :class:`lab.Study`, which validates every cell. The line
under the grid is :func:`lab.study.estimate_line` of :meth:`lab.Study.estimate`; the preview is
:meth:`lab.Study.to_yaml`. Backbone names are checked as they are typed with :func:`lab.backbones.check_name`
(the check a study runs before any cluster starts), whose message names the closest valid names.
"""
from __future__ import annotations

import html
from functools import partial
from pathlib import Path
from typing import Callable

import panel as pn
import param

from lab.config import RunConfig
from lab.study import ORDERS, Study, estimate_line

from ._compose_values import AXIS_FIELDS, BLANK, blank_base, parse_seeds, parse_values, seeds_text, value_text
from ._specs import shipped_folder, shipped_specs, spec_file

__all__ = ["StudyComposer"]

_esc = partial(html.escape, quote=False)       # Markdown: <, > and & only
_PICK = "(pick one to add)"
_EXAMPLES = ("mlp:depth=4,width=128", "mlp:depth=8,width=128")     # from-scratch MLPs: any depth and width


class StudyComposer(pn.viewable.Viewer):
    """One per session: a study built axis by axis; :meth:`to_study` returns it.

    Parameters
    ----------
    store : RunStore, path or None
        The run store the estimate counts stored cells in (None: the default store).
    base_config : callable returning a RunConfig, optional
        The settings a blank study starts from (the app passes its sidebar form's ``to_config``); without
        it, the sidebar's tiny demo preset.
    on_launch : callable taking a Study, optional
        Called by **Launch** with :meth:`to_study` (the Studies tab runs it as it runs a spec).
    on_grow : callable taking a Study and returning a message, optional
        Called by **Add to running study** (Launch while :meth:`follow` shows a running study) with
        :meth:`to_study`; what it returns is shown (the Studies tab's ``grow``).
    on_save : callable taking the spec's path, optional
        Called after **Save** wrote a spec (the Studies tab lists it in its spec picker).
    """

    source = param.Selector(default=BLANK, objects=[BLANK], doc="What the study starts from: a blank study or a "
                                                                 "shipped spec (its name, base, axes and seeds).")
    study_name = param.String(default="my-study", doc="The study's name: its runs carry it in the store.")
    axes = param.Dict(default={}, doc="The study's axes but the seeds: {RunConfig field: [values]}.")
    seeds = param.String(default="0, 1", doc="The replicate axis: seeds separated by commas (one per cell: "
                                             "0, 1, 2), or lists of seeds ([0, 1], [2, 3]); empty for the base's.")
    order = param.Selector(default="grid", objects=list(ORDERS), doc="The order the cells run in (lab.study.order).")
    message = param.String(default="", doc="What the last Save or Launch did, or why it did not.")
    growing = param.Boolean(default=False, doc="A study runs and is shown (follow): Launch adds the study shown "
                                               "to it instead of starting another.")

    def __init__(self, store=None, *, base_config: Callable[[], RunConfig] | None = None,
                 on_launch: Callable[[Study], None] | None = None,
                 on_grow: Callable[[Study], str] | None = None,
                 on_save: Callable[[Path], None] | None = None, **params):
        super().__init__(**params)
        self.store = store
        self.base_config = base_config
        self.on_launch, self.on_grow, self.on_save = on_launch, on_grow, on_save
        self._specs = shipped_specs()
        self.param.source.objects = [BLANK, *self._specs]
        self._base: dict = {}
        self._extra: dict = {}                 # description, retries and order_seed of the spec started from
        self._loaded_seeds: tuple[str, list, int] | None = None   # text, values, position
        self._checked: dict[str, str | None] = {}      # backbone -> the name check's message (None: loads)
        self._saved: Path | None = None        # the file this composer last wrote: Save may write it again
        self.axis_select = pn.widgets.Select(label="Axis", options=list(AXIS_FIELDS), width=170,
                                             css_classes=["ls-compose-axis"])
        self.values_input = pn.widgets.TextInput(label="Values (comma-separated)", placeholder="e.g. 0.0, 0.2, 0.5",
                                                 width=320, css_classes=["ls-compose-values"])
        self.add_button = pn.widgets.Button(label="Add axis", width=100, css_classes=["ls-compose-add"])
        self.add_button.on_click(lambda _e: self.add_axis())
        self.hint = pn.pane.Markdown("", sizing_mode="stretch_width", css_classes=["ls-compose-hint"])
        # the backbones this machine loads offline (the zoo, the ImageNet backbones, cached timm and Hugging Face
        # weights: the sidebar's list), offered while the axis is the backbone; a pick is added to the values typed
        self.offered = pn.widgets.Select(name="Available here", options=[_PICK], width=260, visible=False,
                                         css_classes=["ls-compose-offered"])
        self.offered.param.watch(lambda e: self._offer_picked(e.new), "value")
        self.axis_select.param.watch(lambda e: self._show_offered(e.new), "value")
        self._show_offered(self.axis_select.value)
        self.values_input.param.watch(lambda _e: self._check_typed(), "value")
        self.axis_select.param.watch(lambda _e: self._check_typed(), "value")
        self.rows = pn.Column(sizing_mode="stretch_width", css_classes=["ls-compose-rows"])
        self.estimate = pn.pane.Markdown("", sizing_mode="stretch_width", css_classes=["ls-compose-estimate"])
        # a plain text area: Panel's CodeEditor needs its Ace script on the page from the start, and a served page
        # that opens the composer later has none ("ace is not defined", the composer never shows)
        self.preview = pn.widgets.TextAreaInput(value="", disabled=True, height=260, sizing_mode="stretch_width",
                                                css_classes=["ls-compose-yaml"])
        self.save_button = pn.widgets.Button(label="Save", width=90, css_classes=["ls-compose-save"])
        self.launch_button = pn.widgets.Button(label="Launch", color="primary", width=170,
                                               css_classes=["ls-compose-launch"])
        self.save_button.on_click(lambda _e: self.save())
        self.launch_button.on_click(lambda _e: self.launch())
        self.note = pn.pane.Markdown("", sizing_mode="stretch_width", css_classes=["ls-compose-message"])
        self.param.watch(lambda _e: self.start_from(self.source), "source")
        self._quiet = False                    # while start_from sets several parameters: one refresh after
        self.param.watch(lambda *_e: self._quiet or self._refresh(), ["study_name", "axes", "seeds", "order"])
        self.param.watch(lambda e: setattr(self.note, "object", e.new), "message")
        self.param.watch(lambda e: setattr(self.launch_button, "name", "Add to running study" if e.new else "Launch"),
                         "growing")
        self.start_from(self.source)

    # -- composing ---------------------------------------------------------------------------------
    def start_from(self, source: str) -> None:
        """Start again from a blank study or the shipped spec named ``source`` (a key of shipped_specs)."""
        self._extra, self._loaded_seeds, self._saved = {}, None, None
        if source == BLANK:
            config = None
            if self.base_config is not None:
                try:
                    config = self.base_config()
                except ValueError as exc:
                    self.message = (f"The sidebar's settings are not valid ({exc}); the blank study starts from the "
                                    "tiny demo.")
            self._base = blank_base(config)
            self._update(axes={}, seeds="0, 1", order="grid")
            return
        self._load(Study.from_file(self._specs[source]))

    def follow(self, study: Study) -> None:
        """Show the running ``study`` as the starting point; Launch becomes **Add to running study**."""
        self._load(study)
        self.growing = True

    def unfollow(self) -> None:
        """The study shown by :meth:`follow` has ended: Launch starts a study again."""
        self.growing = False

    def _load(self, study: Study) -> None:
        self._extra, self._loaded_seeds = {}, None
        self._base = dict(study.base)
        self._extra = {"description": study.description, "retries": study.retries, "order_seed": study.order_seed}
        axes = {k: list(v) for k, v in study.axes.items() if k != "seeds"}
        seeds = seeds_text(study.axes["seeds"]) if "seeds" in study.axes else ""
        if "seeds" in study.axes:
            self._loaded_seeds = (seeds, list(study.axes["seeds"]), list(study.axes).index("seeds"))
        self._update(study_name=study.name, axes=axes, seeds=seeds, order=study.order)

    def _update(self, **values) -> None:
        self._quiet = True
        try:
            self.param.update(**values)
        finally:
            self._quiet = False
        self._refresh()

    def add_axis(self, axis: str | None = None, text: str | None = None) -> None:
        """Add ``axis`` (default: the axis picker's) with the values of ``text`` (default: the values typed);
        an axis the study has already gets these values instead of its own."""
        axis = axis or self.axis_select.value
        text = self.values_input.value if text is None else text
        try:
            values = parse_values(text, axis=axis)
        except ValueError as exc:
            self.hint.object = _esc(str(exc))
            return
        if not values:
            self.hint.object = f"Type the values of {axis} first, separated by commas."
            return
        self.axes = {**self.axes, axis: values}
        self.values_input.value = ""
        self.hint.object = self._problems_text(axis, values)

    def _show_offered(self, axis: str) -> None:
        if axis == "backbone" and len(self.offered.options) == 1:
            from app.choose import offline_backbones

            self.offered.options = [_PICK, *dict.fromkeys([m.name for m in offline_backbones()] + list(_EXAMPLES))]
        self.offered.visible = axis == "backbone"

    def _offer_picked(self, name: str) -> None:
        if name == _PICK:
            return
        typed = self.values_input.value.strip().rstrip(",")
        self.values_input.value = f"{typed}, {name}" if typed else name
        self.offered.value = _PICK

    def remove_axis(self, axis: str) -> None:
        self.axes = {k: v for k, v in self.axes.items() if k != axis}

    def to_study(self) -> Study:
        """The study shown; ValueError (the message the page shows) for an invalid one, a backbone that does
        not load here (with its closest names) included."""
        for value in self.axes.get("backbone", []):
            problem = self._backbone_problem(value)
            if problem:
                raise ValueError(f"axis 'backbone': {problem}")
        axes = list(self.axes.items())
        seeds = self._seed_values()
        if seeds:
            # where the spec started from had them (its cells keep their order), else last
            at = self._loaded_seeds[2] if self._loaded_seeds is not None else len(axes)
            axes.insert(at, ("seeds", seeds))
        axes = dict(axes)
        base = {k: v for k, v in self._base.items() if k not in axes}
        return Study(self.study_name, base, axes, order=self.order, **self._extra)

    def _seed_values(self) -> list:
        if self._loaded_seeds is not None and self._loaded_seeds[0] == self.seeds:
            return list(self._loaded_seeds[1])          # as the spec wrote them: its stored cells keep their keys
        return parse_seeds(self.seeds)

    def _backbone_problem(self, value) -> str | None:
        if not isinstance(value, str):
            return None                                  # the study's validation names it
        if value not in self._checked:
            from lab.backbones import check_name

            try:
                check_name(value)
                self._checked[value] = None
            except ValueError as exc:
                self._checked[value] = str(exc)
        return self._checked[value]

    def _problems_text(self, axis: str, values: list) -> str:
        if axis != "backbone":
            return ""
        problems = [p for p in map(self._backbone_problem, values) if p]
        return "\n\n".join(f"**Backbone not found:** {_esc(p)}" for p in problems)

    def _check_typed(self) -> None:
        if self.axis_select.value != "backbone":
            self.hint.object = ""
            return
        try:
            values = parse_values(self.values_input.value, axis="backbone")
        except ValueError as exc:
            self.hint.object = _esc(str(exc))
            return
        self.hint.object = self._problems_text("backbone", values)

    # -- showing -----------------------------------------------------------------------------------
    def _refresh(self) -> None:
        self.rows.objects = [self._row(axis, values) for axis, values in self.axes.items()]
        try:
            study = self.to_study()
        except ValueError as exc:
            self.estimate.object = f"**Not a valid study:** {_esc(str(exc))}"
            self.preview.value = ""
            return
        self.preview.value = study.to_yaml()
        try:
            self.estimate.object = _esc(estimate_line(study.estimate(store=self.store)))
        except (ValueError, OSError) as exc:
            self.estimate.object = f"{len(study.cells())} cells · could not read the run store: {_esc(str(exc))}"

    def _row(self, axis: str, values: list):
        remove = pn.widgets.Button(label="Remove", width=80, css_classes=["ls-compose-remove"])
        remove.on_click(lambda _e, a=axis: self.remove_axis(a))
        text = ", ".join(value_text(v) for v in values)
        return pn.Row(pn.pane.Markdown(f"**{axis}** [{len(values)}]: {_esc(text)}", sizing_mode="stretch_width"),
                      remove, sizing_mode="stretch_width")

    # -- saving and launching ----------------------------------------------------------------------
    def save(self) -> Path | None:
        """Write the study to ``<name>.yaml`` in ``$LAB_STUDIES_DIR`` (else ``studies/``); a shipped spec, or
        another spec of that name than the one started from or last saved here, is not overwritten (the message
        says so). Saving a study grown while it runs keeps its spec in step: ``python -m lab study run`` on it
        then resumes every cell, the added ones included."""
        try:
            study = self.to_study()
            path = spec_file(study.name)
        except ValueError as exc:
            self.message = f"**Not saved:** {_esc(str(exc))}"
            return None
        started = self._specs.get(self.source)
        shipped = path.resolve().parent == shipped_folder().resolve()
        own = {p.resolve() for p in (started, self._saved) if p is not None}
        if path.exists() and (shipped or path.resolve() not in own):
            kind = "a shipped spec" if shipped else "another spec"
            self.message = (f"**Not saved:** {_esc(str(path))} is {kind}; it is not overwritten. "
                            f"Give the study another name to save it.")
            return None
        path.parent.mkdir(parents=True, exist_ok=True)
        replaced = path.exists()
        study.save(path)
        self._saved = path
        self._specs = shipped_specs()
        self.param.source.objects = [BLANK, *self._specs]
        replacing = ", replacing the version saved before" if replaced else ""
        self.message = (f"Saved {_esc(str(path))} ({len(study.cells())} cells{replacing}). "
                        f"Run it from a shell with `python -m lab study run {_esc(str(path))}`: stored cells are "
                        "not run again.")
        if self.on_save is not None:
            self.on_save(path)
        return path

    def launch(self) -> None:
        """Call ``on_launch`` with :meth:`to_study` (``on_grow`` while :attr:`growing`); the message says what it
        did, or why not (an invalid study, or one the running study cannot grow into)."""
        try:
            study = self.to_study()
        except ValueError as exc:
            self.message = f"**Not {'added' if self.growing else 'launched'}:** {_esc(str(exc))}"
            return
        if self.growing and self.on_grow is not None:
            self.message = self.on_grow(study)
            return
        if self.on_launch is None:
            self.message = "Nothing runs studies here: save the spec and run it with `python -m lab study run`."
            return
        self.on_launch(study)
        self.message = f"Launched **{_esc(study.name)}** ({len(study.cells())} runs)."

    def __panel__(self):
        start = pn.Row(pn.widgets.Select.from_param(self.param.source, name="Start from", width=240),
                       pn.widgets.TextInput.from_param(self.param.study_name, name="Name", width=220,
                                                       css_classes=["ls-compose-name"]),
                       pn.widgets.Select.from_param(self.param.order, name="Order", width=120),
                       sizing_mode="stretch_width")
        # the offered backbones after the Add button: showing or hiding them moves nothing a user aims at
        add = pn.Row(self.axis_select, self.values_input, self.add_button, self.offered, sizing_mode="stretch_width")
        seeds = pn.widgets.TextInput.from_param(self.param.seeds, name="Seeds", width=240,
                                                css_classes=["ls-compose-seeds"])
        return pn.Column(start, add, self.hint, self.rows, seeds, self.estimate, self.preview,
                         pn.Row(self.save_button, self.launch_button), self.note, sizing_mode="stretch_width",
                         css_classes=["ls-study-composer"])
