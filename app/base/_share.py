"""How much of the server's event loop the redraws of all sessions may take together, and a page's priority.

Every session of ``panel serve`` runs its callbacks on one thread, the server's event loop, which also
builds a new visitor's page, sends it, serves its script files and answers every click. A live view's
redraws (:class:`~app.base.RedrawQueue`) run in turns; each session paced only its own turns, so four
sessions drawing their runs kept the loop busy all the time, and a fifth visitor's page waited behind them
(73 s for a usable Run button on 2 cores, ``benchmarks/late_page.py``).

:data:`LOOP_SHARE` paces the turns of every view of the process together: after a turn that took ``d``
seconds (its redraws and the document patches they send), no view starts another before ``d * (1 - s) / s``
seconds have passed, ``s`` being the redraws' share of the loop: :data:`SHARE` while another view wants it too,
:data:`LOADING_SHARE` while a new page is loading (from its session's start until the browser says it has
rendered it, see :meth:`LoopShare.page_loading`), and all of it (no pause) while one view draws and no page
loads: a pause nobody else uses is lost time (a stored run opened alone drew at half speed). A waiting view's
redraws coalesce meanwhile (only the newest data is drawn), so a busy server draws less often, not later.
"""
from __future__ import annotations

import threading
import time

__all__ = ["LoopShare", "LOOP_SHARE", "SHARE", "LOADING_SHARE", "LOADING_MAX_S", "page_loading"]

SHARE = 0.5
"""The redraws' share of the event loop (all views together) while no page is loading."""
LOADING_SHARE = 0.1
"""Their share while a new page is loading: the running views still move, a little."""
CONTENDED_S = 2.0
"""A view that started or asked for a turn this many seconds ago still wants the loop: while another does, the
turns take :data:`SHARE` of it."""
LOADING_MAX_S = 30.0
"""A page that has not said it is rendered after this many seconds no longer counts (a tab closed early)."""
CONNECT_S = 10.0
"""A page whose browser has not opened its websocket this many seconds after the page was made does not count until
it does: a GET that never connects (a health check, a test waiting for the server to answer) made every view draw
at a tenth of its pace for 30 s."""


class LoopShare:
    """The pace of the redraw turns of every view of one process (thread-safe); ``clock``: seconds (tests pass
    their own).

    A turn calls :meth:`delay` first (and waits that long if it is not 0), :meth:`begin` as it starts, and
    :meth:`end` once its document changes have been sent (the dispatcher's flush ends); a view asking for a turn
    calls :meth:`want`. All but :meth:`end` name the view (``who``: any object, kept by its id), so that a view
    drawing alone is not paced.
    """

    def __init__(self, share: float = SHARE, loading_share: float = LOADING_SHARE, clock=time.monotonic):
        self.share, self.loading_share = share, loading_share
        self._clock = clock
        self._guard = threading.Lock()
        self._next = 0.0                        # no turn starts before this (on ``clock``)
        self._open: float | None = None         # start of the turn in progress
        # by id(): a view or page of a closed session is not kept alive here
        self._drawing: int | None = None        # the view whose turn is in progress
        self._drawing_page: int | None = None   # and its page
        self._wanting: dict[int, float] = {}    # view -> when it last started or asked for a turn
        self._loading: dict[object, tuple] = {}  # page -> (when it stops counting, when made, connected())

    def want(self, who: object = None) -> None:
        """View ``who`` has asked for a turn: the loop is shared from now on."""
        with self._guard:
            self._wanting[id(who)] = self._clock()

    def delay(self, who: object = None) -> float:
        """Seconds before a turn of view ``who`` may start (0: now)."""
        with self._guard:
            now = self._clock()
            self._wanting[id(who)] = now
            return max(0.0, self._next - now)

    def begin(self, who: object = None, page: object = None) -> None:
        """A turn of view ``who`` (on ``page``: its own page loading does not slow it) starts now."""
        with self._guard:
            self._open = self._wanting[id(who)] = self._clock()
            self._drawing, self._drawing_page = id(who), id(page)

    def end(self) -> None:
        """The turn in progress (if any) has ended: the next may start after its cost times the pause ratio."""
        with self._guard:
            if self._open is None:
                return
            now = self._clock()
            share = self._share_locked(now)
            self._next = now + (now - self._open) * (1 - share) / share
            self._open = None

    def page_loading(self, page, max_s: float = LOADING_MAX_S, connected=None) -> None:
        """``page`` (any hashable: a session's document) is loading: the redraws of the other pages take
        :attr:`loading_share` until :meth:`page_loaded`, at most ``max_s`` seconds; after :data:`CONNECT_S`
        seconds only while ``connected()`` (None: always) says its browser has connected."""
        with self._guard:
            now = self._clock()
            self._loading[page] = (now + max_s, now, connected)

    def page_loaded(self, page) -> None:
        """``page`` has loaded (or gone); idempotent."""
        with self._guard:
            self._loading.pop(page, None)

    @property
    def loading(self) -> int:
        """How many pages are loading now."""
        with self._guard:
            return self._count_locked(self._clock())

    def _count_locked(self, now: float, besides: int | None = None) -> int:
        count = 0
        for page, (until, made, connected) in list(self._loading.items()):
            if until <= now:
                del self._loading[page]
            elif id(page) != besides and (connected is None or now - made <= CONNECT_S or connected()):
                count += 1              # one that connects late (a busy server) counts again
        return count

    def _share_locked(self, now: float) -> float:
        if self._count_locked(now, besides=self._drawing_page):
            return self.loading_share
        for who in [w for w, at in self._wanting.items() if at < now - CONTENDED_S]:
            del self._wanting[who]
        return self.share if any(w != self._drawing for w in self._wanting) else 1.0


LOOP_SHARE = LoopShare()
"""The process's one :class:`LoopShare` (the event loop is one per process)."""


def page_loading(doc) -> None:
    """Give the page of the served session ``doc`` priority over every view's redraws until the browser has
    rendered it (Panel's ``onload``) or the session ends; nothing outside a served session."""
    if doc is None or getattr(doc, "session_context", None) is None:
        return
    import panel as pn

    def connected() -> bool:
        session = doc.session_context.session
        return session is not None and session.connection_count > 0

    LOOP_SHARE.page_loading(doc, connected=connected)
    pn.state.onload(lambda: LOOP_SHARE.page_loaded(doc))
    doc.on_session_destroyed(lambda _ctx: LOOP_SHARE.page_loaded(doc))
