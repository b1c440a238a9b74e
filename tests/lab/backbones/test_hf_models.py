"""Every supported Hugging Face vision model type: a tiny random model of each is saved with
save_pretrained (and a preprocessor config) and read back offline through ``lab.backbones.load``;
its taps, pre-logits and extraction are checked against the saved model itself. Bad input: a hub id
not in the cache, a model without an image encoder, a type hf: refuses, weights that do not cover
the model."""
from __future__ import annotations

import json

import pytest
import torch

transformers = pytest.importorskip("transformers")

from lab.backbones import HF_FAMILIES, PRE_LOGITS, load  # noqa: E402
from lab.backbones._hf_families import EXCLUDED, VISION_TOWERS  # noqa: E402
from lab.features import extract  # noqa: E402

VIT =  dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, patch_size=8)
VIT_R = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, mlp_ratio=2, patch_size=8)
TINY = {
    "vit": dict(VIT),
    "swin": dict(embed_dim=8, depths=[1, 2], num_heads=[1, 2], window_size=2, patch_size=4),
    "pvt": dict(num_encoder_blocks=2, depths=[1, 2], hidden_sizes=[8, 16], sequence_reduction_ratios=[2, 1],
                num_attention_heads=[1, 2], patch_sizes=[4, 2], strides=[4, 2], mlp_ratios=[2, 2]),
    "pvt_v2": dict(num_encoder_blocks=2, depths=[1, 2], hidden_sizes=[8, 16], sr_ratios=[2, 1],
                   num_attention_heads=[1, 2], patch_sizes=[4, 2], strides=[4, 2], mlp_ratios=[2, 2]),
    "cvt": dict(patch_sizes=[7, 3], patch_stride=[4, 2], patch_padding=[2, 1], embed_dim=[8, 16], num_heads=[1, 2],
                depth=[1, 2], mlp_ratio=[2.0, 2.0], attention_drop_rate=[0.0, 0.0], drop_rate=[0.0, 0.0],
                drop_path_rate=[0.0, 0.0], qkv_bias=[True, True], cls_token=[False, True],
                qkv_projection_method=["dw_bn", "dw_bn"], kernel_qkv=[3, 3], padding_kv=[1, 1], stride_kv=[2, 2],
                padding_q=[1, 1], stride_q=[1, 1]),
    "poolformer": dict(num_encoder_blocks=2, depths=[1, 2], hidden_sizes=[8, 16], patch_sizes=[7, 3],
                       strides=[4, 2], padding=[2, 1]),
    "convnextv2": dict(num_stages=2, depths=[1, 2], hidden_sizes=[8, 16]),
    "resnet": dict(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 2], layer_type="basic"),
    "beit": dict(VIT),
    "bit": dict(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 2], num_groups=4),
    "clip": dict(VIT),
    "convnext": dict(num_stages=2, depths=[1, 2], hidden_sizes=[8, 16]),
    "data2vec-vision": dict(VIT),
    "deit": dict(VIT),
    "dinov2": dict(VIT_R),
    "dinov2_with_registers": dict(VIT_R, num_register_tokens=2),
    "donut-swin": dict(embed_dim=8, depths=[1, 2], num_heads=[1, 2], window_size=2, patch_size=4),
    "efficientnet": dict(width_coefficient=0.25, depth_coefficient=0.2, hidden_dim=320),
    "focalnet": dict(embed_dim=8, depths=[1, 2], hidden_sizes=[8, 16], patch_size=4, focal_levels=[1, 1],
                     focal_windows=[3, 3]),
    "hgnet_v2": dict(embedding_size=8, stem_channels=[3, 8, 8], hidden_sizes=[16, 32], depths=[1, 1],
                     stage_in_channels=[8, 16], stage_mid_channels=[8, 8], stage_out_channels=[16, 32],
                     stage_num_blocks=[1, 2], stage_downsample=[False, True], stage_light_block=[False, False],
                     stage_kernel_size=[3, 3], stage_numb_of_layers=[2, 2]),
    "hiera": dict(embed_dim=8, depths=[1, 2], num_heads=[1, 2], patch_size=[3, 3],
                  patch_stride=[2, 2], patch_padding=[1, 1], masked_unit_size=[4, 4], query_stride=[2, 2],
                  embed_dim_multiplier=2.0, num_query_pool=1),
    "ijepa": dict(VIT),
    "levit": dict(hidden_sizes=[16, 24, 32], num_attention_heads=[2, 3, 4], depths=[1, 1, 2], key_dim=[8, 8, 8],
                  mlp_ratio=[2, 2, 2], attention_ratio=[2, 2, 2]),
    "metaclip_2": dict(VIT),
    "mobilenet_v1": dict(depth_multiplier=0.25, min_depth=4),
    "mobilenet_v2": dict(depth_multiplier=0.25, depth_divisible_by=4, min_depth=4),
    "mobilevit": dict(hidden_sizes=[16, 24, 32], neck_hidden_sizes=[8, 8, 16, 16, 24, 24, 48], num_attention_heads=2,
                      patch_size=2),
    "mobilevitv2": dict(width_multiplier=0.25),
    "perceiver": dict(num_latents=8, d_latents=32, d_model=32, num_blocks=1, num_self_attends_per_block=2,
                      num_self_attention_heads=2, num_cross_attention_heads=1, image_size=32),
    "pp_lcnet": dict(scale=0.25),
    "regnet": dict(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 2], groups_width=8),
    "segformer": dict(num_encoder_blocks=2, depths=[1, 2], hidden_sizes=[8, 16], sr_ratios=[2, 1],
                      num_attention_heads=[1, 2], patch_sizes=[4, 2], strides=[4, 2], mlp_ratios=[2, 2]),
    "siglip": dict(VIT),
    "siglip2": dict(VIT),
    "swiftformer": dict(depths=[1, 2], embed_dims=[8, 16], mlp_ratio=2, downsamples=[True, True]),
    "swinv2": dict(embed_dim=8, depths=[1, 2], num_heads=[1, 2], window_size=2, patch_size=4),
    "textnet": dict(stem_out_channels=8, conv_layer_kernel_sizes=[[[3, 3]], [[3, 3], [3, 3]]],
                    conv_layer_strides=[[2], [2, 1]], hidden_sizes=[8, 8, 16]),
    "timm_wrapper": dict(architecture="resnet10t"),
    "vit_msn": dict(VIT),
    "clip_vision_model": dict(VIT),
    "siglip_vision_model": dict(VIT),
    "siglip2_vision_model": dict(VIT),
    "dinov3_vit": dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                       patch_size=8, num_register_tokens=2),
    "dinov3_convnext": dict(depths=[1, 2], hidden_sizes=[8, 16]),
    "vit_mae": dict(VIT),
}
TINY["timm_wrapper"] = dict(architecture="test_resnet")
TINY["mobilevitv2"] = dict(width_multiplier=0.25)
SIDE = {"mobilevitv2": 64}
"""Image side per type (default 32)."""

