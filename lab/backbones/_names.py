"""Backbone and checkpoint names resolved up front, without building any model.

:func:`source_of` is the one place that decides which loader takes a backbone name;
:func:`lab.backbones.load` dispatches on it and :func:`check_name` checks the same
forms with what each loader reads first (timm's registry, the zoo's cards, a Hugging
Face ``config.json`` in a folder or the local cache, the MLP's option parser), so that a
study or the app can refuse a name before any cluster starts or any weight is read.

>>> check_name("resnet18")
>>> check_name("resnet1")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
lab.errors.UnknownNameError: unknown backbone 'resnet1'; closest: 'resnet18', ...
"""
from __future__ import annotations

import difflib
import json
import os

from lab.backbones import _hf, _imagenet, _timm, _zoo
from lab.errors import UnknownNameError

__all__ = ["source_of", "check_name", "check_checkpoint"]

_CHECKPOINT_EXTS = (".safetensors", ".pt", ".pth", ".bin", ".ckpt")
_CHECKPOINT_FIX = ("give the path of a .safetensors or PyTorch state_dict file, or run:ID[/SEED] for the "
                   "fine-tuned weights of a stored run")


def source_of(name: str) -> tuple[str, str]:
    """Which loader takes backbone ``name``, and what it is given.

    Returns
    -------
    ("hf", spec) for ``hf:SPEC``; ("zoo", zoo name) for ``zoo:NAME`` or a bare zoo name that
    is no timm name; ("imagenet", name) for an ImageNet backbone with a card
    (``imagenet_efficientnet_lite0``); ("mlp", name) for ``mlp`` / ``mlp:...``; ("timm", name) otherwise.
    """
    if name.startswith("hf:"):
        return "hf", name[3:].strip()
    if name.startswith("zoo:"):
        return "zoo", name[4:].strip()
    if name in _zoo.zoo_names() and not _timm.is_timm_name(name):
        return "zoo", name
    if name in _imagenet.imagenet_names() and not _timm.is_timm_name(name):
        return "imagenet", name
    if name == "mlp" or name.startswith("mlp:"):
        return "mlp", name
    return "timm", name


def _fix() -> str:
    zoo = ", ".join(_zoo.zoo_names()) or "none installed"
    return (f"use a timm model name (timm.list_models()), zoo:NAME ({zoo}), "
            f"{' or '.join(_imagenet.imagenet_names())} (ImageNet-pretrained, offline), hf:FAMILY "
            f"({', '.join(_hf.HF_FAMILIES)}), hf:ORG/NAME from the local Hugging Face cache, hf:DIR "
            f"(a save_pretrained folder) or mlp:depth=D,width=W")


def _closest(name: str) -> list[str]:
    """Up to 5 valid names closest to ``name`` across timm, the zoo, the hf: families and the MLP."""
    import timm

    zoo = _zoo.zoo_names()
    candidates = (timm.list_models() + zoo + [f"zoo:{z}" for z in zoo] + _imagenet.imagenet_names()
                  + [f"hf:{f}" for f in _hf.HF_FAMILIES] + ["mlp"])
    by_lower = {c.lower(): c for c in candidates}
    return [by_lower[c] for c in difflib.get_close_matches(name.lower(), list(by_lower), n=5, cutoff=0.6)]


def _unknown(name: str) -> UnknownNameError:
    return UnknownNameError("backbone", name, _closest(name), _fix())


def _check_config(name: str, folder: str) -> None:
    """A saved Hugging Face model loads only when its ``config.json`` names a supported model type."""
    path = os.path.join(folder, "config.json")
    try:
        with open(path, encoding="utf-8") as f:
            model_type = json.load(f).get("model_type")
    except (OSError, ValueError, AttributeError) as exc:
        raise UnknownNameError("backbone", name, [], "save the model again with model.save_pretrained(...)",
                               reason=f"{path} is not a readable JSON config ({exc})") from exc
    # the same rule as the loader (a type outside the family table loads by the general rule)
    problem = (_hf.model_type_problem(model_type) if isinstance(model_type, str)
               else "config.json names no model_type")
    if problem is not None:
        raise UnknownNameError("backbone", name, [], "see docs/hf_models.md for the model types hf: reads",
                               reason=f"its config.json has model_type {model_type!r}: {problem}")


def _check_hf(name: str, spec: str) -> None:
    if spec in _hf.HF_FAMILIES:
        return
    if _hf.looks_like_dir(spec):
        path = os.path.expanduser(spec)
        if not os.path.isdir(path):
            raise UnknownNameError("backbone", name, [], "give a directory written by save_pretrained, hf:ORG/NAME "
                                   "from the cache or hf:FAMILY", reason=f"directory {path} does not exist")
        if not os.path.isfile(os.path.join(path, "config.json")):
            raise UnknownNameError("backbone", name, [], f"save the model there with model.save_pretrained({path!r})",
                                   reason=f"directory {path} has no config.json")
        _check_config(name, path)
        return
    if "/" not in spec:
        raise _unknown(name)
    folder = _hf.cached_snapshot(spec)
    if folder is None:
        raise UnknownNameError("backbone", name, [], f"fill the cache where there is network (`hf download {spec}`) "
                               f"and copy it here, or set HF_HUB_CACHE to a cache that has it",
                               reason=f"not in the Hugging Face cache {_hf.cache_dir()} (nothing is downloaded)")
    _check_config(name, folder)


