"""2-D layouts of the unseen classes per layer: PCA at once, UMAP in the background.

PCA layouts of every epoch are computed, stored and emitted as soon as a layer is measured
(aligned with the same layer's previous layout). UMAP layouts are fitted in a background
thread (:class:`lab.projection.Projector`, on at most ``projection_fit_points`` images, the
rest placed by umap's ``transform``) and arrive whenever they are ready, the current best layer
first; fits of an older epoch that have not started when a newer epoch is evaluated are
dropped, and the last epoch's are waited for at the end of each seed.

The embeddings behind the layouts are stored at every evaluation; once a later evaluation of
the seed is on disk, an earlier one is removed unless ``keep_embeddings`` pins it
(:meth:`Projections.superseded`), so a run keeps its latest evaluation's embeddings even when
it is stopped early, and its folder barely grows with its epochs.
"""
from __future__ import annotations

import contextlib
import logging
import threading
import warnings
from typing import Callable, Generator

import numpy as np

from lab.events import Event, ProjectionReady
from lab.runs.compute import few_threads
from lab.runs.context import RunContext

__all__ = ["Projections", "ProjectionWarning", "notices_to"]

_log = logging.getLogger(__name__)
_listener = threading.local()        # .callback: where this thread's runs also send their notices


@contextlib.contextmanager
def notices_to(callback: Callable[[str], None]):
    """Inside the block, the layouts' notices (:class:`ProjectionWarning` texts) of runs driven from this
    thread also go to ``callback`` (the app shows them to the session whose run it is). Per thread, not
    through ``warnings``' process-wide display, which would mix concurrent sessions' runs."""
    previous = getattr(_listener, "callback", None)
    _listener.callback = callback
    try:
        yield
    finally:
        _listener.callback = previous


class ProjectionWarning(UserWarning):
    """A UMAP layout could not be drawn as asked (cuML failed and umap-learn took over, or a fit failed)."""


class Projections:
    """The layouts of one run (and the embeddings behind them)."""

    def __init__(self, ctx: RunContext):
        self.ctx = ctx
        self.projector = None                                   # lab.projection.Projector, started lazily
        self._previous_pca: dict[tuple[int, str], np.ndarray] = {}
        self._stored: dict[int, list[int]] = {}                 # seed -> epochs whose embeddings are on disk

    def _labels(self) -> tuple[np.ndarray, list[str]]:
        from lab.features import to_numpy

        return to_numpy(self.ctx.unseen_labels), list(self.ctx.data.split.unseen)

    def layer(self, seed: int, epoch: int, layer: str, X, previous_layer: str | None) -> ProjectionReady:
        """Store ``X`` (N, d) as float16 embeddings, lay it out by PCA (stored, returned as an event)
        and queue its UMAP fit when the run asks for one."""
        import torch

        from lab.projection import pca_layout

        ctx = self.ctx
        labels, class_names = self._labels()
        with ctx.recorder.timed("projection"):
            stored = self._stored.setdefault(seed, [])
            if epoch not in stored:
                stored.append(epoch)
            ctx.recorder.embeddings(seed, epoch, layer, X.detach().to("cpu", torch.float16), labels,
                                    ctx.unseen_indices)
            with few_threads(X):
                pca = pca_layout(X, reference=self._previous_pca.get((seed, layer)))      # (N, 2)
            self._previous_pca[(seed, layer)] = pca
            ctx.recorder.projection(seed, epoch, layer, "pca", pca, labels, ctx.unseen_indices,
                                    class_names=class_names)
            if ctx.cfg.projection == "umap" and X.shape[0] >= 4:
                self._submit_umap(seed, epoch, layer, X, previous_layer, pca)
        return ProjectionReady(ctx.run_id, seed=seed, epoch=epoch, layer=layer, method="pca", coords=pca,
                               labels=labels, indices=ctx.unseen_indices, class_names=class_names)

    def superseded(self, seed: int, epoch: int) -> list[tuple[int, int]]:
        """The (seed, epoch) pairs whose embeddings go once ``epoch``'s are stored: the seed's earlier
        evaluations that ``keep_embeddings`` does not pin."""
        stored = self._stored.get(seed, [])
        if epoch not in stored:
            return []
        gone = [e for e in stored if e < epoch and not self.ctx.cfg.keeps_embeddings(e)]
        self._stored[seed] = [e for e in stored if e not in gone]
        return [(seed, e) for e in gone]

    def focus(self, seed: int, layer: str) -> None:
        """Lay out ``layer`` (the current best) and then its neighbours first."""
        if self.projector is not None:
            self.projector.focus(seed, layer)

    def _submit_umap(self, seed, epoch, layer, X, previous_layer, pca) -> None:
        from lab.projection import Projector, warm_up

        ctx = self.ctx
        if self.projector is None:
            warm_up()
            self.projector = Projector(seed=0, fit_points=ctx.cfg.projection_fit_points, layers=ctx.proj_layers,
                                       device=X.device)
        self.projector.submit(seed, epoch, layer, X, labels=self._labels()[0], previous_layer=previous_layer,
                              pca=pca)

    def poll(self) -> list[ProjectionReady]:
        """The UMAP layouts that finished since the last call (stored, as events)."""
        if self.projector is None:
            return []
        events = [self._event(res) for res in self.projector.poll()]
        self._warn()
        return events

    def _warn(self) -> None:
        """The projector's news for the user (cuML replaced by umap-learn, failed fits): a warning each,
        from the engine's thread, where the command line and notebooks show them."""
        for message in self.projector.take_messages():
            _log.info("run %s: %s", self.ctx.run_id, message)
            text = f"run {self.ctx.run_id}: {message}"
            callback = getattr(_listener, "callback", None)
            if callback is not None:
                callback(text)
            warnings.warn(text, ProjectionWarning, stacklevel=2)

    def finish(self) -> Generator[Event, None, None]:
        """Wait for the queued UMAP fits (the last epoch's), emitting each as it lands."""
        if self.projector is None:
            return
        while self.projector.pending:
            self.ctx.check()
            for res in self.projector.wait(timeout=0.25):
                yield self._event(res)
            self._warn()

    def _event(self, res) -> ProjectionReady:
        ctx = self.ctx
        labels, class_names = self._labels()
        ctx.recorder.projection(res.seed, res.epoch, res.layer, res.method, res.coords, labels,
                                ctx.unseen_indices, class_names=class_names)
        return ProjectionReady(ctx.run_id, seed=res.seed, epoch=res.epoch, layer=res.layer, method=res.method,
                               coords=res.coords, labels=labels, indices=ctx.unseen_indices,
                               class_names=class_names)

    def close(self) -> None:
        if self.projector is not None:
            self.projector.close()