BLOCKS = {"mobilenet_v1": 26, "mobilenet_v2": 16, "mobilevit": 7, "mobilevitv2": 12, "efficientnet": 7,
          "levit": 12, "pp_lcnet": 13, "timm_wrapper": 4, "hgnet_v2": 3, "textnet": 3, "swiftformer": 3}
"""Blocks of the tiny models whose config does not count them (depths or num_hidden_layers)."""

PREFIX = {"deit": 2, "dinov2_with_registers": 3, "dinov3_vit": 3, "siglip": 0, "siglip2": 0, "ijepa": 0,
          "siglip_vision_model": 0, "siglip2_vision_model": 0}
"""Prefix tokens (class, distillation, registers) of the ViT-like types; the others with one layer list
of equal tokens have exactly a class token."""

TEXT = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, vocab_size=64)
NUM_LABELS = 3


def _config(model_type):
    cls = transformers.CONFIG_MAPPING[model_type]
    kwargs = dict(TINY[model_type])
    side = SIDE.get(model_type, 32)
    if model_type in ("clip", "siglip", "siglip2", "metaclip_2"):
        return cls(vision_config=dict(kwargs, image_size=side), text_config=TEXT)
    fields = cls().to_dict()
    if "image_size" in fields:
        kwargs["image_size"] = [side, side] if isinstance(fields["image_size"], (list, tuple)) else side
    return cls(**kwargs)


