"""Backbones and their layer catalogue.

:func:`load` builds any timm model (or the teaching MLP, ``"mlp"``), optionally with
pretrained weights from timm's own cache/hub or a local checkpoint, and describes
its layers as an ordered list of *taps*::

    bb = lab.backbones.load("resnet18", in_chans=1)
    bb.layers   # ['stem', 'layer1.0', 'layer1.1', ..., 'layer4.1', 'pre_logits']

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

One forward pass on a tiny dummy input at load time checks that every tap runs
exactly once, orders the taps by execution, and records each tap's output kind
(``"map"`` N×C×H×W or N×H×W×C, ``"tokens"`` N×T×D, ``"vector"`` N×D) and pooled width.

Seed-paper families that work with random init on CPU: ResNet (``resnet18``),
ViT (``vit_tiny_patch16_224``, pass ``img_size``/``patch_size`` for small images),
Swin (``swin_tiny_patch4_window7_224``; NHWC block outputs are handled), PVT-v2
(``pvt_v2_b0``), PoolFormer (``poolformer_s12``), ConvNeXt-V2 (``convnextv2_atto``).
timm has no CvT (convolutional vision transformer) model, so that family is not
available here.
"""
from __future__ import annotations

import difflib
import os
import pickle
import warnings
from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

from lab.device import resolve_device

__all__ = ["Backbone", "Tap", "load", "register_checkpoint_resolver", "PRE_LOGITS"]

PRE_LOGITS = "pre_logits"
_STEM = "stem"
_CHECKPOINT_RESOLVERS: dict[str, Callable[[str], str | os.PathLike]] = {}


@dataclass(frozen=True)
class Tap:
    """One layer of the catalogue.

    Attributes
    ----------
    name : str
        Tap name (``"stem"``, a block's module name such as ``"layer1.0"``, or ``"pre_logits"``).
    module_name : str or None
        Module whose forward output is the tap (None for ``pre_logits``, which is
        computed from ``forward_head``).
    kind : {"map", "tokens", "vector"}
        Output kind: feature map (N, C, H, W) or (N, H, W, C), tokens (N, T, D), vector (N, D).
    dim : int
        Width after default pooling (channels C, token width D, or vector width D).
    layout : str
        ``"NCHW"`` or ``"NHWC"`` for maps; ``""`` otherwise.
    prefix_tokens : int
        Number of prefix (class/register) tokens at the start of a tokens output.
    cls_token : bool
        True when token 0 is a class token that pooling should take (ViT blocks).
    shape : tuple
        Output shape of one sample at load time (without the batch dimension).
    """

    name: str
    module_name: str | None
    kind: str
    dim: int
    layout: str = ""
    prefix_tokens: int = 0
    cls_token: bool = False
    shape: tuple = ()


def register_checkpoint_resolver(prefix: str, fn: Callable[[str], str | os.PathLike]) -> None:
    """Let ``load(checkpoint="PREFIX:...")`` resolve symbolic checkpoints to files.

    Parameters
    ----------
    prefix : str
        Scheme without the colon, e.g. ``"run"`` for ``"run:ID[/seed]"``.
    fn : callable
        ``fn(spec) -> path``; receives the whole spec string (``"run:abc123/0"``)
        and returns the path of a checkpoint file.
    """
    prefix = str(prefix).rstrip(":")
    if not prefix or not callable(fn):
        raise ValueError(f"register_checkpoint_resolver needs a non-empty prefix and a callable. "
                         f"Got {prefix!r}, {fn!r} instead.")
    _CHECKPOINT_RESOLVERS[prefix] = fn


class _ModuleGroup(nn.Module):
    """Several modules (and loose parameters) of one model seen as one module.

    Shares the model's modules and ``Parameter`` objects (no copies), so its
    ``state_dict``/``parameters`` reflect and update the model.
    """

    def __init__(self, modules: dict[str, nn.Module], params: dict[str, nn.Parameter]):
        super().__init__()
        for name, module in modules.items():
            self.add_module(name, module)
        for name, param in params.items():
            self.register_parameter(name, param)


def _owns_params(module: nn.Module) -> bool:
    return any(True for _ in module.parameters())


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


