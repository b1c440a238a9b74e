"""One cell of a study, run on a Dask worker: the task :func:`run_cell` and the events it sends the client.

The worker side of :mod:`lab.study.runner`, which submits it.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
import threading
import time
from typing import Callable, Iterator

from lab import events
from lab.archive import pack_bytes
from lab.study.records import tag_run

__all__ = ["run_cell", "TERMINAL"]

TERMINAL = (events.RunFinished.kind, events.RunFailed.kind, events.RunCancelled.kind)
"""The kinds of the engine events a run ends with."""
_PROGRESS_EVERY = 0.5        # seconds between progress messages of one run (keeps the topic light)
_STOP_POLL = 0.5             # seconds a running cell waits on the study's stop event per check


def _emitter(topic: str | None) -> Callable[[events.CellEvent], None]:
    if topic is None:
        return lambda event: None
    try:
        from distributed import get_worker
        worker = get_worker()
    except (ImportError, ValueError):
        return lambda event: None
    # Dask's event log carries plain data: the client reads it back with events.study_event
    return lambda event: worker.log_event(topic, event.to_dict())


def _cell_event(ev, cell: int) -> events.CellEvent | None:
    """The small, serialisable study event of an engine event for the client (None: not sent)."""
    kind = ev.kind
    if kind == events.RunStarted.kind:
        return events.CellStarted(cell, run_id=ev.run_id, layers=len(ev.layers), pid=os.getpid())
    if kind == events.Progress.kind:
        return events.CellProgress(cell, stage=ev.stage, done=int(ev.done), total=int(ev.total), epoch=ev.epoch,
                                   seed=ev.seed)
    if kind == events.EpochFinished.kind:
        return events.CellEpochFinished(cell, epoch=ev.epoch, seed=ev.seed, heldout_accuracy=ev.heldout_accuracy)
    if kind in TERMINAL:
        return events.CellRunEnded(cell, run_id=ev.run_id, status=ev.status, message=getattr(ev, "message", None))
    return None


@contextlib.contextmanager
def _stop_signal(name: str | None, token) -> Iterator[None]:
    """Cancel ``token`` once the study's Dask Event ``name`` is set (watched by a thread of this worker).

    Cancelling a future does not stop its task once it runs (Dask cannot interrupt a thread): on a
    remote scheduler a cancelled study would keep training. The client sets this event first, and
    the run ends at its next batch as "cancelled".
    """
    if name is None:
        yield
        return
    from distributed import Event, get_client

    # the worker's client is found from the task's thread only, so fetch it here for the watcher
    event = Event(name, client=get_client())
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            try:
                if event.wait(timeout=_STOP_POLL):
                    token.cancel()
                    return
            except Exception:             # noqa: BLE001 - the scheduler is gone: the worker is closing too
                return

    threading.Thread(target=watch, name="lab-study-stop", daemon=True).start()
    try:
        yield
    finally:
        done.set()


def run_cell(config: dict, study: str, cell: dict, index: int, threads: int, topic: str | None = None,
             stop: str | None = None) -> dict:
    """Run one cell on this process (a Dask worker) and return its run as an archive.

    ``stop`` names the study's Dask Event whose setting cancels the run (see :func:`_stop_signal`).

    Returns
    -------
    dict: run_id, status (the :class:`lab.RunStatus` it ended with, as its string), message, archive (bytes)
    """
    import torch
    from threadpoolctl import threadpool_limits

    import lab
    from lab.config import RunConfig
    from lab.runs import CancelToken
    from lab.store import RunStore

    # Dask's nanny pins OpenMP/BLAS to one thread; torch keeps its own count, so set it here.
    torch.set_num_threads(max(1, int(threads)))
    emit = _emitter(topic)
    last = 0.0
    token = CancelToken()
    with tempfile.TemporaryDirectory(prefix="lab-study-") as tmp, threadpool_limits(limits=max(1, int(threads))), \
            _stop_signal(stop, token):
        store = RunStore(tmp)
        final = None
        for ev in lab.run(RunConfig.from_dict(config), store=store, cancel=token):
            event = _cell_event(ev, index)
            now = time.monotonic()
            progress = isinstance(event, events.CellProgress)
            if event is not None and (not progress or now - last >= _PROGRESS_EVERY):
                last = now if progress else last
                emit(event)
            if ev.kind in TERMINAL:
                final = ev
        tag_run(final.run_id, study, cell, store=store)
        return {"run_id": final.run_id, "status": final.status.value, "message": getattr(final, "message", None),
                "archive": pack_bytes([final.run_id], store=store)}
