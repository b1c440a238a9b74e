"""The Studies tab's figure reader: marks coalesce, the last read follows close, a failed read is not fatal."""
from __future__ import annotations

import threading

from app.studies._figure_reader import FigureReader


def test_marks_made_during_a_read_coalesce_and_close_reads_once_more():
    release, reading = threading.Event(), threading.Event()
    reads, pushed = [], []

    def read():
        reads.append(len(reads))
        reading.set()
        release.wait(10)
        return reads[-1]

    reader = FigureReader(read, pushed.append)
    reader.mark()
    assert reading.wait(10)                 # the first read runs, held
    for _ in range(5):
        reader.mark()                       # five cells land meanwhile
    release.set()
    reader.close()
    # the held read, one read for the five marks, and close's last read (or the five marks' read was close's)
    assert len(reads) in (2, 3) and pushed == reads and not reader._thread.is_alive()


def test_a_failed_read_leaves_the_reader_running():
    calls, pushed, failed = [], [], threading.Event()

    def read():
        calls.append(1)
        if len(calls) == 1:
            failed.set()
            raise OSError("a run is being written")
        return "figures"

    reader = FigureReader(read, pushed.append)
    reader.mark()
    assert failed.wait(10)
    reader.close()
    assert pushed == ["figures"] and len(calls) == 2


def test_reads_are_spaced_by_the_minimum_interval_but_close_reads_at_once():
    import time

    stamps, pushed = [], []
    reader = FigureReader(lambda: stamps.append(time.monotonic()) or len(stamps), pushed.append, min_interval=30)
    reader.mark()
    while not pushed:
        time.sleep(0.01)
    reader.mark()                       # within the interval: waits for it, or for close
    time.sleep(0.2)
    assert len(stamps) == 1
    reader.close(timeout=10)            # does not wait the 30 s out
    assert len(stamps) == 2 and not reader._thread.is_alive()
