"""The run engine's UMAP worker: one fit at a time in a background thread (part of :mod:`lab.projection`)."""
from __future__ import annotations

import contextlib
import threading
from concurrent.futures import FIRST_COMPLETED, Future
from concurrent.futures import wait as _wait
from dataclasses import dataclass

import numpy as np
import torch

from lab.projection.layouts import _as_tensor, knn_graph, pca_layout, umap_layout

def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else "(no message)"


@contextlib.contextmanager
def _current_cuda_device(device: torch.device | None):
    """``device`` as the current CUDA device of this thread (torch's and, when it is loaded, CuPy's, which
    cuML allocates on); a no-op for any other device. A new thread's current device is 0 whatever the run's."""
    if device is None or device.type != "cuda":
        yield
        return
    index = device.index if device.index is not None else torch.cuda.current_device()
    with contextlib.ExitStack() as stack:
        stack.enter_context(torch.cuda.device(index))
        try:
            import cupy
        except ImportError:
            cupy = None
        if cupy is not None:
            stack.enter_context(cupy.cuda.Device(index))
        yield


@dataclass
class ProjectionResult:
    """One finished layout, as the engine emits it."""

    seed: int
    epoch: int
    layer: str
    method: str
    coords: np.ndarray          # (n, 2) float32


class Projector:
    """Background UMAP fits for the run engine, one at a time: newest epoch first, and within an
    epoch the focused layer (the current best) first, then its neighbours outwards.

    ``submit`` queues a fit; ``poll`` returns finished layouts without blocking (the first
    call starts the worker); ``drain`` waits for everything queued. When a newer epoch of the same seed is
    submitted, fits of older epochs that have not started are dropped (the app
    shows the latest epoch; on a CPU the budget is one epoch's layers at a time).
    Each fit starts from the latest finished UMAP of the same layer, else from the
    nearest layer's UMAP at that epoch, else from the PCA layout, so that layouts stay
    comparable. A fit uses at most ``fit_points`` points (:func:`umap_layout`).

    cuML fits run with ``device`` as the current CUDA device (the worker thread's own is device 0).
    The first cuML failure switches this projector to umap-learn on the CPU: that fit is redone
    there and :meth:`take_messages` says so, once; a fit that fails otherwise is skipped and
    described in ``errors`` (and by :meth:`take_messages`).

    Parameters
    ----------
    layers : the projected taps, input -> output (the order "neighbours" refers to)
    device : where the features live; a CUDA device uses cuML when it imports
        (:func:`lab.projection.budget.umap_backend`)
    """

    def __init__(self, *, seed: int = 0, n_neighbors: int = 15, n_epochs: int | None = 200,
                 fit_points: int | None = None, layers=None, device=None):
        from lab.projection.budget import umap_backend

        self.seed = seed
        self.n_neighbors = n_neighbors
        self.n_epochs = n_epochs
        self.fit_points = fit_points
        self.device = None if device is None else torch.device(device)
        if self.device is not None and self.device.type == "cuda" and self.device.index is None \
                and torch.cuda.is_available():
            self.device = torch.device("cuda", torch.cuda.current_device())   # the caller's, not the worker's
        self.backend = umap_backend(self.device)
        self._order = {name: i for i, name in enumerate(layers or [])}
        self._focus: dict[int, int] = {}                         # seed -> index of the focused layer
        self._queue: list[tuple[tuple[int, int, str], Future, tuple]] = []     # not started
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._pending: list[tuple[tuple[int, int, str], Future]] = []
        self._latest: dict[tuple[int, str], np.ndarray] = {}     # (seed, layer) -> last UMAP coords
        self._by_epoch: dict[tuple[int, int, str], np.ndarray] = {}
        self._lock = threading.Lock()
        self.dropped = 0
        self.errors: list[str] = []
        self.fallback: str | None = None                         # why cuML was given up, once it was
        self._messages: list[str] = []                           # not yet taken by take_messages()
        self.started: list[tuple[int, int, str]] = []            # (seed, epoch, layer) in the order fitted

    def focus(self, seed: int, layer: str) -> None:
        """Fit ``layer`` of ``seed`` first from now on, then the layers nearest to it."""
        if layer in self._order:
            with self._cond:
                self._focus[seed] = self._order[layer]

    def submit(self, seed: int, epoch: int, layer: str, X, *, labels=None, previous_layer: str | None = None,
               pca: np.ndarray | None = None, knn: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        """Queue a UMAP of ``X`` (N, d) for (seed, epoch, layer); ``labels`` (N,) stratify the fitted sample.

        The kNN graph of the fitted points is computed here, on ``X``'s device (``knn`` given: it is the
        graph of the fitted points).
        """
        from lab.projection.budget import fit_subset

        # Drop queued fits of older epochs of this seed that have not started.
        keep = []
        for key, fut in self._pending:
            if key[0] == seed and key[1] < epoch and fut.cancel():
                self.dropped += 1
                continue
            keep.append((key, fut))
        self._pending = keep
        from lab.features import to_numpy

        X = _as_tensor(X)
        labels = None if labels is None else to_numpy(labels)
        n = X.shape[0]
        if self.backend == "umap-learn" and knn is None:
            fit = None
            if self.fit_points is not None and n > self.fit_points:
                fit = fit_subset(np.zeros(n, np.int64) if labels is None else labels, self.fit_points,
                                 seed=self.seed + seed)
            X_fit = X if fit is None else X[torch.from_numpy(fit).to(X.device)]
            knn = knn_graph(X_fit, min(self.n_neighbors, X_fit.shape[0] - 1))
        fut: Future = Future()
        with self._cond:
            self._queue.append(((seed, epoch, layer), fut, (X.cpu(), knn, labels, previous_layer, pca)))
            self._cond.notify()
        self._pending.append(((seed, epoch, layer), fut))

    def _start(self) -> None:
        """Start the worker (at the first poll, so that what is submitted together is ordered together)."""
        with self._cond:
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._work, name="lab-umap", daemon=True)
                self._thread.start()

    def _priority(self, key: tuple[int, int, str]) -> tuple:
        seed, epoch, layer = key
        index = self._order.get(layer, len(self._order))
        focus = self._focus.get(seed)
        return (-epoch, abs(index - focus) if focus is not None else index, index)

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                job = min(self._queue, key=lambda j: self._priority(j[0]))
                self._queue.remove(job)
            key, fut, args = job
            if not fut.set_running_or_notify_cancel():
                continue
            self.started.append(key)
            try:
                fut.set_result(self._fit(*key, *args))
            except BaseException as exc:  # noqa: BLE001 - handed to poll(), which records it
                fut.set_exception(exc)

    def _fit(self, seed, epoch, layer, X, knn, labels, previous_layer, pca) -> ProjectionResult:
        with self._lock:
            init = self._latest.get((seed, layer))
            if init is None:
                init = self._nearest_done(seed, epoch, layer, previous_layer)
        if init is None:
            init = pca
        k = knn[0].shape[1] if knn is not None else self.n_neighbors
        options = dict(knn=knn, init=init, seed=self.seed + seed, n_neighbors=k, n_epochs=self.n_epochs,
                       labels=labels, fit_points=self.fit_points)
        if self.backend == "cuml":
            try:
                with _current_cuda_device(self.device):
                    coords = umap_layout(X, backend="cuml", **options)
            except Exception as exc:  # noqa: BLE001 - any cuML failure: the CPU fallback draws the layout
                self.backend = "umap-learn"
                self.fallback = (f"cuML's UMAP failed on {self.device} ({type(exc).__name__}: {_first_line(exc)}); "
                                 f"UMAP layouts use umap-learn on the CPU from now on")
                self._tell(self.fallback)
                coords = umap_layout(X, backend="umap-learn", **options)
        else:
            coords = umap_layout(X, backend="umap-learn", **options)
        with self._lock:
            self._latest[(seed, layer)] = coords
            self._by_epoch[(seed, epoch, layer)] = coords
        return ProjectionResult(seed, epoch, layer, "umap", coords)

    def _nearest_done(self, seed, epoch, layer, previous_layer) -> np.ndarray | None:
        """The finished UMAP at ``epoch`` of the layer nearest to ``layer`` (``previous_layer`` when unordered)."""
        if layer not in self._order:
            return self._by_epoch.get((seed, epoch, previous_layer)) if previous_layer is not None else None
        done = [(abs(self._order[name] - self._order[layer]), self._order[name], name)
                for (s, e, name) in self._by_epoch if s == seed and e == epoch and name in self._order]
        return self._by_epoch[(seed, epoch, min(done)[2])] if done else None

    def poll(self) -> list[ProjectionResult]:
        """Finished layouts since the last call (in submission order); never blocks.

        A fit that raised is skipped and described in ``errors``.
        """
        self._start()
        done, keep = [], []
        for key, fut in self._pending:
            if fut.done():
                if fut.cancelled():
                    continue
                exc = fut.exception()
                if exc is not None:
                    # A layout is a picture, not a result: record the failure, keep the run going.
                    self.errors.append(f"UMAP of {key}: {type(exc).__name__}: {exc}")
                    seed, epoch, layer = key
                    self._tell(f"no UMAP layout of layer {layer!r} (seed {seed}, epoch {epoch}): "
                               f"{type(exc).__name__}: {_first_line(exc)}")
                else:
                    done.append(fut.result())
            else:
                keep.append((key, fut))
        self._pending = keep
        return done

    def _tell(self, message: str) -> None:
        with self._lock:
            self._messages.append(message)

    def take_messages(self) -> list[str]:
        """What the user should hear since the last call (cuML given up for umap-learn, fits that failed),
        one line each; the engine turns them into warnings."""
        with self._lock:
            out, self._messages = self._messages, []
        return out

    def wait(self, timeout: float | None = None) -> list[ProjectionResult]:
        """Wait up to ``timeout`` seconds for a queued fit to finish; then :meth:`poll`."""
        self._start()
        futures = [fut for _, fut in self._pending]
        if futures:
            _wait(futures, timeout=timeout, return_when=FIRST_COMPLETED)
        return self.poll()

    def drain(self, should_stop=None, timeout: float = 0.25) -> list[ProjectionResult]:
        """Wait for every queued fit (checking ``should_stop()`` between waits); return them all."""
        out = []
        while self._pending:
            if should_stop is not None and should_stop():
                break
            out.extend(self.wait(timeout))
        return out

    @property
    def pending(self) -> int:
        return len(self._pending)

    def close(self) -> None:
        """Drop queued fits and stop the worker (a running fit finishes in the background)."""
        for _, fut in self._pending:
            fut.cancel()
        self._pending = []
        with self._cond:
            self._closed = True
            self._queue.clear()
            self._cond.notify_all()