def _model_class(model_type):
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES as CLS

    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES as BASE

    names = CLS.get(model_type) if model_type not in VISION_TOWERS else None
    names = names or BASE[model_type]
    return getattr(transformers, names if isinstance(names, str) else names[0])   # the first, as hf: reads


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """model type -> (saved model in eval mode, its directory); built once per type."""
    cache = {}

    def get(model_type):
        if model_type not in cache:
            torch.manual_seed(0)
            config = _config(model_type)
            config.num_labels = NUM_LABELS
            model = _model_class(model_type)(config).eval()
            folder = tmp_path_factory.mktemp(model_type.replace("-", "_"))
            model.save_pretrained(folder)
            side = SIDE.get(model_type, 32)
            (folder / "preprocessor_config.json").write_text(json.dumps(
                {"image_mean": [0.4, 0.5, 0.6], "image_std": [0.2, 0.25, 0.3], "do_center_crop": False,
                 "size": {"height": side, "width": side}}))
            cache[model_type] = (model, folder)
        return cache[model_type]
    return get


def _n_blocks(model_type, config) -> int:
    if model_type in BLOCKS:
        return BLOCKS[model_type]
    config = getattr(config, "vision_config", None) or config
    for key in ("depths", "depth"):
        if isinstance(getattr(config, key, None), (list, tuple)):
            return int(sum(getattr(config, key)))
    if model_type == "perceiver":
        return config.num_self_attends_per_block
    return int(config.num_hidden_layers)


def _reference(model_type, model, bb, x):
    """What the saved model itself pools: the input of its classifier (a hook on every linear layer
    with NUM_LABELS outputs), else its vision tower's pooled output (DINOv3, CLIP/SigLIP towers), else
    the class token of its last hidden state (ViT-MAE without masking)."""
    if "ForImageClassification" in type(model).__name__:
        seen = []
        heads = [m for m in model.modules() if isinstance(m, torch.nn.Linear) and m.out_features == NUM_LABELS]
        handles = [h.register_forward_pre_hook(lambda m, a: seen.append(a[0])) for h in heads]
        try:
            with torch.no_grad():
                model(**bb.model._inputs(x))
        finally:
            for h in handles:
                h.remove()
        return seen[0].flatten(1)
    if model_type == "vit_mae":
        model.config.mask_ratio = 0.0                                          # as hf: evaluates it
    tower = getattr(model, "vision_model", None) if model_type in ("clip", "siglip", "siglip2", "metaclip_2") else model
    with torch.no_grad():
        out = tower(**bb.model._inputs(x))
    if getattr(out, "pooler_output", None) is not None:
        return out.pooler_output.flatten(1)
    return out.last_hidden_state[:, 0]


