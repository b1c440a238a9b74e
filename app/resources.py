"""Heavy things shared by every browser session of one server process.

Everything else in the app is per session. What lives here is explicit,
thread-safe and cheap to hold:

- :class:`DeviceLocks` — one lock per compute device, so two runs (from two
  sessions) never train on the same device at once; the second one queues.
- :class:`DatasetCache` — datasets loaded for class lists and hover thumbnails
  (a small LRU; loading glyphs or digits once per process, not per session).
- :func:`warm_up` — compile umap's numba kernels once, in the background, when
  the server starts (``app/app_hooks.py``), so the first UMAP of the first run
  is not delayed by JIT compilation.

:func:`shared` returns the process-wide :class:`Resources` instance.
"""
from __future__ import annotations

import collections
import logging
import threading
from contextlib import contextmanager

__all__ = ["DeviceLocks", "DatasetCache", "Resources", "shared", "warm_up"]

_log = logging.getLogger(__name__)


class DeviceLocks:
    """One :class:`threading.Lock` per device name ("cpu", "cuda:0", ...)."""

    def __init__(self):
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._holders: dict[str, str] = {}

    def _lock(self, device: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(device, threading.Lock())

    def holder(self, device: str) -> str | None:
        """A label of the run holding ``device`` (None when free)."""
        with self._guard:
            return self._holders.get(device)

    @contextmanager
    def hold(self, device: str, label: str = "a run", *, should_stop=None, on_wait=None, poll: float = 0.2):
        """Hold ``device`` for the block; wait (polling ``should_stop``) while another run has it.

        Yields True when the device was acquired, False when ``should_stop()``
        became true while waiting (the block should then do nothing).
        ``on_wait(holder_label)`` is called once when the caller has to queue.
        """
        lock = self._lock(device)
        acquired = lock.acquire(blocking=False)
        if not acquired:
            if on_wait is not None:
                on_wait(self.holder(device) or "another run")
            while not acquired:
                if should_stop is not None and should_stop():
                    break
                acquired = lock.acquire(timeout=poll)
        if acquired:
            with self._guard:
                self._holders[device] = label
        try:
            yield acquired
        finally:
            if acquired:
                with self._guard:
                    self._holders.pop(device, None)
                lock.release()


class DatasetCache:
    """A small thread-safe LRU of loaded datasets keyed by their spec."""

    def __init__(self, maxsize: int = 4):
        self._maxsize = maxsize
        self._guard = threading.Lock()
        self._items: collections.OrderedDict[str, object] = collections.OrderedDict()
        self._loading: dict[str, threading.Lock] = {}

    def get(self, spec: str):
        """``lab.data.load(spec)``, loaded once per process; errors propagate (ValueError etc.)."""
        with self._guard:
            if spec in self._items:
                self._items.move_to_end(spec)
                return self._items[spec]
            loading = self._loading.setdefault(spec, threading.Lock())
        with loading:   # one loader per spec; others wait for it
            with self._guard:
                if spec in self._items:
                    return self._items[spec]
            import lab.data

            dataset = lab.data.load(spec)
            with self._guard:
                self._items[spec] = dataset
                while len(self._items) > self._maxsize:
                    self._items.popitem(last=False)
                self._loading.pop(spec, None)
            return dataset

    def clear(self):
        with self._guard:
            self._items.clear()


class Resources:
    """The process-wide shared resources (see the module docstring)."""

    def __init__(self):
        self.devices = DeviceLocks()
        self.datasets = DatasetCache()
        self._warm_guard = threading.Lock()
        self._warm_started = False

    def warm_up(self, background: bool = True) -> None:
        """Start umap's JIT warm-up once per process (``lab.projection.warm_up`` runs it in its own thread)."""
        with self._warm_guard:
            if self._warm_started and background:
                return
            self._warm_started = True
        try:
            import lab.projection as projection
        except ImportError as exc:  # a missing optional piece only costs speed later
            _log.warning("umap warm-up skipped: %s", exc)
            return
        fn = getattr(projection, "warm_up", None)
        if fn is not None:
            fn(wait=not background)

    @property
    def warm_status(self) -> str:
        """"done", "running", "not started" (for the status line)."""
        if not self._warm_started:
            return "not started"
        try:
            import lab.projection as projection
        except ImportError:
            return "unavailable"
        return "done" if getattr(projection, "is_warm", lambda: True)() else "running"


_SHARED = Resources()


def shared() -> Resources:
    """The one :class:`Resources` of this server process."""
    return _SHARED


def warm_up(background: bool = True) -> None:
    """Start the process-wide umap warm-up (idempotent)."""
    _SHARED.warm_up(background=background)
