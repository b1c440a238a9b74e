"""Growing or shrinking a study while it runs: the :class:`StudyController` that :func:`lab.study.run_study` polls.

The caller (the app's Studies tab, a notebook) holds the controller and hands it a grown or shrunk version of the
running study from any thread; the runner picks it up between two completions, on the same cluster::

    control = StudyController()
    threading.Thread(target=study.run, kwargs={"control": control}).start()
    control.update(study.extend(seeds=[3]))          # new cells are queued
    control.update(study.without(backbone=["mlp"]))  # cells not started are dropped; running ones finish

No Dask here: importing this module does not import it.
"""
from __future__ import annotations

import threading
from typing import Iterable

__all__ = ["StudyController"]


class StudyController:
    """A thread-safe mailbox of changes to a running study.

    :func:`lab.study.run_study` (``control=``) attaches to it when it starts and takes what is waiting between
    two completions: the latest study given to :meth:`update` (earlier ones not yet taken are superseded) and
    every key given to :meth:`drop`. A finished cell is never run again, a running cell finishes, and a cell
    that has not started is taken off the cluster.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._name: str | None = None
        self._store = None
        self._ended = False
        self._study = None
        self._drop: set[str] = set()

    # -- the caller's side ------------------------------------------------------------------------
    def update(self, study) -> None:
        """Run ``study`` (the running study grown or shrunk: :meth:`lab.Study.extend`, :meth:`lab.Study.without`)
        from now on: its cells that are neither stored nor submitted are queued, submitted cells it no
        longer has are dropped unless they started.

        Every new cell's names are checked here (ValueError, nothing changes); ValueError also for a study
        of another name, or once the run has ended (then run the grown study again: stored cells are skipped).
        """
        with self._lock:
            name, store, ended = self._name, self._store, self._ended
        if ended:
            raise ValueError(f"study {study.name!r} is no longer running; run the updated study again "
                             f"(its stored cells are skipped)")
        if name is not None and study.name != name:
            raise ValueError(f"the running study is {name!r}; an update must be a version of it (Study.extend, "
                             f"Study.without). Got study {study.name!r} instead.")
        study.check_names(store=store)
        with self._lock:
            self._study = study

    def drop(self, keys: Iterable[str]) -> None:
        """Take the cells with these keys (:attr:`lab.study.Cell.key`) off the cluster if they have not started."""
        keys = {str(k) for k in keys}
        with self._lock:
            self._drop |= keys

    @property
    def running(self) -> bool:
        """Whether a :func:`~lab.study.run_study` is attached and has not ended."""
        with self._lock:
            return self._name is not None and not self._ended

    # -- the runner's side ------------------------------------------------------------------------
    def attach(self, study, store) -> None:
        """Called by :func:`~lab.study.run_study` as it starts ``study`` (one run at a time per controller)."""
        with self._lock:
            if self._name is not None and not self._ended:
                raise ValueError(f"this StudyController already controls the running study {self._name!r}; "
                                 f"give each run its own")
            # a change given before the runner attached (a seed added as the cluster starts) is kept for it
            pending = self._study is not None and self._study.name == study.name and not self._ended
            self._name, self._store, self._ended = study.name, store, False
            if not pending:
                self._study, self._drop = None, set()

    def take(self) -> tuple[object | None, set[str]]:
        """The study to run from now on (None: no change) and the keys to drop, each handed out once."""
        with self._lock:
            study, drop = self._study, self._drop
            self._study, self._drop = None, set()
            return study, drop

    def detach(self) -> None:
        """Called by :func:`~lab.study.run_study` when it ends: later updates are refused."""
        with self._lock:
            self._ended = True
