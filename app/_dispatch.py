"""Hand items from a worker thread to a session's Bokeh document, batched.

The worker never touches Panel or Bokeh objects. It calls
:meth:`DocDispatcher.push`, which queues the item and, if no flush is pending,
schedules one on the session's event loop (``doc.add_next_tick_callback``, or a
timeout callback to keep at most ``1 / min_interval`` flushes per second). The
flush runs with the document lock held and ``pn.state.curdoc`` set, drains the
queue and hands the batch to ``apply``. Without a server session (tests, a
notebook) items are applied at once, in the caller's thread, under a lock.
"""
from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Callable

import panel as pn
from panel.io.state import set_curdoc

__all__ = ["DocDispatcher"]

_log = logging.getLogger(__name__)


class DocDispatcher:
    """Thread-safe, batched delivery of items to ``apply(list_of_items)`` on a document.

    Parameters
    ----------
    apply : callable
        Called with a non-empty list of items, on the document's thread.
    doc : bokeh.document.Document or None
        The session document (``pn.state.curdoc`` when the dispatcher is made
        inside a session callback). None: apply synchronously.
    min_interval : float
        Minimum seconds between two flushes (events in between are batched).
    """

    def __init__(self, apply: Callable[[list], None], doc=None, min_interval: float = 0.25):
        self._apply = apply
        self._doc = doc
        self._min_interval = min_interval
        self._queue: collections.deque = collections.deque()
        self._guard = threading.Lock()
        self._pending = False
        self._last_flush = 0.0
        self._sync_lock = threading.RLock()

    @property
    def has_session(self) -> bool:
        doc = self._doc
        return doc is not None and getattr(doc, "session_context", None) is not None

    def push(self, item) -> None:
        """Queue one item; safe from any thread."""
        if not self.has_session:
            with self._sync_lock:
                self._apply([item])
            return
        self._queue.append(item)
        with self._guard:
            if self._pending:
                return
            self._pending = True
        wait = self._min_interval - (time.monotonic() - self._last_flush)
        doc = self._doc
        try:
            if wait > 0:
                doc.add_timeout_callback(self._flush, int(wait * 1000))
            else:
                doc.add_next_tick_callback(self._flush)
        except Exception:  # the session is gone (tab closed): nobody to show it to
            _log.debug("dropping update for a closed session", exc_info=True)

    def _flush(self) -> None:
        with self._guard:
            self._pending = False
        self._last_flush = time.monotonic()
        batch = []
        while self._queue:
            batch.append(self._queue.popleft())
        if not batch:
            return
        with set_curdoc(self._doc):
            try:
                with pn.io.hold(self._doc):
                    self._apply(batch)
            except Exception:  # never let a view bug kill the session's event loop
                _log.exception("layerscope: failed to apply %d update(s)", len(batch))
