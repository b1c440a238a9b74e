"""The checks of the model sources (:data:`lab.backbones._registry.SOURCES`): is a name loadable here?

Each ``check_<source>(name, spec)`` reads only what its loader reads first (timm's registry, the
zoo's cards, a Hugging Face ``config.json`` in a folder or the local cache, the MLP's option parser,
an ImageNet card and its package), builds nothing and never uses the network. A name that is simply
unknown raises a bare ``UnknownNameError("backbone", name)``, which :func:`lab.backbones.check_name`
completes with the closest names every source lists.
"""
from __future__ import annotations

import json
import os

from lab.backbones import _hf, _imagenet, _timm, _zoo
from lab.errors import UnknownNameError

__all__ = ["check_hf", "check_zoo", "check_imagenet", "check_mlp", "check_timm"]


def _unknown(name: str) -> UnknownNameError:
    return UnknownNameError("backbone", name)


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


def check_hf(name: str, spec: str) -> None:
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


def check_zoo(name: str, zoo_name: str) -> None:
    if zoo_name not in _zoo.zoo_names():
        raise _unknown(name)
    try:
        card, _ = _zoo.read_card(zoo_name)
    except ValueError as exc:   # a damaged card or missing weights: the name is right, the files are not
        raise UnknownNameError("backbone", name, [], "", reason=str(exc)) from exc
    if not _timm.is_timm_name(card["architecture"]):
        raise UnknownNameError("backbone", name, [], "fix the card or update timm",
                               reason=f"its card names timm model {card['architecture']!r}, which this timm lacks")


def check_imagenet(name: str, spec: str) -> None:
    """The card reads and its package carries the weight file (not read here: the loader checks its hash)."""
    try:
        _imagenet.weights_file(_imagenet.read_card(name))
    except ValueError as exc:   # the name is right; the package is missing or damaged
        raise UnknownNameError("backbone", name, [], "", reason=str(exc)) from exc


def check_mlp(name: str, spec: str) -> None:
    from lab.backbones._mlp import parse_mlp_spec   # the loader's own parser: one syntax

    try:
        parse_mlp_spec(name)
    except ValueError as exc:
        raise UnknownNameError("backbone", name, [], "", reason=str(exc)) from exc


def check_timm(name: str, spec: str) -> None:
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
