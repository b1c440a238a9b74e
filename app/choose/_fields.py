"""The Choose form's fields, derived from :class:`lab.RunConfig`: parameters and value conversions.

:data:`RunConfigFields` has one ``param`` parameter per RunConfig field, with the field's type,
default, choices (:data:`lab.config.FIELD_CHOICES`) and the help text of its docstring
(:meth:`lab.RunConfig.field_docs`). The few values a fresh form deliberately starts from instead
of RunConfig's defaults are listed, each with its reason, in :data:`FORM_DEFAULTS`.
:func:`to_field` and :func:`to_parameter` convert a value between a parameter and its field.
"""
from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import param

from lab.config import FIELD_CHOICES, RunConfig

from .presets import DEFAULT_PRESET, PRESETS

__all__ = ["ADVANCED_FIELDS", "DATASETS", "FORM_DEFAULTS", "FormDefault", "OWN_WAY", "PATH_KINDS", "SPLIT_MODES",
           "TRAINING_FIELDS", "RunConfigFields", "fresh_form", "parse_seeds", "to_field", "to_parameter"]

DATASETS = MappingProxyType({
    "Glyphs · 20 calligraphy styles (embedded)": "glyphs",
    "Glyphs · characters (embedded)": "glyphs:character",
    "Digits · scikit-learn 8×8 (embedded)": "digits",
    "Image folder on disk…": "folder",
    "CIFAR-10 on disk…": "cifar10",
    "CIFAR-100 on disk…": "cifar100",
})
"""Dataset choices (label -> kind); the last three need a path."""

PATH_KINDS = ("folder", "cifar10", "cifar100")
"""Dataset kinds that need a path on disk."""
SPLIT_MODES = ("paper default", "random", "by hand")
"""How the form splits classes into seen and unseen."""


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
               "4 epochs, as the papers fine-tune pretrained backbones; RunConfig's resnet18 is random init")
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

OWN_WAY = ("name", "seen", "unseen")
"""Fields the form shows in its own way (an app parameter of another name or type)."""
TRAINING_FIELDS = ("epochs", "lr", "label_noise", "contribution", "weight_decay", "optimizer", "lr_schedule",
                   "augment")
"""Fields that only matter when something is trained: strategy "none" sends their RunConfig defaults."""
ADVANCED_FIELDS = ("heldout_fraction", "weight_decay", "optimizer", "lr_schedule", "augment", "protocol",
                   "projection_layers", "save_weights", "eval_batch_size", "precision", "train_sample_per_class",
                   "lidar_views", "lidar_images")
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


def _fresh(name: str, defaults: dict[str, Any]) -> Any:
    return FORM_DEFAULTS[name].value if name in FORM_DEFAULTS else defaults[name]


def _field_parameters() -> dict[str, param.Parameter]:
    hints, docs, defaults = _HINTS, RunConfig.field_docs(), RunConfig.defaults()
    return {name: _field_parameter(name, hints[name], _fresh(name, defaults), docs.get(name, "").replace("``", ""))
            for name in defaults if name not in OWN_WAY}


RunConfigFields = param.parameterized_class("_RunConfigFields", _field_parameters())
"""A Parameterized class with one parameter per RunConfig field except :data:`OWN_WAY`."""


def parse_seeds(text: str) -> list[int]:
    """The seeds typed as ``"0, 1, 2"`` (commas, semicolons or spaces); ValueError when not integers."""
    parts = [p for p in str(text).replace(";", ",").replace(" ", ",").split(",") if p]
    try:
        seeds = [int(p) for p in parts]
    except ValueError:
        raise ValueError(f"seeds must be integers separated by commas, e.g. '0' or '0, 1, 2'. Got {text!r} instead.")
    if not seeds:
        raise ValueError("seeds must list at least one seed, e.g. '0' or '0, 1, 2'.")
    return seeds


def to_field(name: str, value: Any) -> Any:
    """A parameter's value as the RunConfig field ``name`` takes it."""
    inner, optional = _split_hint(_HINTS[name])
    if isinstance(value, str) and typing.get_origin(inner) is tuple:          # seeds: "0, 1, 2"
        return parse_seeds(value)
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


def fresh_form() -> dict[str, Any]:
    """Each field parameter's value in a fresh form, asked now: :data:`FORM_DEFAULTS`, else
    :meth:`lab.RunConfig.defaults` (so a metric registered after import with ``default=True`` is chosen), as the
    parameter holds it. The parameters' own defaults were read once, when this module was imported."""
    defaults = RunConfig.defaults()
    return {name: to_parameter(name, _fresh(name, defaults)) for name in defaults if name not in OWN_WAY}


def to_parameter(name: str, value: Any) -> Any:
    """A RunConfig field value (from a preset) as the form's parameter ``name`` holds it."""
    current = RunConfigFields.param[name]
    if isinstance(current, param.ListSelector):
        return list(value or [])
    if isinstance(current, param.String):
        if isinstance(value, (list, tuple)):
            return ", ".join(map(str, value))
        return "" if value is None else str(value)
    return value
