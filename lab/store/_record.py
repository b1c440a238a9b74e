"""Reading a run back: statuses, the status derived from process liveness, RunRecord, its summary."""
from __future__ import annotations

import datetime as _dt
import functools
import os
import socket
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import numpy as np
import pandas as pd

from lab.analysis.summary import summarize_run   # not lab.analysis: its images and agreement read runs from lab.store
from lab.catalogue import per_image_metric
from lab.errors import not_evaluated, not_recorded
from lab.status import RunStatus
from lab.store._class_means import class_means_problem, read_class_means
from lab.store._files import _layer_file, _one_line, _parse_time, _pid_alive, _read_json
from lab.store._images import IMAGES_TABLE, ImageRecord, image_record_parts, read_image_record
from lab.store._tables import _group_files, _read_table

STALE_AFTER = 600.0
"""Seconds without a heartbeat after which a "running" run of another host reads as interrupted."""


def _load_config(data: dict) -> Any:
    """RunConfig when lab.config is importable and accepts the dict, else the dict itself."""
    try:
        from lab.config import RunConfig
    except ImportError:
        return data
    try:
        return RunConfig.from_dict(data)
    except (ValueError, TypeError, KeyError) as exc:
        warnings.warn(f"stored config does not load as a RunConfig ({exc}); keeping it as a dict",
                      stacklevel=3)
        return data


def _read_run_files(path: Path) -> tuple[dict | None, dict | None, list[str]]:
    """(meta, config, problems) of a run folder; a missing or unreadable file is None plus a problem."""
    out: list[dict | None] = []
    problems: list[str] = []
    for name in ("meta.json", "config.json"):
        file = path / name
        if not file.exists():
            out.append(None)
            problems.append(f"{name} is missing")
            continue
        try:
            data = _read_json(file)
        except ValueError as exc:
            out.append(None)
            problems.append(f"{name} is not valid JSON ({_one_line(exc)})")
            continue
        except OSError as exc:
            from lab.errors import os_error_message

            out.append(None)
            problems.append(f"{name} cannot be read ({os_error_message(exc) or exc})")
            continue
        if not isinstance(data, dict):
            out.append(None)
            problems.append(f"{name} holds a JSON {type(data).__name__}, not an object")
            continue
        out.append(data)
    return out[0], out[1], problems


def _derived_status(meta: dict) -> RunStatus | str:
    """The status ``meta`` stores, with "running" read as interrupted when its process is gone; a word that is
    no run status ("unknown" when there is none) is kept as stored, as :attr:`RunRecord.status` reads it."""
    stored = meta.get("status", "unknown")
    status = RunStatus.read(stored)
    if status is not RunStatus.RUNNING:
        return stored if status is None else status
    pid, host = meta.get("pid"), meta.get("host")
    if host == socket.gethostname() and isinstance(pid, int) and os.name != "nt":
        alive = _pid_alive(pid, meta.get("pid_start"))
        return RunStatus.RUNNING if alive else RunStatus.INTERRUPTED
    updated = _parse_time(meta.get("updated") or meta.get("started"))
    if updated is None:
        return RunStatus.INTERRUPTED
    age = (_dt.datetime.now(_dt.timezone.utc) - updated).total_seconds()
    return RunStatus.RUNNING if age < STALE_AFTER else RunStatus.INTERRUPTED


def _summary(record: "RunRecord") -> dict:
    """:func:`lab.analysis.summarize_run` of a stored run: its tables, its status and the facts its meta holds."""
    meta = record.meta
    layers = [layer["name"] if isinstance(layer, dict) else str(layer) for layer in meta.get("layers") or []]
    timings = meta.get("timings") if isinstance(meta.get("timings"), dict) else {}
    return summarize_run(record.metrics, record.training, status=record.status, layers=layers or None,
                         aliases=meta.get("layer_aliases"), epochs=meta.get("epochs"), seeds=meta.get("seeds"),
                         trainable_fraction=meta.get("trainable_fraction"), timings=timings.get("run"))


def _stored_table(table: str) -> functools.cached_property:
    """A :class:`RunRecord` attribute that reads the stored table ``table`` on first access and keeps it."""
    def read(self) -> pd.DataFrame:
        return self._table(table)

    read.__name__ = table
    read.__doc__ = f"The run's {table} table (read on first access, then kept)."
    return functools.cached_property(read)


