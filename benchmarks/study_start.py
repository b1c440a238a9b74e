"""How long a small study takes on a fresh local cluster when its CPU workers spawn, and when they fork.

A study's local cluster used to start each worker as a fresh interpreter ("spawn"), which imports torch and lab
again before its first cell (about 3 CPU-s each here). ``lab.study.local_cluster`` now starts CPU workers from a fork
server that imported them once per session ("forkserver"): the first study of a session pays that import once, the
next ones not at all.

One process: ``--rounds`` times a 2-worker cluster starts, runs two one-epoch cells (one each) and closes, first with
"spawn", then with "forkserver" (whose first round starts the fork server). Prints each round's wall seconds and
the CPU-seconds its child processes used (sampled every 0.1 s), then the ratios forkserver / spawn of the first
rounds and of the medians of the later ones.

Run: ``python benchmarks/study_start.py [--rounds N] [--save]``; ``--save`` writes benchmarks/results/study_start.txt.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._results import add_save_option, recording  # noqa: E402

CELL = {"dataset": "digits", "backbone": "mlp:depth=3,width=16", "strategy": "full", "epochs": 1,
        "projection": "none", "unseen_per_class": 30, "seen_per_class": 15, "metrics": ["nmi", "knn_accuracy", "nc1"],
        "save_weights": False}


class ChildCPU:
    """CPU-seconds used by this process's descendants while the block runs (polled, so ended ones count)."""

    def __enter__(self):
        import psutil

        self._me, self._seen, self._stop = psutil.Process(), {}, threading.Event()
        self._before = self._poll()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def _poll(self) -> dict:
        import psutil

        out = {}
        for child in self._me.children(recursive=True):
            try:
                times = child.cpu_times()
                out[child.pid] = times.user + times.system
            except psutil.Error:
                pass
        return out

    def _loop(self) -> None:
        while not self._stop.wait(0.1):
            self._seen.update(self._poll())

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self._seen.update(self._poll())
        self.seconds = sum(cpu - self._before.get(pid, 0.0) for pid, cpu in self._seen.items())


def one_round(method: str) -> tuple[float, float]:
    """Wall and child CPU seconds of: a 2-worker cluster starts, runs two cells, closes."""
    from distributed import Client

    from lab.study import local_cluster
    from lab.study.runner import run_cell

    started = time.perf_counter()
    with ChildCPU() as cpu:
        with local_cluster(2, dashboard=False, start_method=method) as cluster, Client(cluster) as client:
            futures = [client.submit(run_cell, {**CELL, "seeds": [seed]}, "bench", {"seed": seed}, seed, 1, pure=False)
                       for seed in (0, 1)]
            results = client.gather(futures)
    assert [r["status"] for r in results] == ["finished", "finished"], results
    return time.perf_counter() - started, cpu.seconds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="studies per start method (default: %(default)s)")
    add_save_option(parser)
    args = parser.parse_args(argv)
    with recording(__file__, parser, args, argv=argv):
        import lab.study  # noqa: F401 - the client's own imports are not what is measured

        rows = {}
        print(f"{'start method':<12} {'round':>5} {'wall s':>7} {'child CPU s':>11}")
        for method in ("spawn", "forkserver"):
            rows[method] = []
            for i in range(args.rounds):
                wall, cpu = one_round(method)
                rows[method].append((wall, cpu))
                print(f"{method:<12} {i + 1:>5} {wall:>7.2f} {cpu:>11.2f}", flush=True)
        for label, pick in (("first round", lambda r: r[0]),
                            ("later rounds (median)", lambda r: statistics.median(r[1:]) if len(r) > 1 else r[0])):
            wall = pick([w for w, _ in rows["forkserver"]]) / pick([w for w, _ in rows["spawn"]])
            cpu = pick([c for _, c in rows["forkserver"]]) / pick([c for _, c in rows["spawn"]])
            print(f"forkserver / spawn, {label}: wall {wall:.2f}, child CPU {cpu:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
