"""k-means (nmi) and the linear probe on the features' device (torch) against the scikit-learn path (issue 24).

For each N: Gaussian classes in d dimensions (float32, as extracted features), held as a torch tensor on
``--device``; ``lab.metrics.nmi`` (k-means++, ``n_init=10``) and ``lab.metrics.linear_probe_accuracy``
(5 stratified folds, C = 1) once with ``backend="sklearn"`` (a host copy, then scikit-learn's numerics:
what CPU runs report) and once with ``backend="torch"`` (on the device, no host copy: what ``"auto"``
picks for CUDA features). Printed per N: both values, their difference, both times (best of
``--repeats``; CUDA synchronised; both paths are warmed up once on a small problem first) and the
ratio torch / scikit-learn.

Both sides run under the same thread limits (``--threads``, default 1, as ``benchmarks/metrics.py``: on a
shared 2-core box OpenMP/BLAS threads spin against each other; measured here, one probe fit at N = 1,600
took 0.05 s on one thread and 2.6 s on two).

    .venv/bin/python benchmarks/device_metrics.py [--device cpu|cuda] [--sizes 2000 5000 10000 20000]
        [--threads 1] [--save]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
# Imported before threadpool_limits is entered: threadpoolctl only limits the BLAS/OpenMP
# libraries already loaded.
from sklearn.cluster import KMeans  # noqa: F401
from sklearn.linear_model import LogisticRegression  # noqa: F401
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._results import add_save_option, recording  # noqa: E402
from lab import metrics  # noqa: E402
from lab.device import resolve_device  # noqa: E402


def make_features(n: int, d: int, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Overlapping Gaussian classes (neither metric saturates): (N, d) float32 and labels (N,)."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % k
    centres = rng.normal(scale=0.17, size=(k, d))
    X = centres[y] + rng.normal(size=(n, d))
    return X.astype(np.float32), y


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, device: torch.device, repeats: int) -> tuple[float, float]:
    """(best seconds of ``repeats``, the value)."""
    value, best = None, float("inf")
    for _ in range(repeats):
        _sync(device)
        start = time.perf_counter()
        value = fn()
        _sync(device)
        best = min(best, time.perf_counter() - start)
    return best, value


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="cpu or cuda (the features' device)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[2_000, 5_000, 10_000, 20_000],
                        help="numbers of images N")
    parser.add_argument("--dim", type=int, default=512, help="feature dimension d")
    parser.add_argument("--classes", type=int, default=10, help="classes K")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats per measurement (best is shown)")
    parser.add_argument("--threads", type=int, default=1, help="BLAS/OpenMP/torch CPU threads for both sides")
    add_save_option(parser)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    with recording(__file__, parser, args, argv=argv, device=args.device), threadpool_limits(limits=args.threads):
        device = resolve_device(args.device)
        print(f"device {device}, d={args.dim}, K={args.classes}, float32 features on the device; CPU threads "
              f"{args.threads}; nmi: k-means++ n_init=10; probe: 5 folds, C=1 (time: best of "
              f"{args.repeats}); load average " + ", ".join(f"{v:.1f}" for v in os.getloadavg()))
        Xw, yw = make_features(500, args.dim, args.classes)          # first-call costs (CUDA context, kernels)
        for backend in ("sklearn", "torch"):
            metrics.nmi(torch.from_numpy(Xw).to(device), yw, backend=backend)
            metrics.linear_probe_accuracy(torch.from_numpy(Xw).to(device), yw, backend=backend)
        for n in args.sizes:
            X_np, y = make_features(n, args.dim, args.classes, seed=n)
            X = torch.from_numpy(X_np).to(device)
            yt = torch.from_numpy(y).to(device)
            row = []
            for name, fn in (("nmi", metrics.nmi), ("probe", metrics.linear_probe_accuracy)):
                t_sk, v_sk = timed(lambda: fn(X, yt, backend="sklearn"), device, args.repeats)
                t_th, v_th = timed(lambda: fn(X, yt, backend="torch"), device, args.repeats)
                row.append(f"{name} sklearn {v_sk:.4f} ({t_sk:6.2f} s) torch {v_th:.4f} ({t_th:6.2f} s) "
                           f"diff {v_th - v_sk:+.4f} time ratio {t_th / t_sk:.2f}")
            print(f"N={n:>6,}  " + "  |  ".join(row), flush=True)
        print("load average (1, 5, 15 min) at the end: " + ", ".join(f"{v:.1f}" for v in os.getloadavg()))


if __name__ == "__main__":
    main()
