"""A backbone's taps and the traced dummy forward that every model source and the module taps share."""
from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

from lab.catalogue import HEAD_LAYER

PRE_LOGITS = HEAD_LAYER
"""The last tap, the input of the classifier head: the catalogue's :data:`~lab.catalogue.HEAD_LAYER` (one name)."""
STEM = "stem"


def first_tensor(output):
    """The tensor a module returns: itself, or the first element of a tuple/list/ModelOutput
    (Hugging Face layers return ``(hidden_state, ...)``)."""
    if torch.is_tensor(output):
        return output
    if isinstance(output, dict):
        output = list(output.values())
    if isinstance(output, (tuple, list)) and output and torch.is_tensor(output[0]):
        return output[0]
    return None


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
    after_features : bool
        True for a module that runs in ``forward_head`` (after ``forward_features``), so extraction
        runs the head for it; only module taps (:meth:`Backbone.resolve_layers`) can be.
    """

    name: str
    module_name: str | None
    kind: str
    dim: int
    layout: str = ""
    prefix_tokens: int = 0
    cls_token: bool = False
    shape: tuple = ()
    after_features: bool = False


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




def owns_params(module: nn.Module) -> bool:
    return any(True for _ in module.parameters())


def trace(model: nn.Module, watched: list[str], run: Callable[[], torch.Tensor], *, shapes_only: bool = False):
    """Run ``run()`` once with hooks on ``watched`` modules; hooks are removed in ``finally``.

    Returns (result, starts, ends, calls, outputs): a logical clock at each module's start and
    end, the number of calls, and each module's first output tensor (detached; with ``shapes_only``
    a meta tensor of its shape, so watching every module of a large model keeps no activations).
    """
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
            out = first_tensor(output)
            if out is not None and name not in outputs:
                outputs[name] = torch.empty(out.shape, device="meta") if shapes_only else out.detach()
        return hook

    try:
        for name in watched:
            module = model.get_submodule(name)
            handles.append(module.register_forward_pre_hook(pre_hook(name)))
            handles.append(module.register_forward_hook(post_hook(name)))
        with torch.inference_mode():
            result = run()
    finally:
        for handle in handles:
            handle.remove()
    return result, starts, ends, calls, outputs


def dummy_forward(model: nn.Module, watched: list[str], candidates: list[str], input_size, device,
                  forward: Callable[[torch.Tensor], torch.Tensor] | None = None):
    """One traced forward of a seeded random (1, C, H, W) input to order the candidate blocks.

    Blocks that do not run exactly once or return no tensor are dropped with a warning.
    Returns (pre_logits, starts, ends, calls, outputs, blocks in execution order).
    """
    gen = torch.Generator().manual_seed(0)
    x = torch.randn((1, *input_size), generator=gen).to(device)  # (1, C, H, W)
    forward = forward or (lambda t: model.forward_head(model.forward_features(t), pre_logits=True))
    try:
        pre_logits, starts, ends, calls, outputs = trace(model, watched, lambda: forward(x))
    except (RuntimeError, ValueError, AssertionError, TypeError) as exc:
        raise ValueError(f"{type(model).__name__} failed on a dummy input of shape {(1, *input_size)} "
                         f"({type(exc).__name__}: {str(exc)[:300]}); check img_size, in_chans and the model "
                         f"options (e.g. patch_size, window_size).") from exc
    blocks = []
    for name in candidates:
        n_calls = calls.get(name, 0)
        if n_calls != 1 or name not in outputs:
            why = ("never runs" if n_calls == 0 else f"runs {n_calls} times per forward" if n_calls > 1
                   else "does not return a tensor")
            warnings.warn(f"block {name!r} {why}; it is left out of the layer catalogue.", stacklevel=4)
            continue
        blocks.append(name)
    blocks.sort(key=lambda n: ends[n])
    if not blocks:
        raise ValueError(f"found no blocks to tap in {type(model).__name__}; expected timm's feature_info "
                         f"or child modules with parameters.")
    return pre_logits, starts, ends, calls, outputs, blocks


@contextlib.contextmanager
def eval_mode(model: nn.Module):
    """Eval mode for the duration; restore every module's previous flag afterwards.

    Nothing to do (and nothing to restore) when no module is training: flipping and restoring every
    module's flag is host time that a GPU forward waiting on the host pays on every call."""
    flags = [(m, m.training) for m in model.modules() if m.training]
    if not flags:
        yield
        return
    model.eval()
    try:
        yield
    finally:
        for module, flag in flags:
            module.training = flag
