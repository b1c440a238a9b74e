"""Opening another run in a served view hands what the last run's views freed back to the system."""
from __future__ import annotations

import gc
import inspect
import sys
import weakref

from app.base import release_memory


class _Node:
    pass


def test_release_memory_collects_cycles_and_trims_the_heap_on_linux():
    gc.disable()                        # only release_memory may collect the cycle
    try:
        node = _Node()
        node.me = node
        ref = weakref.ref(node)
        del node
        assert ref() is not None        # a cycle outlives its last name until the collector runs
        returned = release_memory()
        assert ref() is None
        assert returned == sys.platform.startswith("linux")    # glibc's malloc_trim there
    finally:
        gc.enable()


def test_a_served_views_reset_releases_memory_on_the_next_tick():
    from bokeh.document import Document

    from app.live.view import LiveView

    view, doc = LiveView(), Document()
    view.bind_document(doc)
    before = {id(c) for c in doc.session_callbacks}
    view.reset()
    added = [c for c in doc.session_callbacks if id(c) not in before]
    assert [inspect.unwrap(c.callback) for c in added] == [release_memory]    # Bokeh wraps it


def test_a_view_outside_a_session_schedules_nothing():
    from app.live.view import LiveView

    view = LiveView()
    view.reset()                        # no document: nothing to schedule, nothing raised
    assert view._dispatcher.doc is None
