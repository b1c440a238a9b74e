"""Opening another run in a served view hands what the last run's views freed back to the system."""
from __future__ import annotations

import gc
import inspect
import sys
import weakref

from app.base import freeze_imports, release_memory


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


def test_freeze_imports_takes_what_lives_now_out_of_the_walks_and_still_collects_what_comes_later():
    old = _Node()
    old.me = old
    frozen_before = gc.get_freeze_count()      # the suite freezes its imports (tests/conftest.py)
    try:
        moved = freeze_imports()
        assert moved == gc.get_freeze_count() and moved > 10_000      # this process's imports, at least
        assert gc.is_tracked(old)
        assert all(o is not old for g in range(3) for o in gc.get_objects(generation=g))   # walked by none
        node = _Node()                  # made after the freeze: a cycle the next collection returns
        node.me = node
        ref = weakref.ref(node)
        del node
        release_memory()
        assert ref() is None
    finally:
        gc.unfreeze()                   # the other tests' process as it was: frozen again if it was
        if frozen_before:
            gc.freeze()


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
