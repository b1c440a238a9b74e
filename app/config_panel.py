"""Choose: the run settings, as a param-driven component that builds a :class:`lab.RunConfig`.

:class:`ConfigPanel` holds every choice in ``param`` parameters and turns them into a
validated :class:`lab.RunConfig` with :meth:`ConfigPanel.to_config` (ValueError with a
readable message on bad input). The parameters are built from the dataclass: one per
RunConfig field, with its type, default, choices (:data:`lab.config.FIELD_CHOICES`) and the
help text of its docstring (:meth:`lab.RunConfig.field_docs`). The few values a fresh form
deliberately starts from instead of RunConfig's defaults are listed, each with its reason,
in :data:`FORM_DEFAULTS`. Presets fill the parameters.
"""
from __future__ import annotations

import dataclasses
import html
import logging
import types
import typing
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import panel as pn
import param

from lab.catalogue import METRICS
from lab.config import FIELD_CHOICES, RunConfig

from .presets import DEFAULT_PRESET, PRESETS, SEED_ARCHITECTURES
from .resources import shared

__all__ = ["ConfigPanel", "DATASETS", "FORM_DEFAULTS", "FormDefault"]

_log = logging.getLogger(__name__)

DATASETS = MappingProxyType({
    "Glyphs · 20 calligraphy styles (embedded)": "glyphs",
    "Glyphs · characters (embedded)": "glyphs:character",
    "Digits · scikit-learn 8×8 (embedded)": "digits",
    "Image folder on disk…": "folder",
    "CIFAR-10 on disk…": "cifar10",
    "CIFAR-100 on disk…": "cifar100",
})
"""Dataset choices (label -> kind); the last three need a path."""

_PATH_KINDS = ("folder", "cifar10", "cifar100")
_SPLIT_MODES = ("paper default", "random", "by hand")


@dataclass(frozen=True)
class FormDefault:
    """A field whose fresh-form value is not RunConfig's default: the value (or how the form
    computes it) and why."""

    value: Any
    reason: str


_PAPER_SPLIT = ("the form opens on the papers' glyph split (Dyballa et al.: 15 seen / 5 unseen styles, "
                "split mode 'paper default') rather than a random one: the app's first run is the papers' experiment")
_SAMPLE = ("a live run should fill its plots in seconds on a CPU; RunConfig's larger default suits scripted runs, "
           "where the estimates matter more than the wait")
_PRETRAINED = ("the form opens on the default preset's recipe: the zoo's glyph-pretrained ResNet-18 fine-tuned for "
               "6 epochs, as the papers fine-tune pretrained backbones; RunConfig's resnet18 is random init")
FORM_DEFAULTS = MappingProxyType({
    "name": FormDefault("RunConfig.describe()", "an unnamed run is labelled with its one-line description, so "
                                                "the runs table and comparison legends show something readable"),
    "seen": FormDefault("lab.data.Split.paper_default", _PAPER_SPLIT),
    "unseen": FormDefault("lab.data.Split.paper_default", _PAPER_SPLIT),
    "unseen_per_class": FormDefault(60, _SAMPLE),
    "seen_per_class": FormDefault(30, _SAMPLE),
    **{field: FormDefault(PRESETS[DEFAULT_PRESET]["config"][field], _PRETRAINED) for field in ("backbone", "epochs", "lr")},
    "block": FormDefault(-1, "Layer FT and SCL FT need a block, so the form holds the last one ready; "
                             "the other strategies send None"),
})
"""The one table of deliberate differences between a fresh form and ``RunConfig()``."""

# Fields the form shows in its own way (an app parameter of another name or type).
_OWN_WAY = ("name", "seen", "unseen")
_TRAINING_FIELDS = ("epochs", "lr", "label_noise", "contribution", "weight_decay", "optimizer", "lr_schedule",
                    "augment")
"""Fields that only matter when something is trained: strategy "none" sends their RunConfig defaults."""
ADVANCED_FIELDS = ("heldout_fraction", "weight_decay", "optimizer", "lr_schedule", "augment", "protocol",
                   "projection_layers", "save_weights", "eval_batch_size")
