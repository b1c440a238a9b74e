"""Hugging Face ``transformers`` vision backbones behind timm's interface.

``load("hf:NAME")`` where NAME is

- a model type, for random init from the library's default config (offline):
  ``vit``, ``dinov2``, ``swin``, ``convnext``, ... (:data:`HF_FAMILIES`); keywords override
  config fields (``hidden_size=32``, ``depths=[1, 1]``, ...; for a dual encoder such as
  ``clip``, fields of its vision config);
- a hub id (``hf:facebook/dinov2-small``), read from the local Hugging Face cache only;
- a directory written by ``save_pretrained`` (``hf:/path/to/model``).

What is built (docs/hf_models.md lists every type):

- a type with an image-classification model (``*ForImageClassification``): that model with
  the linear layers of its head replaced by identities, so ``pre_logits`` is what its head
  sees (class token, token or spatial mean, DINOv2's class token beside the patch mean);
- a dual encoder (``clip``, ``siglip``, ``siglip2``, ``metaclip_2``) or its vision tower: the
  vision tower, ``pre_logits`` its pooled output (a full checkpoint gives its vision weights);
- any other model that takes ``pixel_values`` (``dinov3_vit``, ``dinov3_convnext``,
  ``vit_mae`` with mask_ratio 0, ...): the model itself, ``pre_logits`` its pooled output,
  else the class token of its last hidden state, else the mean of its patch tokens or map.

A fresh linear head replaces the classifier, as for timm models. The blocks (every encoder
layer, not only the stage outputs that ``hidden_states`` gives) come from
:data:`lab.backbones._hf_families.FAMILIES` where a family is listed, otherwise from the
model's structure: the outermost lists of model-defined modules (a list of stages gives the
blocks inside each stage). One traced dummy forward orders them and picks the stem (the
last module with weights that finishes before the first block). Token taps count their
prefix tokens (class, distillation, register) as the tokens beyond the patch grid
(``config.patch_size``); token 0 is then the class token, and the mean pooling skips every
prefix token, so register tokens are never averaged with patch tokens.

Normalization and input size: ``image_mean``/``image_std`` (and ``crop_size``/``size``)
of the model's ``preprocessor_config.json``, else the defaults of the family's image
processor class, else ImageNet's statistics.
"""
from __future__ import annotations

import contextlib
import difflib
import inspect
import os
import warnings

from torch import nn

from lab.backbones._hf_families import ADAPTERS, EXCLUDED, FAMILIES, SUPPORTED, VISION_TOWERS
from lab.backbones._hf_input import _processor, input_size, normalization
from lab.backbones._hf_net import HFNet, prefix_tokens
from lab.backbones._hf_taps import build_catalogue
from lab.backbones._hf_types import Loaded, Plan

__all__ = ["HF_FAMILIES", "HFNet", "create", "build_catalogue", "normalization", "cache_dir", "looks_like_dir",
           "cached_snapshot", "model_type_problem", "input_size", "prefix_tokens"]

HF_FAMILIES = SUPPORTED
"""Model types ``hf:TYPE`` builds with random init (and reads from the cache or a directory)."""

_HEAD_WIDTH = 7919
"""``num_labels`` the classification model is built with: its head is every linear layer with
this many outputs (a prime no backbone uses as a width), replaced by an identity."""


# ------------------------------------------------------------------------------------------------ building


def cache_dir() -> str:
    """The Hugging Face hub cache that hub ids are read from: ``$HF_HUB_CACHE`` as set now (so that
    setting it after import counts), else huggingface_hub's own (``$HF_HOME/hub``, ...)."""
    from huggingface_hub import constants

    return os.environ.get("HF_HUB_CACHE") or str(constants.HF_HUB_CACHE)


def looks_like_dir(spec: str) -> bool:
    """Whether ``hf:spec`` names a directory (a path, or an existing folder), not a family or a hub id."""
    path = os.path.expanduser(spec)
    return spec.startswith(("/", ".", "~")) or (os.sep in spec and os.path.exists(path)) or os.path.isdir(path)


