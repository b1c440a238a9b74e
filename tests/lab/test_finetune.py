"""Fine-tuning strategies train exactly what they claim; label noise; exact re-initialisation."""
from __future__ import annotations

import math
import unittest.mock

import numpy as np
import pytest
import torch

import lab
import lab.backbones
import lab.features
from lab import finetune
from lab.finetune import combine_skip, corrupt_labels, prepare, reinitialized, resolve_block


pytestmark = pytest.mark.usefixtures("one_thread")      # conftest: torch on one thread


def _mlp(seed=0):
    torch.manual_seed(seed)
    return lab.backbones.load("mlp:depth=3,width=16", in_chans=1, img_size=8, device="cpu")


def _resnet(seed=0):
    torch.manual_seed(seed)
    return lab.backbones.load("resnet18", in_chans=1, img_size=16, device="cpu")


def _batches(bb, n_batches=2, batch=8, n_classes=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    side = bb.input_size[1]
    return [(torch.randn(batch, 1, side, side, generator=g), torch.randint(0, n_classes, (batch,), generator=g))
            for _ in range(n_batches)]


def _snapshot(module):
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def _expected_trainable(ft, strategy, block):
    names = [n for n, _ in ft.model.named_parameters()]
    if strategy == "none":
        return set()
    if strategy == "linear":
        return {n for n in names if n.startswith("head.")}
    if strategy == "full":
        return set(names)
    module = dict(ft.bb.block_modules())[block]
    ids = {id(p) for p in module.parameters()}
    return {n for n, p in ft.model.named_parameters() if id(p) in ids or n.startswith("head.")}


@pytest.mark.parametrize("strategy, block", [("none", None), ("linear", None), ("full", None),
                                             ("layer", "fc2"), ("scl", "fc2")])
def test_each_strategy_trains_exactly_what_it_claims(strategy, block):
    bb = _mlp()
    ft = prepare(bb, 3, strategy, block=block, lr=1e-2, weight_decay=0.01, seed=0)
    expected = _expected_trainable(ft, strategy, block)
    assert set(ft.trainable_names()) == expected
    assert ft.n_trainable == sum(p.numel() for p in ft.model.parameters() if p.requires_grad)
    assert ft.n_total == sum(p.numel() for p in ft.model.parameters())
    assert ft.trainable_fraction == pytest.approx(ft.n_trainable / ft.n_total)
    if strategy == "none":
        assert ft.optimizer is None and ft.trainable_fraction == 0.0
        with pytest.raises(ValueError, match="does not train"):
            ft.train_epoch(_batches(bb))
        return
    before = {n: p.detach().clone() for n, p in ft.model.named_parameters()}
    buffers = {n: b.detach().clone() for n, b in ft.model.named_buffers() if "running_mean" in n}
    stats = ft.train_epoch(_batches(bb))
    assert stats["n"] == 16 and np.isfinite(stats["loss"]) and 0 <= stats["accuracy"] <= 1
    for name, p in ft.model.named_parameters():
        if name in expected:
            continue
        assert torch.equal(p, before[name]), f"frozen {name} changed under strategy {strategy!r}"
    changed = {n for n, p in ft.model.named_parameters() if not torch.equal(p, before[n])}
    assert changed and changed <= expected
    assert {n for n in changed if n.startswith("head.")}             # the head always learns
    # batch-norm statistics follow the downstream data in every strategy, frozen blocks included
    assert all(not torch.equal(b, buffers[n]) for n, b in ft.model.named_buffers() if n in buffers)
    assert not ft.model.training                                      # back in eval mode


@pytest.mark.parametrize("strategy, block", [("layer", "layer3.0"), ("scl", 5)])
def test_layer_and_scl_on_a_resnet_freeze_everything_else(strategy, block):
    bb = _resnet()
    ft = prepare(bb, 3, strategy, block=block, lr=1e-2, seed=0)
    name, module = resolve_block(bb, block)
    assert ft.block == name == "layer3.0"
    assert set(ft.trainable_names()) == _expected_trainable(ft, strategy, name)
    before = _snapshot(ft.model)
    ft.train_epoch(_batches(bb, n_batches=1))
    for key, value in ft.model.state_dict().items():
        in_block = key.startswith("backbone.layer3.0.")
        if key.startswith("head.") or in_block or "running_" in key or "num_batches_tracked" in key:
            continue
        assert torch.equal(value, before[key]), key
    # a middle block is a small share of a ResNet (the NC transfer paper: 6-8 %)
    assert 0.05 < ft.trainable_fraction < 0.12


def test_training_is_seeded_and_deterministic_on_cpu():
    def train(seed):
        bb = _mlp(seed)
        ft = prepare(bb, 3, "full", lr=1e-2, seed=seed)
        ft.train_epoch(_batches(bb, seed=seed))
        return _snapshot(ft.model)

    a, b, c = train(0), train(0), train(1)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], c[k]) for k in a)


