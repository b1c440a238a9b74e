"""A pytest plugin: ``--suite-report PATH`` writes the run's wall time, outcome counts, a probe of the machine's
speed at its start and end (:func:`machine_probe`), its 20 slowest tests and each file's total to PATH as JSON
(``make test`` writes ``test-artifacts/suite.json``, which ``.ci/run`` prints), so that each change sees what it
costs the suite.

Under pytest-xdist the workers' reports reach the controller through ``pytest_runtest_logreport``; only the
controller (no ``workerinput``) writes the file.
"""
from __future__ import annotations

import json
import os
import time
from collections import Counter, defaultdict
from pathlib import Path

SLOWEST = 20
PROBE_LOOPS = 2_000_000
FILE_SECONDS = Path(__file__).with_name("file_seconds.json")
"""Each test file's seconds in one ``make test``: the order tests/conftest.py hands the files out in."""


def pytest_addoption(parser):
    parser.addoption("--suite-report", metavar="PATH", default=None,
                     help="write the suite's wall time and its slowest tests to PATH (JSON)")


def pytest_configure(config):
    path = config.getoption("--suite-report")
    if path and not hasattr(config, "workerinput"):
        config.pluginmanager.register(SuiteTimer(Path(path)), "suite-timer")


def by_file(tests: list[dict]) -> list[dict]:
    """Each test file's total seconds, test count and the workers that ran it (xdist), the costliest first: where
    the workers' time goes."""
    totals: dict[str, list] = defaultdict(lambda: [0.0, 0, set()])
    for t in tests:
        entry = totals[t["test"].split("::")[0]]
        entry[0] += t["seconds"]
        entry[1] += 1
        entry[2].update([t["worker"]] if t.get("worker") else [])
    rows = [{"file": f, "seconds": round(s, 1), "tests": n, **({"workers": sorted(w)} if w else {})}
            for f, (s, n, w) in totals.items()]
    return sorted(rows, key=lambda r: r["seconds"], reverse=True)


def machine_probe() -> float:
    """Seconds of one fixed pure-Python loop (0.07-0.4 s on machines of CI's class): the speed of one core at the
    suite's start and end. These machines are shared: the same commit's suite took 695 s and 951 s an hour apart,
    every test slower alike. The probe is one figure beside the wall time, not a correction for it: it read fast
    (0.07-0.21 s) at both ends of two suites that ran 25 % slow."""
    started = time.perf_counter()
    total = 0
    for i in range(PROBE_LOOPS):
        total += i * i
    return round(time.perf_counter() - started, 3)


class SuiteTimer:
    """Sums each test's setup, call and teardown seconds and writes them when the session ends."""

    def __init__(self, path: Path):
        self.path = path
        self.probe_start = machine_probe()
        self.started = time.monotonic()
        self.phases: dict[str, dict[str, float]] = defaultdict(dict)
        self.outcomes: Counter = Counter()
        self.busy: Counter = Counter()          # worker -> seconds in its tests: how evenly the files were shared
        self.worker_of: dict[str, str] = {}     # test -> the worker that ran it

    def pytest_runtest_logreport(self, report):
        worker = getattr(getattr(report, "node", None), "workerinput", {}).get("workerid")  # set by xdist
        if worker:
            self.busy[worker] += report.duration
            self.worker_of[report.nodeid] = worker
        self.phases[report.nodeid][report.when] = report.duration
        if report.when == "call" or report.outcome != "passed":
            # one outcome per test: the call's, or a setup/teardown that failed or skipped
            self.outcomes["error" if report.when != "call" and report.failed else report.outcome] += 1

    def pytest_sessionfinish(self, session, exitstatus):
        tests = [{"test": nodeid, "seconds": round(sum(p.values()), 2),
                  **{when: round(p[when], 2) for when in ("setup", "call", "teardown") if when in p},
                  **({"worker": self.worker_of[nodeid]} if nodeid in self.worker_of else {})}
                 for nodeid, p in self.phases.items()]
        tests.sort(key=lambda t: t["seconds"], reverse=True)
        report = {"wall_seconds": round(time.monotonic() - self.started, 2), "exit_status": int(exitstatus),
                  "machine_probe_seconds": {"start": self.probe_start, "end": machine_probe()},
                  "workers": len(self.busy) or None,
                  "worker_seconds": {w: round(self.busy[w], 1) for w in sorted(self.busy)},
                  "cpus": os.cpu_count(), "tests": len(self.phases), "outcomes": dict(self.outcomes),
                  "slowest": tests[:SLOWEST], "files": by_file(tests)}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(report, indent=1) + "\n")


def file_seconds() -> dict[str, float]:
    """:data:`FILE_SECONDS`' seconds of each test file ({} without the file)."""
    if not FILE_SECONDS.exists():
        return {}
    return json.loads(FILE_SECONDS.read_text())["seconds"]


def refresh(report: Path) -> None:
    """Rewrite :data:`FILE_SECONDS` from a ``--suite-report`` file's per-file seconds."""
    data = json.loads(FILE_SECONDS.read_text())
    data["seconds"] = {row["file"]: row["seconds"] for row in json.loads(report.read_text())["files"]}
    FILE_SECONDS.write_text(json.dumps(data, indent=1) + "\n")
    print(f"{FILE_SECONDS}: {len(data['seconds'])} files from {report}")


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Refresh tests/file_seconds.json from a make test report.")
    parser.add_argument("--refresh", type=Path, default=Path("test-artifacts/suite.json"), metavar="REPORT")
    refresh(parser.parse_args().refresh)