def cached_snapshot(repo_id: str) -> str | None:
    """The local snapshot folder of hub id ``repo_id`` (with a config.json) in :func:`cache_dir`, or
    None; looks in the cache only, never on the network."""
    from huggingface_hub import snapshot_download

    try:
        path = snapshot_download(repo_id, local_files_only=True, cache_dir=cache_dir())
    except Exception:  # not cached (LocalEntryNotFoundError), or a malformed id
        return None
    return path if os.path.isfile(os.path.join(path, "config.json")) else None


def _families_line() -> str:
    return ", ".join(f"hf:{f}" for f in HF_FAMILIES)


def _resolve_dir(spec: str) -> tuple[str | None, str]:
    """(directory or None for a family, what to call it in messages)."""
    if spec in HF_FAMILIES:
        return None, f"hf:{spec}"
    if looks_like_dir(spec):
        path = os.path.expanduser(spec)
        if not os.path.isdir(path):
            raise ValueError(f"hf:{spec}: directory {path!r} does not exist; give a directory written by "
                             f"save_pretrained, a hub id in the cache or a family ({_families_line()}).")
        if not os.path.isfile(os.path.join(path, "config.json")):
            raise ValueError(f"hf:{spec}: directory {path!r} has no config.json; save the model there with "
                             f"model.save_pretrained({path!r}).")
        return path, path
    if "/" not in spec:
        close = difflib.get_close_matches(spec, HF_FAMILIES, n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join(f'hf:{c}' for c in close)}?" if close else ""
        raise ValueError(f"unknown Hugging Face family 'hf:{spec}'; families (model types): {_families_line()} "
                         f"(or a hub id 'org/name' in the cache, or a save_pretrained directory).{hint}")
    path = cached_snapshot(spec)
    if path is None:
        raise ValueError(f"hf:{spec} is not in the Hugging Face cache ({cache_dir()}) and nothing is downloaded; "
                         f"fill the cache where there is network (`hf download {spec}`) and copy it here, "
                         f"or set HF_HUB_CACHE to a cache that has it.")
    return path, spec


@contextlib.contextmanager
def _quiet_transformers():
    """Silence 'weights not initialized' notices (the head is replaced anyway) and load progress bars."""
    from transformers.utils import logging

    level, bars = logging.get_verbosity(), logging.is_progress_bar_enabled()
    logging.set_verbosity_error()
    logging.disable_progress_bar()
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*(initializ|newly|not used).*")
            yield
    finally:
        logging.set_verbosity(level)
        if bars:
            logging.enable_progress_bar()


def _takes_pixels(cls) -> bool:
    try:
        return "pixel_values" in inspect.signature(cls.forward).parameters
    except (TypeError, ValueError):
        return False


def model_type_problem(model_type: str, config=None) -> str | None:
    """Why ``hf:`` cannot read a model of ``model_type`` (one clause), or None when it can.

    Reads the type lists only (no weights); with ``config`` also a dual encoder's vision config.
    """
    from transformers.models.auto.modeling_auto import (MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES,
                                                        MODEL_MAPPING_NAMES)

    if model_type in EXCLUDED:
        return EXCLUDED[model_type]
    if model_type in MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES or model_type in VISION_TOWERS:
        return None
    name = MODEL_MAPPING_NAMES.get(model_type)
    if name is None:
        return (f"transformers {_version()} has no model for type {model_type!r}; a newer transformers may, "
                f"or use a type it has")
    import transformers

    cls = getattr(transformers, name if isinstance(name, str) else name[0], None)
    if cls is None or not _takes_pixels(cls):
        return (f"model type {model_type!r} ({name}) has no image encoder: its model takes no pixel_values; "
                f"give a vision model (hf:vit, hf:dinov2, hf:clip, ...)")
    return None


def _version() -> str:
    import transformers

    return transformers.__version__


def _types_line() -> str:
    return f"{len(HF_FAMILIES)} model types, listed in docs/hf_models.md ({', '.join(HF_FAMILIES[:8])}, ...)"