def test_combine_skip_zero_pads_the_block_by_hand():
    pre = torch.tensor([[1.0, 2.0, 3.0, 4.0], [0.0, 0.0, 0.0, 1.0]])      # (2, 4) pre-logits
    block = torch.tensor([[10.0, 20.0], [-1.0, 1.0]])                       # (2, 2) pooled block
    assert torch.equal(combine_skip(pre, block), torch.tensor([[11.0, 22.0, 3.0, 4.0], [-1.0, 1.0, 0.0, 1.0]]))
    with pytest.raises(ValueError, match=r"block's width \(5\) to be at most the pre-logits width \(4\)"):
        combine_skip(pre, torch.zeros(2, 5))


def test_scl_feature_is_padded_pooled_block_plus_pre_logits():
    bb = _resnet()
    ft = prepare(bb, 4, "scl", block="layer3.0", lr=1e-3, seed=0)
    x = torch.randn(5, 1, 16, 16, generator=torch.Generator().manual_seed(3))
    captured = {}
    handle = bb.model.get_submodule("layer3.0").register_forward_hook(
        lambda m, a, out: captured.__setitem__("out", out.detach().clone()))
    try:
        with torch.no_grad():
            pre = bb.pre_logits(x)                                          # (5, 512)
    finally:
        handle.remove()
    pooled = captured["out"].mean(dim=(2, 3))                               # (5, 256)
    expected = pre.clone()
    expected[:, :256] += pooled                                             # zero-padded to 512
    with torch.no_grad():
        got = ft.model.features(x)
        logits = ft.model(x)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    # The engine computes held-out logits from extracted (pooled) features: same result.
    feats = lab.features.extract(bb, x, layers=["pre_logits", "layer3.0"], normalize=False)  # x: model input
    torch.testing.assert_close(ft.logits_from_features(feats["pre_logits"], feats["layer3.0"]), logits,
                               rtol=1e-4, atol=1e-5)
    assert not bb.model.get_submodule("layer3.0")._forward_hooks                # no hook left behind


def test_resolve_block_by_name_and_index_with_clear_errors():
    bb = _mlp()
    assert resolve_block(bb, "fc1")[0] == "fc1"
    assert resolve_block(bb, 0)[0] == "fc1" and resolve_block(bb, -1)[0] == "fc3"
    assert resolve_block(bb, "1")[0] == "fc2"
    with pytest.raises(ValueError, match=r"block index 7 is out of range \(-3 to 2\) for mlp:depth=3,width=16; "
                                         r"its blocks are fc1, fc2, fc3"):
        resolve_block(bb, 7)
    with pytest.raises(ValueError, match=r"block 'fc9' is not a trainable block of .*; choose one of fc1, fc2, fc3"):
        resolve_block(bb, "fc9")
    with pytest.raises(ValueError, match="strategy must be one of 'none', 'linear'"):
        prepare(bb, 3, "magic")


def test_label_noise_corrupts_exactly_round_fraction_n_and_keeps_the_clean_copy():
    clean = np.repeat(np.arange(4), 25)                                     # n = 100, K = 4
    original = clean.copy()
    for fraction in (0.0, 0.1, 0.25, 0.333, 0.5, 1.0):
        noisy, corrupted = corrupt_labels(clean, fraction, 4, seed=1)
        m = round(fraction * len(clean))
        assert len(corrupted) == m and len(set(corrupted.tolist())) == m
        assert int((noisy != clean).sum()) == m                             # every chosen label changed
        assert np.array_equal(np.flatnonzero(noisy != clean), corrupted)
        assert noisy.min() >= 0 and noisy.max() < 4
    assert np.array_equal(clean, original)                                  # the clean labels are kept
    a, _ = corrupt_labels(clean, 0.3, 4, seed=7)
    b, _ = corrupt_labels(clean, 0.3, 4, seed=7)
    c, _ = corrupt_labels(clean, 0.3, 4, seed=8)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    with pytest.raises(ValueError, match="fraction must be between 0.0 and 1.0"):
        corrupt_labels(clean, 1.5, 4)


