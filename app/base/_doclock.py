"""One lock per Bokeh document, for notebook kernels that receive comm messages on several threads.

JupyterLab 4.4+ sends comm messages to kernel subshells (ipykernel 7; by default one
subshell, so one thread, per comm target), and the first messages of a target can still
arrive on the kernel's main thread while that subshell is being created. Panel and
jupyter_bokeh apply a browser message to the document on whichever thread received it,
and Panel's handler holds and releases the document around it, which dispatches or drops
the events other threads have queued but not yet sent. A run's updates are flushed on the
loop of the thread that handled the Run click, which need not be the thread that handles
the view's later messages. Two threads changing one document at once lose patches: the
browser logs "reference ... isn't known" and plots never appear (seen in the JupyterLab
browser test on a loaded machine: the click reached the main thread, later messages a
subshell). So the dispatcher's flushes and both libraries' message handlers take the
document's lock: one thread at a time changes a document, whichever threads they are. With JupyterLab's
``commsOverSubshells`` off (``make lab`` and environment.yml set it so) every message arrives on the main thread
and the lock is never contended; it stays for a JupyterLab where the setting is on. The handlers are wrapped in
:mod:`app.base._upstream_panel`, the one module that touches Panel's, Bokeh's and jupyter_bokeh's private parts.

Panel's notebook view also sends every change the kernel made back to the kernel: its comm manager forwards
the browser document's changes without the ``sync`` check a served page's session makes, so each value the
kernel sets comes back once. Most echoes match the kernel's value and change nothing, but a value set twice in
quick succession comes back as the older one after the newer, and reads as the user's. :func:`drop_echoes`
names the properties whose echoes Panel's handler drops before it applies a message (the live view's layer
player and epoch picker); needed with subshells on or off.
"""
from __future__ import annotations

import contextlib
import threading
import weakref
from collections import deque

from ._upstream_panel import wrap_comm_handlers

__all__ = ["doc_lock", "locked", "install", "drop_echoes"]

_LOCKS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_GUARD = threading.Lock()
_RECEIVING = threading.local()          # depth > 0 while this thread applies a browser's message
_ECHOING: "weakref.WeakValueDictionary" = weakref.WeakValueDictionary()     # model id -> its _Sent


def doc_lock(doc) -> threading.RLock:
    """The (re-entrant) lock of ``doc``, made on first use."""
    with _GUARD:
        lock = _LOCKS.get(doc)
        if lock is None:
            lock = _LOCKS[doc] = threading.RLock()
        return lock


@contextlib.contextmanager
def locked(doc):
    """Hold ``doc``'s lock (nothing when ``doc`` is None)."""
    if doc is None:
        yield
        return
    with doc_lock(doc):
        yield


class _Sent:
    """The values the kernel set on one model property whose echoes have not come back yet, oldest first."""

    def __init__(self, attr: str):
        self.attr = attr
        self.values: deque = deque(maxlen=64)
        self.unsent: deque = deque(maxlen=64)    # values the change callback recorded, not yet seen in a patch

    def record(self, attr, old, new) -> None:
        if not getattr(_RECEIVING, "depth", 0):          # set by the kernel, not by a browser's message
            self.values.append(new)
            self.unsent.append(new)

    def record_sent(self, value) -> None:
        """A value in a patch Panel sends. One :meth:`record` saw is recorded already (recorded twice, an echo
        would leave a copy behind, and the user's later pick of that value would read as an echo). Any other is
        recorded now: a change made while a browser's message was applied runs no change callback, and it may
        leave with the next push of another thread, after the message (the JupyterLab test on a loaded machine:
        follow best layer unticked, the layout at fc2, when only pushes made while applying a message counted)."""
        if value in self.unsent:
            while self.unsent.popleft() != value:        # older values combined away in the patch: never sent
                pass
        else:
            self.values.append(value)

    def is_echo(self, value) -> bool:
        """Whether ``value`` from the browser is the kernel's own coming back (it and the older ones are done);
        any other value is the user's, after which nothing the kernel set is still expected back."""
        if value in self.values:
            for done in (self.values, self.unsent):      # it was sent, and so were the older ones
                while value in done and done.popleft() != value:
                    pass
            return True
        self.values.clear()
        self.unsent.clear()
        return False


def drop_echoes(model, attr: str) -> None:
    """Drop the echoes of the kernel's own changes of ``model.<attr>`` from Panel's notebook messages (see the
    module's docstring); the browser's other changes of it still arrive. Idempotent. A served page's session
    sends no echoes, so there the record is kept but nothing is ever dropped."""
    with _GUARD:
        if model.id in _ECHOING:
            return
        sent = _Sent(attr)
        model.on_change(attr, sent.record)       # the model holds the record, and the record the values
        _ECHOING[model.id] = sent


def _record_sent(msg) -> None:
    """Record the values of :func:`drop_echoes`' properties in a patch Panel sends to a notebook's browser: the
    kernel's changes made while Panel holds the document for a browser's message (a click that starts a run)
    reach the browser so, and no change callback of the model runs for them."""
    content = getattr(msg, "content", None)
    events = content.get("events") if isinstance(content, dict) and _ECHOING else None
    for event in events or ():
        if isinstance(event, dict) and event.get("kind") == "ModelChanged":
            sent = _ECHOING.get((event.get("model") or {}).get("id"))
            if sent is not None and event.get("attr") == sent.attr:
                sent.record_sent(event.get("new"))


def _without_echoes(patch) -> None:
    """Remove from a browser's patch the changes that echo the kernel's own (:func:`drop_echoes`)."""
    content = getattr(patch, "content", None)
    events = content.get("events") if isinstance(content, dict) else None
    if not events or not _ECHOING:
        return
    kept = []
    for event in events:
        sent = _ECHOING.get((event.get("model") or {}).get("id")) if event.get("kind") == "ModelChanged" else None
        if sent is None or event.get("attr") != sent.attr or not sent.is_echo(event.get("new")):
            kept.append(event)
    events[:] = kept


@contextlib.contextmanager
def _receiving(doc):
    with locked(doc):
        _RECEIVING.depth = getattr(_RECEIVING, "depth", 0) + 1
        try:
            yield
        finally:
            _RECEIVING.depth -= 1


def install() -> None:
    """Make Panel's and jupyter_bokeh's comm handlers take the document's lock and mark the thread while they
    apply a message, and Panel's drop the echoes :func:`drop_echoes` names (idempotent).

    Handlers bind when a view is displayed, so this runs before any view is: when the app's
    dispatcher module is imported and in :func:`app.extension`.
    """
    with _GUARD:
        wrap_comm_handlers(_receiving, _without_echoes, _record_sent)
