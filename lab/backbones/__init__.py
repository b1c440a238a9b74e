"""Backbones, their layer catalogue and their input normalization.

:func:`load` builds

- any timm model (``"resnet18"``), optionally with timm's pretrained weights from its
  cache or hub, or the teaching MLP (``"mlp"``, ``"mlp:depth=8,width=256"``);
- a Hugging Face ``transformers`` model (``"hf:vit"`` random init, ``"hf:microsoft/cvt-21"``
  from the local cache, ``"hf:/path/to/model"`` saved with ``save_pretrained``);
- a model of the offline glyph-pretrained zoo (``"zoo:NAME"``, or plain ``NAME`` when it
  is no timm name; :func:`zoo_names` lists them);
- an ImageNet-pretrained model whose weights come with an installed package
  (``"imagenet_efficientnet_lite0"``; :func:`imagenet_names` lists them, each with a card);

optionally with a local checkpoint file on top, and describes its layers as an ordered
list of *taps*::

    bb = lab.backbones.load("resnet18", in_chans=1)
    bb.layers          # ['stem', 'layer1.0', 'layer1.1', ..., 'layer4.1', 'pre_logits']
    bb.normalization   # Normalization(mean=(0.449,), std=(0.226,), channels=1, source='timm pretrained_cfg ...')

Every tap is the output of one module (a block: a residual block, a transformer layer),
ordered by one forward pass on a tiny dummy input at load time, plus ``pre_logits``:
the pooled features the classifier sees. Each tap records its output kind (``"map"``
N×C×H×W or N×H×W×C, ``"tokens"`` N×T×D, ``"vector"`` N×D) and pooled width.

Any other module of the model is a tap too (``"blocks.7.attn"``, ``"blocks.7.mlp.fc1"``):
:meth:`Backbone.resolve_layers` puts catalogue taps and module names in forward order and describes a
module's output by the catalogue's rules, :meth:`Backbone.submodules` lists the modules inside a layer and
:meth:`Backbone.module_names` every module that can be tapped; ``bb.layers`` stays the catalogue.

Images enter through :meth:`Backbone.normalize`: pixels (uint8, or float in [0, 1]) with
1 or ``in_chans`` channels become the model's input with the statistics the model was
trained with (timm's ``pretrained_cfg``, the Hugging Face image processor, the zoo card).
:mod:`lab.features` and :mod:`lab.finetune` apply it.

Seed-paper families with random init on CPU: timm ResNet (``resnet18``), ViT
(``vit_tiny_patch16_224``, pass ``img_size``/``patch_size`` for small images), Swin
(``swin_tiny_patch4_window7_224``), PVT-v2 (``pvt_v2_b0``), PoolFormer (``poolformer_s12``),
ConvNeXt-V2 (``convnextv2_atto``); CvT (which timm lacks) and PVT v1 through ``hf:cvt``/``hf:pvt``.

:func:`offline_models` lists what loads here without a network (the zoo, the ImageNet backbones, timm
and Hugging Face weights in the caches), with sizes on disk.

Each kind of name is one entry of the source registry (:data:`SOURCES`: its name rule, check, loader
and listings), as timm's ``register_model`` serves ``create_model`` and ``list_models``; :func:`load`,
:func:`check_name` (whether a name can load here, building nothing), :func:`list_models` and
:func:`offline_models` read it.

Checkpoints have one API: :func:`resolve_checkpoint` turns a spec (a weights file, or a stored run's
weights ``"run:ID[/seed]"``, found by the store passed down as ``store=``) into a :class:`Checkpoint`
(path + kind), :func:`check_checkpoint` checks one up front, and both raise
:class:`lab.errors.CheckpointError`. :func:`load` takes a file or a resolved :class:`Checkpoint`; it
never looks into a store (runs and the app resolve ``run:`` specs with their store), and this package
never imports the store.
"""
from __future__ import annotations

from lab.backbones._checkpoint import load_checkpoint, read_state_dict
from lab.backbones._core import Backbone
from lab.backbones._taps import PRE_LOGITS, Tap, eval_mode, first_tensor
from lab.backbones._hf import HF_FAMILIES
from lab.backbones._imagenet import imagenet_names
from lab.backbones._normalize import Normalization
from lab.backbones._offline import OfflineModel, cache_problems, hub_cache_dir, torch_checkpoints_dir
from lab.backbones._registry import (SOURCES, Checkpoint, Source, check_checkpoint, check_name, list_models,
                                     offline_models, resolve_checkpoint, source_for)
from lab.backbones._zoo import read_card as zoo_card, zoo_dir, zoo_names
from lab.device import resolve_device

