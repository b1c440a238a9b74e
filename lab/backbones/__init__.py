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

:func:`check_name` tells, without building anything, whether a name can load here (and
:func:`check_checkpoint` whether a checkpoint can): a study or the app checks its names up front.

Checkpoints are paths; a stored run's weights (``"run:ID[/seed]"``) are resolved to a path
by whoever holds the store (:func:`lab.store.resolve_checkpoint`; runs and the app do it).
"""
from __future__ import annotations

from lab.backbones import _hf, _imagenet, _timm, _zoo
from lab.backbones._checkpoint import checkpoint_path, load_checkpoint
from lab.backbones._core import PRE_LOGITS, Backbone, Tap, first_tensor
from lab.backbones._hf import HF_FAMILIES
from lab.backbones._imagenet import imagenet_names
from lab.backbones._names import check_checkpoint, check_name, source_of
from lab.backbones._normalize import Normalization, from_stats, lab_default
from lab.backbones._offline import OfflineModel, offline_models
from lab.backbones._zoo import zoo_dir, zoo_names
from lab.device import resolve_device

__all__ = ["Backbone", "Tap", "Normalization", "load", "zoo_names", "zoo_dir", "imagenet_names", "offline_models",
           "OfflineModel", "first_tensor", "PRE_LOGITS", "HF_FAMILIES", "check_name", "check_checkpoint"]


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
    checkpoint : str or path, optional
        A ``.safetensors`` file or a PyTorch file read with ``weights_only=True`` (never
        arbitrary unpickling), loaded after the model is built. State dicts may be nested
        under ``"state_dict"``/``"model"``; ``"module."`` prefixes are stripped. A
        classifier of a different size is ignored (with a warning). ``"run:ID"`` specs
        must be resolved first (:func:`lab.store.resolve_checkpoint`).
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
        (default: the model's own). Zoo models use their card's size (images are resized).
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
        pretrained weights, or a checkpoint that is unsafe, unreadable or does not fit.
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"backbone name must be a non-empty string. Got {name!r} instead.")
    name = name.strip()
    dev = resolve_device(device)
    if int(num_classes) < 0:
        raise ValueError(f"num_classes must be >= 0. Got {num_classes!r} instead.")
    path = checkpoint_path(checkpoint) if checkpoint is not None else None
    num_classes, in_chans = int(num_classes), int(in_chans)

    source, spec = source_of(name)
    if source == "hf":
        model, config, folder, label = _hf.create(spec, pretrained=pretrained, num_classes=num_classes,
                                                  in_chans=in_chans, img_size=img_size, kwargs=kwargs)
        if path is not None:
            load_checkpoint(model, path)
        model = model.to(dev).eval()
        size = _hf.input_size(config, img_size)
        taps = _hf.build_catalogue(model, config, size, dev)
        return Backbone(model, name=name, device=dev, taps=taps, stem_group=None, in_chans=size[0],
                        input_size=size, normalization=_hf.normalization(config, folder, label), source="hf")

    if source == "zoo":
        if kwargs:
            raise ValueError(f"zoo model {spec!r} is built from its card; options {sorted(kwargs)} do not apply.")
        model, card = _zoo.build(spec, num_classes=num_classes)
        size = tuple(int(v) for v in card["input_size"])
        norm = from_stats(card["mean"], card["std"], size[0], f"zoo card ({spec})", size=size[1:])
    elif source == "imagenet":
        if kwargs:
            raise ValueError(f"ImageNet backbone {spec!r} is built from its card; options {sorted(kwargs)} do not "
                             f"apply (img_size and in_chans do).")
        model, card = _imagenet.build(spec, num_classes=num_classes, in_chans=in_chans)
        side = int(card["input_size"][1]) if img_size is None else int(img_size)   # any size: a ConvNet
        size = (in_chans, side, side)
        norm = from_stats(card["mean"], card["std"], in_chans, f"ImageNet card ({spec})")
    elif source == "mlp":
        from lab._mlp import MLP, parse_mlp_spec

        if pretrained:
            raise ValueError("the teaching 'mlp' has no pretrained weights; use pretrained=False "
                             "(optionally with checkpoint=PATH).")
        if kwargs:
            raise ValueError(f"the 'mlp' backbone takes options in its name ('mlp:depth=8,width=256'), not "
                             f"keywords. Got {sorted(kwargs)} instead.")
        side = 32 if img_size is None else int(img_size)
        model = MLP(**parse_mlp_spec(name), in_chans=in_chans, img_size=side, num_classes=num_classes)
        size, norm = (in_chans, side, side), lab_default(in_chans)
    else:
        if not _timm.is_timm_name(name):  # "hf-hub:..." / "local-dir:..." go to timm as they are
            raise _timm.unknown_model(name, zoo_names())
        model = _timm.create(name, pretrained=pretrained, num_classes=num_classes, in_chans=in_chans,
                             img_size=img_size, kwargs=kwargs)
        size = _timm.input_size(model, in_chans, img_size)
        norm = _timm.normalization(model, name, in_chans)
    if path is not None:
        load_checkpoint(model, path)
    model = model.to(dev).eval()
    taps, stem_group = _timm.build_catalogue(model, size, dev)
    return Backbone(model, name=name, device=dev, taps=taps, stem_group=stem_group, in_chans=size[0],
                    input_size=size, normalization=norm, source=source)

