"""timm models (and the teaching MLP, which speaks timm's interface): creation and layer catalogue.

How the catalogue is built (no model-name matching):

1. timm's ``feature_info`` contract names the stages (``module`` of each entry).
   Each stage is expanded into its blocks: a child ``blocks`` container
   (Swin, PVT-v2, PoolFormer, ConvNeXt), or the stage itself when it is a
   ``Sequential``/``ModuleList`` of same-type blocks (ResNet); otherwise the entry
   is a block already (ViT's ``blocks.i``). Entries without parameters (ResNet's
   ``act1``) are not blocks. Models without ``feature_info`` fall back to their
   top-level child modules, expanded the same way.
2. The *stem* is whatever runs, at the top level, before the first block
   (ResNet conv1/bn1/maxpool, ViT patch embedding + position embedding, ...); its
   tap is the output of the last of those modules.
3. The last tap, ``pre_logits``, is ``model.forward_head(model.forward_features(x),
   pre_logits=True)``: the pooled features the classifier sees.

Normalization: timm's ``pretrained_cfg`` mean/std (``timm.data.resolve_data_config``);
models without recorded statistics (the MLP) use ``(x - 0.5) / 0.5``.
"""
from __future__ import annotations

import difflib

import torch
from torch import nn

from lab.backbones._checkpoint import classifier_name as _classifier_name
from lab.backbones._taps import PRE_LOGITS, STEM as _STEM, Tap, dummy_forward, owns_params as _owns_params
from lab.backbones._normalize import Normalization, from_stats, lab_default


def _expand_blocks(model: nn.Module, name: str) -> list[str]:
    """Module names of the blocks inside ``name`` (a stage), or ``[name]`` if it is a block.

    A stage holds its blocks in a child ``blocks`` container, or is itself a
    ``Sequential``/``ModuleList`` of same-type blocks. A ``ModuleList`` is never
    called, so nested ones are expanded further.
    """
    module = model.get_submodule(name)
    inner = getattr(module, "blocks", None)
    if isinstance(inner, (nn.Sequential, nn.ModuleList)) and len(inner) > 0:
        children = [f"{name}.blocks.{child}" for child, _ in inner.named_children()]
    elif (isinstance(module, (nn.Sequential, nn.ModuleList)) and len(module) > 0
          and len({type(child) for child in module}) == 1):
        children = [f"{name}.{child}" for child, _ in module.named_children()]
    else:
        return [name]
    out = []
    for child in children:
        out += _expand_blocks(model, child) if isinstance(model.get_submodule(child), nn.ModuleList) else [child]
    return out


def _resolves(model: nn.Module, name) -> bool:
    try:
        model.get_submodule(name)
    except (AttributeError, TypeError):
        return False
    return True


def _with_siblings(model: nn.Module, name: str) -> list[str]:
    """All blocks of the container holding ``name`` when feature_info lists only some of them (Hiera)."""
    parent, _, _ = name.rpartition(".")
    if not parent:
        return [name]
    container = model.get_submodule(parent)
    if isinstance(container, (nn.Sequential, nn.ModuleList)) and len({type(c) for c in container}) == 1:
        return [f"{parent}.{child}" for child, _ in container.named_children()]
    return [name]


def _expand(model: nn.Module, stages: list[str]) -> list[str]:
    names: list[str] = []
    # Stages first take their siblings too: EfficientNet's and MobileNet's feature_info names only the
    # stages where the resolution drops (blocks.0, 1, 2, 4, 6), but blocks.3 and blocks.5 are layers as well.
    stages = list(dict.fromkeys(s for stage in stages for s in _with_siblings(model, stage)))
    for stage in stages:
        for block in _expand_blocks(model, stage):
            for name in _with_siblings(model, block):
                # Nested parameter-free entries (VGG's ReLUs) are still layers; a top-level one is part of the stem.
                keep = _owns_params(model.get_submodule(name)) or "." in name
                if keep and name not in names and name != PRE_LOGITS:
                    names.append(name)
    # Top-level entries ahead of the first nested block (ResNet's act1, MobileNet's bn1) belong to the stem.
    first_nested = next((i for i, n in enumerate(names) if "." in n), 0)
    return names[first_nested:]


