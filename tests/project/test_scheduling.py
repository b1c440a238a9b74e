"""tests/scheduling.py: ``make test`` hands a ONE_WORKER folder to one worker whole, every other file on its own."""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

from tests.scheduling import ONE_WORKER, work_unit

REPO = Path(__file__).resolve().parents[2]


def session_fixtures(conftest: Path) -> set[str]:
    """The names of the session fixtures ``conftest`` defines: each worker that runs a test using one makes its own."""
    names = set()
    for node in ast.walk(ast.parse(conftest.read_text())):
        if isinstance(node, ast.FunctionDef):
            for deco in node.decorator_list:
                if isinstance(deco, ast.Call) and any(k.arg == "scope" and getattr(k.value, "value", None) == "session"
                                                      for k in deco.keywords):
                    names.add(node.name)
    return names

SHARED_CONFTEST = '''
import os, pytest

@pytest.fixture(scope="session")
def server(tmp_path_factory):
    # one file per worker that set up the "server"
    marks = os.environ["MARKS"]
    open(os.path.join(marks, os.environ["PYTEST_XDIST_WORKER"]), "w").close()
'''


def test_every_file_using_a_one_worker_folders_session_fixture_is_in_that_folder():
    """A test file outside the folder that used one of its session fixtures (the servers) would have a second
    worker start it. A test or a fixture of the file asking for it counts."""
    for folder in ONE_WORKER:
        shared = session_fixtures(REPO / folder / "conftest.py")
        assert shared, f"{folder}conftest.py defines no session fixture"
        users = set()
        for path in (REPO / "tests").rglob("test_*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef) and shared & {a.arg for a in node.args.args}:
                    users.add(path.relative_to(REPO).as_posix())
        assert {f for f in users if work_unit(f) != folder} == set(), shared
        assert len(users) >= 6, users          # the app, collapse, studies, watch, embedding and explorer tests


def test_a_one_worker_folder_sets_up_its_session_fixture_on_one_worker(tmp_path):
    folder = tmp_path / ONE_WORKER[0]
    folder.mkdir(parents=True)
    (folder / "conftest.py").write_text(SHARED_CONFTEST)
    for i in range(4):
        (folder / f"test_shared_{i}.py").write_text("def test_uses_the_server(server):\n    pass\n")
    for i in range(4):
        (tmp_path / "tests" / f"test_alone_{i}.py").write_text(
            "import os\n\ndef test_alone():\n"
            f"    open(os.path.join(os.environ['ALONE'], os.environ['PYTEST_XDIST_WORKER'] + '-{i}'), 'w').close()\n")
    (tmp_path / "tests" / "conftest.py").write_text('pytest_plugins = ("tests.scheduling",)\n')
    (tmp_path / "pyproject.toml").write_text('[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
    marks, alone = tmp_path / "marks", tmp_path / "alone"
    marks.mkdir()
    alone.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "MARKS": str(marks), "ALONE": str(alone)}
    report = tmp_path / "suite.json"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.suite_time",
                           "-n", "2", "--dist", "loadfile", "--no-loadscope-reorder", f"--suite-report={report}"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "8 passed" in done.stdout
    assert len(list(marks.iterdir())) == 1, "the shared folder's session fixture was set up on both workers"
    assert len(list(alone.iterdir())) == 4
    # the report names the worker that ran each file: one per file, the same one for the whole folder
    files = {row["file"]: row["workers"] for row in json.loads(report.read_text())["files"]}
    assert len(files) == 8 and all(len(workers) == 1 for workers in files.values()), files
    assert len({tuple(w) for f, w in files.items() if f.startswith(ONE_WORKER[0])}) == 1, files
    assert {w for f, (w,) in files.items() if not f.startswith(ONE_WORKER[0])} <= {"gw0", "gw1"}, files
