"""Cost of the four label-free measures of one layer against the kNN family, on the CPU in one process.

Prints, for one layer of N = 20,000 images × d = 768 features (float32, 10 Gaussian classes):

1. each label-free measure's time once: ``rankme``, ``alpha_req`` and ``twonn_id`` on X, ``lidar`` on
   q = 4 views of N / 4 images (each view = its image's features + isotropic noise of 0.1 × their
   scale, N rows × d in all, the same size as X);
2. the four together against the kNN family, ``compute_layer(X, y, metrics=("knn_accuracy",
   "knn_purity", "weighted_knn_accuracy"))``, alternated for ``--repeats`` rounds: the median wall
   and CPU seconds of each side and their ratio (goal: label-free / kNN ≤ 0.5).

Both sides run on one thread (``--threads``, default 1: on a shared 2-core box OpenMP/BLAS threads
spin against each other). With one thread the process CPU time is what the work itself cost, so the
ratio is taken from CPU seconds; the wall ratio is printed beside it.

    .venv/bin/python benchmarks/label_free_cost.py [--n 20000] [--dim 768] [--views 4] [--repeats 3] [--save]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._results import add_save_option, recording  # noqa: E402
from lab.metrics.label_free import alpha_req, lidar, rankme, twonn_id  # noqa: E402
from lab.metrics.report import compute_layer  # noqa: E402

KNN = ("knn_accuracy", "knn_purity", "weighted_knn_accuracy")
CLASSES = 10
GOAL = 0.5


def make_layer(n: int, d: int, q: int, *, seed: int = 0) -> tuple[torch.Tensor, np.ndarray, torch.Tensor]:
    """X (n, d) float32 of 10 Gaussian classes, labels y (n,), and views (n // q, q, d) float32."""
    g = torch.Generator().manual_seed(seed)
    y = np.repeat(np.arange(CLASSES), -(-n // CLASSES))[:n]
    centres = torch.randn(CLASSES, d, generator=g)
    X = torch.randn(n, d, generator=g) + centres[torch.from_numpy(y)]               # (n, d)
    images = X[: n // q]                                                            # (n/q, d)
    views = images[:, None, :] + 0.1 * torch.randn(n // q, q, d, generator=g)       # (n/q, q, d)
    return X, y, views


def timed(fn):
    """(wall seconds, process CPU seconds, value)."""
    w, c = time.perf_counter(), time.process_time()
    value = fn()
    return time.perf_counter() - w, time.process_time() - c, value


def label_free(X: torch.Tensor, views: torch.Tensor) -> dict[str, float]:
    return {"rankme": rankme(X), "alpha_req": alpha_req(X), "twonn_id": twonn_id(X), "lidar": lidar(views)}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000, help="images (rows of X)")
    parser.add_argument("--dim", type=int, default=768, help="features per image")
    parser.add_argument("--views", type=int, default=4, help="views per image for lidar (of n / views images)")
    parser.add_argument("--repeats", type=int, default=3, help="alternated rounds of both sides (median)")
    parser.add_argument("--threads", type=int, default=1, help="BLAS/OpenMP/torch threads for both sides")
    add_save_option(parser)
    args = parser.parse_args(argv)
    with recording(__file__, parser, args, argv=argv, device="cpu"):
        torch.set_num_threads(args.threads)
        X, y, views = make_layer(args.n, args.dim, args.views)
        print(f"torch {torch.__version__}, numpy {np.__version__}, threads={args.threads}, device=cpu")
        print(f"X: {args.n:,} images x {args.dim} features (float32, {CLASSES} Gaussian classes); lidar: "
              f"{views.shape[0]:,} images x {views.shape[1]} views x {args.dim} features\n")
        with threadpool_limits(limits=args.threads):
            # Warm-up on a slice (numba compiles the kNN kernel, lazy imports), not timed.
            compute_layer(X[:3000], y[:3000], metrics=KNN)
            label_free(X[:3000], views[:750])

            print("each label-free measure once:")
            for name, fn, arg in (("rankme", rankme, X), ("alpha_req", alpha_req, X),
                                  ("twonn_id", twonn_id, X), ("lidar", lidar, views)):
                wall, cpu, value = timed(lambda fn=fn, arg=arg: fn(arg))
                print(f"  {name:10s} {wall:7.2f} s wall {cpu:7.2f} s cpu   value {value:.4f}")

            times = {"label-free": [], "kNN": []}
            for _ in range(args.repeats):
                times["label-free"].append(timed(lambda: label_free(X, views))[:2])
                wall, cpu, knn = timed(lambda: compute_layer(X, y, metrics=KNN))
                times["kNN"].append((wall, cpu))
            print(f"\nthe four label-free measures vs the kNN family ({', '.join(KNN)}), "
                  f"median of {args.repeats} alternated rounds:")
            med = {}
            for side, rows in times.items():
                med[side] = (statistics.median(w for w, _ in rows), statistics.median(c for _, c in rows))
                each = ", ".join(f"{c:.1f}" for _, c in rows)
                print(f"  {side:10s} {med[side][0]:7.2f} s wall {med[side][1]:7.2f} s cpu   (cpu per round: {each})")
            print(f"  kNN values: {', '.join(f'{k} {v:.4f}' for k, v in knn.items())}")
            ratio_cpu = med["label-free"][1] / med["kNN"][1]
            ratio_wall = med["label-free"][0] / med["kNN"][0]
            verdict = "met" if ratio_cpu <= GOAL else "NOT met"
            print(f"\nratio label-free / kNN: {ratio_cpu:.2f} (cpu), {ratio_wall:.2f} (wall); "
                  f"goal <= {GOAL}: {verdict}")


if __name__ == "__main__":
    main()
