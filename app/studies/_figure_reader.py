"""A running study's table and figures, re-read from the store off the runner's thread.

The runner imports each finished cell and then tells its listeners; reading the figures there (every stored run
of the study, through lab.analysis) held the runner for seconds per cell on a loaded machine: a Stop waited for
every import and figure read queued behind it. Here the runner only marks the figures stale; one thread re-reads
them, once for however many cells landed meanwhile.
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Callable

__all__ = ["FigureReader"]

_log = logging.getLogger(__name__)


class FigureReader:
    """Calls ``push(read())`` on its own thread after each :meth:`mark` (marks made during a read coalesce into one
    more read); :meth:`close` makes a last read and waits for it, so the figures shown end with the store's."""

    def __init__(self, read: Callable[[], Any], push: Callable[[Any], None], *, name: str = "lab-study-figures"):
        self._read, self._push = read, push
        self._stale = threading.Event()
        self._closing = False
        self._thread = threading.Thread(target=self._loop, daemon=True, name=name)
        self._thread.start()

    def mark(self) -> None:
        """The store changed: read the figures again (soon, on the reader's thread)."""
        self._stale.set()

    def close(self, timeout: float | None = 120.0) -> None:
        """Read the figures a last time and wait until they are pushed (at most ``timeout`` seconds)."""
        self._closing = True
        self._stale.set()
        self._thread.join(timeout)

    def _loop(self) -> None:
        while True:
            self._stale.wait()
            self._stale.clear()             # before reading _closing: a close() after this sets _stale again
            closing = self._closing
            try:
                self._push(self._read())
            except Exception:                # noqa: BLE001 - a failed read leaves the last figures shown
                _log.exception("could not read the study's figures")
            if closing:
                return
