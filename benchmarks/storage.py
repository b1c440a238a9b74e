"""A run folder's size for 1 and 10 epochs: stored embeddings are bounded by ``keep_embeddings``.

Every evaluation stores each projected layer's unseen embeddings as float16, so one kept
evaluation costs ``N x d x taps x 2`` bytes (N unseen images, d the tap's width). With
``keep_embeddings="last"`` (the default) a seed keeps only its last evaluation's, plus the 2-D
layouts of every epoch (``N x 2 x taps x 4`` bytes each), so the folder barely grows with
its epochs; ``"all"`` keeps every evaluation's, as runs did before. This script runs the
engine on a small problem (digits, an MLP, PCA layouts) for 1 and 10 epochs under both
settings, prints each folder's size by part and the formula's prediction, the timings line of
each run (``meta.json`` ``"timings"``), and the formula at 224 px scale.

Run (about a minute on 2 cores)::

    .venv/bin/python benchmarks/storage.py [--width 256] [--per-class 150] [--save]

``--save`` also writes the output to ``benchmarks/results/storage.txt``.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._results import add_save_option, recording  # noqa: E402

PARTS = ("arrays/embeddings", "arrays/projections", "tables", "weights")


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else 0


def mb(n: float) -> str:
    return f"{n / 1e6:8.2f} MB"


def measure(args, epochs: int, keep: str) -> None:
    import lab
    from lab.runs.timings import describe

    cfg = lab.RunConfig(dataset="digits", backbone=f"mlp:depth={args.depth},width={args.width}", strategy="full",
                        epochs=epochs, n_unseen=4, unseen_per_class=args.per_class, seen_per_class=30,
                        projection="pca", device="cpu", keep_embeddings=keep, metrics=("nmi", "knn_accuracy"))
    with tempfile.TemporaryDirectory() as tmp:
        store = lab.RunStore(tmp)
        for event in lab.run(cfg, store=store):
            if event.kind == "run_failed":
                raise RuntimeError(event.message)
        rec = store.load(event.run_id)
        n = int(rec.meta["n_images"]["unseen"])
        dims = [int(layer["dim"]) for layer in rec.meta["layers"]]
        kept = len(set(rec.embedding_keys()["epoch"]))
        predicted = n * sum(dims) * 2 * kept
        total = folder_bytes(rec.path)
        parts = {part: folder_bytes(rec.path / part) for part in PARTS}
        print(f"{epochs:>2} epoch(s), keep_embeddings={keep!r:6}: folder {mb(total)}  "
              + "  ".join(f"{part.split('/')[-1]} {mb(size).strip()}" for part, size in parts.items()))
        print(f"    {kept} kept evaluation(s): N x sum(d) x 2 bytes x {kept} = {n} x {sum(dims)} x 2 x {kept} = "
              f"{mb(predicted).strip()} predicted, {mb(parts['arrays/embeddings']).strip()} on disk (npz headers, "
              f"labels and indices on top)")
        print(f"    timings: {describe(rec.meta['timings']['run'])}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=256, help="the MLP's width (each tap's d)")
    parser.add_argument("--depth", type=int, default=4, help="the MLP's hidden layers")
    parser.add_argument("--per-class", type=int, default=150, help="unseen images per class (4 classes)")
    add_save_option(parser)
    args = parser.parse_args(argv)
    with recording(__file__, parser, args, argv=argv):
        import torch

        torch.set_num_threads(1)
        for keep in ("last", "all"):
            for epochs in (1, 10):
                measure(args, epochs, keep)
        print()
        print("The formula at the users' scale (float16, every tap, per kept evaluation):")
        for name, n, d, taps in (("ViT-S/16 224 px, 2,000 unseen images", 2_000, 384, 13),
                                 ("ViT-B/16 224 px, 50,000 unseen images", 50_000, 768, 13)):
            one = n * d * taps * 2
            print(f"  {name}: {n} x {d} x {taps} x 2 = {one / 1e6:,.0f} MB; 10 epochs + epoch 0: "
                  f"'last' {one / 1e6:,.0f} MB, 'all' {11 * one / 1e9:,.1f} GB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
