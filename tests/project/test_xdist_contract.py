"""The contract of tests/scheduling.py with pytest-xdist: its scheduler overrides ``LoadFileScheduling._split_scope``,
pytest-xdist's private grouping of test ids into work units. :data:`CHECKED` pins the version this was checked
against; an upgrade fails :func:`test_installed_version_is_the_checked_one` with what to check again."""
from __future__ import annotations

import inspect
from importlib.metadata import version

from tests import scheduling

CHECKED = "3.8.0"


def test_installed_version_is_the_checked_one():
    now = version("pytest-xdist")
    assert now == CHECKED, (
        f"pytest-xdist is {now}, tests/scheduling.py was checked against {CHECKED}: check again that "
        "LoadScopeScheduling still groups work units by self._split_scope(nodeid) in schedule() and "
        "mark_test_complete(), and whether a public hook for the grouping exists now (then use it); "
        f"then set CHECKED in {__name__.rsplit('.', 1)[-1]}.py")


def test_load_scope_scheduling_groups_by_split_scope():
    from xdist.scheduler import LoadFileScheduling, LoadScopeScheduling

    assert list(inspect.signature(LoadFileScheduling._split_scope).parameters) == ["self", "nodeid"]
    for method in ("schedule", "mark_test_complete"):
        assert "_split_scope" in getattr(LoadScopeScheduling, method).__code__.co_names, (
            f"LoadScopeScheduling.{method} no longer calls self._split_scope: ONE_WORKER folders would split")
    # the grouping replaced is the file's, which work_unit keeps outside ONE_WORKER folders
    assert LoadFileScheduling._split_scope(None, "tests/a/test_b.py::test_c[1]") == "tests/a/test_b.py"


class _LoadFileConfig:
    """What the scheduler's constructor and the hook ask of a pytest config under ``-n 2 --dist loadfile``."""

    def getvalue(self, name):
        return {"dist": "loadfile", "tx": ["2*popen"]}[name]


def test_the_scheduler_of_make_test_splits_by_work_unit():
    scheduler = scheduling.pytest_xdist_make_scheduler(_LoadFileConfig(), None)
    folder = scheduling.ONE_WORKER[0]
    assert scheduler.numnodes == 2
    assert scheduler._split_scope(f"{folder}test_x.py::test_y") == folder
    assert scheduler._split_scope("tests/app/test_plots.py::test_z") == "tests/app/test_plots.py"
