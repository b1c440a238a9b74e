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
    probe = report["machine_probe_seconds"]         # the machine's speed as the suite started and ended
    assert set(probe) == {"start", "end"} and all(0 < s < 60 for s in probe.values()), probe
    assert report["tests"] == 26
    assert report["outcomes"] == {"passed": 23, "failed": 1, "skipped": 1, "error": 1}
    slowest = report["slowest"]
    assert len(slowest) == 20
    seconds = [t["seconds"] for t in slowest]
    assert seconds == sorted(seconds, reverse=True)
    assert all(t["test"].startswith("test_tiny.py::") and "setup" in t for t in slowest)
    (tiny,) = report["files"]                   # one file: its total is every test's seconds summed
    assert tiny["file"] == "test_tiny.py" and tiny["tests"] == 26
    every = sum(sum(t[w] for w in ("setup", "call", "teardown") if w in t) for t in slowest)
    assert tiny["seconds"] >= round(every, 1) - 0.1


def test_make_tests_report_option_works_when_the_report_is_already_there(tmp_path):
    """The Makefile's --suite-report, as written there, run twice in a project laid out like ours (testpaths, the
    plugin named in tests/conftest.py): the second run finds suite.json from the first and must not read it as a
    test path (it did: pytest then skipped tests/conftest.py and refused the option)."""
    recipe = next(line for line in (REPO / "Makefile").read_text().splitlines() if "-m pytest" in line)
    report = next(word for word in recipe.split() if word.startswith("--suite-report"))
    (tmp_path / "pyproject.toml").write_text('[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "conftest.py").write_text('pytest_plugins = ("tests.suite_time",)\n')
    (tmp_path / "tests" / "test_one.py").write_text("def test_one():\n    pass\n")
    (tmp_path / "test-artifacts").mkdir()
    words = [report] if "=" in report else [report, recipe.split()[recipe.split().index(report) + 1]]
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    for attempt in (1, 2):
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *words], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, (attempt, done.stdout + done.stderr)
        assert json.loads((tmp_path / "test-artifacts" / "suite.json").read_text())["tests"] == 1
