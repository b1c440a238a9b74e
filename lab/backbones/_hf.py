"""Hugging Face ``transformers`` vision backbones behind timm's interface.

``load("hf:NAME")`` where NAME is

- a family, for random init from the library's default config (offline):
  ``vit``, ``swin``, ``pvt``, ``pvt_v2``, ``cvt``, ``poolformer``, ``convnextv2``, ``resnet``;
  keywords override config fields (``hidden_size=32``, ``depths=[1, 1]``, ...);
- a hub id (``hf:microsoft/cvt-21``), read from the local Hugging Face cache only;
- a directory written by ``save_pretrained`` (``hf:/path/to/model``).

The model is the family's ``*ForImageClassification`` with its classifier replaced by an
identity, so what that model feeds its classifier (class token, token or spatial mean,
after the final norm) is the ``pre_logits`` tap; a fresh linear head replaces the
classifier, as for timm models. The blocks (every encoder layer, not only the stage
outputs that ``hidden_states`` gives) come from :data:`_FAMILIES`, the one table keyed
by ``config.model_type``; one dummy forward orders them.

Normalization: ``image_mean``/``image_std`` of the model's ``preprocessor_config.json``,
else the defaults of the family's image processor class.
"""
from __future__ import annotations

import contextlib
import difflib
import inspect
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch
from torch import nn

from lab.backbones._core import STEM, Tap, dummy_forward
from lab.backbones._normalize import Normalization, from_stats

__all__ = ["HF_FAMILIES", "HFNet", "create", "build_catalogue", "normalization", "cache_dir", "looks_like_dir",
           "cached_snapshot"]


@dataclass(frozen=True)
class _Family:
    """Where a family keeps its blocks and stem, and which blocks carry a class token.

    ``blocks`` is a module path relative to the base model; ``*`` stands for the stage
    index (its children are the stages), and the path's end is the container of blocks.
    ``cls(config, stage)`` is True when the blocks of ``stage`` put a class token first.
    """

    blocks: str
    stem: str
    cls: Callable = lambda config, stage: False
    stem_prefix: int = 0           # prefix tokens in the stem's output (pooled over patches)
    forward_kwargs: dict = field(default_factory=dict)


_FAMILIES: dict[str, _Family] = {
    "vit": _Family("layers", "embeddings", lambda c, s: True, stem_prefix=1,
                   forward_kwargs={"interpolate_pos_encoding": True}),
    "swin": _Family("encoder.layers.*.blocks", "embeddings"),
    "pvt": _Family("encoder.block.*", "encoder.patch_embeddings.0",
                   lambda c, s: s == c.num_encoder_blocks - 1),
    "pvt_v2": _Family("encoder.layers.*.blocks", "encoder.layers.0.patch_embedding"),
    "cvt": _Family("encoder.stages.*.layers", "encoder.stages.0.embedding", lambda c, s: bool(c.cls_token[s])),
    "poolformer": _Family("encoder.block.*", "encoder.patch_embeddings.0"),
    "convnextv2": _Family("encoder.stages.*.layers", "embeddings"),
    "resnet": _Family("encoder.stages.*.layers", "embedder"),
}
HF_FAMILIES = tuple(_FAMILIES)
"""Families ``hf:NAME`` builds with random init (and model types it reads from the cache or a directory)."""


