"""Checkpoint files: safe reading (safetensors, or torch.load(weights_only=True)) and a strict fit check.

``load(checkpoint=...)`` takes a path only. A stored run's weights (``"run:ID[/seed]"``)
are resolved to a path first by whoever holds the store (``lab.store.resolve_checkpoint``).
"""
from __future__ import annotations

import os
import pickle
import warnings

import torch
from torch import nn


def checkpoint_path(checkpoint) -> str:
    """The checkpoint's path, checked to be a file; a ``run:`` spec gets told where it is resolved."""
    spec = os.fspath(checkpoint)
    if not os.path.isfile(spec):
        if spec.startswith("run:"):
            raise ValueError(f"checkpoint {spec!r} names a stored run, not a file; resolve it first with "
                             f"lab.store.resolve_checkpoint({spec!r}) (runs and the app do this for you).")
        raise ValueError(f"checkpoint file {spec!r} does not exist; expected a .safetensors or PyTorch file.")
    return spec


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


def read_state_dict(path: str) -> dict[str, torch.Tensor]:
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


def load_checkpoint(model: nn.Module, path: str) -> None:
    state = read_state_dict(path)
    own = model.state_dict()
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


