"""The per-image record's size on disk (issue 35: at most N x layers x 3 bytes per evaluation) and what it
says about the default preset's run: how many unseen images arrive at each layer, how many the final
layer forgets.

Part 1 writes one evaluation's record through the store's own writer (``RunWriter.save_image_record``)
for synthetic layers of the given geometries: N unseen images in K Gaussian classes of d features, L
layers whose class separation grows with depth, each measured by ``lab.metrics.compute_layer`` as a run
measures it (kNN votes, k-means clusters of the NMI, class-centre margins, class-pair CDNV terms), so the
values compress as real ones do. It prints the file's bytes divided by N x L.

Part 2 (skipped with ``--skip-preset``) runs the app's default preset (``benchmarks/preset.py``'s config,
one seed, its epochs) into a temporary store and prints, per evaluation, the size of its records, then
from the last evaluation's ``lab.analysis.image_table``: the arrival layers, the images the final layer
forgets, and ``lab.analysis.measure_agreement``.

Run (part 1 about 4 minutes on 2 cores, part 2 about 6 minutes more)::

    .venv/bin/python benchmarks/image_record.py [--skip-preset] [--epochs N] [--save]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks._results import add_save_option, recording  # noqa: E402

BUDGET = 3.0
"""Bytes per image and layer per evaluation (issue 35)."""
GEOMETRIES = ((300, 10, 5, 64, True, "the default preset: 5 unseen glyph styles x 60 images, ResNet-18's 10 taps"),
              (5000, 16, 10, 128, True, "larger: 5,000 images of 10 classes, 16 taps"),
              (5000, 16, 50, 128, False, "many classes (shown, not a goal): 5,000 images of 50 classes, whose "
                                         "K (K - 1) / 2 class pairs grow as K^2"))


def synthetic_layers(n: int, n_layers: int, k: int, d: int, seed: int = 0):
    """``{layer: X (n, d)}`` and labels (n,): K Gaussian classes whose separation grows with depth."""
    import numpy as np

    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(k), -(-n // k))[:n]
    centres = rng.normal(size=(k, d))
    layers = {}
    for i in range(n_layers):
        separation = 0.3 + 2.5 * i / max(n_layers - 1, 1)
        layers[f"layer{i}"] = (separation * centres[y] + rng.normal(size=(n, d)) * np.sqrt(d) / 4).astype(np.float32)
    return layers, y


def record_bytes(n: int, n_layers: int, k: int, d: int) -> tuple[int, float]:
    """(bytes of one evaluation's record file, seconds to measure its layers) for one geometry."""
    import torch

    from lab.config import RunConfig
    from lab.metrics import compute_layer
    from lab.store import RunStore

    layers, y = synthetic_layers(n, n_layers, k, d)
    t0 = time.perf_counter()
    samples = {}
    for name, X in layers.items():
        _, samples[name] = compute_layer(torch.from_numpy(X), y, metrics=("nmi", "knn_accuracy"), layer=name,
                                         return_samples=True, return_margins=True)
    seconds = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        writer = RunStore(tmp).create(RunConfig(dataset="digits", backbone="mlp"))
        path = writer.save_image_record(0, 1, list(layers), y, samples)
        size = path.stat().st_size
        writer.finish("finished")
    return size, seconds


def part_sizes() -> bool:
    print(f"Part 1: one evaluation's record through RunWriter.save_image_record (budget {BUDGET:g} bytes per image "
          "and layer)")
    ok = True
    for n, n_layers, k, d, goal, what in GEOMETRIES:
        size, seconds = record_bytes(n, n_layers, k, d)
        per = size / (n * n_layers)
        pairs = n_layers * k * (k - 1) // 2 * 4
        ok &= per <= BUDGET or not goal
        print(f"  N={n:>5} L={n_layers:>2} K={k:>2} d={d}: {size:>9,} bytes = {per:.2f} bytes per image-layer "
              f"({'within' if per <= BUDGET else 'OVER'} {BUDGET:g}; the class pairs hold {pairs:,} bytes before "
              f"compression, {pairs / (n * n_layers):.2f} per image-layer); {what}; layers measured in {seconds:.1f} s",
              flush=True)
    return ok


def part_preset(epochs: int | None) -> None:
    import lab
    from benchmarks.preset import preset_config
    from lab import analysis
    from lab.events import RunFailed, RunFinished

    cfg = preset_config(0, epochs)
    print(f"\nPart 2: the default preset, seed 0: {cfg.backbone}, {cfg.strategy} fine-tuning, {cfg.n_epochs} epochs, "
          f"{cfg.unseen_per_class} unseen images per class of {len(cfg.unseen)}; metrics {', '.join(cfg.metrics)}",
          flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        store = lab.RunStore(tmp)
        t0 = time.perf_counter()
        end = None
        for event in lab.run(cfg, store=store):
            if isinstance(event, (RunFinished, RunFailed)):
                end = event
        if not isinstance(end, RunFinished):
            raise SystemExit(f"the preset run did not finish: {end}")
        rec = store.load(end.run_id)
        n, n_layers = int(rec.meta["n_images"]["unseen"]), len(rec.meta["layers"])
        print(f"  run finished in {time.perf_counter() - t0:.0f} s; {n} unseen images, {n_layers} layers; "
              f"timings {rec.meta['timings']['run']}")
        sizes = sorted((rec.path / "tables" / "images").glob("*.parquet"))
        per = [p.stat().st_size / (n * n_layers) for p in sizes]
        listed = ", ".join(f"{p.name.split('-')[1]} {p.stat().st_size:,} B" for p in sizes)
        print(f"  record per evaluation: {listed}; {min(per):.2f}-{max(per):.2f} bytes per image-layer "
              f"({'within' if max(per) <= BUDGET else 'OVER'} {BUDGET:g})")
        table = analysis.image_table(end.run_id, store=store)
        attrs = table.attrs
        print(f"  last evaluation (epoch {attrs['epoch']}): best layer {attrs['best_layer']}, final layer "
              f"{attrs['final_layer']}; kNN right at the final layer: {int(table[attrs['final_layer']].sum())} of {n}")
        print("  arrival layer (right from there to the final layer; never: wrong at the final layer), "
              "lab.analysis.arrival_counts:")
        for layer, count in analysis.arrival_counts(table).items():
            print(f"    {layer:<12} {count:>4}")
        print(f"  forgotten (right at the best layer {attrs['best_layer']}, wrong at the final layer): "
              f"{int(table['forgotten'].sum())} of {n}")
        with_pandas_width()
        print("  do the measures agree? (lab.analysis.measure_agreement)")
        agreement = analysis.measure_agreement(end.run_id, store=store)
        print("    " + agreement.to_string(float_format=lambda v: f"{v:.3f}").replace("\n", "\n    "))
        for note in agreement.attrs["notes"]:
            print(f"    note: {note}")


def with_pandas_width() -> None:
    import pandas as pd

    pd.set_option("display.width", 160)
    pd.set_option("display.max_columns", 20)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-preset", action="store_true", help="only part 1 (the synthetic geometries)")
    parser.add_argument("--epochs", type=int, default=None, help="the preset run's epochs (default: the preset's)")
    add_save_option(parser)
    args = parser.parse_args(argv)
    with recording(__file__, parser, args, argv=argv, device="cpu"):
        ok = part_sizes()
        if not args.skip_preset:
            part_preset(args.epochs)
        return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