class HFNet(nn.Module):
    """A ``*ForImageClassification`` model (``net``, classifier replaced by an identity) plus a
    linear ``head``, speaking timm's interface (``forward_features``/``forward_head``,
    ``get_classifier``/``reset_classifier``).

    ``forward_features`` already returns the pooled (N, D) pre-logits features (what the
    family's classifier sees), so ``forward_head(f, pre_logits=True)`` returns them unchanged.
    """

    def __init__(self, net: nn.Module, num_features: int, num_classes: int, forward_kwargs: dict):
        super().__init__()
        self.net = net
        self.num_features = int(num_features)
        self._forward_kwargs = dict(forward_kwargs)
        self.num_classes = 0
        self.head: nn.Module = nn.Identity()
        self.reset_classifier(num_classes)

    @property
    def base(self) -> nn.Module:
        return getattr(self.net, self.net.base_model_prefix)

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(pixel_values=x, **self._forward_kwargs).logits.flatten(1)   # (N, D)

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        return x if pre_logits else self.head(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_head(self.forward_features(x))

    def get_classifier(self) -> nn.Module:
        return self.head

    def reset_classifier(self, num_classes: int) -> None:
        self.num_classes = int(num_classes)
        self.head = nn.Linear(self.num_features, self.num_classes) if self.num_classes > 0 else nn.Identity()


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
    if spec in _FAMILIES:
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
        raise ValueError(f"unknown Hugging Face family 'hf:{spec}'; families: {_families_line()} "
                         f"(or a hub id 'org/name' in the cache, or a save_pretrained directory).{hint}")
    path = cached_snapshot(spec)
    if path is None:
        raise ValueError(f"hf:{spec} is not in the Hugging Face cache ({cache_dir()}) and nothing is downloaded; "
                         f"fill the cache where there is network (`hf download {spec}`) and copy it here, "
                         f"or set HF_HUB_CACHE to a cache that has it.")
    return path, spec


@contextlib.contextmanager
def _quiet_transformers():
    """Silence 'weights not initialized' notices (the classifier is replaced anyway) and load progress bars."""
    from transformers.utils import logging

    level, bars = logging.get_verbosity(), logging.is_progress_bar_enabled()
    logging.set_verbosity_error()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        logging.set_verbosity(level)
        if bars:
            logging.enable_progress_bar()


def _family_of(config, where: str) -> _Family:
    family = _FAMILIES.get(config.model_type)
    if family is None:
        raise ValueError(f"{where}: model type {config.model_type!r} is not supported; supported: "
                         f"{', '.join(HF_FAMILIES)}.")
    return family


def _random_config(family: str, *, in_chans: int, img_size, kwargs: dict):
    from transformers import CONFIG_MAPPING

    from huggingface_hub.errors import StrictDataclassError

    cls = CONFIG_MAPPING[family]
    fields = [p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "kwargs")]
    bad = sorted(set(kwargs) - set(fields))
    if bad:
        raise ValueError(f"hf:{family} does not take {', '.join(bad)}; its config fields are {', '.join(fields)}.")
    args = dict(kwargs, num_channels=int(in_chans))
    if img_size is not None and "image_size" in fields:
        args["image_size"] = int(img_size)
    try:
        return cls(**args)
    except (TypeError, ValueError, StrictDataclassError) as exc:
        first = str(exc).strip().splitlines()
        raise ValueError(f"hf:{family}: the config rejects these options ({' '.join(first[:2])}); "
                         f"check the field types (floats as 2.0, lists of per-stage values).") from exc


def create(spec: str, *, pretrained: bool, num_classes: int, in_chans: int, img_size, kwargs: dict):
    """Build the :class:`HFNet` for ``hf:spec``. Returns (model, config, directory or None, label)."""
    from transformers import AutoConfig, AutoModelForImageClassification

    path, label = _resolve_dir(spec)
    if path is None:
        if pretrained:
            raise ValueError(f"hf:{spec} builds a randomly initialised model; for pretrained weights give a hub id "
                             f"in the cache (e.g. hf:microsoft/cvt-21) or a save_pretrained directory.")
        config = _random_config(spec, in_chans=in_chans, img_size=img_size, kwargs=kwargs)
        with _quiet_transformers():
            net = AutoModelForImageClassification.from_config(config)
    else:
        if kwargs:
            raise ValueError(f"hf:{spec} loads a saved model whose config is fixed; options "
                             f"{sorted(kwargs)} apply only to families ({_families_line()}).")
        config = AutoConfig.from_pretrained(path, local_files_only=True)
        _family_of(config, f"hf:{spec}")
        with _quiet_transformers():
            net = AutoModelForImageClassification.from_pretrained(path, local_files_only=True)
    family = _family_of(config, f"hf:{spec}")
    # What the family's classifier takes in is the pooled representation: keep its width, drop it.
    linears = [m for m in net.classifier.modules() if isinstance(m, nn.Linear)]
    if not linears:
        raise ValueError(f"hf:{spec}: {type(net).__name__} has no linear classifier to read the feature width from.")
    width = linears[0].in_features
    net.classifier = nn.Identity()
    return HFNet(net, width, num_classes, family.forward_kwargs), config, path, label