def test_reinitialized_restores_the_model_exactly():
    bb = _resnet()
    module = bb.tap_module("layer2.0")
    initial = _snapshot(module)
    ft = prepare(bb, 3, "full", lr=1e-2, seed=0)
    ft.train_epoch(_batches(bb, n_batches=2))
    trained = _snapshot(bb.model)
    params = {n: p for n, p in bb.model.named_parameters()}
    assert any(not torch.equal(v, initial[k]) for k, v in module.state_dict().items())
    with reinitialized(module, initial):
        for k, v in module.state_dict().items():
            assert torch.equal(v, initial[k])
    after = bb.model.state_dict()
    assert all(torch.equal(after[k], trained[k]) for k in trained)          # bit for bit
    assert all(params[n] is p for n, p in bb.model.named_parameters())     # same tensors (optimizer safe)
    # restored even when the body raises
    with pytest.raises(RuntimeError):
        with reinitialized(module, initial):
            raise RuntimeError("boom")
    assert all(torch.equal(bb.model.state_dict()[k], trained[k]) for k in trained)


def test_stem_group_can_be_reinitialized_too():
    bb = _resnet()
    stem = bb.tap_module("stem")
    initial = _snapshot(stem)
    with torch.no_grad():
        for p in stem.parameters():
            p.add_(1.0)
    changed = _snapshot(bb.model)
    with reinitialized(stem, initial):
        assert all(torch.equal(v, initial[k]) for k, v in stem.state_dict().items())
    assert all(torch.equal(bb.model.state_dict()[k], changed[k]) for k in changed)


def test_registry_accepts_new_strategies():
    custom = finetune.Strategy("head_and_stem", True, False, False,
                               lambda bb, block: (bb.tap_module("fc1"),), "fc1 + head")
    finetune.register_strategy(custom)
    try:
        ft = prepare(_mlp(), 3, "head_and_stem", lr=1e-2)
        assert {n.split(".")[1] for n in ft.trainable_names() if n.startswith("backbone.")} == {"fc1"}
    finally:
        finetune.unregister_strategy("head_and_stem")
    assert "head_and_stem" not in finetune.STRATEGIES


def test_a_registered_strategy_is_one_a_run_accepts_and_trains_by(tiny_config, one_thread):
    from lab.events import RunFinished

    toy = finetune.Strategy("fc2_only", True, False, False, lambda bb, block: (bb.tap_module("fc2"),),
                            "fc2 and the head", lr={"adamw": 5e-3, "sgd": 0.05})
    finetune.register_strategy(toy)
    try:
        cfg = tiny_config(strategy="fc2_only", epochs=1, seeds=(0,), projection="none")
        assert cfg.n_epochs == 1 and cfg.replace(lr=None).learning_rate == 5e-3
        with pytest.raises(ValueError, match="block is only used by strategy 'layer' or 'scl'"):
            cfg.replace(block=1)
        events = list(lab.run(cfg, store=False))
        assert isinstance(events[-1], RunFinished), getattr(events[-1], "message", events[-1])
        util = {e.layer: e.relative for e in events if e.kind == "layer_utilization" and e.epoch == 1}
        assert util["fc2"] > 0 and util["fc1"] == 0.0           # fc2 trained, fc1 stayed as loaded
        ft = prepare(_mlp(), 3, "fc2_only", lr=1e-2)
        assert {n.split(".")[1] for n in ft.trainable_names() if n.startswith("backbone.")} == {"fc2"}
    finally:
        finetune.unregister_strategy("fc2_only")
    with pytest.raises(ValueError, match="strategy must be one of 'none', 'linear', 'full', 'layer', 'scl'"):
        tiny_config(strategy="fc2_only")


def test_scl_on_a_transformer_adds_the_block_class_token():
    torch.manual_seed(0)
    bb = lab.backbones.load("vit_tiny_patch16_224", in_chans=1, img_size=16, patch_size=8, depth=2, device="cpu")
    block = bb.layers[1]
    assert bb.tap(block).kind == "tokens" and bb.tap(block).cls_token
    ft = prepare(bb, 3, "scl", block=block, lr=1e-3, seed=0)
    x = torch.randn(4, 1, 16, 16, generator=torch.Generator().manual_seed(0))
    captured = {}
    handle = bb.model.get_submodule(bb.tap(block).module_name).register_forward_hook(
        lambda m, a, out: captured.__setitem__("out", out.detach().clone()))
    try:
        with torch.no_grad():
            pre = bb.pre_logits(x)                                          # (4, 192)
    finally:
        handle.remove()
    with torch.no_grad():
        got = ft.model.features(x)
    torch.testing.assert_close(got, pre + captured["out"][:, 0], rtol=1e-5, atol=1e-5)   # class token, no padding


