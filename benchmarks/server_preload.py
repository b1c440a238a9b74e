"""What ``panel serve app`` compiles at start, in CPU seconds of one process: the preload it keeps and the
Datashader warm-up it no longer does there.

The server's preload thread (``app/app_hooks.py``) imports the heavy libraries and compiles umap's kernels
(a run's layouts need them). It used to compile Datashader's kernels too, which only a layout of more than
``EmbeddingView.rasterize_above`` points (5,000) uses; they are now compiled when such a run starts
(:func:`app.explorer._plot.warm_up_in_background`). This script times, in one fresh process and in order:

- ``imports``: what the preload imports (lab.runs, lab.data, lab.metrics) and the explorer's plotting modules;
- ``umap warm-up``: :func:`lab.projection.warm_up` (kept at start);
- ``datashader warm-up``: :func:`app.explorer._plot.warm_up` (moved to the start of a rasterized run);

and prints each one's process CPU time and the share of the old preload that the server no longer spends.

    .venv/bin/python benchmarks/server_preload.py [--save]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._results import add_save_option, recording  # noqa: E402


def _cpu(step) -> tuple[float, float]:
    """(CPU seconds of this process, wall seconds) that ``step()`` took."""
    c0, w0 = time.process_time(), time.perf_counter()
    step()
    return time.process_time() - c0, time.perf_counter() - w0


def _imports() -> None:
    import lab.data  # noqa: F401
    import lab.metrics  # noqa: F401
    import lab.runs  # noqa: F401
    from app.explorer import _plot  # noqa: F401


def _umap() -> None:
    from lab import projection

    projection.warm_up(wait=True)


def _datashader() -> None:
    from app.explorer import _plot

    _plot.warm_up()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_save_option(parser)
    args = parser.parse_args(argv)
    with recording(__file__, parser, args, argv=argv):
        rows = [(name, *_cpu(step)) for name, step in
                (("imports", _imports), ("umap warm-up", _umap), ("datashader warm-up", _datashader))]
        print(f"{'step':<20} {'CPU s':>7} {'wall s':>7}")
        for name, cpu, wall in rows:
            print(f"{name:<20} {cpu:7.2f} {wall:7.2f}")
        old = sum(cpu for _, cpu, _ in rows)
        kept = old - rows[-1][1]
        print(f"preload at server start: {kept:.2f} CPU s now, {old:.2f} CPU s with the Datashader warm-up "
              f"({rows[-1][1] / old:.0%} of it saved per server start; a rasterized run pays it when it starts)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
