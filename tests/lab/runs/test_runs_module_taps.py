"""A run taps modules inside a block of a timm ViT and of a Hugging Face ViT, end to end (engine, store)."""
from __future__ import annotations

import pytest


@pytest.mark.slow
@pytest.mark.parametrize("backbone, modules", [
    ("vit_tiny_patch16_224", ["blocks.1.attn", "blocks.1.mlp.fc1"]),
    ("hf:vit", ["layers.1.attention"]),
])
def test_a_run_measures_modules_inside_a_transformer_block(store, tiny_config, one_thread, backbone, modules):
    if backbone.startswith("hf:"):
        pytest.importorskip("transformers")
    from lab.runs import run

    cfg = tiny_config(backbone=backbone, img_size=32, strategy="none", epochs=0, layers=[*modules, "pre_logits"],
                      projection_layers=[modules[0]])
    events = list(run(cfg, store=store))
    assert events[-1].kind == "run_finished", getattr(events[-1], "message", "")
    started = events[0]
    assert [layer["name"] for layer in started.layers] == [*modules, "pre_logits"]     # forward order
    assert all(layer["kind"] == "tokens" for layer in started.layers[:-1])
    rec = store.load(started.run_id)
    unseen = rec.metrics[rec.metrics["split"] == "unseen"]
    for module in modules:
        rows = unseen[unseen["layer"] == module]
        assert {"nmi", "knn_accuracy", "nc1"} <= set(rows["metric"]), module
        assert rows["value"].notna().all(), module
    coords, _, _ = rec.projection(0, 0, modules[0], method="pca")
    assert coords.shape == (40, 2)
