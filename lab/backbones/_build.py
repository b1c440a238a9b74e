"""The loaders of the model sources (:data:`lab.backbones._registry.SOURCES`): a name's spec -> :class:`Built`.

Each ``build_<source>`` builds the model on the CPU with its weights and says how its input is shaped and
normalized and how its layer catalogue is read; :func:`lab.backbones.load` then loads a checkpoint, moves
the model to the device and builds the catalogue, the same way for every source.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from torch import nn

from lab.backbones import _hf, _imagenet, _timm, _zoo
from lab.backbones._normalize import Normalization, from_stats, lab_default

__all__ = ["Built", "build_hf", "build_zoo", "build_imagenet", "build_mlp", "build_timm"]


@dataclass(frozen=True)
class Built:
    """What a source's loader returns.

    Attributes
    ----------
    model : nn.Module
        On the CPU, with the source's own weights (if any).
    input_size : (C, H, W)
        The input the catalogue's dummy forward pass uses.
    normalization : Normalization
        The statistics the model's weights were trained with.
    catalogue : callable
        ``catalogue(model, input_size, device) -> (taps, stem_group)``.
    """

    model: nn.Module
    input_size: tuple
    normalization: Normalization
    catalogue: Callable = _timm.build_catalogue


def _no_options(kwargs: dict, what: str, applies: str = "") -> None:
    if kwargs:
        raise ValueError(f"{what} is built from its card; options {sorted(kwargs)} do not apply{applies}.")


def build_hf(spec: str, *, name: str, pretrained: bool, num_classes: int, in_chans: int, img_size, kwargs) -> Built:
    """``hf:FAMILY`` (random init), ``hf:ORG/NAME`` (local cache) or ``hf:DIR`` (``save_pretrained``)."""
    model, config, folder, label = _hf.create(spec, pretrained=pretrained, num_classes=num_classes,
                                              in_chans=in_chans, img_size=img_size, kwargs=kwargs)

    def catalogue(net, size, device):
        return _hf.build_catalogue(net, config, size, device), None

    return Built(model, _hf.input_size(config, img_size), _hf.normalization(config, folder, label), catalogue)


def build_zoo(spec: str, *, name: str, pretrained: bool, num_classes: int, in_chans: int, img_size, kwargs) -> Built:
    """A zoo model with its card's statistics, at its card's input size (images are resized and converted to
    it), or at ``img_size`` for a model with a fixed input size (a ViT: position embedding resampled)."""
    _no_options(kwargs, f"zoo model {spec!r}")
    model, card, size = _zoo.build(spec, num_classes=num_classes, img_size=img_size)
    return Built(model, size, from_stats(card["mean"], card["std"], size[0], f"zoo card ({spec})", size=size[1:]))


def build_imagenet(spec: str, *, name: str, pretrained: bool, num_classes: int, in_chans: int, img_size,
                   kwargs) -> Built:
    """An ImageNet backbone for ``in_chans`` channels at any size (a ConvNet), its card's statistics."""
    _no_options(kwargs, f"ImageNet backbone {spec!r}", " (img_size and in_chans do)")
    model, card = _imagenet.build(spec, num_classes=num_classes, in_chans=in_chans)
    side = int(card["input_size"][1]) if img_size is None else int(img_size)
    return Built(model, (in_chans, side, side),
                 from_stats(card["mean"], card["std"], in_chans, f"ImageNet card ({spec})"))


def build_mlp(spec: str, *, name: str, pretrained: bool, num_classes: int, in_chans: int, img_size, kwargs) -> Built:
    """The teaching MLP; its options come in its name (``mlp:depth=8,width=256``), 32 px by default."""
    from lab.backbones._mlp import MLP, parse_mlp_spec

    if pretrained:
        raise ValueError("the teaching 'mlp' has no pretrained weights; use pretrained=False "
                         "(optionally with checkpoint=PATH).")
    if kwargs:
        raise ValueError(f"the 'mlp' backbone takes options in its name ('mlp:depth=8,width=256'), not "
                         f"keywords. Got {sorted(kwargs)} instead.")
    side = 32 if img_size is None else int(img_size)
    model = MLP(**parse_mlp_spec(spec), in_chans=in_chans, img_size=side, num_classes=num_classes)
    return Built(model, (in_chans, side, side), lab_default(in_chans))


def build_timm(spec: str, *, name: str, pretrained: bool, num_classes: int, in_chans: int, img_size, kwargs) -> Built:
    """Any timm name (``hf-hub:``/``local-dir:`` go to timm as they are), with timm's pretrained_cfg statistics."""
    if not _timm.is_timm_name(spec):
        raise _timm.unknown_model(spec, _zoo.zoo_names())
    model = _timm.create(spec, pretrained=pretrained, num_classes=num_classes, in_chans=in_chans,
                         img_size=img_size, kwargs=kwargs)
    return Built(model, _timm.input_size(model, in_chans, img_size), _timm.normalization(model, spec, in_chans))
