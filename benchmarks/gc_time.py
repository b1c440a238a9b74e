"""How much of a test file's time goes to Python's garbage collector, with the suite's collector settings and without.

Runs ``pytest -n 0`` on the file twice, each in a fresh process with :mod:`benchmarks._gc_plugin`: first with
``LAB_TEST_GC_DEFAULTS=1`` (CPython's thresholds, nothing frozen: the suite before ``tests/conftest.py`` set
them), then with the suite's settings (a full collection at most every 100 middle ones, what collection imported
frozen). Each prints the collector's seconds (read from ``gc.callbacks`` in that process, so the machine's load
moves them little), the full collections' count and share, and the frozen objects.

Run: ``.venv/bin/python benchmarks/gc_time.py [FILE] [--save]`` (default ``tests/app/test_live_picker.py``; about
four minutes on 2 cores).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._results import add_save_option, recording  # noqa: E402

DEFAULT_FILE = "tests/app/test_live_picker.py"


def collector_line(test_file: str, *, defaults: bool) -> str:
    """The plugin's ``gc: ...`` line for one run of ``test_file`` (CPython's defaults or the suite's settings)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "benchmarks"), str(ROOT)]),
           "LAB_TEST_GC_DEFAULTS": "1" if defaults else "0"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "_gc_plugin", "-p",
                           "no:cacheprovider", test_file], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("gc: ")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"pytest {test_file} failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}")
    return lines[-1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", nargs="?", default=DEFAULT_FILE, help="the test file to run (default: %(default)s)")
    add_save_option(parser)
    args = parser.parse_args(argv)
    with recording(__file__, parser, args, argv=argv):
        print(f"== {args.file}, CPython's collector settings (LAB_TEST_GC_DEFAULTS=1)")
        print(collector_line(args.file, defaults=True))
        print(f"== {args.file}, the suite's settings (tests/conftest.py)")
        print(collector_line(args.file, defaults=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
