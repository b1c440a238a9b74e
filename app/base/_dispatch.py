"""Hand items from a worker thread to a session's Bokeh document, batched.

The worker never touches Panel or Bokeh objects. It calls
:meth:`DocDispatcher.push`, which queues the item and, if no flush is pending,
schedules one on the session's event loop (``doc.add_timeout_callback``). The
flush runs with the document lock held and ``pn.state.curdoc`` set, drains the
queue and hands the batch to ``apply``.

Pacing: the next flush is scheduled only when the current one has ended, after
a pause of at least twice its duration (batched events) or of ``gap`` seconds
(urgent items). The event loop is therefore idle between two flushes, which is
when it reads the browser's messages: a click on Stop is handled within one
flush even while plots are being redrawn on a busy 2-core machine.

In a notebook kernel there is no server session, but there is the kernel's
event loop: it runs in the kernel's main thread, which also executes cells and
handles the browser's comm messages. Items from a worker thread are then
flushed on that loop (``loop.call_soon_threadsafe``), never applied in the
worker: Panel, Bokeh and jupyter_bokeh objects are not thread-safe, and the
ipywidgets route iterates the document's models while sending. Items pushed
from the loop's own thread outside a flush (a cell feeding a view in a
``for`` loop) are applied at once, so a busy cell still shows them. JupyterLab
may hand the view's own comm messages to another thread (a kernel subshell):
flushes and those handlers take the document's lock (:mod:`app.base._doclock`; only contended where
JupyterLab's ``commsOverSubshells`` is on).

Without a session or a loop (tests, scripts) items are applied at once, in
the caller's thread, under a lock.
"""
from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import sys
import threading
import time
from typing import Callable

import panel as pn
from panel.io.state import set_curdoc

from ._doclock import install as _install_doc_locks, locked
from ._share import LOOP_SHARE
from ._upstream_panel import unblocked, walk_if_changed

__all__ = ["DocDispatcher", "kernel_loop", "one_update"]

_log = logging.getLogger(__name__)


def _in_kernel() -> bool:
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell is not None and getattr(shell, "kernel", None) is not None


def kernel_loop() -> asyncio.AbstractEventLoop | None:
    """The running event loop of this IPython kernel when called on one of its threads, else None."""
    if not _in_kernel():
        return None
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


if _in_kernel():
    _install_doc_locks()    # before any view is displayed: handlers bind then