def test_train_epoch_reports_every_batch_and_stops_with_the_one_cancelled():
    bb = _mlp()
    ft = prepare(bb, 3, "full", lr=1e-2, seed=0)
    seen = []
    stats = ft.train_epoch(_batches(bb, n_batches=3), progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 3), (2, 3), (3, 3)] and stats["n"] == 24
    calls = []

    def should_stop():
        calls.append(1)
        return len(calls) > 2                           # two batches, then stop

    seen.clear()
    with pytest.raises(lab.Cancelled, match="training cancelled after 2 of 3 batches"):
        ft.train_epoch(_batches(bb, n_batches=3), should_stop=should_stop,
                       progress=lambda done, total: seen.append(done))
    assert seen == [1, 2] and not ft.model.training     # back in eval mode
    assert finetune.Cancelled is lab.Cancelled is lab.features.Cancelled


def test_train_epoch_progress_stops_before_a_failing_batch():
    bb = _mlp()
    ft = prepare(bb, 3, "full", lr=1e-2, seed=0)
    batches = _batches(bb, n_batches=3)
    batches[1] = (torch.full_like(batches[1][0], float("nan")), batches[1][1])
    seen = []
    with pytest.raises(ValueError, match="training diverged"):
        ft.train_epoch(batches, progress=lambda done, total: seen.append(done))
    assert seen == [1]                                   # the last report names the failing batch's index


def test_one_pooling_for_extraction_and_the_scl_skip():
    assert finetune.pool_tap_output is lab.features.pool_tap_output
    bb = _resnet()
    tap = bb.tap("layer3.0")
    out = torch.randn(2, 256, 3, 3, requires_grad=True)                    # (N, C, H, W)
    pooled = finetune.pool_tap_output(out, tap)
    torch.testing.assert_close(pooled, out.detach().mean(dim=(2, 3)))
    pooled.sum().backward()                                                 # differentiable for SCL FT
    torch.testing.assert_close(out.grad, torch.full_like(out, 1 / 9))


def test_cosine_schedule_warms_up_decays_to_zero_and_constant_keeps_lr():
    bb = _mlp()
    ft = prepare(bb, 3, "full", lr=0.1, seed=0)
    ft.schedule("cosine", 40)                        # warm-up: 40 // 20 = 2 steps
    lrs = []
    for x, y in _batches(bb, n_batches=40):
        lrs.append(ft.optimizer.param_groups[0]["lr"])   # the lr this step uses
        ft.train_step(x, y)
    assert lrs[0] == pytest.approx(0.05) and lrs[1] == pytest.approx(0.1)
    # after the warm-up: 0.1 * (1 + cos(pi * k / 38)) / 2 for the k-th step past it
    assert lrs[2:] == pytest.approx([0.05 * (1 + math.cos(math.pi * k / 38)) for k in range(38)])
    assert ft.optimizer.param_groups[0]["lr"] == pytest.approx(0.0, abs=1e-12)   # after the last step
    assert all(a >= b for a, b in zip(lrs[1:], lrs[2:]))

    ft = prepare(bb, 3, "full", lr=0.1, seed=0)
    ft.schedule("constant", 40)
    for x, y in _batches(bb, n_batches=3):
        ft.train_step(x, y)
    assert ft.optimizer.param_groups[0]["lr"] == 0.1
    with pytest.raises(ValueError, match="lr_schedule must be 'cosine' or 'constant'"):
        ft.schedule("step", 40)


def test_the_engine_decays_the_lr_to_zero_over_all_epochs():
    cfg = lab.RunConfig(dataset="digits", backbone="mlp:depth=2,width=16", epochs=2, n_unseen=3,
                        unseen_per_class=20, seen_per_class=10, projection="none", batch_size=64,
                        metrics=("nmi",), save_weights=False)
    seen = []
    real = finetune.FineTuner.schedule

    def spy(self, kind, total_steps):
        real(self, kind, total_steps)
        seen.append((kind, total_steps, self))

    with unittest.mock.patch.object(finetune.FineTuner, "schedule", spy):
        events = list(lab.run(cfg, store=False))
    assert type(events[-1]).__name__ == "RunFinished"
    (kind, total, ft), = seen
    n_train = events[0].n_images["train"]
    assert kind == "cosine" and total == 2 * math.ceil(n_train / 64)
    assert ft.optimizer.param_groups[0]["lr"] == pytest.approx(0.0, abs=1e-12)
