"""Cost of ``lab.Monitor.evaluate`` against the engine's own evaluation of the same model and images.

One round builds a run of ``lab.run`` (strategy "none", nothing written: ``store=False``) and times its
evaluation from the consumer's side (from ``RunStarted``, right before epoch 0, which trains nothing, to the
epoch's ``Generalization``: the evaluation, the epoch's bookkeeping and its g),
then monitors the model that run loaded (the same weights: the same backbone name and seed) on the same
unseen and seen held-out images (the run's own ``prepare_data``), and times ``mon.evaluate(0)`` from the
caller's side: the monitor's own work (restoring the model's modes, grad and random state) counts, and is
printed apart. Rounds alternate the two sides (and their order); the medians and their ratio are printed
(goal: monitor / engine ≤ 1.05, in process CPU seconds, which other processes on a shared machine disturb far
less than wall time; the wall ratio is printed beside it).

    .venv/bin/python benchmarks/monitor_cost.py [--backbone resnet18] [--img-size 32] [--per-class 40]
                                                [--repeats 7] [--save]
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


def clock() -> tuple[float, float]:
    """(wall, process CPU) seconds now; the CPU time counts every thread of the process (the extraction's)."""
    return time.perf_counter(), time.process_time()


def since(start: tuple[float, float]) -> tuple[float, float]:
    now = clock()
    return now[0] - start[0], now[1] - start[1]


def engine_seconds(cfg) -> tuple[float, float]:
    """(wall, CPU) seconds from RunStarted (yielded right before epoch 0, which trains nothing) to the epoch's
    Generalization: the evaluation, the epoch's bookkeeping and its g, the span ``mon.evaluate`` covers."""
    import lab
    from lab.events import Generalization, RunFailed, RunStarted

    start = spent = None
    for event in lab.run(cfg, store=False):
        if isinstance(event, RunStarted):
            start = clock()
        elif isinstance(event, Generalization) and spent is None:
            spent = since(start)
        elif isinstance(event, RunFailed):
            raise RuntimeError(event.message)
    return spent


def monitor_seconds(cfg) -> tuple[float, float, float]:
    """(wall, CPU) seconds of ``mon.evaluate(0)``, and the wall seconds that are the monitor's own: the wall time
    less the evaluation's ``seconds`` in the run's training row (the span the engine's epoch counts too)."""
    import lab
    from lab.runs.data import prepare_data

    data = prepare_data(cfg)
    torch.manual_seed(0)                                  # the engine's seed 0: the same random weights
    bb = lab.backbones.load(cfg.backbone, in_chans=data.dataset.in_chans, img_size=cfg.img_size, device="cpu")
    with lab.Monitor(bb.model, unseen=data.unseen, seen=data.heldout, store=False, metrics=cfg.metrics,
                     normalize=True, projection="pca") as mon:
        start = clock()
        mon.evaluate(0)
        wall, cpu = since(start)
        return wall, cpu, wall - float(mon.ctx.results.training()["seconds"].iloc[0])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backbone", default="resnet18", help="backbone name (lab.backbones.load)")
    parser.add_argument("--img-size", type=int, default=32, help="image side in pixels")
    parser.add_argument("--per-class", type=int, default=40, help="unseen and seen held-out images per class")
    parser.add_argument("--repeats", type=int, default=7, help="alternated rounds of both sides (median)")
    add_save_option(parser)
    args = parser.parse_args(argv)
    with recording(__file__, parser, args, argv=argv, device="cpu"):
        cfg = config(args)
        print(f"torch {torch.__version__}, threads={torch.get_num_threads()}, device=cpu")
        print(f"{cfg.backbone} at {cfg.img_size} px on digits: 5 unseen classes x {cfg.unseen_per_class} images, "
              f"5 seen held-out x {cfg.seen_per_class}; metrics {', '.join(cfg.metrics)}\n")
        engine_seconds(cfg)                               # warm-up (imports, numba), not timed
        engine, monitor, own = [], [], []
        for i in range(args.repeats):
            # the order alternates too: a machine that slows down or speeds up favours neither side
            if i % 2 == 0:
                engine.append(engine_seconds(cfg))
            wall, cpu, extra = monitor_seconds(cfg)
            monitor.append((wall, cpu))
            own.append(extra)
            if i % 2 == 1:
                engine.append(engine_seconds(cfg))
            print(f"round {i + 1}: engine {engine[-1][0]:.3f} s wall, {engine[-1][1]:.3f} s CPU; monitor "
                  f"{wall:.3f} s wall, {cpu:.3f} s CPU (of which the monitor's own {extra * 1000:.0f} ms wall)")
        e_wall, e_cpu = (statistics.median(x[k] for x in engine) for k in (0, 1))
        m_wall, m_cpu = (statistics.median(x[k] for x in monitor) for k in (0, 1))
        print(f"\nmedian: engine evaluation {e_wall:.3f} s wall, {e_cpu:.3f} s CPU; Monitor.evaluate {m_wall:.3f} s "
              f"wall, {m_cpu:.3f} s CPU (the monitor's own part {statistics.median(own) * 1000:.0f} ms wall)")
        ratio = m_cpu / e_cpu
        print(f"monitor / engine = {ratio:.3f} in CPU seconds (wall: {m_wall / e_wall:.3f}; goal <= {GOAL}): "
              f"{'met' if ratio <= GOAL else 'NOT met'}")

if __name__ == "__main__":
    main()