"""Fields shown in the collapsed "Advanced" section (widgets made from the parameter's type)."""


def _split_hint(hint: Any) -> tuple[Any, bool]:
    """(the type inside ``X | None``, whether None is allowed)."""
    args = typing.get_args(hint)
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        inner = [a for a in args if a is not type(None)]
        return (inner[0] if len(inner) == 1 else typing.Union[tuple(inner)]), type(None) in args
    return hint, False


def _field_parameter(name: str, hint: Any, default: Any, doc: str) -> param.Parameter:
    """The param.Parameter that edits one RunConfig field (text and multi-choice: empty = None)."""
    inner, optional = _split_hint(hint)
    sequence = typing.get_origin(inner) is tuple
    if name in FIELD_CHOICES:
        choices = list(FIELD_CHOICES[name])
        if sequence:
            return param.ListSelector(default=list(default), objects=choices, doc=doc)
        return param.Selector(default=default, objects=choices, doc=doc)
    if name == "dataset":
        return param.Selector(default=default, objects=list(DATASETS.values()), doc=doc)
    if name == "device":
        return param.Selector(default=default, objects=["auto", "cpu"], doc=doc)
    if inner is bool:
        return param.Boolean(default=default, doc=doc)
    if inner is int:
        return param.Integer(default=default, allow_None=optional, doc=doc)
    if inner is float:
        return param.Number(default=default, allow_None=optional, doc=doc)
    if sequence and typing.get_args(inner)[0] is int:
        return param.String(default=", ".join(map(str, default)), doc=doc)
    if sequence:
        return param.ListSelector(default=list(default or []), objects=[], doc=doc)
    return param.String(default="" if default is None else str(default), doc=doc)


_HINTS = typing.get_type_hints(RunConfig)


def _field_parameters() -> dict[str, param.Parameter]:
    hints, docs = _HINTS, RunConfig.field_docs()
    out = {}
    for f in dataclasses.fields(RunConfig):
        if f.name in _OWN_WAY:
            continue
        default = FORM_DEFAULTS[f.name].value if f.name in FORM_DEFAULTS else f.default
        out[f.name] = _field_parameter(f.name, hints[f.name], default, docs.get(f.name, "").replace("``", ""))
    return out


_RunConfigFields = param.parameterized_class("_RunConfigFields", _field_parameters())


def _to_field(name: str, value: Any) -> Any:
    """A parameter's value as the RunConfig field ``name`` takes it."""
    inner, optional = _split_hint(_HINTS[name])
    if isinstance(value, str) and typing.get_origin(inner) is tuple:          # seeds: "0, 1, 2"
        return _parse_seeds(value)
    if isinstance(value, list):
        return value or (None if optional else value)
    if isinstance(value, str) and optional:
        value = value.strip()
        if not value:
            return None
        if name == "block":
            try:
                return int(value)
            except ValueError:
                return value
    return value


def _to_parameter(name: str, value: Any) -> Any:
    """A RunConfig field value (from a preset) as the form's parameter holds it."""
    current = ConfigPanel.param[name]
    if isinstance(current, param.ListSelector):
        return list(value or [])
    if isinstance(current, param.String):
        if isinstance(value, (list, tuple)):
            return ", ".join(map(str, value))
        return "" if value is None else str(value)
    return value


def _device_choices() -> list[str]:
    choices = ["auto", "cpu"]
    try:
        import torch

        if torch.cuda.is_available():
            choices.append("cuda")
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            choices.append("mps")
    except Exception:  # torch broken: cpu still listed, the run reports the problem
        pass
    return choices


def _backbone_choices() -> list[str]:
    try:
        import timm

        names = timm.list_models()
    except Exception:
        names = []
    try:  # zoo models first, then the Hugging Face families; any typed 'hf:ORG/NAME' or 'zoo:NAME' works too
        from lab.backbones import HF_FAMILIES, zoo_names

        first = list(zoo_names()) + [f"hf:{family}" for family in HF_FAMILIES]
    except Exception:
        first = []
    return first + list(SEED_ARCHITECTURES) + [n for n in names if n not in SEED_ARCHITECTURES and n not in first]


