"""A pytest plugin: the order ``make test`` runs the test files in and what it hands one xdist worker at once.

``make test`` runs ``--dist loadfile --no-loadscope-reorder``: whole work units (:func:`work_unit`: a file, or a
whole :data:`ONE_WORKER` folder) go to the next worker free, in the order :func:`pytest_collection_modifyitems`
leaves them, the longest first (tests/file_seconds.json).
"""
from __future__ import annotations

import pytest


def _weight(item) -> int:
    """0 for a test that drives a browser or a notebook kernel, 1 for another slow one, 2 for the rest."""
    if item.get_closest_marker("browser") or item.get_closest_marker("notebook"):
        return 0
    return 1 if item.get_closest_marker("slow") else 2


_UNTIMED_SECONDS = {0: 60.0, 1: 10.0, 2: 0.0}
"""The seconds guessed for a file tests/file_seconds.json does not list yet, by :func:`_weight`."""


ONE_WORKER = ("tests/browser/shared_servers/",)
"""Folders handed to one worker whole, their files one after another: they share session fixtures (servers) that
each worker would otherwise start for itself."""


def work_unit(nodeid: str) -> str:
    """What ``make test`` hands a worker at once: the test's file, or the :data:`ONE_WORKER` folder it is in."""
    path = nodeid.split("::")[0]
    return next((folder for folder in ONE_WORKER if path.startswith(folder)), path)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile`` by :func:`work_unit`: a file, or a whole :data:`ONE_WORKER` folder."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class ByWorkUnit(LoadFileScheduling):
        # pytest-xdist's only private name we touch: LoadScopeScheduling groups by _split_scope and has no public
        # hook for the grouping (checked against pytest-xdist 3.8.0: tests/project/test_xdist_contract.py)
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return ByWorkUnit(config, log)


def pytest_collection_modifyitems(config, items):
    """The longest work units (:func:`work_unit`; a file's seconds from tests/file_seconds.json) first, each
    unit's tests kept together and in order. ``make test`` hands whole units to the workers in this order
    (``--dist loadfile --no-loadscope-reorder``), the next to the first worker free: the minutes-long files start
    at once instead of last, when the other worker would idle waiting for them, and a file's module fixtures are
    made once. (Worksteal, used before, gave each worker a contiguous half of this order: the first worker had
    every browser test.)"""
    from tests.suite_time import file_seconds

    seconds = file_seconds()
    files: dict = {}
    for item in items:
        files.setdefault(item.nodeid.split("::")[0], []).append(item)

    def expected(name: str) -> float:
        weight = min(_weight(item) for item in files[name])
        return seconds.get(name, _UNTIMED_SECONDS[weight])

    units: dict = {}
    for name in files:
        units.setdefault(work_unit(name), []).append(name)
    order = sorted(units, key=lambda unit: sum(expected(name) for name in units[unit]), reverse=True)
    items[:] = [item for unit in order for name in sorted(units[unit], key=expected, reverse=True)
                for item in files[name]]
