"""Which Hugging Face model types ``hf:`` reads, and what it knows about each.

Three kinds of knowledge, from the most to the least specific:

- :data:`FAMILIES`, a table keyed by ``config.model_type`` for the families whose block
  paths were fixed before the general rule existed (their tap names are kept), and which
  blocks put a class token first when that cannot be read from the token count (PVT, CvT);
- :data:`EXCLUDED`: model types transformers lists for image classification that ``hf:``
  cannot read, each with the reason and what to do instead;
- everything else goes by the general rule of :mod:`lab.backbones._hf_taps` (blocks from the
  model's structure, prefix tokens from the token count and the patch grid).

:data:`SUPPORTED` lists the model types the test suite builds and loads (tiny random
configs); other model types whose model takes ``pixel_values`` load by the general rule.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

__all__ = ["Family", "FAMILIES", "EXCLUDED", "SUPPORTED", "VISION_TOWERS", "ADAPTERS"]


@dataclass(frozen=True)
class Family:
    """Where a family keeps its blocks and stem, and which blocks carry a class token.

    ``blocks`` is a module path relative to the base model; ``*`` stands for the stage
    index (its children are the stages), and the path's end is the container of blocks.
    ``cls(config, stage)`` is True when the blocks of ``stage`` put a class token first.
    """

    blocks: str
    stem: str
    cls: Callable = lambda config, stage: False
    stem_prefix: int = 0           # prefix tokens in the stem's output (pooled over patches)
    forward_kwargs: dict = field(default_factory=dict)


FAMILIES: dict[str, Family] = {
    "vit": Family("layers", "embeddings", lambda c, s: True, stem_prefix=1,
                  forward_kwargs={"interpolate_pos_encoding": True}),
    "swin": Family("encoder.layers.*.blocks", "embeddings"),
    "pvt": Family("encoder.block.*", "encoder.patch_embeddings.0", lambda c, s: s == c.num_encoder_blocks - 1),
    "pvt_v2": Family("encoder.layers.*.blocks", "encoder.layers.0.patch_embedding"),
    "cvt": Family("encoder.stages.*.layers", "encoder.stages.0.embedding", lambda c, s: bool(c.cls_token[s])),
    "poolformer": Family("encoder.block.*", "encoder.patch_embeddings.0"),
    "convnextv2": Family("encoder.stages.*.layers", "embeddings"),
    "resnet": Family("encoder.stages.*.layers", "embedder"),
}

EXCLUDED: dict[str, str] = {
    "imagegpt": "ImageGPT reads colour-cluster ids (input_ids) made by its image processor, not pixel values; "
                "use a ViT-like model (hf:vit, hf:dinov2, ...)",
    "shieldgemma2": "ShieldGemma 2 is a prompt-driven safety classifier on a Gemma 3 language model; its image "
                    "encoder is a SigLIP tower: save that tower (model_type siglip_vision_model) and load it",
    "dinat": "DiNAT needs the natten package (neighbourhood-attention kernels), which is not installed; "
             "install natten, or use hf:swin or hf:convnext",
}
"""Image-classification model types ``hf:`` refuses, with the reason and the alternative."""

VISION_TOWERS = ("clip", "siglip", "siglip2", "metaclip_2", "clip_vision_model", "siglip_vision_model",
                 "siglip2_vision_model", "metaclip_2_vision_model")
"""Types read as their vision tower: a full dual-encoder checkpoint gives its ``vision_config``
and the ``vision_model.*`` weights (the text tower is not loaded)."""

ADAPTERS: dict[str, str] = {
    "vit_mae": "mae_no_mask",          # mask_ratio=0 and an identity shuffle: every patch, in order
    "siglip2": "naflex",               # patchified pixels + spatial shapes (SigLIP 2's NaFlex input)
    "siglip2_vision_model": "naflex",
}
"""Model types whose model input is not ``pixel_values`` as an image batch alone."""

SUPPORTED = (
    # the original eight (block paths of :data:`FAMILIES`)
    "vit", "swin", "pvt", "pvt_v2", "cvt", "poolformer", "convnextv2", "resnet",
    # transformers' other image-classification types
    "beit", "bit", "clip", "convnext", "data2vec-vision", "deit", "dinov2", "dinov2_with_registers",
    "donut-swin", "efficientnet", "focalnet", "hgnet_v2", "hiera", "ijepa", "levit", "metaclip_2",
    "mobilenet_v1", "mobilenet_v2", "mobilevit", "mobilevitv2", "perceiver", "pp_lcnet", "regnet", "segformer",
    "siglip", "siglip2", "swiftformer", "swinv2", "textnet", "timm_wrapper", "vit_msn",
    # vision towers and self-supervised encoders without a classification head
    "clip_vision_model", "siglip_vision_model", "siglip2_vision_model", "dinov3_vit", "dinov3_convnext",
    "vit_mae",
)
"""Model types built, saved and loaded back by the test suite (tests/lab/backbones/test_hf_models.py)."""