@contextlib.contextmanager
def one_update(doc=None):
    """Send what the block changes in a served session's document as one update, as a flush does.

    For a handler of a change made in the browser, which Panel runs (with the document's lock) without a hold:
    a new selection or an unfolded card rebuilds several plots. Elsewhere (no session: a notebook, a test) the
    block runs as it is, as it does off the session's thread, where Panel schedules each update for later."""
    doc = doc if doc is not None else pn.state.curdoc
    if getattr(doc, "session_context", None) is None or not unblocked(doc):
        yield
        return
    with walk_if_changed(doc), pn.io.hold(doc):
        yield


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
        Minimum seconds between two batched flushes (events in between are batched).
    loop : asyncio event loop, None or "auto"
        Flush on this loop when ``doc`` has no server session (a notebook kernel).
        "auto": the kernel's loop when made on its thread inside IPython, else None.
    hold : bool
        Hold the document's events during ``apply`` and send them together. Off for views that
        replace whole HoloViews panes: under Bokeh's "combine" hold such a replacement now and then
        reaches the browser as a reference to a model it never received ("reference ... isn't
        known"), and the page stops updating.
    """

    def __init__(self, apply: Callable[[list], None], doc=None, min_interval: float = 0.25, loop="auto",
                 hold: bool = True):
        self._apply = apply
        self._hold = hold
        self._doc = doc
        served = getattr(doc, "session_context", None) is not None
        if served:
            loop = None                 # a served session: its document schedules the flushes
        elif loop == "auto":
            loop = kernel_loop()
        self._loop = loop
        # a document outside a server session (a notebook's): shared with the comm handlers' threads
        self._notebook_doc = None if served else doc
        self._loop_thread = threading.get_ident() if loop is not None else None
        self._min_interval = min_interval
        self._interval = min_interval
        self._queue: collections.deque = collections.deque()
        self._guard = threading.Lock()
        self._scheduled = False          # a flush callback is registered on the loop
        self._scheduled_at = 0.0         # when it fires (monotonic)
        self._flushing = False
        self._urgent_gap: float | None = None   # smallest gap asked for by urgent items not yet flushed
        self._last_end = 0.0
        self._sync_lock = threading.RLock()

    @property
    def doc(self):
        """The document the items go to (None: applied at once)."""
        return self._doc

    @property
    def has_session(self) -> bool:
        """True when items are flushed later on a session or kernel loop (not applied in the caller)."""
        if self._loop is not None:
            return not self._loop.is_closed()
        doc = self._doc
        return doc is not None and getattr(doc, "session_context", None) is not None

    @property
    def flushing(self) -> bool:
        """A flush is running now (on the loop's thread)."""
        return self._flushing

    def push(self, item, urgent: bool = False, gap: float = 0.0) -> None:
        """Queue one item; safe from any thread.

        ``urgent`` items are flushed ``gap`` seconds after the current flush (or now);
        other items wait for the batching interval.
        """
        if not self.has_session:
            with locked(self._notebook_doc), self._sync_lock:   # the order of every other path
                self._apply([item])
            return
        if self._loop is not None and threading.get_ident() == self._loop_thread and not self._flushing:
            self._queue.append(item)    # the loop's own thread, outside a flush: show it now, in order
            self._flush()
            return
        self._queue.append(item)
        with self._guard:
            if urgent:
                self._urgent_gap = gap if self._urgent_gap is None else min(gap, self._urgent_gap)
            if self._flushing:
                return                  # the flush in progress schedules the next one when it ends
            self._schedule_locked()

    def _delay_locked(self) -> float:
        if self._urgent_gap is not None:
            return self._urgent_gap
        return max(0.0, self._interval - (time.monotonic() - self._last_end))

    def _schedule_locked(self) -> None:
        delay = self._delay_locked()
        due = time.monotonic() + delay
        if self._scheduled and self._scheduled_at <= due + 1e-3:
            return                      # an earlier flush is already on its way
        self._scheduled, self._scheduled_at = True, due
        try:
            if self._loop is not None:
                self._loop.call_soon_threadsafe(self._loop.call_later, delay, self._flush)
            else:
                self._doc.add_timeout_callback(self._flush, int(delay * 1000))
        except Exception:  # the session is gone (tab closed, kernel stopping): nobody to show it to
            self._scheduled = False
            _log.debug("dropping update for a closed session", exc_info=True)

    def _flush(self) -> None:
        with self._guard:
            if self._flushing:
                return
            self._scheduled = False
            self._flushing = True
            self._urgent_gap = None
        started = time.monotonic()
        batch = []
        while self._queue:
            batch.append(self._queue.popleft())
        try:
            if batch and self._doc is None:
                self._apply(batch)
            elif batch:
                with locked(self._notebook_doc):
                    with set_curdoc(self._doc):
                        # freeze: Bokeh walks every model of the document again after each change that adds
                        # or drops one (DocumentModelManager.recompute), dozens of times in a flush that builds a
                        # view's plots, ~30 % of a served app's CPU while it opens a run. Frozen, it walks once,
                        # and not at all when the flush only sent values (walk_if_changed); the hold sends the
                        # flush's events at its end, a new model whole with its last values
                        # (before the walk attaches it, its own changes raise no event). Served sessions only: in
                        # a notebook Panel pushes every update over the comm at once, hold or not, and a model
                        # made in the flush would go out without its later changes (the JupyterLab test saw a
                        # layer player keep its first title).
                        served = self._notebook_doc is None
                        with contextlib.ExitStack() as update:
                            if self._hold and served:
                                update.enter_context(walk_if_changed(self._doc))
                            if self._hold:
                                update.enter_context(pn.io.hold(self._doc))
                            self._apply(batch)
        except Exception:  # never let a view bug kill the session's event loop
            _log.exception("layerscope: failed to apply %d update(s)", len(batch))
        finally:
            LOOP_SHARE.end()        # a redraw turn of this flush, if any, ends with its patches sent
            cost = time.monotonic() - started
            with self._guard:
                self._flushing = False
                self._last_end = time.monotonic()
                if batch:
                    self._interval = min(3.0, max(self._min_interval, 2 * cost))
                if self._queue:
                    if self._urgent_gap is not None:
                        self._urgent_gap = max(self._urgent_gap, 0.05)   # let the loop read the socket
                    self._schedule_locked()
        _log.debug("applied %d update(s) in %.0f ms", len(batch), 1000 * cost)
