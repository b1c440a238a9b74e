"""How much of the server's event loop the redraws of all sessions may take together, and a page's priority.

Every session of ``panel serve`` runs its callbacks on one thread, the server's event loop, which also
builds a new visitor's page, sends it, serves its script files and answers every click. A live view's
redraws (:class:`~app.base.RedrawQueue`) run in turns; each session paced only its own turns, so four
sessions drawing their runs kept the loop busy all the time, and a fifth visitor's page waited behind them
(73 s for a usable Run button on 2 cores, ``benchmarks/late_page.py``).

:data:`LOOP_SHARE` paces the turns of every view of the process together: after a turn that took ``d``
seconds (its redraws and the document patches they send), no view starts another before ``d * (1 - s) / s``
seconds have passed, ``s`` being the redraws' share of the loop: :data:`SHARE` normally, :data:`LOADING_SHARE`
while a new page is loading (from its session's start until the browser says it has rendered it, see
:meth:`LoopShare.page_loading`). A waiting view's redraws coalesce meanwhile (only the newest data is drawn),
so a busy server draws less often, not later.
"""
from __future__ import annotations

import threading
import time

__all__ = ["LoopShare", "LOOP_SHARE", "SHARE", "LOADING_SHARE", "LOADING_MAX_S", "page_loading"]

SHARE = 0.5
"""The redraws' share of the event loop (all views together) while no page is loading."""
LOADING_SHARE = 0.1
"""Their share while a new page is loading: the running views still move, a little."""
LOADING_MAX_S = 30.0
"""A page that has not said it is rendered after this many seconds no longer counts: a tab closed early, or a GET
that opens no websocket (a health check), whose session Bokeh discards only after 15-30 s of disuse."""


class LoopShare:
    """The pace of the redraw turns of every view of one process (thread-safe); ``clock``: seconds (tests pass
    their own).

    A turn calls :meth:`delay` first (and waits that long if it is not 0), :meth:`begin` as it starts, and
    :meth:`end` once its document changes have been sent (the dispatcher's flush ends).
    """

    def __init__(self, share: float = SHARE, loading_share: float = LOADING_SHARE, clock=time.monotonic):
        self.share, self.loading_share = share, loading_share
        self._clock = clock
        self._guard = threading.Lock()
        self._next = 0.0                        # no turn starts before this (on ``clock``)
        self._open: float | None = None         # start of the turn in progress
        self._loading: dict[object, float] = {}  # page -> when it stops counting

    def delay(self) -> float:
        """Seconds before a turn may start (0: now)."""
        with self._guard:
            return max(0.0, self._next - self._clock())

    def begin(self) -> None:
        """A turn starts now."""
        with self._guard:
            self._open = self._clock()

    def end(self) -> None:
        """The turn in progress (if any) has ended: the next may start after its cost times the pause ratio."""
        with self._guard:
            if self._open is None:
                return
            now = self._clock()
            share = self._share_locked(now)
            self._next = now + (now - self._open) * (1 - share) / share
            self._open = None

    def page_loading(self, page, max_s: float = LOADING_MAX_S) -> None:
        """``page`` (any hashable: a session's document) is loading: the redraws take :attr:`loading_share`
        until :meth:`page_loaded` (at most ``max_s`` seconds)."""
        with self._guard:
            self._loading[page] = self._clock() + max_s

    def page_loaded(self, page) -> None:
        """``page`` has loaded (or gone); idempotent."""
        with self._guard:
            self._loading.pop(page, None)

    @property
    def loading(self) -> int:
        """How many pages are loading now."""
        with self._guard:
            return self._count_locked(self._clock())

    def _count_locked(self, now: float) -> int:
        for page in [p for p, until in self._loading.items() if until <= now]:
            del self._loading[page]
        return len(self._loading)

    def _share_locked(self, now: float) -> float:
        return self.loading_share if self._count_locked(now) else self.share


LOOP_SHARE = LoopShare()
"""The process's one :class:`LoopShare` (the event loop is one per process)."""


def page_loading(doc) -> None:
    """Give the page of the served session ``doc`` priority over every view's redraws until the browser has
    rendered it (Panel's ``onload``) or the session ends; nothing outside a served session."""
    if doc is None or getattr(doc, "session_context", None) is None:
        return
    import panel as pn

    LOOP_SHARE.page_loading(doc)
    pn.state.onload(lambda: LOOP_SHARE.page_loaded(doc))
    doc.on_session_destroyed(lambda _ctx: LOOP_SHARE.page_loaded(doc))