def _classifier_name(model: nn.Module) -> str | None:
    """Module name of the classifier (timm's ``get_classifier``), or pretrained_cfg's 'classifier'."""
    getter = getattr(model, "get_classifier", None)
    if callable(getter):
        try:
            head = getter()
        except TypeError:
            head = None
        if isinstance(head, nn.Module):
            for name, module in model.named_modules():
                if module is head and name:
                    return name
    cfg = getattr(model, "pretrained_cfg", None) or {}
    name = cfg.get("classifier") if isinstance(cfg, dict) else None
    return name if isinstance(name, str) else None


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


def _build_catalogue(model: nn.Module, input_size: tuple[int, int, int], device: torch.device):
    """One dummy forward: find the stem, order the taps, record kinds and widths.

    Returns (taps, stem_group) where stem_group is (module names, top-level parameter names).
    """
    candidates = _candidate_blocks(model)
    top = [n for n, _ in model.named_children()]
    watched = list(dict.fromkeys(top + candidates))
    starts: dict[str, int] = {}
    ends: dict[str, int] = {}
    calls: dict[str, int] = {}
    outputs: dict[str, torch.Tensor] = {}
    clock = [0]
    handles = []

    def pre_hook(name):
        def hook(module, args):
            clock[0] += 1
            starts.setdefault(name, clock[0])
        return hook

    def post_hook(name):
        def hook(module, args, output):
            clock[0] += 1
            ends.setdefault(name, clock[0])
            calls[name] = calls.get(name, 0) + 1
            if torch.is_tensor(output) and name not in outputs:
                outputs[name] = output.detach()
        return hook

    try:
        for name in watched:
            module = model.get_submodule(name)
            handles.append(module.register_forward_pre_hook(pre_hook(name)))
            handles.append(module.register_forward_hook(post_hook(name)))
        gen = torch.Generator().manual_seed(0)
        x = torch.randn((1, *input_size), generator=gen).to(device)  # (1, C, H, W)
        with torch.inference_mode():
            pre_logits = model.forward_head(model.forward_features(x), pre_logits=True)
    except (RuntimeError, ValueError, AssertionError) as exc:
        raise ValueError(f"{type(model).__name__} failed on a dummy input of shape {(1, *input_size)} "
                         f"({type(exc).__name__}: {str(exc)[:300]}); check img_size, in_chans and the model "
                         f"options (e.g. patch_size, window_size).") from exc
    finally:
        for handle in handles:
            handle.remove()

    blocks = []
    for name in candidates:
        n_calls = calls.get(name, 0)
        if n_calls != 1 or name not in outputs:
            why = ("never runs" if n_calls == 0 else f"runs {n_calls} times per forward" if n_calls > 1
                   else "does not return a tensor")
            warnings.warn(f"block {name!r} {why}; it is left out of the layer catalogue.", stacklevel=3)
            continue
        blocks.append(name)
    blocks.sort(key=lambda n: ends[n])
    if not blocks:
        raise ValueError(f"found no blocks to tap in {type(model).__name__}; expected timm's feature_info "
                         f"or child modules with parameters.")

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


