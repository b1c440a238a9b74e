"""Studies on Dask: speed-up of a 2-worker LocalCluster over a plain serial loop, and the Dask path's
overhead over the same runs in-process with the same threads (issue: studies on Dask).

Goals on a 2-core machine: 4 small runs on 2 workers x 1 thread >= 1.7x faster than a serial loop
with 1 torch thread; a 1-worker x 1-thread cluster within 5 % of that loop. Cluster start-up is
reported apart (it is paid once per study, not per run); each worker runs one untimed warm-up run
first, as the serial loop does, so that imports and first-call costs are not counted on one side only.

    python benchmarks/study.py [--runs 4] [--epochs 8] [--save]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import lab  # noqa: E402
from benchmarks._results import add_save_option, recording  # noqa: E402
from lab.store import RunStore  # noqa: E402
from lab.study import Study, local_cluster  # noqa: E402


def _base(epochs: int) -> dict:
    return {"dataset": "digits", "backbone": "mlp:depth=5,width=256", "strategy": "full", "epochs": epochs,
            "projection": "none", "unseen_per_class": 60, "seen_per_class": 40, "save_weights": False,
            "metrics": ["nmi", "knn_accuracy", "nc1"]}


def _warm_up(epochs: int) -> None:
    torch.set_num_threads(1)
    cfg = lab.RunConfig(**{**_base(1), "epochs": 1})
    with threadpool_limits(limits=1):
        for _ in lab.run(cfg, store=False):
            pass


def _serial(study: Study) -> float:
    torch.set_num_threads(1)
    t = time.perf_counter()
    with threadpool_limits(limits=1), tempfile.TemporaryDirectory() as tmp:
        store = RunStore(tmp)
        for cell in study.cells():
            for _ in lab.run(cell.config, store=store):
                pass
    return time.perf_counter() - t


def _on_cluster(study: Study, n_workers: int, epochs: int) -> tuple[float, float]:
    from distributed import Client

    t = time.perf_counter()
    with local_cluster(n_workers, 1, dashboard=False) as cluster, Client(cluster) as client:
        client.run(_warm_up, epochs)
        start = time.perf_counter() - t
        with tempfile.TemporaryDirectory() as tmp:
            t = time.perf_counter()
            result = study.run(cluster.scheduler_address, store=RunStore(tmp), threads_per_worker=1)
            took = time.perf_counter() - t
        assert not result.failed and len(result.run_ids) == len(study.cells()), result
    return took, start


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=8)
    add_save_option(parser)
    args = parser.parse_args(argv)
    with recording(__file__, parser, args, argv=argv):
        _measure(args)


def _measure(args: argparse.Namespace) -> None:
    """Time the study serially and on 2- and 1-worker clusters; print the goals."""
    study = Study("bench", _base(args.epochs), {"seeds": [[i] for i in range(args.runs)]})
    _warm_up(args.epochs)
    serial = _serial(study)
    two, start2 = _on_cluster(study, 2, args.epochs)
    one, start1 = _on_cluster(study, 1, args.epochs)
    print(f"{args.runs} runs ({_base(args.epochs)['backbone']} on digits, {args.epochs} epochs), 1 torch thread each")
    print(f"serial loop in-process      {serial:7.2f} s")
    print(f"LocalCluster 2 x 1 thread   {two:7.2f} s   speed-up {serial / two:.2f}x (goal >= 1.7x): "
          f"{'MET' if serial / two >= 1.7 else 'NOT MET'}   (cluster start + warm-up {start2:.1f} s, once per study)")
    print(f"LocalCluster 1 x 1 thread   {one:7.2f} s   overhead {100 * (one / serial - 1):+.1f} % (goal <= 5 %): "
          f"{'MET' if one / serial - 1 <= 0.05 else 'NOT MET'}   (cluster start + warm-up {start1:.1f} s)")


if __name__ == "__main__":
    main()