def _parse_seeds(text: str) -> list[int]:
    parts = [p for p in str(text).replace(";", ",").replace(" ", ",").split(",") if p]
    try:
        seeds = [int(p) for p in parts]
    except ValueError:
        raise ValueError(f"seeds must be integers separated by commas, e.g. '0' or '0, 1, 2'. Got {text!r} instead.")
    if not seeds:
        raise ValueError("seeds must list at least one seed, e.g. '0' or '0, 1, 2'.")
    return seeds


class ConfigPanel(pn.viewable.Viewer, _RunConfigFields):
    """Every choice of a run; :meth:`to_config` returns the :class:`lab.RunConfig`.

    One parameter per RunConfig field (built from the dataclass), plus the form's own:
    the preset, the run name, the dataset path and how classes are split.

    Examples
    --------
    >>> panel = ConfigPanel()
    >>> panel.apply_preset("Tiny demo (fast)")
    >>> panel.to_config().backbone
    'mlp:depth=3,width=64'
    """

    preset = param.Selector(default=DEFAULT_PRESET, objects=list(PRESETS), doc="The preset last applied.")
    run_name = param.String(default="", doc=RunConfig.field_docs()["name"])
    data_path = param.String(default="", doc="Folder (image folder) or CIFAR directory for on-disk datasets.")
    split_mode = param.Selector(default="paper default", objects=list(_SPLIT_MODES),
                                doc="How classes are split into seen and unseen.")
    unseen_classes = param.ListSelector(default=[], objects=[], doc="Unseen classes picked by hand.")
    view = param.Dict(default={}, doc="View choices of the preset last applied (e.g. heatmap metric).")
    error = param.String(default="", doc="The last problem with the choices (shown in the panel).")

    def __init__(self, store=None, **params):
        super().__init__(**params)
        self._store = store
        self._dataset = None        # the loaded dataset (class list, thumbnails); per session
        self._loaded_spec = None
        self.param.device.objects = _device_choices()
        self._build_widgets()
        self.param.watch(self._on_dataset, ["dataset", "data_path"])
        self.param.watch(self._refresh_split_preview, ["split_mode", "n_unseen", "split_seed", "unseen_classes"])
        self.param.watch(self._on_strategy, ["strategy"])
        self.param.watch(self._on_error, ["error"])
        self.apply_preset(self.preset)
        self._on_strategy()
        self._refresh_path_visibility()
        self._refresh_split_preview()

    # ------------------------------------------------------------------ public
    @classmethod
    def field_names(cls) -> list[str]:
        """The RunConfig fields that have a parameter of the same name."""
        return [f.name for f in dataclasses.fields(RunConfig) if f.name not in _OWN_WAY]

    def apply_preset(self, name: str) -> None:
        """Fill the choices from a preset (see :mod:`app.presets`); fields it does not set take the
        fresh form's value (RunConfig's default, or :data:`FORM_DEFAULTS`)."""
        if name not in PRESETS:
            raise ValueError(f"preset must be one of {list(PRESETS)!r}. Got {name!r} instead.")
        preset = PRESETS[name]
        cfg = dict(preset["config"])
        values = {field: self.param[field].default for field in self.field_names()}
        values["metrics"] = list(values["metrics"])
        values.update({k: _to_parameter(k, v) for k, v in cfg.items() if k not in _OWN_WAY})
        values.update(preset=name, data_path="", split_mode=preset.get("split_mode", "random"), layers=[],
                      unseen_classes=[], view=dict(preset.get("view", {})), error="",
                      run_name=cfg.get("name") or "", device=self.device)
        self.param.update(**values)
        self._about.object = f"<i>{html.escape(preset.get('about', ''))}</i>"
        self._preset_select.value = name

    def dataset_spec(self) -> str:
        """The ``lab.data.load`` spec of the current choice (ValueError when a path is missing)."""
        if self.dataset in _PATH_KINDS:
            path = self.data_path.strip()
            if not path:
                raise ValueError(f"dataset '{self.dataset}' needs a path: type the folder into the path field "
                                 "(an image folder with one sub-folder per class, or the CIFAR directory).")
            return f"{self.dataset}:{path}"
        return self.dataset

    def load_dataset(self):
        """The chosen dataset (cached per process); ValueError/OSError with a readable message on failure."""
        spec = self.dataset_spec()
        return shared().datasets.get(spec)

    def split_lists(self, ds=None) -> tuple[list[str] | None, list[str] | None]:
        """(seen, unseen) for the config: explicit lists, or (None, None) for a random split."""
        if self.split_mode == "random":
            return None, None
        ds = ds or self.load_dataset()
        import lab.data

        if self.split_mode == "paper default":
            split = lab.data.Split.paper_default(ds)
            return list(split.seen), list(split.unseen)
        unseen = [c for c in ds.classes if c in set(self.unseen_classes)]
        if len(unseen) < 2:
            raise ValueError(f"pick at least 2 unseen classes by hand (got {len(unseen)}); "
                             "or choose the 'paper default' or 'random' split.")
        seen = [c for c in ds.classes if c not in unseen]
        if len(seen) < 2:
            raise ValueError(f"leave at least 2 seen classes to train on (got {len(seen)}).")
        return seen, unseen

    def config_dict(self) -> dict:
        """The RunConfig fields of the current choices (may still be invalid)."""
        out = {name: _to_field(name, getattr(self, name)) for name in self.field_names()}
        defaults = {f.name: f.default for f in dataclasses.fields(RunConfig)}
        if self.strategy == "none":            # nothing is trained: training settings keep their defaults
            out.update({name: defaults[name] for name in _TRAINING_FIELDS})
        if self.strategy not in ("layer", "scl"):
            out["block"] = None
        seen, unseen = self.split_lists() if self.split_mode != "random" else (None, None)
        out.update(name=self.run_name.strip() or None, dataset=self.dataset_spec(), seen=seen, unseen=unseen,
                   backbone=self.backbone.strip(), metrics=out["metrics"] or list(defaults["metrics"]))
        return out

    def to_config(self):
        """A validated :class:`lab.RunConfig`; ValueError (readable) when a choice is wrong."""
        try:
            cfg = RunConfig(**self.config_dict())
            if cfg.name is None:      # a readable label for the runs table and comparison legends
                cfg = cfg.replace(name=cfg.describe())
        except ValueError as exc:
            self.error = str(exc)
            raise
        except OSError as exc:
            self.error = f"could not read the dataset: {exc}"
            raise ValueError(self.error) from exc
        self.error = ""
        return cfg

    def refresh_runs(self) -> None:
        """Refresh the 'weights of a previous run' choices from the run store."""
        options = {"—": ""}
        if self._store is not None:
            try:
                runs = self._store.list()
                for row in runs.itertuples():
                    if row.status == "finished" and row.strategy not in ("none", None):
                        label = f"{row.name or row.run_id} · {row.backbone} · {row.dataset}"
                        options[label] = f"run:{row.run_id}"
            except Exception as exc:  # an unreadable store only empties this list
                _log.warning("could not list runs: %s", exc)
        self._previous.options = options

    # ------------------------------------------------------------------ reactions
    def _on_error(self, event) -> None:
        self._alert.param.update(object=html.escape(event.new), visible=bool(event.new))

    def _on_dataset(self, *_events) -> None:
        self._refresh_path_visibility()
        self._refresh_split_preview()

    def _on_strategy(self, *_events) -> None:
        trains = self.strategy != "none"
        self._block_w.visible = self.strategy in ("layer", "scl")
        for w in self._training_widgets:
            w.disabled = not trains

    def _refresh_path_visibility(self) -> None:
        self._path_w.visible = self.dataset in _PATH_KINDS

    def _refresh_split_preview(self, *_events) -> None:
        """Class gallery (thumbnail per class) with the unseen classes of the current split highlighted."""
        self._hand_w.visible = self.split_mode == "by hand"
        self._random_row.visible = self.split_mode == "random"
        try:
            spec = self.dataset_spec()
        except ValueError as exc:
            self._gallery.object = f"<span style='color:#666'>{html.escape(str(exc))}</span>"
            return
        try:
            ds = shared().datasets.get(spec)
        except Exception as exc:  # unreadable folder, bad CIFAR files, ...
            self.error = f"could not load dataset {spec!r}: {exc}"
            self._gallery.object = ""
            return
        if self.error.startswith("could not load dataset"):
            self.error = ""
        if list(self.param.unseen_classes.objects) != list(ds.classes):
            self.param.unseen_classes.objects = list(ds.classes)
            self.unseen_classes = [c for c in self.unseen_classes if c in ds.classes]
            self._hand_w.options = list(ds.classes)
        try:
            if self.split_mode == "random":
                import lab.data

                unseen = set(lab.data.Split.random(ds.classes, n_unseen=min(self.n_unseen, len(ds.classes)),
                                                   seed=self.split_seed).unseen)
            else:
                unseen = set(self.split_lists(ds)[1])
        except ValueError as exc:
            unseen = set(self.unseen_classes)
            note = f"<div style='color:#b00'>{html.escape(str(exc))}</div>"
        else:
            note = ""
        self._gallery.object = note + self._gallery_html(ds, unseen)

    def _gallery_html(self, ds, unseen: set) -> str:
        cells = []
        limit = 120
        for name in list(ds.classes)[:limit]:
            try:
                uri = ds.class_thumbnail(name)
            except Exception:
                uri = ""
            mark = unseen and name in unseen
            style = ("border:2px solid #08519c;background:#deebf7" if mark else "border:1px solid #ddd")
            cells.append(
                f"<div title='{html.escape(name)}' style='{style};border-radius:4px;padding:2px;width:58px;"
                f"text-align:center;font-size:9px;overflow:hidden'>"
                f"<img src='{uri}' width='40' height='40' style='image-rendering:pixelated'><br>"
                f"{html.escape(name[:14])}</div>")
        more = f"<div style='font-size:10px'>… {len(ds.classes) - limit} more</div>" if len(ds.classes) > limit else ""
        n_unseen = len(unseen)
        head = (f"<div style='font-size:11px;margin-bottom:4px'>{len(ds.classes)} classes · "
                f"<span style='color:#08519c'><b>{n_unseen} unseen</b></span> (blue) · "
                f"{len(ds.classes) - n_unseen} seen</div>")
        return head + "<div style='display:flex;flex-wrap:wrap;gap:3px'>" + "".join(cells) + "</div>" + more

    def load_catalogue(self, *_events) -> None:
        """Build the chosen backbone once (CPU) to list its layers for the layer and block choices."""
        import lab.backbones

        try:
            ds = self.load_dataset()
            bb = lab.backbones.load(self.backbone.strip(), pretrained=False, in_chans=ds.in_chans,
                                    img_size=self.img_size or ds.image_size, device="cpu")
        except Exception as exc:
            self.error = f"could not build backbone {self.backbone!r}: {exc}"
            return
        self.error = ""
        layers = list(bb.layers)
        self.param.layers.objects = layers
        self.param.projection_layers.objects = layers
        self.layers, self.projection_layers = [], []
        self._layers_w.options = layers
        self._projection_layers_w.options = layers
        self._block_w.options = [name for name, _module in bb.block_modules()]
        self._catalogue_note.object = f"<small>{len(layers)} layers in {html.escape(self.backbone)}; none chosen = all</small>"

    # ------------------------------------------------------------------ widgets
    def _w(self, cls, name: str, **kwargs):
        """A widget for parameter ``name`` with its help text (RunConfig's docstring) as tooltip."""
        if "description" in cls.param:       # (checkboxes and button groups have no tooltip)
            kwargs.setdefault("description", self.param[name].doc or None)
        return cls.from_param(self.param[name], **kwargs)

    def _generic_widget(self, name: str):
        """A widget chosen by the parameter's type, labelled with the field name."""
        p = self.param[name]
        label = name.replace("_", " ")
        if isinstance(p, param.Boolean):
            return self._w(pn.widgets.Checkbox, name, label=label)
        if isinstance(p, param.ListSelector):
            return self._w(pn.widgets.MultiChoice, name, label=f"{label} (empty = all)", sizing_mode="stretch_width")
        if isinstance(p, param.Selector):
            return self._w(pn.widgets.Select, name, label=label, width=150)
        if isinstance(p, param.Integer):
            return self._w(pn.widgets.IntInput, name, label=label, width=150)
        if isinstance(p, param.Number):
            empty = " (empty = default)" if p.allow_None else ""
            return self._w(pn.widgets.FloatInput, name, label=label + empty, width=150)
        return self._w(pn.widgets.TextInput, name, label=label, sizing_mode="stretch_width")

    def _build_widgets(self) -> None:
        self._preset_select = pn.widgets.Select(label="Preset", options=list(PRESETS), value=self.preset, css_classes=["ls-preset"],
                                                sizing_mode="stretch_width")
        self._preset_button = pn.widgets.Button(label="Apply preset", color="primary",
                                                sizing_mode="stretch_width", css_classes=["ls-apply-preset"])
        self._preset_button.on_click(lambda _e: self.apply_preset(self._preset_select.value))
        self._about = pn.pane.HTML("", sizing_mode="stretch_width", styles={"font-size": "12px"})
        self._alert = pn.pane.Alert("", alert_type="danger", visible=False, sizing_mode="stretch_width",
                                    css_classes=["ls-config-alert"])
        dataset_w = self._w(pn.widgets.Select, "dataset", label="Dataset", options=dict(DATASETS),
                                                 sizing_mode="stretch_width")
        self._path_w = self._w(pn.widgets.TextInput, "data_path", label="Path on disk", placeholder="/data/my_images or /data/cifar-100-python",
            sizing_mode="stretch_width", visible=False)
        split_w = self._w(pn.widgets.RadioButtonGroup, "split_mode", sizing_mode="stretch_width",
                                                         color="light")
        self._random_row = pn.Row(self._w(pn.widgets.IntInput, "n_unseen", label="Unseen classes", width=110),
                                  self._w(pn.widgets.IntInput, "split_seed", label="Split seed", width=110))
        self._hand_w = self._w(pn.widgets.MultiChoice, "unseen_classes", label="Unseen classes (by hand)",
                                                         sizing_mode="stretch_width", visible=False)
        self._gallery = pn.pane.HTML("", sizing_mode="stretch_width", max_height=260,
                                     styles={"overflow-y": "auto"})
        backbone_w = self._w(pn.widgets.AutocompleteInput, "backbone", label="Backbone (type to search timm)", options=_backbone_choices(),
            restrict=False, case_sensitive=False, search_strategy="includes", min_characters=1,
            sizing_mode="stretch_width", css_classes=["ls-backbone"])
        pretrained_w = self._w(pn.widgets.Checkbox, "pretrained", label="pretrained weights (cached)")
        checkpoint_w = self._w(pn.widgets.TextInput, "checkpoint", label="Checkpoint (path or run:ID)",
                                                       placeholder="weights.safetensors or run:ID",
                                                       sizing_mode="stretch_width")
        self._previous = pn.widgets.Select(label="…or the fine-tuned weights of a previous run", options={"—": ""},
                                           sizing_mode="stretch_width")
        self._previous.param.watch(lambda e: setattr(self, "checkpoint", e.new) if e.new else None, "value")
        catalogue_button = pn.widgets.Button(label="List layers of this backbone", sizing_mode="stretch_width")
        catalogue_button.on_click(self.load_catalogue)
        self._catalogue_note = pn.pane.HTML("<small>All layers are measured unless you pick some.</small>")
        self._layers_w = self._w(pn.widgets.MultiChoice, "layers", label="Layers (empty = all)",
                                                           sizing_mode="stretch_width")
        pooling_w = self._w(pn.widgets.Select, "pooling", label="Pooling", width=110)
        size_w = self._w(pn.widgets.IntInput, "img_size", label="Image size (empty = native)", width=150)
        strategy_w = self._w(pn.widgets.RadioButtonGroup, "strategy", sizing_mode="stretch_width",
                                                            color="light")
        self._block_w = self._w(pn.widgets.AutocompleteInput, "block", label="Block to tune (tap name or index, -1 = last)", options=[], restrict=False,
            min_characters=0, sizing_mode="stretch_width", visible=False)
        epochs_w = self._w(pn.widgets.IntInput, "epochs", label="Epochs (empty = default)", width=80)
        lr_w = self._w(pn.widgets.FloatInput, "lr", label="LR (empty = default)", width=110, step=1e-4,
                                                format="0.[00000]")
        batch_w = self._w(pn.widgets.IntInput, "batch_size", label="Batch", width=80)
        noise_w = self._w(pn.widgets.FloatSlider, "label_noise", label="Label noise", step=0.05,
                                                    sizing_mode="stretch_width")
        contribution_w = self._w(pn.widgets.Checkbox, "contribution", label="layer contribution (re-init each layer at the end)")
        advanced = {name: self._generic_widget(name) for name in ADVANCED_FIELDS}
        self._projection_layers_w = advanced["projection_layers"]
        self._training_widgets = [epochs_w, lr_w, batch_w, noise_w, contribution_w,
                                  *(advanced[name] for name in ADVANCED_FIELDS if name in _TRAINING_FIELDS)]
        metrics_w = self._w(pn.widgets.MultiChoice, "metrics", label="Metrics",
                          options={METRICS[m].label: m for m in self.param.metrics.objects},
                                                      sizing_mode="stretch_width")
        unseen_w = self._w(pn.widgets.IntInput, "unseen_per_class", label="Unseen imgs/class (empty = all)", width=120)
        seen_w = self._w(pn.widgets.IntInput, "seen_per_class", label="Seen imgs/class (empty = all)", width=120)
        seeds_w = self._w(pn.widgets.TextInput, "seeds", label="Seeds", width=90)
        device_w = self._w(pn.widgets.Select, "device", label="Device", width=90)
        projection_w = self._w(pn.widgets.Select, "projection", label="Layout", width=90)
        name_w = self._w(pn.widgets.TextInput, "run_name", label="Run name (optional)",
                                                 sizing_mode="stretch_width")
        self._sections = pn.Accordion(
            ("Data & split", pn.Column(dataset_w, self._path_w, split_w, self._random_row, self._hand_w,
                                       self._gallery, sizing_mode="stretch_width")),
            ("Backbone & layers", pn.Column(backbone_w, pretrained_w, checkpoint_w, self._previous,
                                            catalogue_button, self._catalogue_note, self._layers_w,
                                            pn.Row(pooling_w, size_w), sizing_mode="stretch_width")),
            ("Fine-tuning", pn.Column(strategy_w, self._block_w, pn.Row(epochs_w, lr_w, batch_w), noise_w,
                                      contribution_w, sizing_mode="stretch_width")),
            ("Metrics, seeds & device", pn.Column(metrics_w, pn.Row(unseen_w, seen_w),
                                                  pn.Row(seeds_w, device_w, projection_w), name_w,
                                                  sizing_mode="stretch_width")),
            ("Advanced", pn.Column(*advanced.values(), sizing_mode="stretch_width")),
            active=[0], sizing_mode="stretch_width", toggle=False,
        )
        self._layout = pn.Column(
            pn.Row(self._preset_select, sizing_mode="stretch_width"), self._preset_button, self._about,
            self._alert, self._sections, sizing_mode="stretch_width",
        )
        self.refresh_runs()

    def __panel__(self):
        return self._layout