class Backbone:
    """A model on a device plus its layer catalogue. Build it with :func:`load`.

    Attributes
    ----------
    model : torch.nn.Module
        The timm model (or :class:`lab._mlp.MLP`), in eval mode on ``device``.
    name : str
        The name it was loaded by.
    device : torch.device
    taps : list[Tap]
        Ordered input -> output; the last is ``pre_logits``.
    in_chans : int
    input_size : tuple[int, int, int]
        (C, H, W) of the dummy input used to build the catalogue.
    """

    def __init__(self, model: nn.Module, *, name: str, device: torch.device, taps: list[Tap],
                 stem_group, in_chans: int, input_size: tuple[int, int, int]):
        self.model = model
        self.name = name
        self.device = device
        self.taps = list(taps)
        self.in_chans = int(in_chans)
        self.input_size = tuple(input_size)
        self._stem_group = stem_group
        self._by_name = {tap.name: tap for tap in self.taps}

    @property
    def layers(self) -> list[str]:
        """Tap names, input -> output; the last is ``"pre_logits"``."""
        return [tap.name for tap in self.taps]

    @property
    def num_features(self) -> int:
        """Width of the pre-logits features (what the classifier sees)."""
        return self._by_name[PRE_LOGITS].dim

    @property
    def img_size(self) -> int:
        """Image side used to build the catalogue (H of ``input_size``)."""
        return int(self.input_size[1])

    def tap(self, name: str) -> Tap:
        """The :class:`Tap` called ``name``; ValueError listing valid names otherwise."""
        try:
            return self._by_name[name]
        except (KeyError, TypeError):
            raise ValueError(f"layer {name!r} is not a tap of {self.name}; valid: {', '.join(self.layers)}") from None

    def tap_module(self, name: str) -> nn.Module | None:
        """Module whose weights tap ``name`` reflects.

        A block tap gives the block; ``"stem"`` gives the stem's parametrised
        top-level modules (and top-level parameters such as ViT's ``pos_embed`` and
        ``cls_token``), grouped in one module that shares the model's parameters;
        ``"pre_logits"`` gives None (it reflects the whole network).
        """
        tap = self.tap(name)
        if tap.name == PRE_LOGITS:
            return None
        if tap.name == _STEM and self._stem_group is not None:
            modules, params = self._stem_group
            if len(modules) == 1 and not params:
                return self.model.get_submodule(modules[0])
            return _ModuleGroup({n: self.model.get_submodule(n) for n in modules},
                                {n: getattr(self.model, n) for n in params})
        return self.model.get_submodule(tap.module_name)

    def block_modules(self) -> list[tuple[str, nn.Module]]:
        """(tap name, module) for every tap that owns weights, input -> output (for Layer FT / SCL FT)."""
        out = []
        for tap in self.taps:
            module = self.tap_module(tap.name)
            if module is not None:
                out.append((tap.name, module))
        return out

    def head_module(self) -> nn.Module:
        """The classifier module (``model.get_classifier()``); an Identity when num_classes is 0."""
        return self.model.get_classifier()

    def reset_head(self, num_classes: int) -> nn.Module:
        """Replace the classifier by a fresh one with ``num_classes`` outputs (0: identity); returns it."""
        if int(num_classes) < 0:
            raise ValueError(f"num_classes must be >= 0. Got {num_classes!r} instead.")
        self.model.reset_classifier(int(num_classes))
        self.model.to(self.device)
        return self.head_module()

    def state_dict_cpu(self) -> dict[str, torch.Tensor]:
        """A detached CPU copy of the model's state_dict (a snapshot, e.g. the initial weights)."""
        return {k: v.detach().to("cpu", copy=True) for k, v in self.model.state_dict().items()}

    def pre_logits(self, x: torch.Tensor) -> torch.Tensor:
        """``forward_head(forward_features(x), pre_logits=True)`` on a batch already on the device."""
        return self.model.forward_head(self.model.forward_features(x), pre_logits=True)

    def __repr__(self) -> str:
        return (f"Backbone({self.name!r}, device={self.device}, input={self.input_size}, "
                f"layers={len(self.taps)}: {self.layers[0]} .. {self.layers[-1]})")


# ----------------------------------------------------------------------------------------------- building


def _unknown_model(name: str) -> ValueError:
    import timm

    close = difflib.get_close_matches(name, timm.list_models() + ["mlp"], n=5, cutoff=0.6)
    hint = f" Close matches: {', '.join(close)}." if close else " See timm.list_models() for names."
    return ValueError(f"unknown backbone {name!r}: expected a timm model name or 'mlp[:depth=D,width=W]'.{hint}")


def _create_timm(name: str, *, pretrained: bool, num_classes: int, in_chans: int, img_size, kwargs: dict):
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


def _resolve_checkpoint(checkpoint) -> str:
    spec = os.fspath(checkpoint)
    scheme, sep, _ = spec.partition(":")
    if sep and scheme == "run" and scheme not in _CHECKPOINT_RESOLVERS:
        # The run store registers "run:" itself; import it lazily so a fresh
        # process can load a run's weights without creating a RunStore first.
        import lab.store

        lab.store.register_checkpoint_resolver()
    if sep and scheme in _CHECKPOINT_RESOLVERS:
        spec = os.fspath(_CHECKPOINT_RESOLVERS[scheme](spec))
    if not os.path.isfile(spec):
        schemes = ", ".join(f"'{s}:'" for s in _CHECKPOINT_RESOLVERS) or "none registered"
        raise ValueError(f"checkpoint file {spec!r} does not exist; expected a .safetensors or PyTorch file "
                         f"(or a registered spec: {schemes}).")
    return spec


