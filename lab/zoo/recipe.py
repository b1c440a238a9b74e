"""The recipe of the glyph zoo: pretrain a backbone on a source task disjoint from ``glyphs``.

The papers fine-tune *pretrained* backbones; offline, nothing is pretrained for
64 px gray glyphs. This recipe renders a source dataset from CJK fonts packaged in
Debian that are **not** among the 20 typefaces of ``glyphs`` (nor other weights,
ancestors or derivatives of them), with characters that are not among its
characters either, and trains a backbone from a seed on the CPU::

    apt-get install fonts-morisawa-bizud-gothic ...     # see SOURCE_FACES
    python -m lab pretrain --arch resnet18 --out lab/zoo/glyph_resnet18 --seed 0

The defaults (:class:`Recipe`) are the recipe meant for the shipped CNN: all 26 source fonts x
every character of the ``"wide"`` pool they all draw (about 2200: some 58 000 images, rendered in
a few minutes and cached), font and character heads together, pen and scan augmentation,
16 epochs of batch 128; about 4-6 minutes an epoch on two idle CPU cores.

It writes ``NAME.safetensors`` (fp16 state dict of the whole timm model, source
classifier included), ``NAME.json`` (the card :mod:`lab.zoo` and
``lab.backbones`` read) and ``NAME.md`` (a short model card). Images are drawn
with :func:`lab.data.build_glyphs.render_glyph`, the renderer of the target dataset, once
(cached under ``$LAB_CACHE_DIR``), varied per batch by pen and scan augmentations
(:mod:`lab.zoo._augment`) and fed as ``glyphs`` feeds them: one channel,
``(x / 255 - 0.5) / 0.5``.

Source tasks: ``"font"`` (which of the source fonts drew the image), ``"char"``
(which character) or ``"both"`` (the default: one head of ``n_fonts + n_chars`` logits,
a cross-entropy over each part, so the backbone learns style and shape; both accuracies
are reported, the font accuracy is the card's ``source_accuracy``).

After every epoch the run is checkpointed in ``DIR/NAME.partial/`` (:mod:`lab.zoo._resume`);
the same command resumes an interrupted run, a different recipe is refused, ``--restart``
starts over.

The source fonts, their check against the targets, the rendering and its cache are
:mod:`lab.zoo._source` (some of its names are importable from here too), what one epoch of training
does is :mod:`lab.zoo._training`; this module is the recipe, the run (epochs, checkpoints, files) and the
command line.
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from lab.zoo import _resume, _training
from lab.zoo._augment import Augment
from lab.zoo._card import make_card, model_card_md
from lab.zoo._source import (EXCLUDED_PACKAGES, POOLS, SOURCE_FACES, SourceData, load_source, render_source,
                             source_characters, target_conflicts)
from lab.zoo._training import ARCHITECTURES, MEAN, STD

__all__ = [
    "SOURCE_FACES", "EXCLUDED_PACKAGES", "ARCHITECTURES", "TASKS", "POOLS", "MEAN", "STD", "Recipe", "Augment",
    "SourceData", "target_conflicts", "source_characters", "render_source", "load_source", "pretrain", "main",
]

TASKS = ("font", "char", "both")


@dataclass(frozen=True)
class Recipe:
    """Every choice the trained weights depend on; saved in each checkpoint and in the card.

    Parameters
    ----------
    arch : str
        A key of :data:`ARCHITECTURES`.
    task : str
        One of :data:`TASKS`.
    epochs, seed : int
        ``seed`` draws the characters, the rendering, the initial weights, the batches and
        their augmentation.
    n_chars : int or None
        Characters per font, drawn from those of ``pool`` that every font draws; None takes them all.
    pool : str
        One of :data:`POOLS`.
    batch_size : int
    lr : float or None
        Peak learning rate; None takes the architecture's. AdamW, linear warm-up over the
        first 5 % of steps, cosine decay.
    weight_decay, label_smoothing, val_fraction : float
        ``val_fraction`` of the (font, character) pairs is held out.
    augment : Augment or float
        Pen and scan augmentation maxima; a float is ``Augment(strength=...)``.
    """

    arch: str
    task: str = "both"
    epochs: int = 16
    seed: int = 0
    n_chars: int | None = None
    pool: str = "wide"
    batch_size: int = 128
    lr: float | None = None
    weight_decay: float = 0.05
    label_smoothing: float = 0.1
    val_fraction: float = 0.1
    augment: Augment = field(default_factory=Augment)

    def __post_init__(self):
        if self.arch not in ARCHITECTURES:
            raise ValueError(f"unknown --arch {self.arch!r}; expected one of {', '.join(ARCHITECTURES)}.")
        if self.task not in TASKS:
            raise ValueError(f"unknown --task {self.task!r}; expected one of {', '.join(TASKS)}.")
        if self.pool not in POOLS:
            raise ValueError(f"unknown --pool {self.pool!r}; expected one of {', '.join(POOLS)}.")
        if int(self.epochs) < 1 or (self.n_chars is not None and int(self.n_chars) < 2) or int(self.batch_size) < 2:
            raise ValueError(f"--epochs must be >= 1, --chars >= 2 (or all) and --batch-size >= 2. Got "
                             f"{self.epochs}, {self.n_chars} and {self.batch_size} instead.")
        if not 0 < self.val_fraction < 1:
            raise ValueError(f"val_fraction must be in (0, 1). Got {self.val_fraction!r} instead.")
        lr = ARCHITECTURES[self.arch][2] if self.lr is None else float(self.lr)
        if not (math.isfinite(lr) and lr > 0):
            raise ValueError(f"--lr must be a positive number. Got {self.lr!r} instead.")
        augment = self.augment
        if not isinstance(augment, Augment):
            augment = Augment(strength=augment)
        for name, value in (("epochs", int(self.epochs)), ("seed", int(self.seed)), ("lr", lr),
                            ("batch_size", int(self.batch_size)), ("augment", augment),
                            ("n_chars", None if self.n_chars is None else int(self.n_chars))):
            object.__setattr__(self, name, value)

    def to_dict(self) -> dict:
        """The recipe as plain JSON values (``augment`` nested)."""
        return {**dataclasses.asdict(self), "augment": self.augment.to_dict()}

    def command(self, out: str | Path) -> str:
        """The command line that runs this recipe (augmentation maxima other than the default
        ones are API-only and recorded in the card)."""
        return (f"python -m lab pretrain --arch {self.arch} --out {Path(out).as_posix()} --task {self.task} "
                f"--epochs {self.epochs} --seed {self.seed} --chars {self.n_chars or 'all'} --pool {self.pool} "
                f"--batch-size {self.batch_size} --lr {self.lr:g} --augment {self.augment.strength:g}")


def _check_out(out) -> Path:
    out = Path(out)
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", out.name) or out.name.endswith((".json", ".md", ".safetensors",
                                                                           ".partial")):
        raise ValueError(f"--out must be DIR/NAME with a plain NAME (letters, digits, _ . -, no suffix). "
                         f"Got {str(out)!r} instead.")
    return out


def _refuse_other_recipe(ckpt: dict, fingerprint: dict, partial: Path) -> None:
    saved = {k: v for k, v in ckpt["recipe"].items() if k in fingerprint}
    diffs = _resume.recipe_differences(saved, fingerprint)
    if diffs:
        raise ValueError(f"{partial} holds a checkpoint (epoch {ckpt['epoch']}) of another recipe: "
                         f"{'; '.join(diffs)}. Resume it with its own command (`{ckpt['info']['command']}`), "
                         f"or start over with --restart (deletes {partial}).")


def _interrupted(out: Path, recipe: Recipe, saved: int, partial: Path) -> str:
    command = recipe.command(out)
    if saved == 0:
        return (f"interrupted before the first epoch ended: nothing to resume. Running `{command}` again "
                f"starts over (the rendered images stay cached).")
    return (f"interrupted after epoch {saved}/{recipe.epochs}, checkpointed in {partial}. Resume with the same "
            f"command: `{command}` (add --restart to start over instead).")


def pretrain(arch: str, out: str | Path, *, restart: bool = False, threads: int = 2, faces=SOURCE_FACES,
             data: SourceData | None = None, log=print, **options) -> dict:
    """Render (or reuse) the source data, train ``arch`` on it from a seed and write the zoo files.

    Parameters
    ----------
    arch : str
        A key of :data:`ARCHITECTURES`.
    out : str or Path
        ``DIR/NAME``: writes ``NAME.safetensors``, ``NAME.json`` and ``NAME.md`` in ``DIR``;
        checkpoints go to ``DIR/NAME.partial/`` until the files are written.
    restart : bool
        Delete the checkpoints of ``out`` first; otherwise a run of the same recipe resumes
        from its last checkpoint and one of another recipe is refused (ValueError naming the
        fields that differ).
    threads : int
        ``torch.set_num_threads``: the recipe is a CPU recipe.
    faces : sequence of lab.data.glyphs.Face
        Source fonts (default :data:`SOURCE_FACES`); checked against the targets.
    data : SourceData, optional
        Already rendered source data (from :func:`render_source` with the same ``n_chars``),
        to train several models on one rendering; default :func:`load_source` (cached).
    log : callable
        Receives progress lines.
    **options
        The other fields of :class:`Recipe` (``task``, ``epochs``, ``seed``, ``n_chars``,
        ``pool``, ``batch_size``, ``lr``, ``weight_decay``, ``label_smoothing``,
        ``val_fraction``, ``augment``).

    Returns
    -------
    dict
        The card written to ``NAME.json``.
    """
    import torch

    unknown = sorted(set(options) - {f.name for f in dataclasses.fields(Recipe)} - {"arch"})
    if unknown:
        raise ValueError(f"unknown recipe option {', '.join(unknown)}; expected fields of lab.zoo.recipe.Recipe.")
    recipe = Recipe(arch, **options)
    out = _check_out(out)
    partial = _resume.partial_dir(out)
    torch.set_num_threads(int(threads))
    if restart and partial.exists():
        _resume.remove(partial)
        log(f"--restart: deleted the checkpoints in {partial}")
    partial.mkdir(parents=True, exist_ok=True)                   # an unwritable --out fails before any work
    ckpt = _resume.load_latest(partial)
    fingerprint = {**recipe.to_dict(), "fonts": [f.name for f in faces] if data is None else
                   [f["name"] for f in data.fonts]}
    if ckpt is not None:
        _refuse_other_recipe(ckpt, fingerprint, partial)          # before any rendering
    t0, cpu0 = time.perf_counter(), time.process_time()
    saved = 0 if ckpt is None else int(ckpt["epoch"])
    try:
        if data is None:
            data = load_source(faces, n_chars=recipe.n_chars, seed=recipe.seed, pool=recipe.pool,
                               val_fraction=recipe.val_fraction, log=log)
        elif recipe.n_chars is not None and len(data.chars) != recipe.n_chars:
            raise ValueError(f"data has {len(data.chars)} characters per font but n_chars={recipe.n_chars}; "
                             f"render it with n_chars={recipe.n_chars} or pass the matching n_chars.")
        fingerprint["data"] = {"characters": len(data.chars), "images": len(data.images),
                               "held_out": int(data.val.sum()),
                               "chars_sha256": hashlib.sha256(data.chars.encode()).hexdigest()[:16]}
        if ckpt is not None:
            _refuse_other_recipe(ckpt, fingerprint, partial)
        x = torch.from_numpy(data.images).unsqueeze(1)                     # (N, 1, 64, 64) uint8
        y_np, num_classes = _training.targets(data, recipe.task)
        y = torch.from_numpy(y_np).long()                                  # (N, parts)
        train, val = torch.from_numpy(~data.val), torch.from_numpy(data.val)
        x_tr, y_tr, x_val, y_val = x[train], y[train], x[val], y[val]
        n_fonts = len(data.fonts)
        model, opt, sched = _training.setup(recipe, num_classes, math.ceil(len(x_tr) / recipe.batch_size))
        history, wall0, cpu_before = [], 0.0, 0.0
        if ckpt is not None:
            model.load_state_dict(ckpt["model"])
            opt.load_state_dict(ckpt["optimizer"])
            sched.load_state_dict(ckpt["scheduler"])
            torch.set_rng_state(ckpt["torch_rng"])
            history, wall0, cpu_before = ckpt["info"]["history"], ckpt["info"]["wall_seconds"], \
                ckpt["info"]["cpu_seconds"]
            log(f"resuming {out.name} after epoch {saved}/{recipe.epochs} from {partial}")
        else:
            log(f"training {recipe.arch} on {len(x_tr)} images ({n_fonts} fonts x {len(data.chars)} characters, "
                f"{len(x_val)} held out); checkpoints in {partial}")
        for epoch in range(saved + 1, recipe.epochs + 1):
            t = time.perf_counter()
            loss = _training.train_epoch(model, opt, sched, x_tr, y_tr, recipe, epoch, n_fonts)
            acc = _training.evaluate(model, x_val, y_val, recipe.task, n_fonts)
            history.append({"epoch": epoch, "train_loss": loss, "val_accuracy": acc,
                            "seconds": time.perf_counter() - t})
            info = {"history": history, "command": recipe.command(out),
                    "wall_seconds": wall0 + time.perf_counter() - t0,
                    "cpu_seconds": cpu_before + time.process_time() - cpu0}
            _resume.save(partial, epoch, recipe=fingerprint, model=model, optimizer=opt, scheduler=sched,
                             info=info)
            saved = epoch
            log(f"epoch {epoch}/{recipe.epochs}: train loss {loss:.3f}, held-out accuracy "
                f"{', '.join(f'{k} {v:.3f}' for k, v in acc.items())} ({time.perf_counter() - t:.0f} s)")
    except BaseException as exc:
        if not any(partial.iterdir()):
            partial.rmdir()
        if isinstance(exc, KeyboardInterrupt):
            log(_interrupted(out, recipe, saved, partial))
        raise

    card = _write_files(out, model, recipe, data, history, num_classes, threads=int(threads),
                        wall_seconds=wall0 + time.perf_counter() - t0,
                        cpu_seconds=cpu_before + time.process_time() - cpu0)
    _resume.remove(partial)
    log(f"wrote {out}.safetensors and its card; held-out accuracy "
        f"{', '.join(f'{k} {v:.3f}' for k, v in card['source_accuracies'].items())}; "
        f"{card['wall_seconds'] / 60:.1f} min in all")
    return card


def _font_head_only(model, task: str, n_fonts: int, num_classes: int) -> tuple[dict, int]:
    """The state dict with the classifier cut to its font rows when the task is ``both``: the character
    rows (thousands of them) only served training, and dropping them keeps the shipped zoo small."""
    state = model.state_dict()
    if task != "both":
        return state, num_classes
    head = model.get_classifier()
    names = {id(p): n for n, p in model.named_parameters()}
    for param in (head.weight, head.bias):
        state[names[id(param)]] = param.detach()[:n_fonts]
    return state, n_fonts


def _write_files(out: Path, model, recipe: Recipe, data: SourceData, history: list, num_classes: int, *,
                 threads: int, wall_seconds: float, cpu_seconds: float) -> dict:
    """``NAME.safetensors`` (fp16, the font head kept), ``NAME.json`` and ``NAME.md``; the card."""
    from safetensors.torch import save_file

    model.eval()
    state, num_classes = _font_head_only(model, recipe.task, len(data.fonts), num_classes)
    state = {k: (v.half() if v.is_floating_point() else v).contiguous() for k, v in state.items()}
    weights = out.parent / f"{out.name}.safetensors"
    save_file(state, str(weights), metadata={"format": "pt", "name": out.name})
    model_name, kwargs, _ = ARCHITECTURES[recipe.arch]
    card = make_card(name=out.name, recipe=recipe, command=recipe.command(out), model_name=model_name,
                     model_kwargs=kwargs, num_classes=num_classes, weights=weights.name, mean=MEAN, std=STD,
                     data=data, history=history, wall_seconds=wall_seconds, cpu_seconds=cpu_seconds,
                     threads=threads)
    out.parent.joinpath(f"{out.name}.json").write_text(json.dumps(card, indent=1, ensure_ascii=False) + "\n",
                                                       encoding="utf-8")
    out.parent.joinpath(f"{out.name}.md").write_text(model_card_md(card, data), encoding="utf-8")
    return card


# ----------------------------------------------------------------------------------------------- command line


def _chars(text: str) -> int | None:
    if text == "all":
        return None
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of characters or 'all'. Got {text!r} instead.") \
            from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The recipe's flags (shared by ``python -m lab pretrain`` and ``python -m lab.zoo.recipe``);
    their defaults are :class:`Recipe`'s."""
    d = {f.name: f.default for f in dataclasses.fields(Recipe)}
    parser.add_argument("--arch", required=True, choices=sorted(ARCHITECTURES),
                        help="backbone recipe: " + "; ".join(f"{k} = {v[0]} {v[1]} (lr {v[2]:g})"
                                                            for k, v in ARCHITECTURES.items()))
    parser.add_argument("--out", required=True, metavar="DIR/NAME",
                        help="writes DIR/NAME.safetensors, DIR/NAME.json and DIR/NAME.md; checkpoints go to "
                             "DIR/NAME.partial/ meanwhile, and the same command resumes from them")
    parser.add_argument("--task", default=d["task"], choices=TASKS,
                        help=f"source task; both = font and character heads together (default: {d['task']})")
    parser.add_argument("--epochs", type=int, default=d["epochs"], help=f"training epochs (default: {d['epochs']})")
    parser.add_argument("--seed", type=int, default=d["seed"],
                        help="seed of characters, rendering, initial weights, batches and augmentation")
    parser.add_argument("--chars", type=_chars, default=d["n_chars"], metavar="N|all",
                        help="characters per source font, drawn from those of --pool that every font draws "
                             "(default: all)")
    parser.add_argument("--pool", default=d["pool"], choices=POOLS,
                        help=f"character pool: common = the 1583 candidates of glyphs, wide = JIS X 0208, Big5 "
                             f"common and GB 2312 (default: {d['pool']})")
    parser.add_argument("--batch-size", type=int, default=d["batch_size"],
                        help=f"(default: {d['batch_size']})")
    parser.add_argument("--lr", type=float, default=d["lr"], help="peak learning rate (default: the --arch's)")
    parser.add_argument("--augment", type=float, default=Augment().strength, metavar="STRENGTH",
                        help="strength of the pen and scan augmentation, 0 = none (default: "
                             f"{Augment().strength:g})")
    parser.add_argument("--restart", action="store_true",
                        help="delete the checkpoints of --out and start over instead of resuming")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads (default: 2)")


def run_from_args(args) -> dict:
    """Run :func:`pretrain` from parsed :func:`add_arguments` flags."""
    return pretrain(args.arch, args.out, task=args.task, epochs=args.epochs, seed=args.seed,
                    n_chars=args.chars, pool=args.pool, batch_size=args.batch_size, lr=args.lr,
                    augment=Augment(strength=args.augment), restart=args.restart, threads=args.threads)


def main(argv: list[str] | None = None) -> int:
    """``python -m lab.zoo.recipe --arch ... --out ...``; exit 2 with one line on bad input, 130 when
    interrupted (the log says how to resume)."""
    parser = argparse.ArgumentParser(prog="python -m lab.zoo.recipe", description=__doc__.split("\n")[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        run_from_args(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