def _check_zoo(name: str, zoo_name: str) -> None:
    if zoo_name not in _zoo.zoo_names():
        raise _unknown(name)
    try:
        card, _ = _zoo.read_card(zoo_name)
    except ValueError as exc:   # a damaged card or missing weights: the name is right, the files are not
        raise UnknownNameError("backbone", name, [], "", reason=str(exc)) from exc
    if not _timm.is_timm_name(card["architecture"]):
        raise UnknownNameError("backbone", name, [], "fix the card or update timm",
                               reason=f"its card names timm model {card['architecture']!r}, which this timm lacks")


def _check_imagenet(name: str) -> None:
    """The card reads and its package carries the weight file (not read here: the loader checks its hash)."""
    try:
        _imagenet.weights_file(_imagenet.read_card(name))
    except ValueError as exc:   # the name is right; the package is missing or damaged
        raise UnknownNameError("backbone", name, [], "", reason=str(exc)) from exc


def _check_mlp(name: str) -> None:
    from lab._mlp import parse_mlp_spec   # the loader's own parser: one syntax

    try:
        parse_mlp_spec(name)
    except ValueError as exc:
        raise UnknownNameError("backbone", name, [], "", reason=str(exc)) from exc


def _check_timm(name: str) -> None:
    import timm

    try:
        source, model_id = timm.models.parse_model_name(name)
    except ValueError:    # a path or hub id without a source prefix, or an unknown "source:"
        raise _unknown(name) from None
    if source == "hf-hub":    # timm reads the repo's config.json even without pretrained weights
        from huggingface_hub import constants, try_to_load_from_cache

        repo, _, revision = model_id.partition("@")
        try:
            found = try_to_load_from_cache(repo, "config.json", revision=revision or None)
        except Exception:   # a malformed repo id
            found = None
        if not isinstance(found, str):
            raise UnknownNameError("backbone", name, [], f"fill the cache where there is network (`hf download "
                                   f"{repo}`) and copy it here, or use a timm model name",
                                   reason=f"not in the Hugging Face cache {constants.HF_HUB_CACHE} "
                                          f"(nothing is downloaded)")
    elif source == "local-dir":
        path = os.path.join(os.path.expanduser(model_id), "config.json")
        if not os.path.isfile(path):
            raise UnknownNameError("backbone", name, [], "give a folder holding a timm config.json and weights",
                                   reason=f"{path} does not exist")
    elif not timm.is_model(model_id):
        raise _unknown(name)


def check_name(name: str) -> None:
    """Raise :class:`lab.errors.UnknownNameError` unless :func:`lab.backbones.load` can load ``name`` here.

    Builds no model and reads no weights: timm names are looked up in timm's registry
    (``hf-hub:`` ids in the Hugging Face cache, ``local-dir:`` folders on disk), ``hf:`` names
    against the families, a folder's or the local cache's ``config.json`` (never the network),
    zoo names against their cards and weight files, ImageNet backbones against their card and installed
    package, ``mlp:...`` with the MLP's own parser.

    Parameters
    ----------
    name : str
        A backbone name as :func:`lab.backbones.load` takes it.

    Raises
    ------
    UnknownNameError
        With ``kind="backbone"``, the closest valid names and the fix.
    """
    if not isinstance(name, str) or not name.strip():
        raise UnknownNameError("backbone", name, [], _fix(), reason="a backbone name must be a non-empty string")
    name = name.strip()
    if name.startswith("run:"):
        raise UnknownNameError("backbone", name, [], f"set checkpoint={name!r} and backbone to the model that run "
                               f"used (`python -m lab runs show ID`)",
                               reason="names a stored run's weights, which is a checkpoint, not a backbone")
    source, spec = source_of(name)
    if source == "hf":
        _check_hf(name, spec)
    elif source == "zoo":
        _check_zoo(name, spec)
    elif source == "imagenet":
        _check_imagenet(name)
    elif source == "mlp":
        _check_mlp(name)
    else:
        _check_timm(name)


def _close_files(path: str) -> list[str]:
    """Checkpoint files next to ``path`` whose names are close to its name."""
    folder, base = os.path.split(os.path.abspath(path))
    try:
        names = [n for n in os.listdir(folder) if n.endswith(_CHECKPOINT_EXTS)]
    except OSError:
        return []
    return [os.path.join(os.path.dirname(path), n) for n in difflib.get_close_matches(base, names, n=5, cutoff=0.6)]


def check_checkpoint(spec) -> None:
    """Raise :class:`lab.errors.UnknownNameError` (``kind="checkpoint"``) unless checkpoint file ``spec``
    exists. A stored run's weights (``run:ID[/SEED]``) are the store's to resolve
    (:func:`lab.store.check_run_checkpoint`), as for :func:`load`.
    """
    text = os.fspath(spec)
    if text.startswith("run:"):
        raise ValueError(f"checkpoint {text!r} names a stored run: check it with lab.store.check_run_checkpoint")
    if os.path.isfile(text):
        return
    reason = "is a folder, not a file" if os.path.isdir(text) else f"no such file ({os.path.abspath(text)})"
    raise UnknownNameError("checkpoint", text, _close_files(text), _CHECKPOINT_FIX, reason=reason)