def input_size(config, img_size) -> tuple[int, int, int]:
    size = img_size if img_size is not None else getattr(config, "image_size", 224)
    hw = (size, size) if isinstance(size, int) else tuple(size)[-2:]
    return (int(config.num_channels), int(hw[0]), int(hw[1]))


def _blocks(base: nn.Module, pattern: str) -> list[tuple[str, int]]:
    """(block path relative to the base model, stage index) for a table pattern."""
    head, star, tail = pattern.partition(".*")
    containers = ([(f"{head}.{s}{tail}", int(s)) for s, _ in base.get_submodule(head).named_children()]
                  if star else [(pattern, 0)])
    return [(f"{c}.{b}", stage) for c, stage in containers for b, _ in base.get_submodule(c).named_children()]


def build_catalogue(model: HFNet, config, size: tuple[int, int, int], device: torch.device) -> list[Tap]:
    """Taps: the stem, every block (input -> output), then ``pre_logits``."""
    family = _family_of(config, type(model.net).__name__)
    prefix = f"net.{model.net.base_model_prefix}."
    blocks = _blocks(model.base, family.blocks)
    stage_of = {prefix + path: stage for path, stage in blocks}
    stem = prefix + family.stem
    candidates = list(stage_of)
    pre, _, _, _, outputs, order = dummy_forward(model, [stem] + candidates, candidates, size, device)
    taps = []
    for name in [stem] + order:
        out = outputs[name]
        shape = tuple(out.shape[1:])
        tap_name = STEM if name == stem else name[len(prefix):]
        if out.dim() == 4:   # transformers keeps maps channels-first
            taps.append(Tap(tap_name, name, "map", shape[0], layout="NCHW", shape=shape))
        elif out.dim() == 3:
            cls = name != stem and bool(family.cls(config, stage_of[name]))
            n_prefix = 1 if cls else (family.stem_prefix if name == stem else 0)
            taps.append(Tap(tap_name, name, "tokens", shape[-1], prefix_tokens=n_prefix, cls_token=cls, shape=shape))
        else:
            raise ValueError(f"tap {tap_name!r} ({name}) outputs shape {tuple(out.shape)}; expected 3-d or 4-d.")
    taps.append(Tap("pre_logits", None, "vector", int(pre.shape[1]), shape=tuple(pre.shape[1:])))
    return taps


def normalization(config, path: str | None, label: str) -> Normalization:
    """The model's image processor statistics (its preprocessor_config.json), else the family
    image processor's defaults."""
    channels = int(config.num_channels)
    if path is not None:
        proc = Path(path) / "preprocessor_config.json"
        if proc.is_file():
            try:
                stats = json.loads(proc.read_text(encoding="utf-8"))
                return from_stats(stats["image_mean"], stats["image_std"], channels,
                                  f"hf image processor ({label})")
            except (OSError, ValueError, KeyError, TypeError):
                pass   # unreadable or incomplete: the family defaults below
    from transformers.models.auto.image_processing_auto import (IMAGE_PROCESSOR_MAPPING_NAMES,
                                                                get_image_processor_class_from_name)

    names = IMAGE_PROCESSOR_MAPPING_NAMES.get(config.model_type) or {}
    for class_name in (names.values() if isinstance(names, dict) else names):
        cls = get_image_processor_class_from_name(class_name) if class_name else None
        if cls is not None:
            defaults = cls()
            return from_stats(defaults.image_mean, defaults.image_std, channels,
                              f"hf {class_name} defaults ({config.model_type})")
    raise ValueError(f"{label}: found no image processor for model type {config.model_type!r}.")