class RunRecord:
    """One stored run, read back as tidy pandas frames and numpy arrays.

    Tables are read on first access and cached (a snapshot: load again to see
    what a live run wrote since).

    Attributes
    ----------
    run_id : str
    path : pathlib.Path
    config : RunConfig or dict
        A :class:`lab.config.RunConfig` when it loads, else the stored dict.
    meta : dict
        status (with "running" turned into "interrupted" for dead runs), name,
        started, ended, updated, host, pid, device, versions, layers, classes, split ...
    """

    def __init__(self, run_id: str, path: Path, config: Any, meta: dict, raw_config: dict,
                 problems: list[str] | None = None, damaged_parts: list[str] | None = None):
        self.run_id = run_id
        self.path = path
        self.config = config
        self.meta = meta
        self.config_dict = raw_config
        self.problems = list(problems or [])
        """What is wrong with config.json / meta.json (empty for an intact run)."""
        self.damaged_parts = list(damaged_parts or [])
        """Table parts (paths relative to the run folder) that are unreadable and skipped."""

    @property
    def damage(self) -> str | None:
        """None for an intact run, else "damaged: ..." (config/meta) or "partially damaged: ..." (tables)."""
        if self.problems:
            return "damaged: " + "; ".join(self.problems)
        if self.damaged_parts:
            n = len(self.damaged_parts)
            return (f"partially damaged: {n} unreadable table part{'s' if n > 1 else ''} skipped "
                    f"({', '.join(self.damaged_parts[:3])}{' ...' if n > 3 else ''})")
        return None

    def _table(self, table: str) -> pd.DataFrame:
        return _read_table(self.path / "tables" / table, table, self.damaged_parts, self.path)

    @property
    def status(self) -> RunStatus | str:
        """The run's :class:`lab.RunStatus` (equal to its plain string); a run without one keeps the word its
        record has: "damaged" (config.json or meta.json unreadable), "unknown" (meta.json names no status), or
        whatever word a foreign meta.json stores."""
        stored = self.meta.get("status", "unknown")
        return RunStatus.read(stored) or stored

    @property
    def name(self) -> str | None:
        return self.meta.get("name")

    @property
    def evaluated(self) -> bool:
        """Whether the run measured anything: a metrics row of at least one evaluation is stored (cheap: lists
        files). False for a run that ended, or has not yet come, before its first evaluation."""
        return bool(_group_files(self.path / "tables" / "metrics"))

    metrics = _stored_table("metrics")
    """Long table: seed, epoch, layer, split, metric, value."""
    training = _stored_table("training")
    """One row per (seed, epoch): train_loss, train_accuracy, heldout_accuracy, heldout_loss, ..."""
    utilization = _stored_table("utilization")
    """seed, epoch, layer, absolute, relative."""
    contribution = _stored_table("contribution")
    """seed, layer, metric, value."""

    @functools.cached_property
    def class_means(self) -> pd.DataFrame:
        """The geometry of the class means (``ClassMeans`` events): one row per seed, epoch, layer and split
        (the training sample and the unseen classes) with ``classes`` (names, sorted-label order) and ``gram`` (K, K) float64, the Gram
        matrix of the centred class means (:func:`lab.analysis.simplex` reads it). Empty for a run recorded
        without them (:attr:`class_means_problem` says why)."""
        return read_class_means(self.path, self.damaged_parts)

    @property
    def class_means_problem(self) -> str | None:
        """Why :attr:`class_means` is empty, in one line, or None when it holds rows."""
        return class_means_problem(self.run_id, self.path, self.status, self.class_means, evaluated=self.evaluated)

    # -- arrays ------------------------------------------------------------------------------
    def _array_keys(self, kind: str) -> pd.DataFrame:
        base = self.path / "arrays" / kind
        rows = []
        pattern = "s*/e*/*/*.npz" if kind == "projections" else "s*/e*/*.npz"
        for p in base.glob(pattern) if base.is_dir() else []:
            rel = p.relative_to(base).parts
            try:
                seed, epoch = int(rel[0][1:]), int(rel[1][1:])
            except ValueError:
                continue
            row = {"seed": seed, "epoch": epoch, "layer": unquote(p.name[:-4])}
            if kind == "projections":
                row["method"] = rel[2]
            rows.append(row)
        cols = ["seed", "epoch", "layer"] + (["method"] if kind == "projections" else [])
        df = pd.DataFrame(rows, columns=cols)
        return df.sort_values(cols[:2], kind="stable").reset_index(drop=True)

    def embedding_keys(self) -> pd.DataFrame:
        """Available (seed, epoch, layer) of stored embeddings."""
        return self._array_keys("embeddings")

    def projection_keys(self) -> pd.DataFrame:
        """Available (seed, epoch, layer, method) of stored projections."""
        return self._array_keys("projections")

    def embeddings(self, seed: int, epoch: int, layer: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(X float16 (n, d), labels (n,), indices (n,))`` of one layer at one epoch."""
        path = (self.path / "arrays" / "embeddings" / f"s{int(seed)}" / f"e{int(epoch):04d}"
                / _layer_file(layer))
        if not path.is_file():
            raise KeyError(self.missing_embeddings(seed, epoch) or
                           f"run {self.run_id!r} has no embeddings for seed={seed}, epoch={epoch}, "
                           f"layer={layer!r}; see RunRecord.embedding_keys() for what is stored")
        with np.load(path, allow_pickle=False) as z:
            return z["X"], z["labels"], z["indices"]

    @property
    def keep_embeddings(self) -> str | list[int]:
        """The run's ``keep_embeddings``; "all" for a run that predates it (every evaluation was kept)."""
        return self.config_dict.get("keep_embeddings", "all")

    def missing_embeddings(self, seed: int, epoch: int) -> str | None:
        """Why the embeddings of (seed, epoch) are absent when ``keep_embeddings`` let them go, else None."""
        keep = self.keep_embeddings
        keys = self.embedding_keys()
        stored = sorted({int(e) for e in keys.loc[keys["seed"] == int(seed), "epoch"]})
        if keep == "all" or int(epoch) in stored or not stored or int(epoch) > max(stored):
            return None
        pinned = "" if keep == "last" else f" and epochs {list(keep)}"
        return (f"run {self.run_id!r} did not keep the embeddings of epoch {epoch} (seed {seed}): keep_embeddings="
                f"{keep!r} keeps those of the last evaluation of each seed{pinned} (stored epochs: {stored}); "
                f"the 2-D layouts of every epoch are kept; to keep embeddings of every epoch, run it again with "
                f"keep_embeddings='all' (or [{epoch}])")

    def projection(self, seed: int, epoch: int, layer: str,
                   method: str | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(coords float32 (n, 2), labels (n,), indices (n,))``; method None: umap, else pca, else any."""
        base = self.path / "arrays" / "projections" / f"s{int(seed)}" / f"e{int(epoch):04d}"
        fname = _layer_file(layer)
        if method is None:
            found = sorted(p.name for p in base.iterdir() if (p / fname).is_file()) if base.is_dir() else []
            ranked = [m for m in ("umap", "pca") if m in found] + [m for m in found if m not in ("umap", "pca")]
            method = ranked[0] if ranked else "umap"
        path = base / str(method) / fname
        if not path.is_file():
            raise KeyError(f"run {self.run_id!r} has no {method} projection for seed={seed}, epoch={epoch}, "
                           f"layer={layer!r}; see RunRecord.projection_keys() for what is stored")
        with np.load(path, allow_pickle=False) as z:
            return z["coords"], z["labels"], z["indices"]

    def projection_class_names(self, seed: int, epoch: int, layer: str, method: str) -> list[str] | None:
        """Class names saved with a projection, if any."""
        path = (self.path / "arrays" / "projections" / f"s{int(seed)}" / f"e{int(epoch):04d}"
                / method / _layer_file(layer))
        with np.load(path, allow_pickle=False) as z:
            return [str(c) for c in z["class_names"]] if "class_names" in z else None

    def thumbnails(self) -> np.ndarray | None:
        """Small pictures of the unseen images the run kept, uint8 (n, h, w, C) in the layouts' ``indices``
        order (a monitored run, whose images lab cannot load again), or None when it kept none or the file is
        unreadable."""
        path = self.path / "arrays" / "thumbnails.npz"
        if not path.is_file():
            return None
        try:
            with np.load(path, allow_pickle=False) as z:
                return np.asarray(z["images"], dtype=np.uint8)
        except (OSError, ValueError, KeyError):
            return None

    def weights_path(self, seed: int | None = None) -> Path:
        """Path of ``weights/seed{seed}.safetensors`` (default: the config's first seed)."""
        if seed is None:
            seeds = self.config_dict.get("seeds") or [0]
            seed = int(seeds[0]) if isinstance(seeds, (list, tuple)) else int(seeds)
        path = self.path / "weights" / f"seed{int(seed)}.safetensors"
        if not path.is_file():
            stored = sorted(p.stem for p in (self.path / "weights").glob("seed*.safetensors"))
            raise FileNotFoundError(
                f"run {self.run_id!r} has no weights for seed {seed} (stored: {stored or 'none'}); "
                f"weights are saved at the end of each seed when save_weights is on")
        return path

    # -- the per-image record ------------------------------------------------------------------
    def image_record_keys(self) -> pd.DataFrame:
        """The evaluations (seed, epoch) whose per-image record is stored, in order."""
        keys = sorted(image_record_parts(self.path / "tables" / IMAGES_TABLE))
        return pd.DataFrame(keys, columns=["seed", "epoch"], dtype="int64")

    def _default_seed(self, stored: list[tuple[int, int]]) -> int:
        """The config's first seed with a stored record (else its first seed)."""
        seeds = self.config_dict.get("seeds") or [0]
        seeds = [int(s) for s in (seeds if isinstance(seeds, (list, tuple)) else [seeds])]
        have = {s for s, _ in stored}
        return next((s for s in seeds if s in have), min(have) if have else seeds[0])

    def image_record_problem(self, seed: int | None = None, epoch: int | None = None) -> str | None:
        """Why :meth:`image_record` would fail, in one line, or None when the record is there (cheap: lists
        files, reads none). ``seed`` None: the run's first seed; ``epoch`` None: its latest evaluation."""
        parts = image_record_parts(self.path / "tables" / IMAGES_TABLE)
        seed = self._default_seed(list(parts)) if seed is None else int(seed)
        epochs = sorted(e for s, e in parts if s == seed)
        run = f"run {self.run_id!r}"
        if not parts:
            metrics, votes = self.config_dict.get("metrics"), per_image_metric("right")
            if self.status is RunStatus.RUNNING:
                return f"{run} has not finished an evaluation yet; its per-image record comes with the first"
            if not self.evaluated:
                return not_evaluated(self.run_id, "per-image record", self.status)
            if isinstance(metrics, (list, tuple)) and votes not in metrics:
                return (f"{run} did not measure {votes}, whose leave-one-out votes the per-image record holds; "
                        f"run it again with {votes} among its metrics to get one")
            return not_recorded(self.run_id, "per-image record", self.path / "config.json")
        if not epochs:
            seeds = sorted({s for s, _ in parts})
            return f"{run} has no per-image record for seed {seed} (recorded for seeds {seeds})"
        if epoch is not None and int(epoch) not in epochs:
            return f"{run} has no per-image record for seed {seed} at epoch {epoch} (recorded epochs: {epochs})"
        wanted = [int(epoch)] if epoch is not None else epochs
        names = {(seed, e): parts[(seed, e)].relative_to(self.path).as_posix() for e in wanted}
        if all(name in self.damaged_parts for name in names.values()):
            return (f"{run}: the per-image record of seed {seed}, epoch {wanted[-1]} is damaged "
                    f"({names[(seed, wanted[-1])]}); delete that file, or run it again to get a new one")
        return None

    def image_record(self, seed: int | None = None, epoch: int | None = None) -> ImageRecord:
        """One evaluation's per-image record (:class:`lab.store._images.ImageRecord`): per layer, each unseen
        image's leave-one-out kNN vote, class-centre margin and k-means cluster, and the class-pair CDNV terms.

        ``seed`` None: the run's first seed; ``epoch`` None: its latest evaluation with a readable record (a
        damaged one is skipped with a warning). Raises :class:`lab.errors.NoImageRecordError` (a KeyError)
        with a one-line reason when there is none (:meth:`image_record_problem`).
        """
        from lab.errors import NoImageRecordError

        problem = self.image_record_problem(seed, epoch)
        if problem is not None:
            raise NoImageRecordError(problem)
        parts = image_record_parts(self.path / "tables" / IMAGES_TABLE)
        seed = self._default_seed(list(parts)) if seed is None else int(seed)
        epochs = [int(epoch)] if epoch is not None else sorted((e for s, e in parts if s == seed), reverse=True)
        reasons = []
        for e in epochs:
            path = parts[(seed, e)]
            try:
                return read_image_record(path, seed, e)
            except ValueError as exc:
                name = path.relative_to(self.path).as_posix()
                reasons.append(f"{name}: {_one_line(exc)}")
                if name not in self.damaged_parts:
                    self.damaged_parts.append(name)
                if epoch is None:
                    warnings.warn(f"run {self.run_id}: skipping the damaged per-image record {name} "
                                  f"({_one_line(exc)}); an earlier evaluation's loads instead", stacklevel=2)
        raise NoImageRecordError(f"run {self.run_id!r}: the per-image record of seed {seed} is damaged "
                                 f"({'; '.join(reasons[:2])}); delete the file, or run it again to get a new one")

    def summary(self) -> dict:
        """The run's summary (:func:`lab.analysis.summarize_run`, the one the engine reports): the status, the
        run's epochs, seeds, layers, trainable fraction and timings as far as its meta has them, and what it
        measured (g, its best layer and seed spread at the last complete epoch, whether that layer is the final
        representation, the seen held-out accuracy, the terminal phase)."""
        return _summary(self)

    def __repr__(self) -> str:
        return f"RunRecord({self.run_id!r}, status={self.status!r}, path={str(self.path)!r})"

