"""The zoo recipe's training: the model and its optimizer, one epoch over the source images, the evaluation.

:func:`lab.zoo.recipe.pretrain` runs the epochs, checkpoints and writes the files; this module is what one
epoch does: seeded batch order and augmentation (:mod:`lab.zoo._augment`), the loss of each part of the source
task, and the accuracy of each part on clean images.
"""
from __future__ import annotations

import math

import numpy as np

from lab.zoo import _augment
from lab.zoo._card import source_parts
from lab.zoo._source import SourceData

__all__ = ["ARCHITECTURES", "MEAN", "STD", "targets", "loss_and_hits", "normalize", "evaluate", "epoch_generator",
           "train_epoch", "setup"]

MEAN, STD = (0.5,), (0.5,)       # the engine's input scaling of gray glyphs: (x / 255 - 0.5) / 0.5

ARCHITECTURES: dict[str, tuple[str, dict, float]] = {
    "resnet18": ("resnet18", {"in_chans": 1}, 2e-3),
    "convnext_atto": ("convnext_atto", {"in_chans": 1}, 2e-3),
    "vit_tiny": ("vit_tiny_patch16_224", {"in_chans": 1, "img_size": 64, "patch_size": 8, "depth": 6}, 1e-3),
}
"""Recipe ``--arch`` -> (timm model name, ``timm.create_model`` keywords, default learning rate)."""


def targets(data: SourceData, task: str) -> tuple[np.ndarray, int]:
    n_fonts, n_chars = len(data.fonts), len(data.chars)
    if task == "font":
        return data.font[:, None], n_fonts
    if task == "char":
        return data.char[:, None], n_chars
    return np.stack([data.font, data.char + n_fonts], 1), n_fonts + n_chars


def loss_and_hits(logits, y, task: str, n_fonts: int, smoothing: float = 0.1):
    """Cross-entropy (summed over the task's parts) and correct predictions per part."""
    import torch.nn.functional as F

    if task == "both":
        parts = [(logits[:, :n_fonts], y[:, 0]), (logits[:, n_fonts:], y[:, 1] - n_fonts)]
    else:
        parts = [(logits, y[:, 0])]
    loss = sum(F.cross_entropy(z, t, label_smoothing=smoothing) for z, t in parts)
    hits = [(z.argmax(1) == t).sum().item() for z, t in parts]
    return loss, hits


def normalize(x):
    """uint8 (B, 1, H, W) -> float32, as ``glyphs`` feeds the engine; per batch to keep memory small."""
    return (x.float() / 255 - MEAN[0]) / STD[0]


def evaluate(model, x, y, task: str, n_fonts: int, batch: int = 256) -> dict[str, float]:
    """Accuracy of each part of the task (``font``, ``char``) on clean images."""
    import torch

    model.eval()
    hits = [0] * len(source_parts(task))
    with torch.no_grad():
        for i in range(0, len(x), batch):
            _, h = loss_and_hits(model(normalize(x[i:i + batch])), y[i:i + batch], task, n_fonts)
            hits = [a + b for a, b in zip(hits, h)]
    return {p: h / max(len(x), 1) for p, h in zip(source_parts(task), hits)}


def epoch_generator(seed: int, epoch: int):
    """The generator of one epoch's batch order and augmentation: a function of (seed, epoch) only,
    so a run resumed at an epoch boundary draws what the uninterrupted run draws."""
    import torch

    state = np.random.SeedSequence([int(seed), int(epoch)]).generate_state(2, np.uint32)
    return torch.Generator().manual_seed(int(state[0]) << 31 | int(state[1]) >> 1)


def train_epoch(model, opt, sched, x, y, recipe, epoch: int, n_fonts: int) -> float:
    """One pass over the training images in a seeded order, each batch augmented; the mean loss. ``recipe``: the
    run's :class:`lab.zoo.recipe.Recipe` (its seed, batch size, augmentation, task and label smoothing)."""
    import torch

    gen = epoch_generator(recipe.seed, epoch)
    model.train()
    order = torch.randperm(len(x), generator=gen)
    loss_sum = 0.0
    for i in range(0, len(order), recipe.batch_size):
        idx = order[i:i + recipe.batch_size]
        batch = _augment.augment(x[idx], gen, recipe.augment)                # (B, 1, 64, 64) uint8
        loss, _ = loss_and_hits(model(normalize(batch)), y[idx], recipe.task, n_fonts, recipe.label_smoothing)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        loss_sum += loss.item() * len(idx)
    return loss_sum / len(x)


def setup(recipe, num_classes: int, steps_per_epoch: int):
    """The model (initialized from the seed), AdamW and its warm-up + cosine schedule, for ``recipe`` (a
    :class:`lab.zoo.recipe.Recipe`)."""
    import timm
    import torch

    model_name, kwargs, _ = ARCHITECTURES[recipe.arch]
    torch.manual_seed(recipe.seed)
    model = timm.create_model(model_name, num_classes=num_classes, **kwargs)
    opt = torch.optim.AdamW(model.parameters(), lr=recipe.lr, weight_decay=recipe.weight_decay)
    total = steps_per_epoch * recipe.epochs
    warm = max(1, total // 20)

    def factor(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        return 0.5 * (1 + math.cos(math.pi * (step - warm) / max(total - warm, 1)))

    return model, opt, torch.optim.lr_scheduler.LambdaLR(opt, factor)
