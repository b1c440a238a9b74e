"""What limiting a small metric problem to one thread costs while another thread keeps the interpreter busy.

A run in the served app evaluates in a worker thread while the session's thread redraws plots. The engine runs each
layer's metrics inside ``lab.runs.compute.few_threads``, which limits the BLAS/OpenMP pools to one thread. As released
it called ``threadpoolctl.threadpool_limits`` each time, which finds the loaded libraries anew through one ctypes
callback per library; each callback takes the GIL back, and with a busy thread beside it waits its turn (py-spy of
the law lesson run in the app: 18 s of 60 s). ``few_threads`` now keeps one ``ThreadpoolController`` until the next
import.

One process: a thread runs pure Python (the redraws' stand-in) while the main thread enters and leaves the limit
``--calls`` times, first as released, then as now, alternating ``--repeats`` times; then the same without the busy
thread. Prints the seconds per call and the ratio (now / released) of the medians.

Run: ``python benchmarks/thread_limits.py [--calls N] [--repeats N] [--save]``; ``--save`` writes
benchmarks/results/thread_limits.txt.
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


def released(calls: int) -> float:
    """Seconds per enter-and-leave of the limit as released (``threadpool_limits`` every time)."""
    from threadpoolctl import threadpool_limits

    started = time.perf_counter()
    for _ in range(calls):
        with threadpool_limits(limits=1):
            pass
    return (time.perf_counter() - started) / calls


def now(calls: int) -> float:
    """Seconds per enter-and-leave of the limit as ``few_threads`` does it now."""
    from lab.runs.compute import _thread_pools

    started = time.perf_counter()
    for _ in range(calls):
        with _thread_pools().limit(limits=1):
            pass
    return (time.perf_counter() - started) / calls


class Busy:
    """A thread that keeps the interpreter busy (pure Python) until stopped."""

    def __enter__(self):
        self._stop = threading.Event()

        def spin():
            x = 0
            while not self._stop.is_set():
                for i in range(10_000):
                    x += i

        self._thread = threading.Thread(target=spin, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20, help="limits entered per measurement (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=3, help="measurements of each kind (default: %(default)s)")
    add_save_option(parser)
    args = parser.parse_args(argv)
    with recording(__file__, parser, args, argv=argv):
        import holoviews  # noqa: F401  (the libraries a served app has loaded: the search walks them all)
        import panel  # noqa: F401
        import sklearn.cluster  # noqa: F401
        import torch  # noqa: F401

        import lab.runs.compute  # noqa: F401

        from threadpoolctl import threadpool_info

        print(f"{len(threadpool_info())} thread pools loaded; {args.calls} calls per measurement")
        released(2), now(2)                     # first-use costs, in neither column
        for label, context in (("a busy thread beside it", Busy), ("alone", None)):
            seconds = {"released": [], "now": []}
            for _ in range(args.repeats):
                for name, measure in (("released", released), ("now", now)):
                    if context is None:
                        took = measure(args.calls)
                    else:
                        with context():
                            took = measure(args.calls)
                    seconds[name].append(took)
                    print(f"{label:<24} {name:<9} {1000 * took:9.3f} ms per call", flush=True)
            a, b = statistics.median(seconds["released"]), statistics.median(seconds["now"])
            print(f"median, {label}: released {1000 * a:.3f} ms, now {1000 * b:.3f} ms per call: ratio {b / a:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
