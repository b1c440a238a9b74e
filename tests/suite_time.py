"""A pytest plugin: ``--suite-report PATH`` writes the run's wall time, outcome counts and its 20 slowest tests and
each file's total to PATH as JSON (``make test`` writes ``test-artifacts/suite.json``, which ``.ci/run`` prints), so that each
change sees what it costs the suite.

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


def pytest_addoption(parser):
    parser.addoption("--suite-report", metavar="PATH", default=None,
                     help="write the suite's wall time and its slowest tests to PATH (JSON)")


def pytest_configure(config):
    path = config.getoption("--suite-report")
    if path and not hasattr(config, "workerinput"):
        config.pluginmanager.register(SuiteTimer(Path(path)), "suite-timer")


def by_file(tests: list[dict]) -> list[dict]:
    """Each test file's total seconds and test count, the costliest first: where the workers' time goes."""
    totals: dict[str, list] = defaultdict(lambda: [0.0, 0])
    for t in tests:
        entry = totals[t["test"].split("::")[0]]
        entry[0] += t["seconds"]
        entry[1] += 1
    rows = [{"file": f, "seconds": round(s, 1), "tests": n} for f, (s, n) in totals.items()]
    return sorted(rows, key=lambda r: r["seconds"], reverse=True)


class SuiteTimer:
    """Sums each test's setup, call and teardown seconds and writes them when the session ends."""

    def __init__(self, path: Path):
        self.path = path
        self.started = time.monotonic()
        self.phases: dict[str, dict[str, float]] = defaultdict(dict)
        self.outcomes: Counter = Counter()
        self.workers: set[str] = set()

    def pytest_runtest_logreport(self, report):
        worker = getattr(getattr(report, "node", None), "workerinput", {}).get("workerid")  # set by xdist
        if worker:
            self.workers.add(worker)
        self.phases[report.nodeid][report.when] = report.duration
        if report.when == "call" or report.outcome != "passed":
            # one outcome per test: the call's, or a setup/teardown that failed or skipped
            self.outcomes["error" if report.when != "call" and report.failed else report.outcome] += 1

    def pytest_sessionfinish(self, session, exitstatus):
        tests = [{"test": nodeid, "seconds": round(sum(p.values()), 2),
                  **{when: round(p[when], 2) for when in ("setup", "call", "teardown") if when in p}}
                 for nodeid, p in self.phases.items()]
        tests.sort(key=lambda t: t["seconds"], reverse=True)
        report = {"wall_seconds": round(time.monotonic() - self.started, 2), "exit_status": int(exitstatus),
                  "workers": len(self.workers) or None,
                  "cpus": os.cpu_count(), "tests": len(self.phases), "outcomes": dict(self.outcomes),
                  "slowest": tests[:SLOWEST], "files": by_file(tests)}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(report, indent=1) + "\n")