def _plan(config, where: str) -> Plan:
    """The :class:`Plan` for ``config``, or a ValueError naming the type and what would work."""
    import transformers
    from transformers.models.auto.modeling_auto import (MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES,
                                                        MODEL_MAPPING_NAMES)

    model_type = config.model_type
    problem = model_type_problem(model_type, config)
    if problem is not None:
        raise ValueError(f"{where}: cannot read model type {model_type!r}: {problem}.")
    adapter = ADAPTERS.get(model_type)
    if model_type in VISION_TOWERS:
        vision = getattr(config, "vision_config", None) or config
        # The vision model class: by its type, else by the config class's name (MetaCLIP 2's tower is not mapped).
        name = MODEL_MAPPING_NAMES.get(vision.model_type) or type(vision).__name__.replace("Config", "Model")
        cls = getattr(transformers, name, None)
        if cls is None:
            raise ValueError(f"{where}: transformers {_version()} has no vision model for {vision.model_type!r}.")
        return Plan(model_type, cls, vision, "output", FAMILIES.get(vision.model_type), adapter)
    names = MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES.get(model_type)
    if names:
        name = names if isinstance(names, str) else names[0]
        return Plan(model_type, getattr(transformers, name), config, "logits", FAMILIES.get(model_type), adapter)
    name = MODEL_MAPPING_NAMES[model_type]
    name = name if isinstance(name, str) else name[0]
    if model_type == "vit_mae":
        config.mask_ratio = 0.0   # evaluation sees every patch
    return Plan(model_type, getattr(transformers, name), config, "output", FAMILIES.get(model_type), adapter)


def _random_config(family: str, *, in_chans: int, img_size, kwargs: dict):
    from transformers import CONFIG_MAPPING

    from huggingface_hub.errors import StrictDataclassError

    cls = CONFIG_MAPPING[family]
    composite = family in VISION_TOWERS and "vision_config" in inspect.signature(cls.__init__).parameters
    target = cls().vision_config.__class__ if composite else cls
    fields = [p for p in inspect.signature(target.__init__).parameters if p not in ("self", "kwargs")]
    bad = sorted(set(kwargs) - set(fields))
    if bad:
        raise ValueError(f"hf:{family} does not take {', '.join(bad)}; its "
                         f"{'vision ' if composite else ''}config fields are {', '.join(fields)}.")
    args = dict(kwargs)
    if "num_channels" in fields:
        args["num_channels"] = int(in_chans)
    elif int(in_chans) != 3:
        raise ValueError(f"hf:{family} has no num_channels in its config; it reads 3-channel images. "
                         f"Got in_chans={in_chans} instead; use in_chans=3 (gray images are repeated).")
    if img_size is not None and "image_size" in fields:
        default = inspect.signature(target.__init__).parameters["image_size"].default
        args["image_size"] = [int(img_size)] * 2 if isinstance(default, (list, tuple)) else int(img_size)
    try:
        if composite:
            return cls(vision_config=target(**args).to_dict())
        return cls(**args)
    except (TypeError, ValueError, KeyError, StrictDataclassError) as exc:
        first = str(exc).strip().splitlines()
        raise ValueError(f"hf:{family}: the config rejects these options ({' '.join(first[:2])}); "
                         f"check the field types (floats as 2.0, lists of per-stage values).") from exc


def _drop_head(net: nn.Module, where: str) -> int:
    """Replace every linear layer with :data:`_HEAD_WIDTH` outputs by an identity; its input width."""
    heads = [(name, m) for name, m in net.named_modules() if isinstance(m, nn.Linear)
             and m.out_features == _HEAD_WIDTH]
    if not heads:
        raise ValueError(f"{where}: {type(net).__name__} has no linear classifier to read the feature width from.")
    for name, _ in heads:
        parent, _, leaf = name.rpartition(".")
        setattr(net.get_submodule(parent) if parent else net, leaf, nn.Identity())
    return heads[0][1].in_features


def _output_width(net: nn.Module, config) -> int:
    for key in ("hidden_size", "embed_dim"):
        value = getattr(config, key, None)
        if isinstance(value, int):
            return value
    for key in ("hidden_sizes", "embed_dim", "neck_hidden_sizes"):
        value = getattr(config, key, None)
        if isinstance(value, (list, tuple)) and value:
            return int(value[-1])
    return 0   # read from the dummy forward


