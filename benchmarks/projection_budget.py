"""The projection budget (issue 24): a full UMAP fit against a fit of ``fit_points`` points + ``transform``.

Both layouts come from ``lab.projection.umap_layout`` (the engine's function), on the same features:
Gaussian classes in d dimensions (K classes, N points). Reported for each: seconds, the share of each
point's 10 nearest neighbours in d dimensions that stay among its 10 nearest in 2-D (neighbourhood
preservation), and leave-one-out 10-NN accuracy of the class in 2-D (how separated the classes look).
The first fit in a process compiles numba (~14 s): a small warm-up fit runs first and is not counted.

    .venv/bin/python benchmarks/projection_budget.py [--n 20000] [--fit-points 5000] [--save]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.neighbors import NearestNeighbors

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._results import add_save_option, recording  # noqa: E402
from lab.projection import umap_layout  # noqa: E402

K_NEIGHBOURS = 10


def blobs(n: int, k: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, k, n)
    centres = rng.normal(scale=1.5, size=(k, d))
    return (centres[labels] + rng.normal(size=(n, d))).astype(np.float32), labels


def neighbours(X: np.ndarray) -> np.ndarray:
    """(N, K_NEIGHBOURS) indices of each point's nearest others (exact, sklearn)."""
    return NearestNeighbors(n_neighbors=K_NEIGHBOURS + 1).fit(X).kneighbors(X, return_distance=False)[:, 1:]


def quality(high: np.ndarray, coords: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    low = neighbours(coords)
    kept = np.mean([len(np.intersect1d(a, b, assume_unique=True)) for a, b in zip(high, low)]) / K_NEIGHBOURS
    votes = labels[low]
    accuracy = np.mean([np.bincount(v).argmax() == y for v, y in zip(votes, labels)])
    return float(kept), float(accuracy)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000, help="points (images) to lay out")
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--dim", type=int, default=64, help="feature dimension")
    parser.add_argument("--fit-points", type=int, default=5_000, help="the budget (RunConfig.projection_fit_points)")
    add_save_option(parser)
    args = parser.parse_args(argv)
    with recording(__file__, parser, args, argv=argv, device="cpu"):
        X, y = blobs(args.n, args.classes, args.dim)
        print(f"{args.n:,} points, {args.classes} Gaussian classes in {args.dim} dimensions; "
              f"budget {args.fit_points:,} fitted points")
        umap_layout(X[:300], labels=y[:300], seed=0)                  # numba compiles here, not timed
        high = neighbours(X)
        rows = []
        for name, budget in (("full fit", None), (f"fit {args.fit_points:,} + transform", args.fit_points)):
            t = time.perf_counter()
            coords = umap_layout(X, labels=y, seed=0, fit_points=budget)
            seconds = time.perf_counter() - t
            kept, accuracy = quality(high, coords, y)
            finite = bool(np.isfinite(coords).all())
            rows.append((name, seconds, kept, accuracy, finite))
            print(f"{name:28s} {seconds:7.1f} s   10-NN kept {kept:.3f}   2-D 10-NN class accuracy {accuracy:.3f}   "
                  f"all finite: {finite}")
        print(f"speed-up of the budget: {rows[0][1] / rows[1][1]:.1f}x")


if __name__ == "__main__":
    main()
