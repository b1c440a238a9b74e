"""How functions on stored runs find their store and their run.

Every function that reads stored runs (:mod:`lab.analysis`, :mod:`lab.export`, :mod:`lab.sinks`,
:mod:`lab.archive`, :mod:`lab.study`) takes the run first, as an id or a :class:`~lab.store.RunRecord`
already loaded, and the store as the keyword ``store=``: None for the default store (``$LAB_RUNS_DIR``
or ``./runs``), a :class:`~lab.store.RunStore`, or the path of a store folder. These helpers turn those
into a store, a record and an id, so that every function accepts the same things and says the same
when given something else.

Examples
--------
>>> from lab.store.lookup import open_store, run_id_of
>>> open_store("runs").root                                       # doctest: +SKIP
PosixPath('runs')
>>> run_id_of("2024-01-01-abc")
'2024-01-01-abc'
"""
from __future__ import annotations

import os
from typing import Any

__all__ = ["open_store", "load_run", "run_id_of", "is_store", "is_record", "run_stamp"]


def is_store(value: Any) -> bool:
    """Whether ``value`` is a run store: a :class:`~lab.store.RunStore`, or anything with ``load(run_id)``
    and ``root`` as it has (a record has neither)."""
    return callable(getattr(value, "load", None)) and hasattr(value, "root")


def is_record(value: Any) -> bool:
    """Whether ``value`` is a run already read: a :class:`~lab.store.RunRecord` (anything with ``run_id``,
    ``meta`` and ``metrics``)."""
    return all(hasattr(value, name) for name in ("run_id", "meta", "metrics")) and not isinstance(value, str)


def open_store(store: Any = None):
    """The run store that ``store`` names.

    Parameters
    ----------
    store : None, lab.RunStore or path
        None: the default store (:func:`lab.store.default_root`: ``$LAB_RUNS_DIR`` or ``./runs``); a
        store as it is; a folder path: the store in that folder.

    Returns
    -------
    lab.store.RunStore

    Raises
    ------
    ValueError
        ``store`` is none of those.
    """
    from lab.store import RunStore, default_root

    if store is None:
        return RunStore(default_root())
    if isinstance(store, (str, os.PathLike)):
        return RunStore(store)
    if not is_store(store):
        raise ValueError(f"store must be a lab.RunStore, a folder path or None (the default store). "
                         f"Got {type(store).__name__} instead.")
    return store


def run_id_of(run: Any) -> str:
    """The id of ``run``: a run id as it is, a record's ``run_id``.

    Raises
    ------
    ValueError
        ``run`` is neither a string nor a record.
    """
    if isinstance(run, str):
        return run
    if is_record(run):
        return run.run_id
    raise ValueError(f"run must be a run id (a string; `python -m lab runs list` shows them) or a "
                     f"lab.store.RunRecord. Got {type(run).__name__} instead.")


def load_run(run: Any, store: Any = None):
    """The record of ``run``: a :class:`~lab.store.RunRecord` as it is (``store`` unused), a run id read
    from :func:`open_store` of ``store``.

    Raises
    ------
    ValueError
        ``run`` is neither a run id nor a record, or ``store`` is not a store.
    lab.store.RunNotFoundError
        No run with that id in the store.
    """
    if is_record(run):
        return run
    return open_store(store).load(run_id_of(run))


def run_stamp(folder) -> tuple | None:
    """A key that changes whenever the run in ``folder`` is written: (the folder resolved, its meta.json's change
    time and size; every write of the run's tables and status rewrites meta.json), or None when meta.json cannot be
    read. What is computed from a finished run is cached under it."""
    from pathlib import Path

    folder = Path(folder)
    try:
        stat = (folder / "meta.json").stat()
    except OSError:
        return None
    return str(folder.resolve()), stat.st_mtime_ns, stat.st_size
