"""A model built elsewhere (a researcher's own) as a :class:`lab.backbones.Backbone`: :func:`wrap` does for it what
:func:`lab.backbones.load` does after building a model, so it gets the same catalogue, taps and pooling.

Three kinds of model, told apart by their interface, not their name:

- timm's interface (``forward_features`` and ``forward_head``: timm models, lab's teaching MLP): the
  catalogue of :func:`lab.backbones.load` (:func:`lab.backbones._timm.build_catalogue`);
- a Hugging Face ``transformers`` vision model: its base model (the encoder) behind the wrapper ``hf:`` uses,
  pooled as ``hf:`` pools a model without a classification head (class token, else token mean); layer names are
  read in the base model (``layers.0``; ``vit.layers.0`` as the full model names it is accepted too);
- any other ``nn.Module``: its top-level children with weights (a ``Sequential``/``ModuleList`` of one block type
  expanded into its blocks) and ``pre_logits`` = the model's own output, flattened; ``layers=`` may name any of
  its modules.

A wrapped model (DistributedDataParallel's or DataParallel's ``.module``, ``torch.compile``'s ``._orig_mod``) is
unwrapped first. The user's model is never changed: the catalogue's one dummy forward runs in eval mode (every
module's train flag is restored after it) and the wrappers below only hold it.
"""
from __future__ import annotations

import sys

import torch
from torch import nn

from lab.backbones._core import Backbone
from lab.backbones._normalize import Normalization
from lab.backbones._taps import PRE_LOGITS, Tap, eval_mode, first_tensor

__all__ = ["wrap", "unwrap", "model_device", "model_kind", "layer_names", "ModuleNet"]


def unwrap(model: nn.Module) -> nn.Module:
    """The module that holds the weights: DDP/DataParallel's ``.module`` and torch.compile's ``._orig_mod``
    removed, as many times as they are nested."""
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module (a timm, Hugging Face or any PyTorch model). "
                         f"Got {type(model).__name__} instead.")
    for _ in range(8):
        inner = getattr(model, "_orig_mod", None)
        if isinstance(inner, nn.Module):
            model = inner
            continue
        if isinstance(model, (nn.parallel.DistributedDataParallel, nn.DataParallel)):
            model = model.module
            continue
        break
    return model


def model_device(model: nn.Module) -> torch.device:
    """The one device of ``model``'s parameters and buffers (CPU for a model without any)."""
    devices = {t.device for t in list(model.parameters()) + list(model.buffers())}
    if len(devices) > 1:
        names = ", ".join(sorted(str(d) for d in devices))
        raise ValueError(f"the model's weights are spread over several devices ({names}); the monitor evaluates "
                         f"a model on one device: move it with model.to(device), or monitor each replica's "
                         f"module on its own device.")
    return devices.pop() if devices else torch.device("cpu")


def _is_hf(model: nn.Module) -> bool:
    transformers = sys.modules.get("transformers")       # a model of it means it is imported already
    return transformers is not None and isinstance(model, transformers.PreTrainedModel)


def _is_timm_like(model: nn.Module) -> bool:
    return callable(getattr(model, "forward_features", None)) and callable(getattr(model, "forward_head", None))


def model_kind(model: nn.Module) -> str:
    """``timm``, ``hf`` or ``module``: how :func:`wrap` reads ``model``."""
    return "hf" if _is_hf(model) else "timm" if _is_timm_like(model) else "module"


class ModuleNet(nn.Module):
    """Any ``nn.Module`` behind timm's interface: ``forward_features`` is its output flattened to (N, D),
    which is also its ``pre_logits``. Holds the model as ``net`` (taps are named without that prefix)."""

    def __init__(self, net: nn.Module):
        super().__init__()
        self.net = net

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        out = first_tensor(self.net(x))
        if out is None:
            raise ValueError(f"{type(self.net).__name__} returned {type(out).__name__}; the monitor needs a model "
                             f"that returns a tensor (or a tuple starting with one).")
        return out.flatten(1) if out.dim() != 2 else out                                    # (N, D)

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        return x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_features(x)

    def get_classifier(self) -> nn.Module:
        return nn.Identity()