def _candidate_blocks(model: nn.Module) -> list[str]:
    """Block module names from timm's feature_info; fall back to the top-level children."""
    info = getattr(model, "feature_info", None)
    names: list[str] = []
    if isinstance(info, (list, tuple)):
        stages = [fi["module"] for fi in info if isinstance(fi, dict) and _resolves(model, fi.get("module"))]
        names = _expand(model, stages)
    if not names:
        head = _classifier_name(model)
        names = _expand(model, [n for n, m in model.named_children() if n != head and _owns_params(m)])
    return names


def _stage_channels(model: nn.Module) -> dict[str, int]:
    """num_chs of each feature_info module, so blocks inside it can tell NCHW from NHWC."""
    out = {}
    for fi in getattr(model, "feature_info", None) or []:
        if isinstance(fi, dict) and "module" in fi and "num_chs" in fi:
            out[fi["module"]] = int(fi["num_chs"])
    return out


def _describe(name: str, module_name: str | None, out: torch.Tensor, *, model: nn.Module,
              expected_chs: int | None, is_stem: bool) -> Tap:
    """Build a Tap from one sample output of the dummy forward."""
    shape = tuple(out.shape[1:])
    if out.dim() == 2:
        return Tap(name, module_name, "vector", shape[0], shape=shape)
    if out.dim() == 4:
        if expected_chs is not None and shape[0] != expected_chs and shape[-1] == expected_chs:
            layout = "NHWC"
        elif expected_chs is not None and shape[0] == expected_chs:
            layout = "NCHW"
        else:
            layout = "NHWC" if str(getattr(model, "output_fmt", "NCHW")).upper() == "NHWC" else "NCHW"
        dim = shape[-1] if layout == "NHWC" else shape[0]
        return Tap(name, module_name, "map", dim, layout=layout, shape=shape)
    if out.dim() == 3:
        prefix = int(getattr(model, "num_prefix_tokens", 0) or 0)
        num_patches = getattr(getattr(model, "patch_embed", None), "num_patches", None)
        has_prefix = prefix > 0 and num_patches is not None and shape[0] == int(num_patches) + prefix
        # The class token before any block is the same learned vector for every image: pool patches there.
        cls = has_prefix and getattr(model, "cls_token", None) is not None and not is_stem
        return Tap(name, module_name, "tokens", shape[-1], prefix_tokens=prefix if has_prefix else 0,
                   cls_token=bool(cls), shape=shape)
    raise ValueError(f"tap {name!r} ({module_name}) outputs a {out.dim()}-d tensor of shape {tuple(out.shape)}; "
                     f"expected 2-d (vector), 3-d (tokens) or 4-d (map).")


def build_catalogue(model: nn.Module, input_size: tuple[int, int, int], device: torch.device):
    """One dummy forward: find the stem, order the taps, record kinds and widths.

    Returns (taps, stem_group) where stem_group is (module names, top-level parameter names).
    """
    candidates = _candidate_blocks(model)
    top = [n for n, _ in model.named_children()]
    watched = list(dict.fromkeys(top + candidates))
    pre_logits, starts, ends, calls, outputs, blocks = dummy_forward(model, watched, candidates, input_size,
                                                                     device)

    # Stem: top-level modules (other than the first block's ancestor) that finish before the first block starts.
    first_top = blocks[0].split(".")[0]
    stem_modules = [n for n in top if n != first_top and n in ends and ends[n] < starts[blocks[0]]
                    and calls.get(n) == 1]
    stem_params = [n for n, _ in model.named_parameters(recurse=False)]
    has_stem = first_top != blocks[0] and _STEM not in blocks and stem_modules and (
        any(_owns_params(model.get_submodule(n)) for n in stem_modules) or stem_params)

    channels = _stage_channels(model)

    def expected(block: str) -> int | None:
        for stage, chs in channels.items():
            if block == stage or block.startswith(stage + "."):
                return chs
        return None

    taps = [_describe(name, name, outputs[name], model=model, expected_chs=expected(name), is_stem=False)
            for name in blocks]
    if has_stem:
        stem_out = max(stem_modules, key=lambda n: ends[n])
        if stem_out in outputs:
            # The stem feeds the first block, so it has that block's width: tells NCHW from NHWC.
            taps.insert(0, _describe(_STEM, stem_out, outputs[stem_out], model=model, expected_chs=taps[0].dim,
                                     is_stem=True))
        else:
            has_stem = False
    if pre_logits.dim() != 2:
        raise ValueError(f"{type(model).__name__}.forward_head(..., pre_logits=True) returned shape "
                         f"{tuple(pre_logits.shape)}; expected (N, D).")
    taps.append(Tap(PRE_LOGITS, None, "vector", int(pre_logits.shape[1]), shape=tuple(pre_logits.shape[1:])))
    stem_group = ([n for n in stem_modules if _owns_params(model.get_submodule(n))], stem_params) if has_stem else None
    return taps, stem_group