def _images(n=3, side=32, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(n, 3, side, side, generator=gen)                          # (N, 3, H, W) pixels in [0, 1]


def test_every_image_classification_type_is_supported_or_refused_with_a_reason():
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES as CLS

    assert set(CLS) <= set(HF_FAMILIES) | set(EXCLUDED), sorted(set(CLS) - set(HF_FAMILIES) - set(EXCLUDED))
    assert set(TINY) == set(HF_FAMILIES)


@pytest.mark.parametrize("model_type", list(HF_FAMILIES))
def test_saved_model_loads_offline_with_its_taps(saved, model_type):
    model, folder = saved(model_type)
    bb = load(f"hf:{folder}", device="cpu")
    side = SIDE.get(model_type, 32)
    assert bb.input_size == (3, side, side) and bb.normalization.size == (side, side)
    assert bb.normalization.mean == (0.4, 0.5, 0.6) and bb.normalization.std == (0.2, 0.25, 0.3)
    assert bb.layers[0] == "stem" and bb.layers[-1] == PRE_LOGITS
    assert len(bb.layers) == 1 + _n_blocks(model_type, model.config) + 1 == len(set(bb.layers))
    blocks = bb.taps[1:-1]
    if blocks[-1].kind == "tokens" and len({t.shape for t in blocks}) == 1 and model_type not in (
            "perceiver", "levit"):   # one list of equal token blocks: a ViT-like
        prefix = PREFIX.get(model_type, 1)
        assert {t.prefix_tokens for t in blocks} == {prefix} and all(t.cls_token == (prefix > 0) for t in blocks)
        assert blocks[-1].shape[0] == prefix + (side // 8) ** 2                 # every patch (MAE: no masking)
    x = bb.normalize(_images(side=side))
    torch.testing.assert_close(bb.pre_logits(x), _reference(model_type, model, bb, x), rtol=1e-4, atol=1e-5)
    feats = extract(bb, _images(side=side))
    assert [tuple(v.shape) for v in feats.values()] == [(3, t.dim) for t in bb.taps]
    assert all(torch.isfinite(v).all() for v in feats.values())
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in bb.model.modules())


def test_register_tokens_are_never_averaged_with_patches(saved):
    model, folder = saved("dinov2_with_registers")
    bb = load(f"hf:{folder}", device="cpu")
    last = bb.layers[-2]
    x = bb.normalize(_images())
    with torch.no_grad():
        hidden = model.dinov2_with_registers(pixel_values=x, output_hidden_states=True).hidden_states[-1]
    mean = extract(bb, x, layers=[last], pooling="mean", normalize=False)[last]
    torch.testing.assert_close(mean, hidden[:, 3:].mean(dim=1))               # patches only (1 class + 2 registers)
    cls = extract(bb, x, layers=[last], normalize=False)[last]
    torch.testing.assert_close(cls, hidden[:, 0])


def test_random_init_of_a_new_family_and_a_vision_tower():
    bb = load("hf:dinov2", in_chans=1, img_size=32, device="cpu", **TINY["dinov2"])
    assert bb.in_chans == 1 and len(bb.layers) == 4 and bb.tap(bb.layers[1]).cls_token
    bb = load("hf:clip", img_size=32, device="cpu", **TINY["clip"])          # options of its vision config
    assert type(bb.model.net).__name__ == "CLIPVisionModel"
    with pytest.raises(ValueError, match=r"hf:clip does not take hiden_size; its vision config fields are "):
        load("hf:clip", device="cpu", hiden_size=8)


# ------------------------------------------------------------------------------------------------ bad input


def _cache_with(tmp_path, monkeypatch, repo_id, folder):
    import huggingface_hub.constants as hf_constants

    cache = tmp_path / "hub"
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    snap = repo / "snapshots" / ("a" * 40)
    snap.mkdir(parents=True)
    for f in folder.iterdir():
        (snap / f.name).write_bytes(f.read_bytes())
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("a" * 40)
    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_hub_id_not_cached(tmp_path, monkeypatch):
    import huggingface_hub.constants as hf_constants

    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(tmp_path / "empty"))
    with pytest.raises(ValueError, match=r"^hf:facebook/dinov2-small is not in the Hugging Face cache \(.*empty\) "
                                         r"and nothing is downloaded; .*hf download facebook/dinov2-small"):
        load("hf:facebook/dinov2-small", device="cpu")


def test_cached_text_model_has_no_image_encoder(tmp_path, monkeypatch):
    config = transformers.BertConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=32, vocab_size=50)
    transformers.BertModel(config).save_pretrained(tmp_path / "bert")
    _cache_with(tmp_path, monkeypatch, "someorg/tiny-bert", tmp_path / "bert")
    with pytest.raises(ValueError, match=r"^hf:someorg/tiny-bert: cannot read model type 'bert': model type 'bert' "
                                         r"\(BertModel\) has no image encoder: its model takes no pixel_values; "
                                         r"give a vision model \(hf:vit, hf:dinov2, hf:clip, ...\)\.$"):
        load("hf:someorg/tiny-bert", device="cpu")


def test_refused_type_says_why(tmp_path):
    config = transformers.ImageGPTConfig(n_embd=16, n_layer=1, n_head=2, vocab_size=17, n_positions=16)
    transformers.ImageGPTModel(config).save_pretrained(tmp_path / "igpt")
    with pytest.raises(ValueError, match=r"cannot read model type 'imagegpt': ImageGPT reads colour-cluster ids"):
        load(f"hf:{tmp_path / 'igpt'}", device="cpu")


def test_directory_without_config(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"directory '.*empty' has no config.json; save the model there with"):
        load(f"hf:{tmp_path / 'empty'}", device="cpu")


def test_weights_that_do_not_cover_the_encoder_are_refused(saved, tmp_path):
    from safetensors.torch import load_file, save_file

    _, folder = saved("clip_vision_model")
    part = tmp_path / "part"
    part.mkdir()
    for f in folder.iterdir():
        (part / f.name).write_bytes(f.read_bytes())
    state = load_file(str(part / "model.safetensors"))
    save_file({k: v for k, v in state.items() if "layers.1." not in k}, str(part / "model.safetensors"),
              metadata={"format": "pt"})
    with pytest.raises(ValueError, match=r"the saved weights do not cover CLIPVisionModel \(missing "
                                         r"(vision_model.)?encoder.layers.1.*Save the image encoder itself"):
        load(f"hf:{part}", device="cpu")