def _module_catalogue(wrapper: ModuleNet, input_size, device) -> list[Tap]:
    """Taps of a plain module: its blocks (timm's fallback rule on the module), then ``pre_logits``."""
    from lab.backbones import _taps, _timm

    candidates = [f"net.{name}" for name in _timm._candidate_blocks(wrapper.net)]
    top = [f"net.{name}" for name, _ in wrapper.net.named_children()]
    pre, _, _, _, outputs, blocks = _taps.dummy_forward(wrapper, list(dict.fromkeys(top + candidates)),
                                                        candidates, input_size, device)
    taps = [_timm._describe(name[len("net."):], name, outputs[name], model=wrapper.net, expected_chs=None,
                            is_stem=False) for name in blocks]
    taps.append(Tap(PRE_LOGITS, None, "vector", int(pre.shape[1]), shape=tuple(pre.shape[1:])))
    return taps


def _hf_parts(model: nn.Module, input_size, device):
    """(HFNet around the base model, taps, normalization) for a transformers model."""
    import inspect

    from lab.backbones import _hf
    from lab.backbones._hf_families import ADAPTERS, FAMILIES
    from lab.backbones._hf_types import Loaded, Plan

    base = model.base_model
    config = base.config
    forward_kwargs = {}
    if "interpolate_pos_encoding" in inspect.signature(base.forward).parameters:
        forward_kwargs["interpolate_pos_encoding"] = True
    net = _hf.HFNet(base, 0, 0, forward_kwargs, pool="output", adapter=ADAPTERS.get(config.model_type))
    plan = Plan(config.model_type, type(base), config, "output", FAMILIES.get(config.model_type),
                ADAPTERS.get(config.model_type))
    loaded = Loaded(config, plan, {}, int(input_size[1]))
    net.to(device)
    taps = _hf.build_catalogue(net, loaded, input_size, device)
    return net, taps, _hf.normalization(loaded, None, type(model).__name__)


def wrap(model: nn.Module, input_size: tuple[int, int, int], *, normalize: bool = True) -> Backbone:
    """``model`` as a Backbone on its device (the model itself, not a copy), its catalogue built for
    ``input_size`` (C, H, W) by one dummy forward in eval mode (the train flags are restored).

    ``model`` must be unwrapped already (:func:`unwrap`).

    ``normalize`` False: the images go to the model as they are (float; uint8 is scaled to [0, 1]); True: the
    model's own statistics (timm's pretrained_cfg, the Hugging Face processor's defaults, else (x - 0.5) / 0.5).
    """
    from lab.backbones import _normalize, _timm

    device = model_device(model)
    kind = model_kind(model)
    name = type(model).__name__
    with eval_mode(model):
        if kind == "hf":
            net, taps, stats = _hf_parts(model, input_size, device)
            stem_group = None
        elif kind == "timm":
            net = model
            taps, stem_group = _timm.build_catalogue(model, input_size, device)
            stats = _timm.normalization(model, name, input_size[0])
        else:
            net = ModuleNet(model)
            taps, stem_group = _module_catalogue(net, input_size, device), None
            stats = _normalize.lab_default(input_size[0])
    if not normalize:
        channels = int(input_size[0])
        stats = Normalization((0.0,) * channels, (1.0,) * channels, channels, "none: images are model input")
    return Backbone(net, name=f"{name} (monitored)", device=device, taps=taps, stem_group=stem_group,
                    in_chans=int(input_size[0]), input_size=tuple(int(v) for v in input_size),
                    normalization=stats, source=f"monitor:{kind}")


def layer_names(model: nn.Module, layers) -> list[str] | None:
    """The requested layers in the catalogue's namespace: a Hugging Face model's names may carry its base
    model's prefix (``vit.layers.0``), which the catalogue (named in the base model) does not."""
    if layers is None:
        return None
    names = [layers] if isinstance(layers, str) else list(layers)
    bad = [n for n in names if not isinstance(n, str)]
    if bad or not names:
        raise ValueError(f"layers must be a list of tap or module names (strings). Got {layers!r} instead.")
    if model_kind(model) == "hf":
        prefix = f"{model.base_model_prefix}."
        if model.base_model is not model:
            names = [n[len(prefix):] if n.startswith(prefix) else n for n in names]
    return names
