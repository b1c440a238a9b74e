"""Recording one run: the store's writer, its I/O thread, the row buffers and the timings.

The engine talks to one :class:`Recorder` and never to the writer itself. ``store=False``
gets a :class:`NullRecorder`, which keeps the timings and writes nothing. The timings live in one
:class:`lab.runs.timings.Timings` (``Recorder.clock``); each closed epoch writes its table to
``meta.json`` (``"timings"``).

Rows of an epoch are buffered and written when the epoch closes (:meth:`Recorder.end_epoch`),
array files (embeddings, layouts) go through a single I/O thread off the critical path,
and every write of an epoch is waited for before the epoch's training row closes it, so a
completed epoch on disk is always whole.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import secrets
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterable, Mapping

from lab.runs.timings import TIMED, Timings

__all__ = ["Recorder", "NullRecorder", "open_recorder", "TIMED"]


def open_recorder(store, config) -> "Recorder":
    """A :class:`Recorder` on a new run in ``store`` (None: ``RunStore()``), or a NullRecorder for False."""
    if store is False:
        return NullRecorder()
    from lab.store import RunStore

    store = store if store is not None else RunStore()
    if not hasattr(store, "create"):
        raise ValueError(f"store must be a lab.RunStore, None or False. Got {type(store).__name__} instead.")
    return Recorder(store.create(config, name=config.name), root=getattr(store, "root", None))


class Recorder:
    """Writes one run through a :class:`lab.store.RunWriter`.

    Attributes
    ----------
    run_id : str
    path : Path or None (the run's folder)
    root : Path or None (the store's root, to resolve ``run:`` checkpoints there)
    clock : :class:`lab.runs.timings.Timings`, the run's one clock
    timings : dict, inclusive seconds per :data:`TIMED` key (``clock.seconds``)
    """

    def __init__(self, writer, root: Path | None = None):
        self.writer = writer
        self.run_id: str = writer.run_id
        self.path: Path | None = writer.path
        self.root = root
        self.clock = Timings()
        self._metrics: list[dict] = []
        self._utilization: list[dict] = []
        self._class_means: dict[tuple[int, int], list[dict]] = {}
        self._io: ThreadPoolExecutor | None = None
        self._pending: list[Future] = []

    # -- timings ---------------------------------------------------------------------------------
    @property
    def timings(self) -> dict[str, float]:
        return self.clock.seconds

    def timed(self, key: str) -> contextlib.AbstractContextManager:
        """Add the seconds spent in the block to ``key`` (:meth:`lab.runs.timings.Timings.timed`)."""
        return self.clock.timed(key)

    def since(self, before: Mapping[str, float]) -> dict[str, float]:
        """Inclusive seconds per key spent since the snapshot ``before`` (a copy of :attr:`timings`)."""
        return self.clock.since(before)

    # -- the run's meta ------------------------------------------------------------------------------
    def update_meta(self, **fields: Any) -> None:
        """Merge JSON-able ``fields`` into the run's meta (written now)."""
        self.writer.update_meta(**fields)

    def heartbeat(self) -> None:
        """Tell readers on other hosts the run is alive (:meth:`lab.store.RunWriter.heartbeat`)."""
        self.writer.heartbeat()

    # -- tables ----------------------------------------------------------------------------------------
    def metrics(self, rows: list[dict]) -> None:
        """Buffer metric rows ``{seed, epoch, layer, split, metric, value}`` until the epoch ends."""
        self._metrics.extend(rows)

    def utilization(self, rows: list[dict]) -> None:
        """Buffer utilization rows ``{seed, epoch, layer, absolute, relative}`` until the epoch ends."""
        self._utilization.extend(rows)

    def class_means(self, seed: int, epoch: int, layer: str, split: str, classes: list[str], gram) -> None:
        """Buffer one layer's class-mean Gram (K, K) until the epoch ends (one file per evaluation)."""
        self._class_means.setdefault((int(seed), int(epoch)), []).append(
            {"layer": layer, "split": split, "classes": list(classes), "gram": gram})

    def contribution(self, rows: list[dict]) -> None:
        """Append contribution rows ``{seed, layer, metric, value}`` now."""
        with self.timed("store"):
            self.writer.append_contribution(rows)

    def end_epoch(self, training_row: dict, *, drop_embeddings: Iterable[tuple[int, int]] = ()) -> dict:
        """Close epoch (seed, epoch): wait for its array files, write its rows, then the training row;
        then remove the embeddings of the (seed, epoch) pairs in ``drop_embeddings`` (superseded by this
        epoch's, which are on disk by then). Returns the epoch's timings row, also written to meta.json."""
        with self.timed("store"):
            self._sync()
            self._flush()
            self.writer.append_training(training_row)
            for seed, epoch in drop_embeddings:
                self.writer.delete_embeddings(seed, epoch)
        row = self.clock.end_epoch(training_row["seed"], training_row["epoch"])
        self.writer.update_meta(timings=self.clock.table())      # also the heartbeat
        return row

    # -- arrays ----------------------------------------------------------------------------------------
    # Array writes are queued, not timed: the caller's own timing (projection) holds the queueing,
    # and the writes themselves are waited for, and timed, when the epoch ends.
    def embeddings(self, seed: int, epoch: int, layer: str, X, labels, indices) -> None:
        """Store one layer's unseen embeddings (n, d) on the I/O thread."""
        self._submit(self.writer.save_embeddings, seed, epoch, layer, X, labels, indices)

    def projection(self, seed: int, epoch: int, layer: str, method: str, coords, labels, indices,
                   class_names: list[str]) -> None:
        """Store one 2-D layout (n, 2) on the I/O thread."""
        self._submit(self.writer.save_projection, seed, epoch, layer, method, coords, labels, indices,
                     class_names=class_names)

    def images(self, seed: int, epoch: int, layers: list[str], labels, samples: Mapping[str, Mapping]) -> None:
        """Store one evaluation's per-image record (votes, margins, clusters per layer) on the I/O thread."""
        self._submit(self.writer.save_image_record, seed, epoch, list(layers), labels, samples)

    def thumbnails(self, images) -> None:
        """Store the unseen images' thumbnails, uint8 (n, h, w, C), on the I/O thread."""
        self._submit(self.writer.save_thumbnails, images)

    def weights(self, seed: int, state_dict: Mapping[str, Any]) -> None:
        """Store a seed's fine-tuned weights (safetensors) now."""
        with self.timed("store"):
            self.writer.save_weights(seed, state_dict)

    # -- the end -----------------------------------------------------------------------------------
    def close(self, status: str, message: str | None = None, summary: dict | None = None,
              traceback: str | None = None) -> None:
        """Flush what the current epoch has so far and mark the run; never raises."""
        # Each step on its own: rows that cannot be written (a full disk) must not keep the run's status
        # from being recorded, and the store must not mask the run's own outcome.
        try:
            for step in (self._sync, self._flush):
                try:
                    step()
                except Exception:      # noqa: BLE001 - a failed write must not hide the outcome
                    pass
            with contextlib.suppress(Exception):
                table = self.clock.table()
                if isinstance((summary or {}).get("timings"), dict):
                    table["run"] = summary["timings"]          # one reading of the clock for both
                extra = {"traceback": traceback} if traceback else {}
                self.writer.update_meta(timings=table, **extra)
            with contextlib.suppress(Exception):
                self.writer.finish(status, message=message, summary=summary or None)
        finally:
            if self._io is not None:
                self._io.shutdown(wait=True)
                self._io = None

    # -- internals -------------------------------------------------------------------------------------
    def _submit(self, fn, *args, **kwargs) -> None:
        if self._io is None:
            self._io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lab-store")
        self._pending.append(self._io.submit(fn, *args, **kwargs))

    def _sync(self) -> None:
        pending, self._pending = self._pending, []
        for fut in pending:
            fut.result()               # re-raises a failed write

    def _flush(self) -> None:
        if self._metrics:
            rows, self._metrics = self._metrics, []
            self.writer.append_metrics(rows)
        if self._utilization:
            rows, self._utilization = self._utilization, []
            self.writer.append_utilization(rows)
        if self._class_means:
            evaluations, self._class_means = self._class_means, {}
            for (seed, epoch), entries in evaluations.items():
                self.writer.save_class_means(seed, epoch, entries)


class NullRecorder(Recorder):
    """The recorder of ``store=False``: same interface, keeps the timings, writes nothing."""

    def __init__(self) -> None:
        stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        self.writer = None
        self.run_id = f"{stamp}-unsaved-{secrets.token_hex(2)}"
        self.path = None
        self.root = None
        self.clock = Timings()

    def update_meta(self, **fields: Any) -> None:
        pass

    def heartbeat(self) -> None:
        pass

    def metrics(self, rows: list[dict]) -> None:
        pass

    def utilization(self, rows: list[dict]) -> None:
        pass

    def class_means(self, seed, epoch, layer, split, classes, gram) -> None:
        pass

    def contribution(self, rows: list[dict]) -> None:
        pass

    def end_epoch(self, training_row: dict, *, drop_embeddings=()) -> dict:
        return self.clock.end_epoch(training_row["seed"], training_row["epoch"])

    def embeddings(self, seed, epoch, layer, X, labels, indices) -> None:
        pass

    def projection(self, seed, epoch, layer, method, coords, labels, indices, class_names) -> None:
        pass

    def images(self, seed, epoch, layers, labels, samples) -> None:
        pass

    def thumbnails(self, images) -> None:
        pass

    def weights(self, seed, state_dict) -> None:
        pass

    def close(self, status, message=None, summary=None, traceback=None) -> None:
        pass
