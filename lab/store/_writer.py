"""RunWriter: appends one run's tables, arrays and weights to its folder, every write atomic."""
from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import shutil
import threading
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

# The modules, for _write_json and _write_parquet: looked up on each call so that patching
# lab.store._files._write_json / lab.store._tables._write_parquet (tests of full and read-only disks)
# reaches the writer.
from lab.store import _files, _tables
from lab.store._class_means import class_means_file, write_class_means
from lab.store._files import _TMP_PREFIX, _atomic_file, _json_default, _layer_file, _now
from lab.store._images import IMAGES_TABLE, write_image_record
from lab.status import RunStatus
from lab.store._record import _summary
from lab.store._tables import _PART_RE, _TABLES, _frame, _group_files

_METHOD_RE = re.compile(r"[a-z0-9_]{1,32}")


def _as_numpy(x: Any, dtype: Any = None) -> np.ndarray:
    if hasattr(x, "detach"):              # torch tensor, without importing torch
        x = x.detach().cpu().numpy()
    arr = np.asarray(x)
    return arr.astype(dtype, copy=False) if dtype is not None else arr


def _check_int(name: str, value: Any) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer; got {value!r}")
    return int(value)



class RunWriter:
    """Appends the results of one run to its folder; every write is atomic.

    Obtained from :meth:`RunStore.create`. Thread-safe (a background projection
    thread may save while the engine appends). Usable as a context manager: an
    exception marks the run "failed", a clean exit "finished" (unless
    :meth:`finish` was called already).
    """

    def __init__(self, store, run_id: str, path: Path, meta: dict):
        self.store = store
        self.run_id = run_id
        self.path = path
        self._meta = meta
        self._lock = threading.RLock()
        self._seq = itertools.count()
        self._finished = False

    # -- meta --------------------------------------------------------------------------------
    @property
    def meta(self) -> dict:
        """A copy of the metadata as last written."""
        with self._lock:
            return json.loads(json.dumps(self._meta, default=_json_default))

    def update_meta(self, **fields: Any) -> None:
        """Merge ``fields`` (JSON-able: layers, classes, split, device, n_images ...) into meta.json."""
        with self._lock:
            meta = {**self._meta, **fields, "updated": _now()}
            _files._write_json(self.path / "meta.json", meta)    # raises before anything changes
            self._meta = meta

    def heartbeat(self) -> None:
        """Refresh meta's ``updated`` time, so readers on other hosts know the run is alive."""
        self.update_meta()

    def finish(self, status: str, message: str | None = None, summary: dict | None = None) -> None:
        """Close the run with an ended ``status`` (:class:`lab.RunStatus` or its string): finished, failed or
        cancelled (interrupted is what the store reads for a run whose process died, never written); merges
        every table."""
        closing = [s.value for s in RunStatus if s.closed]
        if status not in closing:
            raise ValueError(f"status must be one of {closing}; got {status!r}; "
                             f"pass one of them (or its lab.RunStatus)")
        status = RunStatus(status)
        with self._lock:
            for table in _TABLES:
                with contextlib.suppress(OSError):    # unmerged parts read just as well (e.g. a full disk)
                    self._compact(table, None)
            record = self.store.load(self.run_id, _check_live=False)
            # One summary: lab.analysis's numbers; the engine adds only what the tables lack
            # (timings, trainable_fraction, ...), never its own g or best layer.
            computed = {**_summary(record), "status": status}
            extra = {k: v for k, v in (summary or {}).items() if k not in computed}
            fields = {"status": status, "ended": _now(), "message": message, "summary": {**extra, **computed}}
            self.update_meta(**fields)
            self._finished = True

    # -- tables ------------------------------------------------------------------------------
    def append_metrics(self, rows: Iterable[dict]) -> None:
        """Append rows ``{seed, epoch, layer, split, metric, value}``."""
        self._append("metrics", rows)

    def append_training(self, row: dict) -> None:
        """Append one training row ``{seed, epoch, train_loss, train_accuracy, heldout_accuracy, ...}``.

        It closes epoch (seed, epoch): that epoch's metric and utilization parts are merged.
        """
        if not isinstance(row, Mapping):
            raise ValueError(f"append_training takes one dict; got {type(row).__name__}")
        self._append("training", [row])
        key = (_check_int("seed", row["seed"]), _check_int("epoch", row["epoch"]))
        with self._lock:
            for table in ("metrics", "utilization"):
                self._compact(table, key)

    def append_utilization(self, rows: Iterable[dict]) -> None:
        """Append rows ``{seed, epoch, layer, absolute, relative}``."""
        self._append("utilization", rows)

    def append_contribution(self, rows: Iterable[dict]) -> None:
        """Append rows ``{seed, layer, metric, value}``."""
        self._append("contribution", rows)

    def save_image_record(self, seed: int, epoch: int, layers: list[str], labels: Any,
                          samples: Mapping[str, Mapping]) -> Path:
        """Store one evaluation's per-image record (:mod:`lab.store._images`): per layer, each unseen image's
        kNN vote, class-centre margin and k-means cluster, and the class-pair CDNV terms.

        ``samples`` is ``{layer: {"knn_accuracy", "nmi", "margin", "cdnv_pairs"}}`` as
        :func:`lab.metrics.compute_layer` returns them; ``labels`` (N,) the images' class codes.
        """
        group = f"s{_check_int('seed', seed)}-e{_check_int('epoch', epoch):04d}"
        path = self.path / "tables" / IMAGES_TABLE / f"{group}-{next(self._seq):06d}.parquet"
        write_image_record(path, layers, _as_numpy(labels, np.int64), samples)
        return path

    def save_class_means(self, seed: int, epoch: int, entries: Iterable[Mapping]) -> Path:
        """Store one evaluation's class-mean geometry (:mod:`lab.store._class_means`): entries
        ``{layer, split, classes, gram}``, gram the (K, K) Gram matrix of the centred class means."""
        path = class_means_file(self.path, _check_int("seed", seed), _check_int("epoch", epoch))
        write_class_means(path, entries)
        return path

    def _append(self, table: str, rows: Iterable[dict]) -> None:
        rows = list(rows)
        if not rows:
            return
        df = _frame(table, rows)
        keys = ["seed", "epoch"] if "epoch" in _TABLES[table] else ["seed"]
        with self._lock:
            for key, part in df.groupby(keys, sort=True):
                key = key if isinstance(key, tuple) else (key,)
                group = f"s{int(key[0])}" + (f"-e{int(key[1]):04d}" if len(key) > 1 else "")
                name = f"{group}-{next(self._seq):06d}.parquet"
                _tables._write_parquet(self.path / "tables" / table / name, part)

    def _compact(self, table: str, key: tuple | None) -> None:
        """Merge the parts of one group (or of every group) into one file; safe to interrupt."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        folder = self.path / "tables" / table
        stale = [p for p in folder.glob("*.parquet") if _PART_RE.fullmatch(p.name)] if folder.is_dir() else []
        for gkey, live in _group_files(folder).items():
            if key is not None and gkey[:len(key)] != key:
                continue
            if len(live) < 2:
                continue
            seq = max(s for s, _ in live)
            group = f"s{gkey[0]}" + ("" if gkey[1] is None else f"-e{gkey[1]:04d}")
            merged = pa.concat_tables([pq.read_table(p) for _, p in live], promote_options="default")
            target = folder / f"{group}-c{seq:06d}.parquet"
            with _atomic_file(target) as f:
                pq.write_table(merged, f, compression="zstd")
            for path in stale:
                m = _PART_RE.fullmatch(path.name)
                same = (int(m["seed"]), None if m["epoch"] is None else int(m["epoch"])) == gkey
                if same and path != target and int(m["seq"]) <= seq:
                    with contextlib.suppress(FileNotFoundError):
                        path.unlink()

    # -- arrays ------------------------------------------------------------------------------
    def save_embeddings(self, seed: int, epoch: int, layer: str, X: Any, labels: Any, indices: Any) -> Path:
        """Store unseen-class embeddings of one layer: ``X`` (n, d) as float16, labels and indices (n,)."""
        X = _as_numpy(X, np.float16)                                  # (n, d)
        labels, indices = _as_numpy(labels, np.int64), _as_numpy(indices, np.int64)
        if X.ndim != 2 or labels.shape != (X.shape[0],) or indices.shape != (X.shape[0],):
            raise ValueError(f"embeddings must be X (n, d) with labels (n,) and indices (n,); got "
                             f"X {X.shape}, labels {labels.shape}, indices {indices.shape}")
        path = (self.path / "arrays" / "embeddings" / f"s{_check_int('seed', seed)}"
                / f"e{_check_int('epoch', epoch):04d}" / _layer_file(layer))
        self._save_npz(path, X=X, labels=labels, indices=indices, layer=np.array(layer))
        return path

    def delete_embeddings(self, seed: int, epoch: int) -> None:
        """Remove the stored embeddings of one evaluation (every layer); its layouts stay.

        The folder is renamed out of sight first, so a reader sees the epoch's embeddings whole or not at all.
        """
        folder = (self.path / "arrays" / "embeddings" / f"s{_check_int('seed', seed)}"
                  / f"e{_check_int('epoch', epoch):04d}")
        if not folder.is_dir():
            return
        hidden = folder.with_name(f"{_TMP_PREFIX}{folder.name}-{next(self._seq):06d}")
        os.rename(folder, hidden)
        shutil.rmtree(hidden, ignore_errors=True)

    def save_projection(self, seed: int, epoch: int, layer: str, method: str, coords: Any,
                        labels: Any, indices: Any, class_names: list[str] | None = None) -> Path:
        """Store a 2-D layout (``coords`` (n, 2)) of one layer, by ``method`` ("pca", "umap", ...)."""
        if not isinstance(method, str) or not _METHOD_RE.fullmatch(method):
            raise ValueError(f"projection method must be a short lower-case name like 'umap' or 'pca'; "
                             f"got {method!r}")
        coords = _as_numpy(coords, np.float32)                        # (n, 2)
        labels, indices = _as_numpy(labels, np.int64), _as_numpy(indices, np.int64)
        if coords.ndim != 2 or coords.shape[1] != 2 or labels.shape != (coords.shape[0],) \
                or indices.shape != (coords.shape[0],):
            raise ValueError(f"a projection must be coords (n, 2) with labels (n,) and indices (n,); got "
                             f"coords {coords.shape}, labels {labels.shape}, indices {indices.shape}")
        path = (self.path / "arrays" / "projections" / f"s{_check_int('seed', seed)}"
                / f"e{_check_int('epoch', epoch):04d}" / method / _layer_file(layer))
        extra = {"class_names": np.array(list(class_names), dtype=str)} if class_names is not None else {}
        self._save_npz(path, coords=coords, labels=labels, indices=indices, layer=np.array(layer), **extra)
        return path

    def save_thumbnails(self, images: Any) -> Path:
        """Store small pictures of the run's unseen images, uint8 (n, h, w, C) with C 1 or 3, in the order of
        the layouts' ``indices`` (``arrays/thumbnails.npz``): the app's hover shows them for a run whose data it
        cannot load (a monitored loop's own tensors)."""
        images = _as_numpy(images, np.uint8)                          # (n, h, w, C)
        if images.ndim != 4 or images.shape[-1] not in (1, 3):
            raise ValueError(f"thumbnails must be uint8 images (n, h, w, C) with C 1 or 3; got shape {images.shape}")
        path = self.path / "arrays" / "thumbnails.npz"
        self._save_npz(path, images=images)
        return path

    @staticmethod
    def _save_npz(path: Path, **arrays: np.ndarray) -> None:
        with _atomic_file(path) as f:
            np.savez(f, **arrays)

    def save_weights(self, seed: int, state_dict: Mapping[str, Any]) -> Path:
        """Store a model's ``state_dict`` as ``weights/seed{seed}.safetensors``."""
        import torch
        from safetensors.torch import save as st_save

        seed = _check_int("seed", seed)
        # clone: safetensors refuses tensors that share storage (tied weights, views)
        tensors = {k: v.detach().to("cpu").contiguous().clone() for k, v in state_dict.items()
                   if isinstance(v, torch.Tensor)}
        blob = st_save(tensors, metadata={"run_id": self.run_id, "seed": str(seed)})
        path = self.path / "weights" / f"seed{seed}.safetensors"
        with _atomic_file(path) as f:
            f.write(blob)
        return path

    # -- context manager ---------------------------------------------------------------------
    def __enter__(self) -> "RunWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self._finished:
            return
        if exc_type is None:
            self.finish(RunStatus.FINISHED)
        elif issubclass(exc_type, (KeyboardInterrupt, GeneratorExit)):
            self.finish(RunStatus.CANCELLED, message=RunStatus.CANCELLED.value)
        else:
            self.finish(RunStatus.FAILED, message=f"{exc_type.__name__}: {exc}")

    def __repr__(self) -> str:
        return f"RunWriter({self.run_id!r}, path={str(self.path)!r})"

