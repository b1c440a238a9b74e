"""Benchmark the bootstrap of one evaluation (issue 26): its cost relative to the evaluation's metrics.

One evaluation as the engine runs it, in one process: L layers of pooled features of the unseen
images (K = 5 classes, n images each, widths of a ResNet-18's taps), each layer's default unseen
metrics by ``lab.metrics.compute_layer(..., return_samples=True)`` (what the engine times as
"metrics"), then ``lab.analysis.bootstrap`` over every layer (B = 200 resamples; what the engine
times as "bootstrap"). Prints both times, their ratio (goal <= 0.20), the best layer's interval and
share, and, for scale, the time of one resample's metrics refitted from scratch (what a naive
bootstrap would pay B times).

    .venv/bin/python benchmarks/bootstrap.py [--per-class 500] [--repeats 3] [--threads 1] [--save]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._results import add_save_option, recording  # noqa: E402
from lab import analysis, catalogue  # noqa: E402
from lab.metrics import compute_layer  # noqa: E402

K = 5
WIDTHS = (64, 64, 64, 128, 128, 256, 256, 512, 512)       # resnet18: stem, layer1.x ... layer4.x


def make_layers(per_class: int, seed: int = 0) -> tuple[dict[str, torch.Tensor], np.ndarray]:
    """Features whose class separation rises then falls with depth (the papers' shape), float32."""
    g = torch.Generator().manual_seed(seed)
    y = np.repeat(np.arange(K), per_class)
    layers = {}
    for i, d in enumerate(WIDTHS):
        spread = 0.5 + 0.6 * np.sin(np.pi * (i + 1) / (len(WIDTHS) + 2))
        centres = torch.randn(K, d, generator=g) * spread * 2 / np.sqrt(d)           # centre distance ~ 2.8 spread
        layers[f"layer{i}"] = torch.randn(len(y), d, generator=g) + centres[torch.from_numpy(y)]   # (N, d)
    return layers, y


def one_evaluation(layers, y, metrics) -> tuple[float, float, object]:
    """(metric seconds, bootstrap seconds, bootstrap table) of one evaluation."""
    labels = torch.from_numpy(y)
    per_image = {}
    t = time.perf_counter()
    for name, X in layers.items():
        _, per_image[name] = compute_layer(X, labels, metrics=metrics, layer=name, return_samples=True)
    metric_s = time.perf_counter() - t
    wanted = {name: {m: v for m, v in got.items() if m in catalogue.metric_names(per_image=True)}
              for name, got in per_image.items()}
    t = time.perf_counter()
    table = analysis.bootstrap(wanted, y, layers=list(layers), n_resamples=analysis.N_RESAMPLES, seed=0)
    return metric_s, time.perf_counter() - t, table


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-class", type=int, default=500, help="unseen images per class (papers: 500)")
    parser.add_argument("--repeats", type=int, default=3, help="evaluations timed (the median is reported)")
    parser.add_argument("--threads", type=int, default=1, help="BLAS/OpenMP/torch threads (the engine's "
                        "few_threads uses 1 for these sizes)")
    add_save_option(parser)
    args = parser.parse_args(argv)
    with recording(__file__, parser, args, argv=argv, device="cpu"):
        torch.set_num_threads(args.threads)
        load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
        print(f"torch {torch.__version__}, numpy {np.__version__}, threads={args.threads}, {os.cpu_count()} cores, "
              f"load average {load}")
        metrics = tuple(m for m in catalogue.metric_names(default=True) if m in catalogue.METRICS
                        and "unseen" in catalogue.METRICS[m].splits)
        layers, y = make_layers(args.per_class)
        print(f"{len(layers)} layers, widths {WIDTHS}, N = {len(y)} ({K} classes x {args.per_class}); "
              f"metrics: {', '.join(metrics)}; B = {analysis.N_RESAMPLES} resamples of nmi and knn_accuracy")
        with threadpool_limits(limits=args.threads):
            runs = [one_evaluation(layers, y, metrics) for _ in range(args.repeats)]
            metric_s = float(np.median([r[0] for r in runs]))
            boot_s = float(np.median([r[1] for r in runs]))
            table = runs[-1][2]
            one = next(iter(layers.values()))
            t = time.perf_counter()
            compute_layer(one, torch.from_numpy(y), metrics=("nmi", "knn_accuracy"))
            refit_s = (time.perf_counter() - t) * len(layers)
        print(f"metric time of one evaluation:  {metric_s:8.3f} s (median of {args.repeats})")
        print(f"bootstrap of that evaluation:   {boot_s:8.3f} s")
        print(f"ratio bootstrap / metrics:      {boot_s / metric_s:8.3f}   (goal <= 0.20)")
        print(f"a naive bootstrap (refit nmi + kNN per resample) would take about "
              f"{refit_s * analysis.N_RESAMPLES:.0f} s ({refit_s:.2f} s per resample)")
        nmi = table[table["metric"] == "nmi"].set_index("layer")
        best = nmi["value"].idxmax()
        row = nmi.loc[best]
        print(f"best layer by NMI: {best}, NMI {row['value']:.3f} (95 % interval {row['low']:.3f}-{row['high']:.3f}), "
              f"best in {100 * row['best_share']:.0f} % of resamples")
        print(nmi[["value", "low", "high", "best_share"]].round(3).to_string())


if __name__ == "__main__":
    main()
