"""Cost of ``lab.Monitor.evaluate`` against the engine's own evaluation of the same model and images.

One round builds a run of ``lab.run`` (strategy "none", nothing written: ``store=False``) and times its
evaluation (``EpochFinished.seconds`` of epoch 0: the evaluation and the epoch's bookkeeping, no training),
then monitors the model that run loaded (the same weights: the same backbone name and seed) on the same
unseen and seen held-out images (the run's own ``prepare_data``), and times ``mon.evaluate(0)`` from the
caller's side: the monitor's own work (restoring the model's modes, grad and random state) counts. Rounds
alternate the two sides; the medians and their ratio are printed (goal: monitor / engine ≤ 1.05).

    .venv/bin/python benchmarks/monitor_cost.py [--backbone resnet18] [--img-size 32] [--per-class 40]
                                                [--repeats 3] [--save]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._results import add_save_option, recording  # noqa: E402

GOAL = 1.05


def config(args):
    import lab

    return lab.RunConfig(dataset="digits", backbone=args.backbone, img_size=args.img_size, n_unseen=5,
                         unseen_per_class=args.per_class, seen_per_class=args.per_class, strategy="none",
                         projection="pca", device="cpu", train_sample_per_class=0, seeds=(0,))


def engine_seconds(cfg) -> float:
    import lab
    from lab.events import EpochFinished, RunFailed

    seconds = None
    for event in lab.run(cfg, store=False):
        if isinstance(event, EpochFinished):
            seconds = event.seconds
        if isinstance(event, RunFailed):
            raise RuntimeError(event.message)
    return seconds


def monitor_seconds(cfg) -> float:
    import lab
    from lab.runs.data import prepare_data

    data = prepare_data(cfg)
    torch.manual_seed(0)                                  # the engine's seed 0: the same random weights
    bb = lab.backbones.load(cfg.backbone, in_chans=data.dataset.in_chans, img_size=cfg.img_size, device="cpu")
    with lab.Monitor(bb.model, unseen=data.unseen, seen=data.heldout, store=False, metrics=cfg.metrics,
                     normalize=True, projection="pca") as mon:
        t = time.perf_counter()
        mon.evaluate(0)
        return time.perf_counter() - t


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backbone", default="resnet18", help="backbone name (lab.backbones.load)")
    parser.add_argument("--img-size", type=int, default=32, help="image side in pixels")
    parser.add_argument("--per-class", type=int, default=40, help="unseen and seen held-out images per class")
    parser.add_argument("--repeats", type=int, default=3, help="alternated rounds of both sides (median)")
    add_save_option(parser)
    args = parser.parse_args(argv)
    with recording(__file__, parser, args, argv=argv, device="cpu"):
        cfg = config(args)
        print(f"torch {torch.__version__}, threads={torch.get_num_threads()}, device=cpu")
        print(f"{cfg.backbone} at {cfg.img_size} px on digits: 5 unseen classes x {cfg.unseen_per_class} images, "
              f"5 seen held-out x {cfg.seen_per_class}; metrics {', '.join(cfg.metrics)}\n")
        engine_seconds(cfg)                               # warm-up (imports, numba), not timed
        engine, monitor = [], []
        for i in range(args.repeats):
            engine.append(engine_seconds(cfg))
            monitor.append(monitor_seconds(cfg))
            print(f"round {i + 1}: engine {engine[-1]:.3f} s, monitor {monitor[-1]:.3f} s")
        e, m = statistics.median(engine), statistics.median(monitor)
        ratio = m / e
        print(f"\nmedian: engine evaluation {e:.3f} s, Monitor.evaluate {m:.3f} s")
        print(f"monitor / engine = {ratio:.3f} (goal <= {GOAL}): {'met' if ratio <= GOAL else 'NOT met'}")


if __name__ == "__main__":
    main()
