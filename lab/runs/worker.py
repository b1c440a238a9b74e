"""Cancellation and the background worker that lets the engine stream progress of long calls.

A training epoch or a feature extraction is one blocking call (``FineTuner.train_epoch``,
``lab.features.extract``) that reports each batch through a ``progress`` callback. The
engine is a generator, and a callback cannot yield, so :class:`Worker` runs the call in a
persistent thread and turns its callbacks into :class:`~lab.events.Progress` events in the
generator's thread. Closing the generator stops the call within one batch.
"""
from __future__ import annotations

import contextlib
import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as _wait
from typing import Any, Callable, Generator, Iterable

from lab._cancel import Cancelled
from lab.device import device_scope
from lab.events import Event, Progress

__all__ = ["CancelToken", "Worker"]


class CancelToken:
    """Cooperative cancellation for :func:`lab.run`: ``token.cancel()`` from any thread.

    The engine checks ``token.cancelled`` before every training and extraction
    batch and between layers, then ends the run with a ``RunCancelled`` event.
    """

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        """Ask the run to stop (idempotent, thread-safe)."""
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def check(self) -> None:
        """Raise :class:`lab.Cancelled` when the token is cancelled."""
        if self._event.is_set():
            raise Cancelled("cancelled by the user")

    def __repr__(self) -> str:
        return f"CancelToken(cancelled={self.cancelled})"


# fn(progress, should_stop) -> result; progress(done, total) with total None when unknown
Task = Callable[[Callable[[int, "int | None"], None], Callable[[], bool]], Any]


class Worker:
    """One persistent thread for the engine's long calls.

    One thread for the whole run, not one per call: a new thread per extraction would get
    fresh malloc arenas and grow the process's peak memory.
    """

    def __init__(self, cancel: CancelToken, run_id: str = "", device=None):
        self.cancel = cancel
        self.run_id = run_id
        self.device = device               # the run's device: its GPU is made current in the thread
        self._pool: ThreadPoolExecutor | None = None

    def stream(self, fn: Task, *, stage: str, seed: int | None, epoch: int | None, coalesce: bool = True,
               between: Callable[[], Iterable[Event]] | None = None) -> Generator[Event, None, Any]:
        """Run ``fn(progress, should_stop)`` in the worker thread, yielding its progress as events.

        Parameters
        ----------
        fn : the call; ``should_stop()`` is true once the token is cancelled or the generator closed
        stage, seed, epoch : copied into every :class:`Progress`
        coalesce : skip stale progress when the consumer is slower than the batches (extraction);
            False yields one Progress per report (training: one per batch, as documented)
        between : called after every Progress; the events it returns are yielded too

        Returns (as the generator's value) what ``fn`` returned; re-raises what it raised.

        The error is handed over without a reference cycle (``box`` is emptied before it is raised):
        its traceback holds ``fn``'s frames, and so the model, the optimizer and the activations,
        which would otherwise wait for the cycle collector after the run ends.
        """
        q: queue.SimpleQueue = queue.SimpleQueue()
        stop = threading.Event()
        box: dict = {}

        def should_stop() -> bool:
            return stop.is_set() or self.cancel.cancelled

        def progress(done, total) -> None:
            q.put((done, total))

        def target() -> None:
            try:
                with device_scope(self.device) if self.device is not None else contextlib.nullcontext():
                    box["value"] = fn(progress, should_stop)
            except BaseException as exc:       # noqa: BLE001 - re-raised in the generator's thread
                box["error"] = exc
            finally:
                q.put(None)

        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lab-worker")
        job = self._pool.submit(target)
        try:
            while True:
                item = q.get()
                if item is None:
                    break
                while coalesce:
                    try:
                        nxt = q.get_nowait()
                    except queue.Empty:
                        break
                    if nxt is None:
                        q.put(None)
                        break
                    item = nxt
                done, total = item
                yield Progress(self.run_id, stage, int(done), int(total if total is not None else done),
                               seed=seed, epoch=epoch)
                if between is not None:
                    yield from between()
        except BaseException:
            stop.set()
            _wait([job])
            box.clear()
            raise
        _wait([job])
        error, value = box.pop("error", None), box.pop("value", None)
        if error is None:
            return value
        try:
            raise error
        finally:
            del error              # this frame is in the traceback: no frame -> error -> frame cycle

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