def create(spec: str, *, pretrained: bool, num_classes: int, in_chans: int, img_size, kwargs: dict):
    """Build the :class:`HFNet` for ``hf:spec``. Returns (model, :class:`Loaded`, directory or None, label).

    Everything that can be refused (type, options, weights that do not cover the model) is
    refused before the model is returned: nothing half-loaded.
    """
    from transformers import AutoConfig

    path, label = _resolve_dir(spec)
    if path is None:
        if pretrained:
            raise ValueError(f"hf:{spec} builds a randomly initialised model; for pretrained weights give a hub id "
                             f"in the cache (e.g. hf:facebook/dinov2-small) or a save_pretrained directory.")
        config = _random_config(spec, in_chans=in_chans, img_size=img_size, kwargs=kwargs)
        plan = _plan(config, f"hf:{spec}")
        if plan.pool == "logits":
            plan.config.num_labels = _HEAD_WIDTH
        with _quiet_transformers():
            net = plan.cls._from_config(plan.config)
    else:
        if kwargs:
            raise ValueError(f"hf:{spec} loads a saved model whose config is fixed; options "
                             f"{sorted(kwargs)} apply only to model types built with random init (hf:vit, ...).")
        try:
            config = AutoConfig.from_pretrained(path, local_files_only=True)
        except (ValueError, KeyError, OSError) as exc:
            raise ValueError(f"hf:{spec}: could not read {os.path.join(path, 'config.json')} "
                             f"({str(exc).splitlines()[0][:200]}); a newer transformers may know its model "
                             f"type ({_version()} is installed).") from exc
        plan = _plan(config, f"hf:{spec}")
        extra = {"num_labels": _HEAD_WIDTH, "ignore_mismatched_sizes": True} if plan.pool == "logits" else {}
        if plan.config is not config:
            extra["config"] = plan.config
        elif config.model_type == "vit_mae":
            extra["config"] = config
        with _quiet_transformers():
            try:
                net, info = plan.cls.from_pretrained(path, local_files_only=True, output_loading_info=True, **extra)
            except (OSError, ValueError, RuntimeError, KeyError) as exc:
                raise ValueError(f"hf:{spec}: could not load {plan.cls.__name__} from {path} "
                                 f"({str(exc).splitlines()[0][:300]}).") from exc
        _check_loaded(net, info, f"hf:{spec}", plan)
    net.eval()
    where = f"hf:{spec}"
    if plan.pool == "logits":
        width = _drop_head(net, where)
    else:
        width = _output_width(net, plan.config)
    kwargs_ = dict(plan.family.forward_kwargs) if plan.family else {}
    if not kwargs_ and "interpolate_pos_encoding" in inspect.signature(net.forward).parameters:
        kwargs_["interpolate_pos_encoding"] = True   # any image size, as for timm's dynamic_img_size
    model = HFNet(net, width, num_classes, kwargs_, pool=plan.pool, adapter=plan.adapter)
    return model, Loaded(plan.config, plan, _processor(path), img_size), path, label


def _check_loaded(net: nn.Module, info: dict, label: str, plan: Plan) -> None:
    """Refuse a model whose saved weights miss parts of its encoder (only the head may be new)."""
    prefix = getattr(net, "base_model_prefix", "")
    base_keys = {k for k in net.state_dict() if not prefix or k.startswith(prefix + ".")} \
        if plan.pool == "logits" and prefix and hasattr(net, prefix) else set(net.state_dict())
    missing = sorted(set(info.get("missing_keys") or ()) & base_keys)
    if missing:
        few = ", ".join(missing[:3]) + (f", ... ({len(missing) - 3} more)" if len(missing) > 3 else "")
        raise ValueError(f"{label}: the saved weights do not cover {plan.cls.__name__} (missing {few}); "
                         f"model type {plan.model_type!r} keeps its image encoder under other names. Save the "
                         f"image encoder itself with save_pretrained and load that directory.")
