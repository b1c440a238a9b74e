"""The server's event loop is shared by every session: the live views' redraws take a share of it, a smaller one while
a new page loads, and the watch list's look at the store is shared by the sessions (benchmarks/late_page.py)."""
from __future__ import annotations

import pytest
from bokeh.document import Document

import lab.store
from app.base import _dispatch, _redraw, _share
from app.base._share import LoopShare


class _Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class _ServedDoc(Document):
    """A Bokeh document posing as a server session's: it keeps the callbacks scheduled on it, with their delay."""

    def __init__(self):
        super().__init__()
        self.scheduled: list[tuple] = []

    @property
    def session_context(self):
        return object()

    def add_timeout_callback(self, cb, ms):
        self.scheduled.append((cb, ms))

    def run_scheduled(self) -> list[int]:
        """Run what is scheduled now; the delays it was scheduled with."""
        due, self.scheduled = self.scheduled, []
        for cb, _ in due:
            cb()
        return [ms for _, ms in due]


def test_the_redraws_take_their_share_of_the_loop_and_less_while_a_page_loads():
    clock = _Clock()
    share = LoopShare(share=0.5, loading_share=0.1, clock=clock)
    assert share.delay("b") == 0                         # view b wants the loop too
    assert share.delay("a") == 0
    share.begin("a")
    clock.now += 0.2
    share.end()
    assert share.delay("a") == pytest.approx(0.2)       # as long again: half the loop
    clock.now += 0.2
    assert share.delay("a") == 0
    share.end()                                          # no turn open: nothing changes
    assert share.delay("a") == 0
    share.page_loading("page", max_s=30)
    assert share.loading == 1
    share.begin("a")
    clock.now += 0.2
    share.end()
    assert share.delay("a") == pytest.approx(1.8)       # nine times as long: a tenth of the loop
    share.page_loaded("page")
    share.page_loaded("page")                            # idempotent
    assert share.loading == 0
    share.page_loading("closed early", max_s=30)
    clock.now += 31
    assert share.loading == 0                            # a page that never said it loaded stops counting


def test_a_view_drawing_alone_is_not_paced():
    clock = _Clock()
    share = LoopShare(share=0.5, loading_share=0.1, clock=clock)
    share.begin("a")
    clock.now += 0.2
    share.end()
    assert share.delay("a") == 0                         # nobody else wants the loop: no pause
    share.delay("b")                                     # another view asks for a turn
    share.begin("a")
    clock.now += 0.2
    share.end()
    assert share.delay("a") == pytest.approx(0.2)       # now the two share it
    clock.now += 3                                       # b has not asked for over 2 s: it is gone
    share.begin("a")
    clock.now += 0.2
    share.end()
    assert share.delay("a") == 0
    share.page_loading("page", max_s=30)                 # a page loading has its priority all the same
    share.begin("a")
    clock.now += 0.2
    share.end()
    assert share.delay("a") == pytest.approx(1.8)


def test_a_view_waits_while_another_views_turn_has_its_share(monkeypatch):
    clock = _Clock()
    shared = LoopShare(share=0.5, loading_share=0.1, clock=clock)
    monkeypatch.setattr(_redraw, "LOOP_SHARE", shared)
    monkeypatch.setattr(_dispatch, "LOOP_SHARE", shared)
    drawn = []

    def view(name):
        doc = _ServedDoc()
        dispatcher = _dispatch.DocDispatcher(lambda items: [item() for item in items], doc=doc)
        queue = _redraw.RedrawQueue(lambda: dispatcher, after_turn=lambda: None)
        return doc, queue

    def redraw(name):
        drawn.append(name)
        clock.now += 0.3                                 # what the redraw costs

    doc_a, a = view("a")
    doc_b, b = view("b")
    a.schedule("curves", lambda: redraw("a"))
    b.schedule("curves", lambda: redraw("b"))
    a.request(gap=0)
    b.request(gap=0)
    doc_a.run_scheduled()
    assert drawn == ["a"]
    assert doc_b.run_scheduled() == [0] and drawn == ["a"]      # b's turn came too soon: it asks again, later
    (_, later), = doc_b.scheduled
    assert later == pytest.approx(300, abs=1)                    # when a's turn has had its half
    clock.now += 0.3
    doc_b.run_scheduled()
    assert drawn == ["a", "b"]


def test_a_turn_outside_a_session_is_not_paced(monkeypatch):
    clock = _Clock()
    shared = LoopShare(clock=clock)
    monkeypatch.setattr(_redraw, "LOOP_SHARE", shared)
    shared.begin()
    clock.now += 10
    shared.end()
    queue = _redraw.RedrawQueue(lambda: _dispatch.DocDispatcher(lambda items: None, doc=None, loop=None),
                                after_turn=lambda: None)
    drawn = []
    queue.schedule("x", lambda: drawn.append(1))
    queue.turn()
    assert drawn == [1]                                  # a test, a script: drawn at once


def test_page_loading_needs_a_served_session():
    _share.page_loading(None)
    _share.page_loading(Document())                      # a notebook's document: no session, no priority
    assert _share.LOOP_SHARE.loading == 0


def test_the_sessions_share_one_look_at_the_running_runs(tmp_path):
    from app.live.watch_control import running_runs

    class Store(lab.store.RunStore):          # a real store that counts its looks
        looks = 0

        def running(self):
            Store.looks += 1
            return super().running()

    first, second = Store(tmp_path / "runs"), Store(tmp_path / "runs")    # two sessions, one folder
    table = running_runs(first, max_age=3600)
    assert table.empty and Store.looks == 1
    assert running_runs(second, max_age=3600) is table and Store.looks == 1   # read a moment ago: it will do
    assert running_runs(second, max_age=0) is not table and Store.looks == 2  # ↻ and a test look afresh
    assert running_runs(Store(tmp_path / "other"), max_age=3600).empty and Store.looks == 3   # another store


def test_a_page_whose_browser_never_connects_stops_counting_and_a_view_is_not_slowed_by_its_own_page():
    clock = _Clock()
    share = LoopShare(share=0.5, loading_share=0.1, clock=clock)
    link = {"up": False}
    share.page_loading("health check", max_s=30, connected=lambda: False)
    share.page_loading("visitor", max_s=30, connected=lambda: link["up"])
    assert share.loading == 2
    clock.now += _share.CONNECT_S + 0.1
    link["up"] = True                                    # the visitor's browser opened its websocket
    assert share.loading == 1                            # the GET that never connected no longer counts
    share.begin("a", page="visitor")                     # the visitor's own view, drawing as its page loads
    clock.now += 0.2
    share.end()
    assert share.delay("a") == 0                         # its own page loading does not slow it
    share.begin("b", page="another")                     # another page's view makes way for the visitor's page
    clock.now += 0.2
    share.end()
    assert share.delay("b") == pytest.approx(1.8)
    clock.now += 30
    assert share.loading == 0                            # connected but never rendered: gone after max_s
    share.page_loading("late", max_s=30, connected=lambda: link["late"])
    link["late"] = False
    clock.now += _share.CONNECT_S + 1
    assert share.loading == 0
    link["late"] = True                                  # a busy server's visitor connects late: it counts again
    assert share.loading == 1
