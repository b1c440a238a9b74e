"""lab.runs.worker: the cancel token and the thread that streams a long call's progress."""
from __future__ import annotations

import threading

import pytest

import lab
from lab.runs import CancelToken
from lab.runs.worker import Worker


def _collect(gen):
    events = []
    while True:
        try:
            events.append(next(gen))
        except StopIteration as stop:
            return events, stop.value


def test_one_cancelled_exception_for_the_whole_library():
    import lab.features
    import lab.finetune
    import lab.runs

    assert lab.features.Cancelled is lab.finetune.Cancelled is lab.runs.Cancelled is lab.Cancelled
    token = CancelToken()
    token.check()                                        # not cancelled: nothing happens
    token.cancel()
    with pytest.raises(lab.Cancelled, match="cancelled by the user"):
        token.check()


def test_stream_yields_every_progress_in_order_and_returns_the_value():
    worker = Worker(CancelToken(), run_id="r")
    between = []

    def fn(progress, should_stop):
        for i in range(1, 6):
            progress(i, 5)
        return "done"

    try:
        events, value = _collect(worker.stream(fn, stage="train", seed=3, epoch=1, coalesce=False,
                                               between=lambda: between.append(1) or []))
    finally:
        worker.close()
    assert value == "done"
    assert [(e.kind, e.stage, e.done, e.total, e.seed, e.epoch, e.run_id) for e in events] == [
        ("progress", "train", i, 5, 3, 1, "r") for i in range(1, 6)]
    assert len(between) == 5                             # called after every Progress


def test_stream_reraises_the_call_s_error_in_the_consumer_s_thread():
    worker = Worker(CancelToken())

    def fn(progress, should_stop):
        progress(1, None)
        raise ValueError("bad batch")

    try:
        with pytest.raises(ValueError, match="bad batch"):
            _collect(worker.stream(fn, stage="extract", seed=0, epoch=0))
    finally:
        worker.close()


def test_closing_the_stream_stops_the_call_and_waits_for_it():
    worker = Worker(CancelToken())
    stopped, finished = threading.Event(), threading.Event()

    def fn(progress, should_stop):
        try:
            for i in range(10**6):
                if should_stop():
                    stopped.set()
                    raise lab.Cancelled("stopped")
                progress(i + 1, None)
                threading.Event().wait(0.001)
        finally:
            finished.set()

    gen = worker.stream(fn, stage="extract", seed=0, epoch=0)
    try:
        assert next(gen).done >= 1
        gen.close()                                      # the consumer walks away
        assert stopped.is_set() and finished.is_set()    # joined before close() returned
    finally:
        worker.close()


def test_a_cancelled_token_stops_the_call():
    token = CancelToken()
    worker = Worker(token)

    def fn(progress, should_stop):
        progress(1, 2)
        token.cancel()
        if should_stop():
            raise lab.Cancelled("stopped")
        return "not reached"

    try:
        with pytest.raises(lab.Cancelled):
            _collect(worker.stream(fn, stage="train", seed=0, epoch=1, coalesce=False))
    finally:
        worker.close()