def is_timm_name(name: str) -> bool:
    """Whether timm takes ``name``: a registered architecture (with or without a pretrained tag), or
    an ``hf-hub:``/``local-dir:`` source. Raises ValueError for a path or hub id without a source."""
    import timm

    source, _ = timm.models.parse_model_name(name)
    return source is not None or timm.is_model(name)


def unknown_model(name: str, zoo: list[str] = ()) -> ValueError:
    import timm

    close = difflib.get_close_matches(name, list(zoo) + timm.list_models() + ["mlp"], n=5, cutoff=0.6)
    hint = f" Close matches: {', '.join(close)}." if close else " See timm.list_models() for names."
    return ValueError(f"unknown backbone {name!r}: expected a timm model name, 'mlp[:depth=D,width=W]', "
                      f"'hf:FAMILY|ORG/NAME|DIR' or a zoo name.{hint}")


def create(name: str, *, pretrained: bool, num_classes: int, in_chans: int, img_size, kwargs: dict):
    import timm

    base = dict(kwargs, num_classes=num_classes, in_chans=in_chans)
    if img_size is not None:
        base["img_size"] = img_size

    def build(pretrained_flag: bool, args: dict):
        try:
            return timm.create_model(name, pretrained=pretrained_flag, **args), args
        except TypeError as exc:
            # Fully convolutional models take any input size and have no img_size argument.
            if "img_size" in args and "img_size" in str(exc):
                args = {k: v for k, v in args.items() if k != "img_size"}
                return timm.create_model(name, pretrained=pretrained_flag, **args), args
            raise

    try:
        model, args = build(False, base)
    except TypeError as exc:
        raise ValueError(f"timm model {name!r} does not accept these arguments ({exc}). "
                         f"Remove the offending keyword.") from exc
    if not pretrained:
        return model
    try:
        model, _ = build(True, args)
    except Exception as exc:  # offline, not cached, no weights for this name, ...
        raise ValueError(
            f"could not get pretrained weights for {name!r} from timm's cache or the Hugging Face hub "
            f"({type(exc).__name__}: {str(exc)[:200]}). Offline or without cached weights, download them "
            f"elsewhere and pass a local file: load({name!r}, checkpoint='PATH.safetensors') "
            f"(safetensors, or a plain PyTorch state_dict)."
        ) from exc
    return model


def input_size(model: nn.Module, in_chans: int, img_size) -> tuple[int, int, int]:
    if img_size is not None:
        hw = (img_size, img_size) if isinstance(img_size, int) else tuple(img_size)
    else:
        hw = getattr(getattr(model, "patch_embed", None), "img_size", None)
        if hw is None:
            cfg = getattr(model, "pretrained_cfg", None) or {}
            hw = tuple(cfg.get("input_size", (in_chans, 224, 224)))[-2:]
        hw = (hw, hw) if isinstance(hw, int) else tuple(hw)
    return (int(in_chans), int(hw[0]), int(hw[1]))




def normalization(model: nn.Module, name: str, in_chans: int) -> Normalization:
    """timm's resolved mean/std for ``model`` (adapted to ``in_chans``); the lab default without any."""
    cfg = getattr(model, "pretrained_cfg", None) or {}
    if not isinstance(cfg, dict) or cfg.get("mean") is None or cfg.get("std") is None:
        return lab_default(in_chans)
    from timm.data import resolve_data_config

    data_cfg = resolve_data_config(model=model)
    return from_stats(data_cfg["mean"], data_cfg["std"], in_chans, f"timm pretrained_cfg ({name})")
