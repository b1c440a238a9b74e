"""Redraws waiting to run on a session's thread: the newest one per key, a few per turn.

A HoloViews redraw costs 0.1-0.5 s on a busy CPU. Run all at once, the redraws one batch of events
asks for would keep the session's event loop busy for seconds, and a click on Stop would wait for
them. :class:`RedrawQueue` runs them in turns: a turn stops after a time budget and asks the view's
:class:`~app.base._dispatch.DocDispatcher` for the next one, so the loop reads the browser's messages in
between. The turns of every view of the process share the loop by :data:`~app.base._share.LOOP_SHARE`: with
several sessions drawing, and above all while a new page loads, a turn waits its turn.
"""
from __future__ import annotations

import time
from typing import Callable

from ._dispatch import DocDispatcher
from ._share import LOOP_SHARE

__all__ = ["RedrawQueue"]

_TURN_BUDGET = 0.15
"""Seconds of redraws per turn in a session (without one, a turn runs every redraw)."""


class RedrawQueue:
    """Pending redraws of one view, keyed so that only the newest data is drawn.

    Parameters
    ----------
    dispatcher : callable
        Returns the view's current dispatcher (a view gets a new one when it is bound to a document);
        a turn is queued on it as the item :meth:`turn`.
    after_turn : callable
        Called at the end of every turn (the view refreshes its status line).
    """

    def __init__(self, dispatcher: Callable[[], DocDispatcher], after_turn: Callable[[], None]):
        self._dispatcher = dispatcher
        self._after_turn = after_turn
        self._tasks: dict[str, Callable[[], None]] = {}
        self._requested = False          # a turn is queued on the dispatcher

    def schedule(self, key: str, task: Callable[[], None]) -> None:
        """Queue ``task``; it replaces a waiting one with the same key (and goes to the back)."""
        self._tasks.pop(key, None)
        self._tasks[key] = task

    def __len__(self) -> int:
        """The number of redraws waiting."""
        return len(self._tasks)

    def discard(self, key: str) -> None:
        """Drop the waiting redraw ``key``, if any (it is being done now)."""
        self._tasks.pop(key, None)

    def clear(self) -> None:
        """Drop every waiting redraw (a turn already requested still comes, and finds nothing)."""
        self._tasks.clear()

    def reset(self) -> None:
        """Drop every waiting redraw and forget the requested turn (a new run in the view)."""
        self._tasks.clear()
        self._requested = False

    def request(self, gap: float, *, again: bool = False) -> None:
        """Ask the dispatcher for a turn ``gap`` seconds after its current flush, if redraws wait and
        none is requested. ``again``: the requested turn arrived but was not taken: ask anew."""
        if again:
            self._requested = False
        if self._tasks and not self._requested:
            self._requested = True
            dispatcher = self._dispatcher()
            if dispatcher.has_session:
                LOOP_SHARE.want(self)
            dispatcher.push(self.turn, urgent=True, gap=gap)

    def turn(self) -> None:
        """Run waiting redraws, oldest first, for at most the turn's budget; then request the next turn.

        In a session, a turn that comes before :data:`LOOP_SHARE` lets one start asks for a later one instead."""
        self._requested = False
        dispatcher = self._dispatcher()
        budget = _TURN_BUDGET if dispatcher.has_session else None
        if budget is not None and self._tasks:
            wait = LOOP_SHARE.delay(self)
            if wait > 0:
                self.request(gap=wait)
                return
            LOOP_SHARE.begin(self, dispatcher.doc)   # ended by the dispatcher's flush, once the patches are sent
        start = time.monotonic()
        while self._tasks:
            key = next(iter(self._tasks))
            task = self._tasks.pop(key)
            task()
            if budget is not None and time.monotonic() - start > budget:
                break
        self.request(gap=0.1)
        self._after_turn()
        if budget is not None and not dispatcher.flushing:
            LOOP_SHARE.end()
