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
document's lock: one thread at a time changes a document, whichever threads they are.
"""
from __future__ import annotations

import contextlib
import functools
import threading
import weakref

__all__ = ["doc_lock", "locked", "install"]

_LOCKS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_GUARD = threading.Lock()
_MARK = "_layerscope_doc_locked"


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


def _panel_doc(ref: str):
    from panel.io.state import state

    view = state._views.get(ref)
    return view[2] if view else None


def _lock_panel() -> None:
    from panel.viewable import MimeRenderMixin

    original = MimeRenderMixin._on_msg
    if getattr(original, _MARK, False):
        return

    @functools.wraps(original)
    def _on_msg(self, ref, manager, msg):
        with locked(_panel_doc(ref)):
            return original(self, ref, manager, msg)

    setattr(_on_msg, _MARK, True)
    MimeRenderMixin._on_msg = _on_msg


def _lock_jupyter_bokeh() -> None:
    try:
        from jupyter_bokeh.widgets import BokehModel
    except ImportError:          # the ipywidgets route is optional
        return
    original = BokehModel._handle_msg
    if getattr(original, _MARK, False):
        return

    @functools.wraps(original)
    def _handle_msg(self, msg):
        model = getattr(self, "_model", None)
        with locked(getattr(model, "document", None)):
            return original(self, msg)

    setattr(_handle_msg, _MARK, True)
    BokehModel._handle_msg = _handle_msg


def install() -> None:
    """Make Panel's and jupyter_bokeh's comm handlers take the document's lock (idempotent).

    Handlers bind when a view is displayed, so this runs before any view is: when the app's
    dispatcher module is imported and in :func:`app.extension`.
    """
    with _GUARD:
        _lock_panel()
        _lock_jupyter_bokeh()
