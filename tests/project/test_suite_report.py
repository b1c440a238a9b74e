"""The --suite-report plugin (tests/suite_time.py) that ``make test`` uses to write test-artifacts/suite.json."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

TESTS = '''
import pytest

@pytest.fixture
def broken():
    raise RuntimeError("setup fails")

def test_passes():
    pass

def test_fails():
    assert False

@pytest.mark.skip(reason="skipped")
def test_skipped():
    pass

def test_errors(broken):
    pass

@pytest.mark.parametrize("i", range(22))
def test_many(i):
    pass
'''


def test_the_report_gives_wall_time_outcomes_and_the_20_slowest_tests(tmp_path):
    (tmp_path / "test_tiny.py").write_text(TESTS)
    out = tmp_path / "artifacts" / "suite.json"
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.suite_time",
                           "--rootdir", str(tmp_path), "--suite-report", str(out), "test_tiny.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr  # one test fails
    report = json.loads(out.read_text())
    assert report["exit_status"] == 1
    assert isinstance(report["wall_seconds"], float) and report["wall_seconds"] >= 0
    assert report["tests"] == 26
    assert report["outcomes"] == {"passed": 23, "failed": 1, "skipped": 1, "error": 1}
    slowest = report["slowest"]
    assert len(slowest) == 20
    seconds = [t["seconds"] for t in slowest]
    assert seconds == sorted(seconds, reverse=True)
    assert all(t["test"].startswith("test_tiny.py::") and "setup" in t for t in slowest)
