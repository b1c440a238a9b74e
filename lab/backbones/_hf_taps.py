"""The layer catalogue of a Hugging Face backbone: stem, every block, ``pre_logits``.

Blocks come from :data:`lab.backbones._hf_families.FAMILIES` where a family is listed, otherwise from
the model's structure (the outermost lists of model-defined modules); one traced dummy forward orders
them and picks the stem. Private: :mod:`lab.backbones._hf` re-exports :func:`build_catalogue`.
"""
from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import torch
from torch import nn

from lab.backbones._taps import PRE_LOGITS, STEM, Tap, owns_params, trace
from lab.backbones._hf_net import prefix_tokens

if TYPE_CHECKING:
    from lab.backbones._hf_types import Loaded
    from lab.backbones._hf_net import HFNet

__all__ = ["build_catalogue"]


def _is_block_list(module: nn.Module) -> bool:
    """A ModuleList/Sequential of the model's own modules with weights (not torch layers)."""
    children = list(module.children())
    return (isinstance(module, (nn.ModuleList, nn.Sequential)) and bool(children)
            and all(not type(c).__module__.startswith("torch.") and owns_params(c) for c in children))


def _outermost_lists(module: nn.Module, path: str) -> list[str]:
    found = []
    for name, child in module.named_children():
        sub = f"{path}.{name}" if path else name
        found += [sub] if _is_block_list(child) else _outermost_lists(child, sub)
    return found


def _general_units(base: nn.Module) -> list[tuple[str, list[str]]]:
    """(unit, its blocks) from the structure: the children of the outermost block lists; when
    each child holds block lists itself (a list of stages), the children of those lists."""
    units = []
    for lst in _outermost_lists(base, ""):
        children = [f"{lst}.{n}" for n, _ in base.get_submodule(lst).named_children()]
        inner = {c: _outermost_lists(base.get_submodule(c), c) for c in children}
        stages = all(inner.values())
        for c in children:
            blocks = [f"{il}.{n}" for il in inner[c] for n, _ in base.get_submodule(il).named_children()] \
                if stages else []
            units.append((c, blocks))
    return units


def _table_blocks(base: nn.Module, pattern: str) -> list[tuple[str, int]]:
    """(block path relative to the base model, stage index) for a table pattern."""
    head, star, tail = pattern.partition(".*")
    containers = ([(f"{head}.{s}{tail}", int(s)) for s, _ in base.get_submodule(head).named_children()]
                  if star else [(pattern, 0)])
    return [(f"{c}.{b}", stage) for c, stage in containers for b, _ in base.get_submodule(c).named_children()]


def build_catalogue(model: HFNet, loaded: Loaded, size: tuple[int, int, int], device: torch.device) -> list[Tap]:
    """Taps: the stem, every block (input -> output), then ``pre_logits``."""
    base = model.base
    prefix = next(name for name, m in model.named_modules() if m is base)
    prefix = prefix + "." if prefix else ""
    family = loaded.plan.family
    watched = [prefix + n for n, _ in base.named_modules() if n]
    gen = torch.Generator().manual_seed(0)
    x = torch.randn((1, *size), generator=gen).to(device)                               # (1, C, H, W)
    try:
        pre, starts, ends, calls, outputs = trace(
            model, watched, lambda: model.forward_head(model.forward_features(x), pre_logits=True))
    except (RuntimeError, ValueError, AssertionError, TypeError, IndexError) as exc:
        raise ValueError(f"{type(model.net).__name__} failed on a dummy input of shape {(1, *size)} "
                         f"({type(exc).__name__}: {str(exc)[:300]}); check img_size, in_chans and the model "
                         f"options (e.g. patch_size, window_size).") from exc

    def ok(path: str) -> bool:
        out = outputs.get(prefix + path)
        return calls.get(prefix + path, 0) == 1 and out is not None and out.dim() >= 2 and out.shape[0] == 1

    if family is not None:
        table = _table_blocks(base, family.blocks)
        stage_of = {path: stage for path, stage in table}
        for path, _ in table:
            if not ok(path):
                n = calls.get(prefix + path, 0)
                why = "never runs" if n == 0 else f"runs {n} times per forward" if n > 1 else "does not return a tensor"
                warnings.warn(f"block {path!r} {why}; it is left out of the layer catalogue.", stacklevel=3)
        blocks = [path for path, _ in table if ok(path)]
        stem = family.stem
    else:
        stage_of = {}
        blocks = []
        for unit, inner in _general_units(base):
            good = [b for b in inner if ok(b)]
            blocks += good if good else ([unit] if ok(unit) else [])
        stem = None
    if not blocks:
        raise ValueError(f"found no blocks to tap in {type(model.net).__name__}: no list of its own modules "
                         f"runs once per forward; model type {loaded.model_type!r} needs an entry in "
                         f"lab/backbones/_hf_families.FAMILIES.")
    blocks.sort(key=lambda b: ends[prefix + b])
    if stem is None:
        stem = _general_stem(base, prefix, blocks, starts, ends, ok)
    taps = []
    config = loaded.config
    for path in ([stem] if stem else []) + blocks:
        out = outputs[prefix + path]
        shape = tuple(out.shape[1:])
        tap_name = STEM if path == stem else path
        if out.dim() == 4:   # transformers keeps maps channels-first
            taps.append(Tap(tap_name, prefix + path, "map", shape[0], layout="NCHW", shape=shape))
        elif out.dim() == 3:
            if family is not None:
                cls = path != stem and bool(family.cls(config, stage_of[path]))
                n_prefix = 1 if cls else (family.stem_prefix if path == stem else 0)
            else:
                n_prefix = prefix_tokens(config, shape[0], size[1:])
                cls = n_prefix > 0 and path != stem
            taps.append(Tap(tap_name, prefix + path, "tokens", shape[-1], prefix_tokens=n_prefix, cls_token=cls,
                            shape=shape))
        elif out.dim() == 2 and path != stem:
            taps.append(Tap(tap_name, prefix + path, "vector", shape[0], shape=shape))
        else:
            raise ValueError(f"tap {tap_name!r} ({prefix + path}) outputs shape {tuple(out.shape)}; "
                             f"expected 3-d or 4-d.")
    if model.num_features == 0 or model.num_features != int(pre.shape[1]):
        model.num_features = int(pre.shape[1])
        model.reset_classifier(model.num_classes)
        model.to(device)
    taps.append(Tap(PRE_LOGITS, None, "vector", int(pre.shape[1]), shape=tuple(pre.shape[1:])))
    return taps


def _general_stem(base, prefix, blocks, starts, ends, ok) -> str | None:
    """The last module with weights to finish before the first block starts (not inside a block)."""
    first = min(starts[prefix + b] for b in blocks)
    best, best_end = None, -1
    for name, module in base.named_modules():
        key = prefix + name
        if not name or key not in ends or ends[key] >= first or not owns_params(module) or not ok(name):
            continue
        if ends[key] > best_end:
            best, best_end = name, ends[key]
    return best