def _read_state_dict(path: str) -> dict[str, torch.Tensor]:
    """Read a checkpoint without arbitrary unpickling; unwrap 'state_dict'/'model'; strip wrapper prefixes."""
    if path.endswith(".safetensors"):
        from safetensors.torch import load_file

        try:
            obj = load_file(path, device="cpu")
        except Exception as exc:
            raise ValueError(f"could not read safetensors checkpoint {path!r}: {exc}") from exc
    else:
        try:
            obj = torch.load(path, map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as exc:
            raise ValueError(
                f"refused to unpickle {path!r}: it holds objects other than tensors and plain containers, and "
                f"loading it could run arbitrary code; save as safetensors or a plain state_dict "
                f"(torch.save(model.state_dict(), path))."
            ) from exc
        except Exception as exc:
            raise ValueError(f"could not read checkpoint {path!r} ({type(exc).__name__}: {exc}); expected a "
                             f".safetensors file or a torch.save'd state_dict.") from exc
    for key in ("state_dict", "model"):
        if isinstance(obj, dict) and isinstance(obj.get(key), dict):
            obj = obj[key]
            break
    if not isinstance(obj, dict) or not all(torch.is_tensor(v) for v in obj.values()):
        raise ValueError(f"checkpoint {path!r} is not a state_dict (a dict of tensor names to tensors, possibly "
                         f"under 'state_dict' or 'model'); got {type(obj).__name__}.")
    out = {}
    for key, value in obj.items():
        for prefix in ("_orig_mod.", "module.", "_orig_mod."):
            if key.startswith(prefix):
                key = key[len(prefix):]
        out[key] = value
    return out


def _few(keys, n: int = 5) -> str:
    keys = sorted(keys)
    more = f", ... ({len(keys) - n} more)" if len(keys) > n else ""
    return ", ".join(keys[:n]) + more


def _load_checkpoint(model: nn.Module, path: str) -> None:
    state = _read_state_dict(path)
    own = model.state_dict()
    head = _classifier_name(model)
    head_state = {}
    if head:
        def is_head(k):
            return k == head or k.startswith(head + ".")
        ckpt_head = {k: tuple(v.shape) for k, v in state.items() if is_head(k)}
        own_head = {k: tuple(v.shape) for k, v in own.items() if is_head(k)}
        if ckpt_head != own_head:
            state = {k: v for k, v in state.items() if not is_head(k)}
            got = ", ".join(f"{k} {s}" for k, s in sorted(ckpt_head.items())) or "none"
            warnings.warn(f"checkpoint classifier ({got}) does not match this model's head "
                          f"(num_classes={getattr(model, 'num_classes', '?')}); the head keeps its "
                          f"initialization and the checkpoint's head is ignored.", stacklevel=3)
        head_state = {k: v for k, v in state.items() if is_head(k)}
        state = {k: v for k, v in state.items() if not is_head(k)}
        own = {k: v for k, v in own.items() if not is_head(k)}
    missing = set(own) - set(state)
    unexpected = set(state) - set(own)
    mismatched = [f"{k} {tuple(state[k].shape)} vs model {tuple(own[k].shape)}"
                  for k in sorted(set(own) & set(state)) if tuple(state[k].shape) != tuple(own[k].shape)]
    if missing or unexpected or mismatched:
        parts = []
        if missing:
            parts.append(f"missing keys: {_few(missing)}")
        if unexpected:
            parts.append(f"unexpected keys: {_few(unexpected)}")
        if mismatched:
            parts.append(f"shape mismatches: {_few(mismatched, 3)}")
        raise ValueError(f"checkpoint {path!r} does not fit {type(model).__name__} ({'; '.join(parts)}). "
                         f"Load with the same backbone name and in_chans/img_size/options it was saved with.")
    model.load_state_dict({**state, **head_state}, strict=False)


def _input_size(model: nn.Module, in_chans: int, img_size) -> tuple[int, int, int]:
    if img_size is not None:
        hw = (img_size, img_size) if isinstance(img_size, int) else tuple(img_size)
    else:
        hw = getattr(getattr(model, "patch_embed", None), "img_size", None)
        if hw is None:
            cfg = getattr(model, "pretrained_cfg", None) or {}
            hw = tuple(cfg.get("input_size", (in_chans, 224, 224)))[-2:]
        hw = (hw, hw) if isinstance(hw, int) else tuple(hw)
    return (int(in_chans), int(hw[0]), int(hw[1]))


def load(name: str, *, pretrained: bool = False, checkpoint=None, num_classes: int = 0, in_chans: int = 3,
         img_size: int | None = None, device="auto", **kwargs) -> Backbone:
    """Build a backbone and its layer catalogue.

    Parameters
    ----------
    name : str
        A timm model name (``timm.list_models()``), or ``"mlp"`` /
        ``"mlp:depth=8,width=256"`` for the teaching MLP.
    pretrained : bool
        Load timm's pretrained weights from its cache or the hub. Offline without
        cached weights this raises a ValueError explaining how to pass ``checkpoint``.
    checkpoint : str or path, optional
        A ``.safetensors`` file, a PyTorch file read with ``weights_only=True``
        (never arbitrary unpickling), or a spec whose prefix was registered with
        :func:`register_checkpoint_resolver` (e.g. ``"run:ID/seed"``). State dicts may
        be nested under ``"state_dict"``/``"model"``; ``"module."`` prefixes are
        stripped. A classifier of a different size is ignored (with a warning).
    num_classes : int
        Classifier outputs; 0 (default) for no classifier.
    in_chans : int
        Input channels (timm adapts the first layer).
    img_size : int, optional
        Input side, for models that take one (ViT, Swin, the MLP, which defaults to
        32); ignored by fully convolutional models. Also the size of the dummy input
        used to build the catalogue (default: the model's own input size).
    device : str or torch.device
        ``"auto"`` (cuda, then mps, then cpu), ``"cpu"``, ``"cuda"``, ...
    **kwargs
        Passed to ``timm.create_model`` (e.g. ``patch_size=8``, ``window_size=4``, ``depth=2``).

    Returns
    -------
    Backbone
        Model in eval mode on ``device``, with ``layers``/``taps``.

    Raises
    ------
    ValueError
        Unknown name (with close matches), unusable arguments, missing pretrained
        weights, or a checkpoint that is unsafe, unreadable or does not fit.
    """
    import timm

    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"backbone name must be a non-empty string. Got {name!r} instead.")
    name = name.strip()
    dev = resolve_device(device)
    if int(num_classes) < 0:
        raise ValueError(f"num_classes must be >= 0. Got {num_classes!r} instead.")
    if name == "mlp" or name.startswith("mlp:"):
        from lab._mlp import MLP, parse_mlp_spec

        if pretrained:
            raise ValueError("the teaching 'mlp' has no pretrained weights; use pretrained=False "
                             "(optionally with checkpoint=PATH).")
        if kwargs:
            raise ValueError(f"the 'mlp' backbone takes options in its name ('mlp:depth=8,width=256'), not "
                             f"keywords. Got {sorted(kwargs)} instead.")
        side = 32 if img_size is None else int(img_size)
        model = MLP(**parse_mlp_spec(name), in_chans=in_chans, img_size=side, num_classes=int(num_classes))
    else:
        source, _ = timm.models.parse_model_name(name)
        if source is None and not timm.is_model(name):  # "hf-hub:..." / "local-dir:..." go to timm as they are
            raise _unknown_model(name)
        model = _create_timm(name, pretrained=pretrained, num_classes=int(num_classes), in_chans=int(in_chans),
                             img_size=img_size, kwargs=kwargs)
    if checkpoint is not None:
        _load_checkpoint(model, _resolve_checkpoint(checkpoint))
    model = model.to(dev).eval()
    input_size = _input_size(model, int(in_chans), img_size)
    taps, stem_group = _build_catalogue(model, input_size, dev)
    return Backbone(model, name=name, device=dev, taps=taps, stem_group=stem_group,
                    in_chans=int(in_chans), input_size=input_size)
