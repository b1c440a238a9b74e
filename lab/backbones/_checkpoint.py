"""Checkpoint files: safe reading (safetensors, or torch.load(weights_only=True)) and a strict fit check.

One mismatch is fitted rather than refused: a checkpoint saved for 3-channel images loaded
into a model for 1-channel data (or the reverse) gets its stem convolution adapted as timm
adapts pretrained weights (``timm.models._manipulate.adapt_input_conv``: summed over RGB for
one channel; repeated and scaled by 1/3 for three from one), with one warning saying so.

Which file a spec names is :func:`lab.backbones.resolve_checkpoint`'s job (the registry's
checkpoint sources); this module reads and fits the file it resolved to.
"""
from __future__ import annotations

import os
import pickle
import warnings

import torch
from torch import nn


def classifier_name(model: nn.Module) -> str | None:
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


def read_state_dict(path) -> dict[str, torch.Tensor]:
    """Read a checkpoint file (a path or a :class:`lab.backbones.Checkpoint`) without arbitrary unpickling;
    unwrap 'state_dict'/'model'; strip wrapper prefixes."""
    kind = getattr(path, "kind", None) or ("safetensors" if os.fspath(path).endswith(".safetensors") else "torch")
    path = os.fspath(path)
    if kind == "safetensors":
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


def _stem_key(model: nn.Module) -> str | None:
    """State-dict key of the first convolution's weight (the one that sees the images), if any."""
    for name, module in model.named_modules():
        if isinstance(module, nn.Conv2d):
            return f"{name}.weight"
    return None


def _adapt_stem(model: nn.Module, state: dict, own: dict, path: str) -> dict:
    """``state`` with the stem conv adapted from 3 to 1 input channels or from 1 to 3, warning once."""
    key = _stem_key(model)
    if key is None or key not in state or key not in own:
        return state
    got, want = tuple(state[key].shape), tuple(own[key].shape)
    if len(got) != 4 or got == want or got[:1] + got[2:] != want[:1] + want[2:] or {got[1], want[1]} != {1, 3}:
        return state
    from timm.models import adapt_input_conv

    how = ("summed over its RGB input channels" if want[1] == 1
           else "its one input channel repeated to RGB and scaled by 1/3")
    warnings.warn(f"checkpoint {path!r}: {key} {got} adapted to the model's {want[1]} input channel"
                  f"{'s' if want[1] > 1 else ''} ({how}, as timm's adapt_input_conv does for pretrained "
                  f"weights) -> {want}.", stacklevel=4)
    return {**state, key: adapt_input_conv(want[1], state[key], base_chans=got[1]).to(state[key].dtype)}


def load_checkpoint(model: nn.Module, checkpoint) -> None:
    """Copy the weights of ``checkpoint`` (a path or a resolved :class:`lab.backbones.Checkpoint`) into
    ``model``: strict, except a classifier of another size (kept, with a warning) and a 1 <-> 3 channel stem
    (adapted, with a warning). Raises ValueError naming the missing, unexpected and mismatched keys."""
    state = read_state_dict(checkpoint)
    path = os.fspath(checkpoint)
    own = model.state_dict()
    state = _adapt_stem(model, state, own, path)
    head = classifier_name(model)
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


