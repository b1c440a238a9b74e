"""Seen-class held-out accuracy of the default preset's fine-tuning, per style, and which styles it confuses.

Issue 12 asked the default preset ("Which layer generalizes (glyphs, 15/5)") to reach 90 % seen
held-out accuracy. This script measures where the errors are: it fine-tunes the preset's backbone
on the preset's split with the preset's recipe (``app.choose.presets``, so the settings have one source),
scores the held-out images of the 15 seen styles the way the run engine does (``lab.features.extract``
of ``pre_logits``, ``FineTuner.logits_from_features``, ``FineTuner.score``), and prints per-style accuracy, the styles each one is taken for, and *groups*:
styles joined when they are mistaken for each other in at least ``--group-at`` of their images.
"Accuracy within groups" counts a prediction right when it lands in the true style's group, i.e.
how far the model is from the ceiling that near-identical typefaces leave.

``--archive PATH`` measures a rebuilt glyph archive instead of the shipped one, e.g. one with
the renderer's stroke-width variation on::

    .venv/bin/python -m lab.data.build_glyphs build --out /tmp/glyphs_jitter.npz --stroke-jitter
    .venv/bin/python benchmarks/seen_accuracy.py --archive /tmp/glyphs_jitter.npz

Run (about 3.5 min on 2 cores for the preset's 6 epochs; --all-styles trains on all 20)::

    .venv/bin/python benchmarks/seen_accuracy.py [--epochs N] [--lr LR] [--no-augment] [--archive PATH] [--threads 2] [--save]

``--save`` also writes the output to ``benchmarks/results/seen_accuracy.txt`` (other options add to the name).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._results import add_save_option, recording  # noqa: E402


def groups_of(cm: np.ndarray, at: float) -> list[list[int]]:
    """Classes joined (transitively) when i is predicted as j or j as i in >= ``at`` of their images."""
    k = len(cm)
    rate = cm / np.maximum(cm.sum(1, keepdims=True), 1)
    parent = list(range(k))

    def root(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(k):
        for j in range(i + 1, k):
            if max(rate[i, j], rate[j, i]) >= at:
                parent[root(i)] = root(j)
    found: dict[int, list[int]] = {}
    for i in range(k):
        found.setdefault(root(i), []).append(i)
    return sorted(found.values(), key=lambda g: (-len(g), g))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--epochs", type=int, default=None, help="default: the preset's")
    p.add_argument("--lr", type=float, default=None, help="default: the preset's")
    p.add_argument("--no-augment", dest="augment", action="store_false")
    p.add_argument("--archive", default=None, help="a glyph archive built by `python -m lab.data.build_glyphs build`")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--group-at", type=float, default=0.1)
    p.add_argument("--all-styles", action="store_true",
                   help="fine-tune on every style of the archive (no unseen ones): the confusion between all of them")
    add_save_option(p)
    args = p.parse_args(argv)
    with recording(__file__, p, args, argv=argv, device="cpu"):
        return _measure(args)


def _measure(args: argparse.Namespace) -> int:
    """Fine-tune, score the held-out images and print the per-style breakdown."""
    import torch
    from sklearn.metrics import confusion_matrix

    import lab
    from app.choose.presets import DEFAULT_PRESET, PRESETS
    from lab import backbones, features, finetune
    from lab.data import glyphs
    from lab.runs import prepare_data

    torch.set_num_threads(args.threads)
    if args.archive:
        # The "glyphs" spec always reads the shipped archive; point it at the rebuilt one for this process.
        glyphs.DEFAULT_PATH = Path(args.archive).resolve()
        glyphs.read()                                 # a clear error now if the archive is missing
    preset = dict(PRESETS[DEFAULT_PRESET]["config"])
    split = lab.data.Split.paper_default(preset["dataset"])
    cfg = lab.RunConfig(**{**preset, "seen": split.seen, "unseen": split.unseen, "seeds": (args.seed,),
                           "augment": args.augment, "projection": "none",
                           **({"epochs": args.epochs} if args.epochs else {}),
                           **({"lr": args.lr} if args.lr else {})})
    if args.all_styles:
        # Every style seen, split by character exactly as a run splits its seen styles.
        everything = lab.data.load(cfg.dataset, image_size=cfg.img_size)
        everything = everything.subset(list(everything.classes))
        names = list(everything.classes)
        train, heldout = (everything.partition(part, test_fraction=cfg.heldout_fraction, seed=cfg.split_seed)
                          for part in ("train", "test"))
    else:
        data = prepare_data(cfg)
        names, train, heldout = list(data.split.seen), data.train, data.heldout
    bb = backbones.load(cfg.backbone, device="cpu")
    ft = finetune.prepare(bb, len(names), cfg.strategy, lr=cfg.learning_rate,
                          weight_decay=cfg.decay, optimizer=cfg.optimizer, seed=args.seed)
    ft.schedule(cfg.lr_schedule, -(-len(train) // cfg.batch_size) * cfg.n_epochs)
    y_heldout = torch.as_tensor(np.asarray(heldout.targets))
    print(f"{DEFAULT_PRESET}: {cfg.backbone}, {cfg.strategy} fine-tuning, lr {cfg.learning_rate:g}, "
          f"{cfg.n_epochs} epochs, augment={cfg.augment}, archive {glyphs.DEFAULT_PATH.name}; "
          f"{len(train)} training / {len(heldout)} held-out images of {len(names)} "
          f"{'styles (all seen)' if args.all_styles else 'seen styles'}")
    t0 = time.perf_counter()
    for epoch in range(1, cfg.n_epochs + 1):
        fit = ft.train_epoch(train.train_loader(cfg.batch_size, augment=cfg.augment,
                                                       seed=args.seed * 1000 + epoch, shuffle=True))
        pre_logits = features.extract(bb, heldout, ["pre_logits"], batch_size=cfg.eval_batch_size)["pre_logits"]
        logits = ft.logits_from_features(pre_logits)
        _, accuracy = ft.score(logits, y_heldout)
        print(f"epoch {epoch}: train accuracy {fit['accuracy']:.3f}, held-out accuracy {accuracy:.3f} "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)

    pred = logits.argmax(1).cpu().numpy()
    cm = confusion_matrix(y_heldout.numpy(), pred, labels=range(len(names)))
    print("\nper style (held-out accuracy; taken for):")
    for i, name in enumerate(names):
        off = ", ".join(f"{names[j]} {cm[i, j]}" for j in np.argsort(-cm[i]) if j != i and cm[i, j])
        print(f"  {name:18s} {cm[i, i] / cm[i].sum():.2f}   {off}")
    rate = cm / np.maximum(cm.sum(1, keepdims=True), 1)
    np.fill_diagonal(rate, 0)
    i, j = np.unravel_index(rate.argmax(), rate.shape)
    print(f"\nlargest confusion: {names[i]} taken for {names[j]} in {rate[i, j]:.1%} of its held-out images "
          f"(goal: no style above 10 %)")
    groups = groups_of(cm, args.group_at)
    group = {i: g for g in groups for i in g}
    within = np.mean([pred[n] in group[t] for n, t in enumerate(y_heldout.tolist())])
    print(f"\ngroups (mistaken for each other in >= {args.group_at:.0%} of a style's images):")
    for g in groups:
        if len(g) > 1:
            acc = cm[np.ix_(g, g)].trace() / cm[g].sum()
            print(f"  {' / '.join(names[i] for i in g)}: accuracy {acc:.2f}")
    alone = [i for g in groups if len(g) == 1 for i in g]
    if alone:
        which = "all" if len(alone) == len(names) else "the other"
        print(f"  {which} {len(alone)} styles: accuracy {cm[alone, alone].sum() / cm[alone].sum():.2f}")
    print(f"\nheld-out accuracy {accuracy:.3f}; within groups {within:.3f}; "
          f"{time.perf_counter() - t0:.0f} s for {cfg.n_epochs} epochs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
