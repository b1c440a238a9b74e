"""A thread that reads a stored run as another process writes it and hands its events to a live view.

:class:`Following` polls :class:`lab.runs.follow.RunFollower` every ``every`` seconds and pushes what is new
through ``LiveView.push`` (thread-safe), until the run ends or :meth:`Following.stop` is called; the view then
draws it exactly as a run it started (the same events). A store that cannot be read for a moment (a disk
hiccup, a run being deleted) is said once in the view's status line, and the thread tries again.
"""
from __future__ import annotations

import logging
import threading
import weakref
from functools import partial
from typing import Callable

from lab import events as ev

__all__ = ["Following", "follow_in"]

_log = logging.getLogger(__name__)


class Following:
    """Follow ``run_id`` of ``store`` into ``push`` (a LiveView's) from a daemon thread.

    Raises KeyError (from the store) when the run is not there, before any thread starts.
    """

    def __init__(self, run_id: str, store, push: Callable, *, every: float = 1.0,
                 on_started: Callable[[ev.RunStarted], None] | None = None,
                 on_message: Callable[[str], None] | None = None):
        from lab.runs.follow import RunFollower

        self.run_id = run_id
        self._follower = RunFollower(run_id, store=store)
        self._push, self._every = push, float(every)
        self._on_started, self._on_message = on_started, on_message
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name=f"layerscope-follow-{run_id}")

    @property
    def active(self) -> bool:
        """The thread is still following (the run has not ended and nobody stopped it)."""
        return self._thread.is_alive() and not self._stop.is_set()

    def start(self) -> "Following":
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop following (the events sent so far stay on show)."""
        self._stop.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the thread ends (tests); True when it has."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _loop(self) -> None:
        failing = False
        while not self._stop.is_set():
            try:
                events = self._follower.poll()
            except Exception as exc:            # noqa: BLE001 - a moment's unreadable store: say so, try again
                if not failing and self._on_message is not None:
                    self._push(partial(self._on_message, f"Cannot read run {self.run_id} right now ({exc}); "
                                                         f"trying again."))
                failing = True
                self._stop.wait(max(self._every, 2.0))
                continue
            failing = False
            for event in events:
                if self._stop.is_set():
                    return
                if event.kind == ev.RunStarted.kind and self._on_started is not None:
                    try:
                        self._on_started(event)
                    except Exception:           # noqa: BLE001 - thumbnails are a nicety
                        _log.exception("following %s: on_started failed", self.run_id)
                self._push(event)
            if self._follower.ended:
                return
            self._stop.wait(self._every)


def follow_in(view, run_id: str, store=None, *, every: float = 1.0) -> Following:
    """Have ``view`` (a :class:`~app.live.LiveView`) show ``run_id`` of ``store`` (None: the view's store, else
    the default store) and follow it: reset the view and route its events through the session's document. The
    :class:`Following` returned is not started: the view keeps it before it starts, so that it names the run it
    follows (``LiveView.followed``) from the first event on, even one applied on the thread (no session). Stopped
    when the session ends. Raises KeyError for a run the store does not have."""
    import panel as pn

    import lab.store

    store = store if store is not None else (view.store or lab.store.RunStore())
    following = Following(run_id, store, view.push, every=every, on_started=partial(_thumbnails_for, view, store),
                          on_message=partial(view.set_message, status="running"))
    view.store = store
    view.reset(f"Reading run {run_id} from the store…", status="starting")
    doc = pn.state.curdoc
    view.bind_document(doc)
    if doc is not None and doc.session_context is not None and doc not in _STOPPED_ON_CLOSE.get(view, ()):
        # one callback per view and document, not per run followed: each would keep its run's follower (the
        # rows it read) alive until the session ends; it stops whichever run the view follows then
        pn.state.on_session_destroyed(lambda _ctx, v=weakref.ref(view): v() is not None and v().stop_following())
        _STOPPED_ON_CLOSE.setdefault(view, weakref.WeakSet()).add(doc)
    return following


_STOPPED_ON_CLOSE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
"""view -> the documents whose end stops what it follows (:func:`follow_in` registers that once per document)."""


def _thumbnails_for(view, store, event: ev.RunStarted) -> None:
    """Hover thumbnails of a followed run's images (the follow thread): those the run kept (a monitored loop's
    own tensors, which lab cannot load again), else from its dataset where it is one lab loads."""
    from lab.config import RunConfig
    from lab.monitor import is_monitored

    from app.base import array_thumbnails

    from ._thumbnails import load_thumbnails

    if is_monitored(event.config):
        images = store.load(event.run_id).thumbnails()      # None: the loop's inputs were not images
        if images is not None:
            view.push(partial(view.set_thumbnails, array_thumbnails(images)))
        return
    load_thumbnails(view, RunConfig.from_dict(event.config))
