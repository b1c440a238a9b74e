"""A running study's table and figures, re-read from the store off the runner's thread.

The runner imports each finished cell and then tells its listeners; reading the figures there (every stored run
of the study, through lab.analysis) held the runner for seconds per cell on a loaded machine: a Stop waited for
every import and figure read queued behind it. Here the runner only marks the figures stale; one thread re-reads
them, once for however many cells landed meanwhile.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

__all__ = ["FigureReader"]

_log = logging.getLogger(__name__)


class FigureReader:
    """Calls ``push(read())`` on its own thread after each :meth:`mark` (marks made during a read coalesce into one
    more read), at most once every ``min_interval`` seconds; :meth:`close` makes a last read at once and waits for
    it, so the figures shown end with the store's.

    ``min_interval`` leaves the page's own thread free between two redraws: cells of a few seconds landing one
    after the other would otherwise keep it drawing figures while a click waits.
    """

    def __init__(self, read: Callable[[], Any], push: Callable[[Any], None], *, min_interval: float = 0.0,
                 name: str = "lab-study-figures"):
        self._read, self._push = read, push
        self.min_interval = float(min_interval)
        self._stale = threading.Event()
        self._closed = threading.Event()      # wakes a wait between two reads
        self._closing = False
        self._thread = threading.Thread(target=self._loop, daemon=True, name=name)
        self._thread.start()

    def mark(self) -> None:
        """The store changed: read the figures again (soon, on the reader's thread)."""
        self._stale.set()

    def close(self, timeout: float | None = 120.0) -> None:
        """Read the figures a last time and wait until they are pushed (at most ``timeout`` seconds)."""
        self._closing = True
        self._closed.set()
        self._stale.set()
        self._thread.join(timeout)

    def _loop(self) -> None:
        while True:
            self._stale.wait()
            started = time.monotonic()
            self._stale.clear()             # before reading _closing: a close() after this sets _stale again
            closing = self._closing
            try:
                self._push(self._read())
            except Exception:                # noqa: BLE001 - a failed read leaves the last figures shown
                _log.exception("could not read the study's figures")
            if closing:
                return
            self._closed.wait(max(0.0, self.min_interval - (time.monotonic() - started)))
