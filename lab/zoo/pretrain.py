"""The recipe of the glyph zoo: pretrain a backbone on a source task disjoint from ``glyphs``.

The papers fine-tune *pretrained* backbones; offline, nothing is pretrained for
64 px gray glyphs. This recipe renders a source dataset from CJK fonts packaged in
Debian that are **not** among the 20 typefaces of ``glyphs`` (nor other weights,
ancestors or derivatives of them), with characters that are not among its
characters either, and trains a backbone from a seed on the CPU::

    apt-get install fonts-morisawa-bizud-gothic ...     # see SOURCE_FACES
    python -m lab pretrain --arch resnet18 --out lab/zoo/glyph_resnet18 --epochs 8 --seed 0

It writes ``NAME.safetensors`` (fp16 state dict of the whole timm model, source
classifier included), ``NAME.json`` (the card :mod:`lab.zoo` and
``lab.backbones`` read) and ``NAME.md`` (a short model card). Images are drawn
with :func:`lab.data.glyphs.render_glyph`, the renderer of the target dataset,
and fed as ``glyphs`` feeds them: one channel, ``(x / 255 - 0.5) / 0.5``.

Source tasks: ``"font"`` (which of the source fonts drew the image), ``"char"``
(which character) or ``"both"`` (one head of ``n_fonts + n_chars`` logits, a
cross-entropy over each part).

The source fonts, their check against the targets and the rendering are
:mod:`lab.zoo._source` (its names are importable from here too); this module is the
training loop, the files it writes and the command line.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from pathlib import Path

import numpy as np

from lab.data import glyphs
from lab.zoo._source import (EXCLUDED_PACKAGES, SOURCE_FACES, SourceData, render_source, source_characters,
                             target_conflicts)

__all__ = [
    "SOURCE_FACES", "EXCLUDED_PACKAGES", "ARCHITECTURES", "TASKS", "MEAN", "STD",
    "SourceData", "target_conflicts", "source_characters", "render_source", "pretrain", "main",
]

TASKS = ("font", "char", "both")
MEAN, STD = (0.5,), (0.5,)       # the engine's input scaling of gray glyphs: (x / 255 - 0.5) / 0.5

ARCHITECTURES: dict[str, tuple[str, dict, float]] = {
    "resnet18": ("resnet18", {"in_chans": 1}, 2e-3),
    "vit_tiny": ("vit_tiny_patch16_224", {"in_chans": 1, "img_size": 64, "patch_size": 8, "depth": 6}, 1e-3),
}
"""Recipe ``--arch`` -> (timm model name, ``timm.create_model`` keywords, default learning rate)."""


# ----------------------------------------------------------------------------------------------- training


def _targets(data: SourceData, task: str) -> tuple[np.ndarray, int]:
    n_fonts, n_chars = len(data.fonts), len(data.chars)
    if task == "font":
        return data.font[:, None], n_fonts
    if task == "char":
        return data.char[:, None], n_chars
    return np.stack([data.font, data.char + n_fonts], 1), n_fonts + n_chars


def _loss_and_hits(logits, y, task: str, n_fonts: int):
    """Cross-entropy (summed over the task's parts) and correct predictions per part."""
    import torch.nn.functional as F

    if task == "both":
        parts = [(logits[:, :n_fonts], y[:, 0]), (logits[:, n_fonts:], y[:, 1] - n_fonts)]
    else:
        parts = [(logits, y[:, 0])]
    loss = sum(F.cross_entropy(z, t, label_smoothing=0.1) for z, t in parts)
    hits = [(z.argmax(1) == t).sum().item() for z, t in parts]
    return loss, hits


def _normalize(x):
    """uint8 (B, 1, H, W) -> float32, as ``glyphs`` feeds the engine; per batch to keep memory small."""
    return (x.float() / 255 - MEAN[0]) / STD[0]


def _evaluate(model, x, y, task: str, n_fonts: int, batch: int = 256) -> list[float]:
    import torch

    model.eval()
    hits = None
    with torch.no_grad():
        for i in range(0, len(x), batch):
            _, h = _loss_and_hits(model(_normalize(x[i:i + batch])), y[i:i + batch], task, n_fonts)
            hits = h if hits is None else [a + b for a, b in zip(hits, h)]
    return [h / max(len(x), 1) for h in hits]


def _recipe_command(arch, out, task, epochs, seed, n_chars, batch_size, lr) -> str:
    return (f"python -m lab pretrain --arch {arch} --out {out} --task {task} --epochs {epochs} "
            f"--seed {seed} --chars {n_chars} --batch-size {batch_size} --lr {lr:g}")


def pretrain(arch: str, out: str | Path, *, task: str = "font", epochs: int = 8, seed: int = 0,
             n_chars: int = 200, batch_size: int = 64, lr: float | None = None, weight_decay: float = 0.05,
             threads: int = 2, faces=SOURCE_FACES, data: SourceData | None = None, log=print) -> dict:
    """Render the source data, train ``arch`` on it from ``seed`` and write the zoo files.

    Parameters
    ----------
    arch : str
        A key of :data:`ARCHITECTURES`.
    out : str or Path
        ``DIR/NAME``: writes ``NAME.safetensors``, ``NAME.json`` and ``NAME.md`` in ``DIR``.
    task : str
        One of :data:`TASKS`.
    epochs, seed, n_chars, batch_size, lr, weight_decay
        ``lr`` None takes the architecture's default. AdamW with a linear warm-up
        (first 5 % of steps) and a cosine decay; label smoothing 0.1.
    threads : int
        ``torch.set_num_threads``: the recipe is a CPU recipe.
    faces : sequence of lab.data.glyphs.Face
        Source fonts (default :data:`SOURCE_FACES`); checked against the targets.
    data : SourceData, optional
        Already rendered source data (from :func:`render_source` with the same
        ``n_chars`` and ``seed``), to train several models on one rendering.
    log : callable
        Receives progress lines.

    Returns
    -------
    dict
        The card written to ``NAME.json``.
    """
    import timm
    import torch
    from safetensors.torch import save_file

    if arch not in ARCHITECTURES:
        raise ValueError(f"unknown --arch {arch!r}; expected one of {', '.join(ARCHITECTURES)}.")
    if task not in TASKS:
        raise ValueError(f"unknown --task {task!r}; expected one of {', '.join(TASKS)}.")
    if int(epochs) < 1 or int(n_chars) < 2:
        raise ValueError(f"--epochs must be >= 1 and --chars >= 2. Got {epochs} and {n_chars} instead.")
    out = Path(out)
    name = out.name
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name) or name.endswith((".json", ".md", ".safetensors")):
        raise ValueError(f"--out must be DIR/NAME with a plain NAME (letters, digits, _ . -, no suffix). "
                         f"Got {str(out)!r} instead.")
    torch.set_num_threads(int(threads))
    torch.manual_seed(seed)
    t0, cpu0 = time.perf_counter(), time.process_time()
    if data is None:
        data = render_source(faces, n_chars=n_chars, seed=seed, log=log)
    elif len(data.chars) != n_chars:
        raise ValueError(f"data has {len(data.chars)} characters per font but n_chars={n_chars}; "
                         f"render it with n_chars={n_chars} or pass the matching n_chars.")
    log(f"rendered {len(data.images)} images in {time.perf_counter() - t0:.0f} s")

    x = torch.from_numpy(data.images).unsqueeze(1)                     # (N, 1, 64, 64) uint8
    y_np, num_classes = _targets(data, task)
    y = torch.from_numpy(y_np).long()                                  # (N, parts)
    train, val = torch.from_numpy(~data.val), torch.from_numpy(data.val)
    x_tr, y_tr, x_val, y_val = x[train], y[train], x[val], y[val]
    n_fonts = len(data.fonts)

    model_name, kwargs, default_lr = ARCHITECTURES[arch]
    lr = default_lr if lr is None else float(lr)
    model = timm.create_model(model_name, num_classes=num_classes, **kwargs)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    steps_per_epoch = math.ceil(len(x_tr) / batch_size)
    total = steps_per_epoch * int(epochs)
    warm = max(1, total // 20)
    def factor(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        return 0.5 * (1 + math.cos(math.pi * (step - warm) / max(total - warm, 1)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
    gen = torch.Generator().manual_seed(seed)
    history = []
    for epoch in range(1, int(epochs) + 1):
        t = time.perf_counter()
        model.train()
        order = torch.randperm(len(x_tr), generator=gen)
        loss_sum = 0.0
        for i in range(0, len(order), batch_size):
            idx = order[i:i + batch_size]
            loss, _ = _loss_and_hits(model(_normalize(x_tr[idx])), y_tr[idx], task, n_fonts)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            loss_sum += loss.item() * len(idx)
        acc = _evaluate(model, x_val, y_val, task, n_fonts)
        history.append({"epoch": epoch, "train_loss": loss_sum / len(x_tr), "val_accuracy": acc})
        log(f"epoch {epoch}/{epochs}: train loss {loss_sum / len(x_tr):.3f}, source val accuracy "
            f"{' / '.join(f'{a:.3f}' for a in acc)} ({time.perf_counter() - t:.0f} s)")

    model.eval()
    state = {k: (v.half() if v.is_floating_point() else v).contiguous() for k, v in model.state_dict().items()}
    out.parent.mkdir(parents=True, exist_ok=True)
    weights = out.parent / f"{name}.safetensors"
    save_file(state, str(weights), metadata={"format": "pt", "name": name})
    parts = {"font": "font accuracy", "char": "character accuracy",
             "both": "mean of font and character accuracy"}[task]
    final = history[-1]["val_accuracy"]
    card = {
        "name": name,
        "architecture": model_name,
        "model_kwargs": dict(kwargs),
        "num_classes": int(num_classes),
        "weights": weights.name,
        "input_size": [1, glyphs.IMAGE_SIZE, glyphs.IMAGE_SIZE],
        "mean": list(MEAN),
        "std": list(STD),
        "source": (f"{_TASK_TEXT[task]} on {len(data.images)} rendered 64 px glyphs: {n_fonts} Debian CJK "
                   f"fonts disjoint from the glyphs typefaces x {len(data.chars)} characters not in glyphs "
                   f"(held-out {int(data.val.sum())} font-character pairs; source_accuracy = {parts})"),
        "recipe": _recipe_command(arch, out.as_posix(), task, epochs, seed, n_chars, batch_size, lr),
        "epochs": int(epochs),
        "source_accuracy": round(float(np.mean(final)), 4),
        "seed": int(seed),
    }
    out.parent.joinpath(f"{name}.json").write_text(json.dumps(card, indent=1, ensure_ascii=False) + "\n",
                                                   encoding="utf-8")
    out.parent.joinpath(f"{name}.md").write_text(
        _model_card_md(card, data, history, task, time.perf_counter() - t0, time.process_time() - cpu0,
                       threads, batch_size, lr),
        encoding="utf-8")
    log(f"wrote {weights} ({weights.stat().st_size / 1e6:.1f} MB) and its card; "
        f"source accuracy {card['source_accuracy']:.3f} in {time.perf_counter() - t0:.0f} s")
    return card


_TASK_TEXT = {"font": "font recognition", "char": "character recognition",
              "both": "font and character recognition"}


def _model_card_md(card: dict, data: SourceData, history: list, task: str, seconds: float, cpu: float,
                   threads: int, batch_size: int, lr: float) -> str:
    import platform

    import timm
    import torch

    fonts = "\n".join(f"| {f['name']} | {f['family']} | {f['package']} | {f['package_version'] or '?'} |"
                      for f in data.fonts)
    epochs = "\n".join(f"| {h['epoch']} | {h['train_loss']:.3f} | "
                       f"{' / '.join(f'{a:.3f}' for a in h['val_accuracy'])} |" for h in history)
    kwargs = ", ".join(f"{k}={v!r}" for k, v in card["model_kwargs"].items())
    return f"""# {card['name']}

`{card['architecture']}` ({kwargs}) pretrained offline on **{_TASK_TEXT[task]}** over CJK
glyphs rendered from Debian fonts that are disjoint from the 20 typefaces of the `glyphs`
dataset, with characters that are not among its characters (the shipped `glyphs.json` lists both). Load it by name
(`{card['name']}`); the full timm model with its {card['num_classes']}-way source classifier is
stored in `{card['weights']}` (fp16 safetensors).

- **Source data**: {card['source']}.
- **Recipe**: `{card['recipe']}` (CPU, {threads} torch threads: {seconds / 60:.0f} min wall,
  {cpu / 60:.0f} CPU-min on {platform.machine()} with torch {torch.__version__}, timm {timm.__version__}).
  Rendering the source images is part of the recipe and of these times.
- **Training**: {card['epochs']} epochs, AdamW (weight decay 0.05), linear warm-up and cosine decay,
  label smoothing 0.1, batch {batch_size}, learning rate {lr:g}; the images' variation is the
  `glyphs` renderer's (stroke width, rotation, scale, position).
- **Source accuracy** (held-out font-character pairs): {card['source_accuracy']:.3f}.
- **Input and normalization**: {card['input_size'][0]} channel,
  {card['input_size'][1]}x{card['input_size'][2]} px, dark ink on white, `(x / 255 - mean) / std`
  with mean {card['mean']} and std {card['std']}.
- **Seed**: {card['seed']}.

| epoch | train loss | source val accuracy |
|---|---|---|
{epochs}

Source fonts (one class each for the font task):

| name | family | Debian package | version |
|---|---|---|---|
{fonts}

Characters ({len(data.chars)}): {data.chars}
"""


# ----------------------------------------------------------------------------------------------- command line


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The recipe's flags (shared by ``python -m lab pretrain`` and ``python -m lab.zoo.pretrain``)."""
    parser.add_argument("--arch", required=True, choices=sorted(ARCHITECTURES),
                        help="backbone recipe: " + "; ".join(f"{k} = {v[0]} {v[1]} (lr {v[2]:g})"
                                                            for k, v in ARCHITECTURES.items()))
    parser.add_argument("--out", required=True, metavar="DIR/NAME",
                        help="writes DIR/NAME.safetensors, DIR/NAME.json and DIR/NAME.md")
    parser.add_argument("--task", default="font", choices=TASKS, help="source task (default: font)")
    parser.add_argument("--epochs", type=int, default=8, help="training epochs (default: 8)")
    parser.add_argument("--seed", type=int, default=0, help="seed of characters, rendering and training")
    parser.add_argument("--chars", type=int, default=200, help="characters per source font (default: 200)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=None, help="learning rate (default: the --arch's)")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads (default: 2)")


def run_from_args(args) -> dict:
    """Run :func:`pretrain` from parsed :func:`add_arguments` flags."""
    return pretrain(args.arch, args.out, task=args.task, epochs=args.epochs, seed=args.seed,
                    n_chars=args.chars, batch_size=args.batch_size, lr=args.lr, threads=args.threads)


def main(argv: list[str] | None = None) -> int:
    """``python -m lab.zoo.pretrain --arch ... --out ...``; exit 2 with one line on bad input."""
    parser = argparse.ArgumentParser(prog="python -m lab.zoo.pretrain", description=__doc__.split("\n")[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        run_from_args(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