__all__ = ["Backbone", "Tap", "Normalization", "load", "zoo_names", "zoo_dir", "zoo_card", "imagenet_names",
           "offline_models", "OfflineModel", "first_tensor", "PRE_LOGITS", "HF_FAMILIES", "check_name",
           "check_checkpoint", "resolve_checkpoint", "Checkpoint", "SOURCES", "Source", "source_for", "list_models",
           "read_state_dict", "load_checkpoint", "cache_problems", "hub_cache_dir",
           "torch_checkpoints_dir", "eval_mode"]


def load(name: str, *, pretrained: bool = False, checkpoint=None, num_classes: int = 0, in_chans: int = 3,
         img_size: int | None = None, device="auto", **kwargs) -> Backbone:
    """Build a backbone, its layer catalogue and its input normalization.

    Parameters
    ----------
    name : str
        A timm model name (``timm.list_models()``); ``"mlp"`` / ``"mlp:depth=8,width=256"``
        for the teaching MLP; ``"hf:FAMILY"`` (random init; :data:`HF_FAMILIES`),
        ``"hf:ORG/NAME"`` (Hugging Face cache only, never a download) or ``"hf:DIR"``
        (``save_pretrained`` directory); ``"zoo:NAME"`` or a bare zoo name (:func:`zoo_names`);
        an ImageNet backbone (:func:`imagenet_names`: weights from an installed package).
    pretrained : bool
        timm: load timm's pretrained weights from its cache or the hub (offline without
        cached weights: a ValueError explaining how to pass ``checkpoint``). Hugging Face
        hub ids/directories, zoo and ImageNet models always carry their weights; ``hf:FAMILY``
        refuses it.
    checkpoint : str, path or Checkpoint, optional
        A ``.safetensors`` file or a PyTorch file read with ``weights_only=True`` (never
        arbitrary unpickling), loaded after the model is built. State dicts may be nested
        under ``"state_dict"``/``"model"``; ``"module."`` prefixes are stripped. A
        classifier of a different size is ignored (with a warning). ``"run:ID"`` specs
        must be resolved first (:func:`resolve_checkpoint` with ``store=``).
    num_classes : int
        Classifier outputs; 0 (default) for no classifier. An ImageNet backbone keeps its
        ImageNet classifier when this is 1000 (as timm's ``pretrained=True`` does).
    in_chans : int
        Input channels of the images. timm models, the MLP and ``hf:FAMILY`` are built
        for them; saved Hugging Face and zoo models keep their own channels and
        :meth:`Backbone.normalize` converts gray <-> RGB. ImageNet backbones are built for them,
        the stem's RGB kernel summed for one channel (timm's ``adapt_input_conv``).
    img_size : int, optional
        Input side, for models that take one (ViT, Swin, the MLP, which defaults to 32,
        ``hf:`` families); also the size of the dummy input that builds the catalogue
        (default: the model's own). Zoo models use their card's size (images are resized), except a
        zoo ViT, which is set to ``img_size`` (its position embedding resampled by timm's
        ``set_input_size``; a multiple of its patch size).
    device : str or torch.device
        ``"auto"`` (cuda, then mps, then cpu), ``"cpu"``, ``"cuda"``, ...
    **kwargs
        timm: passed to ``timm.create_model`` (``patch_size=8``, ``depth=2``, ...);
        ``hf:FAMILY``: config fields (``hidden_size=32``, ``depths=[1, 1]``, ...).

    Returns
    -------
    Backbone
        Model in eval mode on ``device``, with ``layers``/``taps`` and ``normalization``.

    Raises
    ------
    ValueError
        Unknown name (with close matches or the valid families), a hub id missing from
        the cache, a directory without config.json, unusable arguments, missing
        pretrained weights, or a checkpoint that is unsafe, unreadable or does not fit
        (:class:`lab.errors.CheckpointError` when it is missing or no file).
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"backbone name must be a non-empty string. Got {name!r} instead.")
    name = name.strip()
    dev = resolve_device(device)
    if int(num_classes) < 0:
        raise ValueError(f"num_classes must be >= 0. Got {num_classes!r} instead.")
    ckpt = resolve_checkpoint(checkpoint) if checkpoint is not None else None   # no store: files only
    source, spec = source_for(name)
    built = source.load(spec, name=name, pretrained=pretrained, num_classes=int(num_classes),
                        in_chans=int(in_chans), img_size=img_size, kwargs=kwargs)
    if ckpt is not None:
        load_checkpoint(built.model, ckpt)
    model = built.model.to(dev).eval()
    taps, stem_group = built.catalogue(model, built.input_size, dev)
    return Backbone(model, name=name, device=dev, taps=taps, stem_group=stem_group, in_chans=built.input_size[0],
                    input_size=built.input_size, normalization=built.normalization, source=source.name)
