"""Hugging Face backbones (``hf:``): contracts on tiny random configs of the eight table families,
save_pretrained round trips, the offline cache, fine-tuning, and bad input."""
from __future__ import annotations

import functools
import json

import pytest
import torch

transformers = pytest.importorskip("transformers")

from lab.backbones import HF_FAMILIES, PRE_LOGITS, load  # noqa: E402
from lab.features import extract  # noqa: E402

# Tiny configs (CPU, 32 px): two stages (ViT: two layers); the last stage has two blocks.
TINY = {
    "vit": dict(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32, patch_size=8),
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
}
# Blocks that put a class token first: every ViT layer; PVT and CvT (cls_token=[False, True]) in the last stage.
CLASS_TOKEN_BLOCKS = {"vit": 2, "pvt": 2, "cvt": 2}


@functools.lru_cache(maxsize=None)
def _tiny(family: str):
    torch.manual_seed(0)
    return load(f"hf:{family}", in_chans=1, img_size=32, device="cpu", **TINY[family])


def _images(n=3, chans=1, side=32, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(n, chans, side, side, generator=gen)   # (N, C, H, W) pixels in [0, 1]


def _no_hooks(model):
    return all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


def _n_blocks(config) -> int:
    for key in ("depths", "depth"):
        if hasattr(config, key):
            return int(sum(getattr(config, key)))
    return int(config.num_hidden_layers)


def test_the_table_keeps_the_eight_original_families():
    """Their block paths (and so their tap names) are the table's; every other type goes by the
    general rule (tests/lab/backbones/test_hf_models.py)."""
    from lab.backbones._hf_families import FAMILIES

    assert set(FAMILIES) == set(TINY) and set(TINY) <= set(HF_FAMILIES)


@pytest.mark.parametrize("family", list(TINY))
def test_family_contract(family):
    """Stem + every block + pre_logits, in execution order; class tokens where the family has them;
    pre_logits is what the family's own classifier sees."""
    bb = _tiny(family)
    config = bb.model.net.config
    assert bb.layers[0] == "stem" and bb.layers[-1] == PRE_LOGITS
    assert len(bb.layers) == 1 + _n_blocks(config) + 1 == len(set(bb.layers))   # block granularity
    assert bb.source == "hf" and bb.in_chans == 1 and not bb.model.training and _no_hooks(bb.model)
    assert sum(t.cls_token for t in bb.taps) == CLASS_TOKEN_BLOCKS.get(family, 0)
    assert not bb.tap("stem").cls_token
    if family == "cvt":   # class token only in the last stage
        assert [t.cls_token for t in bb.taps[1:-1]] == [False, True, True]
    # Execution order, seen by independent hooks.
    seen = []
    handles = [bb.model.get_submodule(t.module_name).register_forward_hook(
        lambda m, a, o, name=t.name: seen.append(name)) for t in bb.taps if t.module_name]
    x = bb.normalize(_images())
    try:
        with torch.no_grad():
            bb.pre_logits(x)
    finally:
        for h in handles:
            h.remove()
    assert seen == bb.layers[:-1]
    # Reference: transformers' own classification model with an identity classifier (D -> D).
    ref = transformers.AutoModelForImageClassification.from_config(config.__class__(**{
        **config.to_dict(), "num_labels": bb.num_features}))
    missing, unexpected = ref.load_state_dict(bb.model.net.state_dict(), strict=False)
    assert set(missing) == {"classifier.weight", "classifier.bias"} or all("classifier" in k for k in missing)
    assert not unexpected
    with torch.no_grad():
        linear = [m for m in ref.classifier.modules() if isinstance(m, torch.nn.Linear)][0]
        linear.weight.copy_(torch.eye(bb.num_features))
        linear.bias.zero_()
        expected = ref.eval()(pixel_values=x, **bb.model._forward_kwargs).logits           # (3, D)
    feats = extract(bb, _images())
    assert [tuple(v.shape) for v in feats.values()] == [(3, t.dim) for t in bb.taps]
    torch.testing.assert_close(feats[PRE_LOGITS], expected, rtol=1e-4, atol=1e-5)
    assert _no_hooks(bb.model)


def test_vit_blocks_equal_transformers_hidden_states():
    bb = _tiny("vit")
    x = bb.normalize(_images())
    with torch.no_grad():
        hidden = bb.model.base(pixel_values=x, output_hidden_states=True).hidden_states   # embeddings + 2 layers
    flat = extract(bb, x, layers=["stem", "layers.0", "layers.1"], pooling="flatten", normalize=False)
    for layer, h in zip(flat.values(), hidden):
        torch.testing.assert_close(layer, h.flatten(1))
    cls = extract(bb, x, layers=["layers.1"], normalize=False)["layers.1"]
    torch.testing.assert_close(cls, hidden[-1][:, 0])                                  # class token


def _save(tmp_path, family, base=False, processor=True):
    bb = _tiny(family)
    config = bb.model.net.config
    config = config.__class__(**{**config.to_dict(), "num_channels": 3})    # saved models take RGB
    cls = transformers.AutoModel if base else transformers.AutoModelForImageClassification
    torch.manual_seed(1)
    model = cls.from_config(config).eval()
    folder = tmp_path / family
    model.save_pretrained(folder)
    if processor:
        (folder / "preprocessor_config.json").write_text(json.dumps(
            {"image_mean": [0.2, 0.3, 0.4], "image_std": [0.5, 0.6, 0.7]}))
    return model, folder


@pytest.mark.parametrize("family", ["vit", "resnet"])
def test_save_pretrained_directory_round_trip(tmp_path, family):
    model, folder = _save(tmp_path, family, base=True)
    bb = load(f"hf:{folder}", device="cpu", img_size=32)
    assert bb.normalization.mean == (0.2, 0.3, 0.4) and bb.normalization.std == (0.5, 0.6, 0.7)
    assert "hf image processor" in bb.normalization.source
    x = bb.normalize(_images())
    with torch.no_grad():
        out = model(pixel_values=x, output_hidden_states=True)
    last = bb.layers[-2]
    got = extract(bb, x, layers=[last], pooling="flatten", normalize=False)[last]
    final = out.hidden_states[-1]                                # last block output, before any final norm
    torch.testing.assert_close(got, final.flatten(1), rtol=1e-5, atol=1e-6)
    if family == "vit":   # pre_logits: the class token of the final (layer-normed) hidden state
        pre = extract(bb, x, layers=[PRE_LOGITS], normalize=False)[PRE_LOGITS]
        torch.testing.assert_close(pre, out.last_hidden_state[:, 0], rtol=1e-5, atol=1e-6)


def test_hub_id_is_read_from_the_cache_only(tmp_path, monkeypatch):
    import huggingface_hub.constants as hf_constants

    model, folder = _save(tmp_path, "resnet", processor=False)
    cache = tmp_path / "hub"
    repo = cache / "models--someorg--tiny-resnet"
    snap = repo / "snapshots" / ("a" * 40)
    snap.mkdir(parents=True)
    for f in folder.iterdir():
        (snap / f.name).write_bytes(f.read_bytes())
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("a" * 40)
    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    bb = load("hf:someorg/tiny-resnet", device="cpu", img_size=32)
    # Without a processor config: the family image processor's defaults.
    assert "defaults (resnet)" in bb.normalization.source and bb.in_chans == 3
    x = bb.normalize(_images(chans=3))
    with torch.no_grad():
        ref = model.resnet(pixel_values=x).pooler_output.flatten(1)
    torch.testing.assert_close(bb.pre_logits(x), ref)
    with pytest.raises(ValueError, match=r"hf:someorg/missing is not in the Hugging Face cache \(.*hub\) and "
                                         r"nothing is downloaded; fill the cache .*hf download someorg/missing"):
        load("hf:someorg/missing", device="cpu")


def test_gray_images_become_rgb_for_a_saved_rgb_model(tmp_path):
    _, folder = _save(tmp_path, "convnextv2")
    bb = load(f"hf:{folder}", device="cpu", img_size=32)
    assert bb.in_chans == 3 and bb.normalization.mean == (0.2, 0.3, 0.4)
    gray = _images(2)
    rgb = gray.expand(-1, 3, -1, -1)
    hand = (rgb - torch.tensor([0.2, 0.3, 0.4]).view(1, 3, 1, 1)) / torch.tensor([0.5, 0.6, 0.7]).view(1, 3, 1, 1)
    torch.testing.assert_close(extract(bb, gray)[PRE_LOGITS], extract(bb, hand, normalize=False)[PRE_LOGITS])


@pytest.mark.parametrize("strategy,block", [("linear", None), ("full", None), ("layer", -1), ("scl", 1)])
def test_fine_tuning_strategies_and_checkpoints(tmp_path, strategy, block):
    from safetensors.torch import save_file

    from lab import finetune

    family = "cvt" if strategy == "scl" else "swin"
    bb = load(f"hf:{family}", in_chans=1, img_size=32, device="cpu", **TINY[family])
    before = {k: v.clone() for k, v in bb.model.state_dict().items()}
    ft = finetune.prepare(bb, 3, strategy, block=block, lr=1e-2, seed=0)
    x, y = _images(6), torch.tensor([0, 1, 2, 0, 1, 2])
    ft.model.train()
    loss, _ = ft.train_step(x, y)
    ft.model.eval()
    assert loss > 0
    changed = {k for k, v in bb.model.state_dict().items() if not torch.equal(v, before[k])}
    trained = set(ft.trainable_names())
    if strategy == "linear":
        assert trained == {"head.weight", "head.bias"}
    else:
        assert trained - {"head.weight", "head.bias"}
        if strategy in ("layer", "scl"):
            prefix = bb.tap(ft.block).module_name + "."
            assert all(n.startswith("backbone." + prefix) for n in trained - {"head.weight", "head.bias"})
            assert {k for k in changed if "running" not in k and "num_batches" not in k} <= {
                n[len("backbone."):] for n in trained}
    # The fine-tuned weights load back through checkpoint=PATH (as runs save them).
    path = tmp_path / "w.safetensors"
    save_file({k: v.contiguous() for k, v in bb.model.state_dict().items()}, str(path))
    again = load(f"hf:{family}", in_chans=1, img_size=32, device="cpu", checkpoint=path, **TINY[family])
    xs = bb.normalize(_images(2, seed=3))
    with torch.no_grad():
        torch.testing.assert_close(again.pre_logits(xs), bb.pre_logits(xs))
    ft.close()


# ------------------------------------------------------------------------------------------------ bad input


def test_unknown_family_lists_the_families():
    with pytest.raises(ValueError, match=r"unknown Hugging Face family 'hf:vitt'; families \(model types\): hf:vit, hf:swin, "
                                         r"hf:pvt, hf:pvt_v2, hf:cvt, hf:poolformer, hf:convnextv2, hf:resnet, .*"
                                         r"Did you mean hf:vit"):
        load("hf:vitt", device="cpu")


def test_directory_without_config(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"has no config.json; save the model there with model.save_pretrained"):
        load(f"hf:{tmp_path / 'empty'}", device="cpu")
    with pytest.raises(ValueError, match=r"directory '.*nowhere' does not exist"):
        load(f"hf:{tmp_path / 'nowhere'}", device="cpu")


def test_bad_options_and_pretrained_family():
    with pytest.raises(ValueError, match=r"hf:resnet does not take hiden_sizes; its config fields are "):
        load("hf:resnet", device="cpu", hiden_sizes=[8])
    with pytest.raises(ValueError, match=r"hf:resnet builds a randomly initialised model; for pretrained weights"):
        load("hf:resnet", pretrained=True, device="cpu")


def test_checkpoint_of_another_architecture(tmp_path):
    from safetensors.torch import save_file

    path = tmp_path / "vit.safetensors"
    save_file({k: v.contiguous() for k, v in _tiny("vit").model.state_dict().items()}, str(path))
    with pytest.raises(ValueError, match=r"checkpoint '.*vit.safetensors' does not fit HFNet \(missing keys: "
                                         r".*Load with the same backbone name"):
        load("hf:resnet", in_chans=1, img_size=32, device="cpu", checkpoint=path, **TINY["resnet"])
