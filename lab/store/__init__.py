"""The durable run store: one folder per run, written atomically while it runs.

Layout of one run (``<root>/<run_id>/``)::

    config.json                      the RunConfig, as given
    meta.json                        status, pid, host, timestamps, versions, device, layers, split ...
    tables/<table>/s<seed>-e<epoch>-<seq>.parquet    appended parts (metrics, training, utilization)
    tables/<table>/s<seed>-e<epoch>-c<seq>.parquet   a compacted group: every part of that group up to <seq>
    tables/contribution/s<seed>-<seq>.parquet
    tables/images/s<seed>-e<epoch>-<seq>.parquet     the per-image record of one evaluation (_images: one row
                                     per layer; each unseen image's kNN vote, margin, cluster)
    arrays/embeddings/s<seed>/e<epoch>/<layer>.npz            X float16 (n, d), labels, indices
                                     (the evaluations RunConfig.keep_embeddings keeps; by default the last)
    arrays/projections/s<seed>/e<epoch>/<method>/<layer>.npz  coords float32 (n, 2), labels, indices
    weights/seed<seed>.safetensors   fine-tuned weights at the end of each seed

Every file is written to a temporary name in its own folder and renamed into place
(``os.replace``), so a reader never sees half a file and a process killed mid-run
(even with SIGKILL) leaves every completed epoch readable. Tables are appended as
small parquet parts, one per call, and merged per (seed, epoch) when that epoch's
training row arrives; a reader takes the newest merged file of a group plus the
parts written after it, so a kill during a merge loses nothing and duplicates
nothing.

A run whose ``meta.json`` says "running" is read as "interrupted" when its process
is gone (same host: the pid is dead, a zombie, or was reused by a newer process;
another host: no heartbeat for :data:`STALE_AFTER` seconds).

This module holds the store itself (create, load, list, delete, checkpoints) and the
run-id validation; beside it, as in MLflow's file store: ``_files`` (atomic files,
JSON, process liveness), ``_tables`` (parquet parts), ``_images`` (the per-image record), ``_writer`` (:class:`RunWriter`)
and ``_record`` (:class:`RunRecord`, statuses).

Example
-------
>>> store = RunStore("runs")                       # doctest: +SKIP
>>> w = store.create(config)                       # doctest: +SKIP
>>> w.append_metrics([{"seed": 0, "epoch": 0, "layer": "layer1", "split": "unseen",
...                    "metric": "nmi", "value": 0.41}])            # doctest: +SKIP
>>> w.finish("finished")                           # doctest: +SKIP
>>> store.load(w.run_id).metrics                   # doctest: +SKIP
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import difflib
import errno
import os
import re
import secrets
import shutil
import socket
import warnings
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from lab.errors import CheckpointError, CheckpointNotFoundError

# The store's own writes go through _files._write_json, looked up per call, so that tests of full and
# read-only disks can patch it.
from lab.store import _files
from lab.store._files import (_TMP_PREFIX, _atomic_file, _fsync_dir, _now, _one_line, _parse_time, _proc_start_time,
                              _read_json, _versions, _write_json)
from lab.store._images import ImageRecord
from lab.status import RunStatus
from lab.store._record import STALE_AFTER, RunRecord, _derived_status, _load_config, _read_run_files
from lab.store._tables import _damaged_parts, _empty
from lab.store._writer import RunWriter

__all__ = [
    "RunStore", "RunWriter", "RunRecord", "ImageRecord", "RunNotFoundError", "DamagedRunError", "validate_run_id",
    "default_root", "STALE_AFTER",
    "read_json", "write_json", "atomic_file",
]

read_json = _read_json
"""A JSON file of the store (:func:`lab.store._files._read_json`)."""
atomic_file = _atomic_file
"""A binary file written beside ``path`` and renamed into place on success (``with atomic_file(path) as f``): a
reader sees the old file or the new one, never half of one; the store writes every file so."""
write_json = _write_json
"""Write a JSON file atomically, as the store writes its own (:func:`lab.store._files._write_json`)."""

_RUN_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")



def _slug(text: Any, limit: int = 32) -> str:
    slug = re.sub(r"[^A-Za-z0-9_]+", "-", str(text or "")).strip("-_")
    return slug[:limit].strip("-_") or "x"


def _config_dict(config: Any) -> dict:
    if config is None:
        return {}
    if isinstance(config, Mapping):
        return dict(config)
    if hasattr(config, "to_dict"):
        return dict(config.to_dict())
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return dataclasses.asdict(config)
    raise TypeError(f"config must be a RunConfig or a dict; got {type(config).__name__}")


def default_root() -> Path:
    """The default store folder: ``$LAB_RUNS_DIR`` when set, else ``./runs``."""
    return Path(os.environ.get("LAB_RUNS_DIR") or "runs")


def validate_run_id(run_id: Any, root: str | os.PathLike | None = None) -> str:
    """Return ``run_id`` if it names a folder directly inside the store, else raise ValueError.

    A valid id is 1–128 characters from letters, digits, ``.``, ``_`` and ``-``,
    starts with a letter or digit and contains no ``..``; when ``root`` is given,
    the resolved folder must also lie inside it (no symlink escapes).
    """
    ok = isinstance(run_id, str) and _RUN_ID_RE.fullmatch(run_id) is not None and ".." not in run_id
    if ok and root is not None:
        base = Path(root).resolve()
        ok = (base / run_id).resolve().parent == base
    if not ok:
        raise ValueError(
            f"run id {run_id!r} is not valid: expected 1-128 characters from letters, digits, "
            f"'.', '_' and '-', starting with a letter or digit, without '..', naming a folder "
            f"inside the store; use an id shown by `python -m lab runs list`")
    return run_id


class RunNotFoundError(KeyError):
    """No run with that id in the store (a KeyError whose text reads well)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "run not found"


class DamagedRunError(ValueError):
    """A run folder whose config.json or meta.json is missing or unreadable: its settings are unknown,
    so it is never filled in with defaults (``RunStore.load(..., damaged_ok=True)`` reads what is left)."""



# ----------------------------------------------------------------------------------------------
# the store
# ----------------------------------------------------------------------------------------------

def _epochs(rec) -> Any:
    """A run's epochs for a listing: the latest evaluated epoch of a monitored run (its loop numbers them and
    plans none), else the configured number."""
    from lab.monitor import is_monitored

    if is_monitored(rec.config_dict):
        return rec.meta.get("epochs")
    return getattr(rec.config, "n_epochs", rec.config_dict.get("epochs"))


_LIST_COLUMNS = ["run_id", "name", "status", "dataset", "backbone", "strategy", "epochs", "seeds",
                 "started", "best_layer", "g", "heldout_accuracy", "damage"]


class RunStore:
    """A folder of runs (default ``$LAB_RUNS_DIR`` or ``./runs``).

    Parameters
    ----------
    root : str or PathLike, optional
        The store folder; created on the first write.
    """

    def __init__(self, root: str | os.PathLike | None = None):
        self.root = Path(root) if root is not None else default_root()

    def __repr__(self) -> str:
        return f"RunStore({str(self.root)!r})"

    def path(self, run_id: str) -> Path:
        """The folder of ``run_id`` (validated; it need not exist)."""
        validate_run_id(run_id, self.root)
        return self.root / run_id

    def exists(self, run_id: str) -> bool:
        return (self.path(run_id) / "meta.json").is_file()

    # -- writing -----------------------------------------------------------------------------
    def create(self, config: Any, name: str | None = None) -> RunWriter:
        """Allocate a new run folder, write config.json and meta.json (status "running")."""
        cfg = _config_dict(config)
        self.root.mkdir(parents=True, exist_ok=True)
        pid = os.getpid()
        now = _now()
        meta = {
            "run_id": None, "name": name if name is not None else cfg.get("name"), "status": "running",
            "pid": pid, "pid_start": _proc_start_time(pid), "host": socket.gethostname(),
            "started": now, "updated": now, "ended": None, "message": None,
            "device": cfg.get("device"), "versions": _versions(),
        }
        # Build the folder under a hidden name and rename it into place, so that a reader
        # never sees a run without its config and meta.
        stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        base = f"{stamp}-{_slug(cfg.get('dataset'), 24)}-{_slug(cfg.get('backbone'), 24)}"
        staging = self.root / f"{_TMP_PREFIX}{secrets.token_hex(8)}"
        staging.mkdir()                   # (mkdtemp would make it private to this user)
        try:
            _files._write_json(staging / "config.json", cfg)
            for _ in range(64):
                run_id = validate_run_id(f"{base}-{secrets.token_hex(2)}", self.root)
                meta["run_id"] = run_id
                _files._write_json(staging / "meta.json", meta)
                path = self.root / run_id
                if path.exists():
                    continue
                try:
                    os.rename(staging, path)      # fails if a run took the name meanwhile
                except OSError:
                    continue
                break
            else:                             # pragma: no cover - 64 collisions on 4 hex digits
                raise RuntimeError(f"could not allocate a run id under {self.root}")
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        _fsync_dir(self.root)
        return RunWriter(self, run_id, path, meta)

    # -- reading -----------------------------------------------------------------------------
    def load(self, run_id: str, *, _check_live: bool = True, damaged_ok: bool = False) -> RunRecord:
        """Read a run back. Raises :class:`RunNotFoundError` (a KeyError) for an unknown id and
        :class:`DamagedRunError` (a ValueError) for a run whose config.json or meta.json is missing or
        unreadable, unless ``damaged_ok``: then its record has status "damaged", ``problems`` says why,
        and ``config`` is None when config.json is unusable (never a default config)."""
        path = self.path(run_id)
        self._check_root()
        if not any((path / name).exists() for name in ("meta.json", "config.json", "tables")):
            raise RunNotFoundError(f"no run {run_id!r} in the store {self.root.resolve()}; "
                                   f"`python -m lab runs list` shows the stored runs")
        meta, raw, problems = _read_run_files(path)
        if problems and not damaged_ok:
            raise DamagedRunError(
                f"run {run_id!r} in {self.root.resolve()} is damaged: {'; '.join(problems)}; its settings are "
                f"unknown, so it cannot be used; restore the file from a backup or delete the run with "
                f"`python -m lab runs delete {run_id}`")
        if problems:
            meta = {**(meta or {"run_id": run_id}), "stored_status": (meta or {}).get("status"),
                    "status": "damaged"}
        elif _check_live:
            status = _derived_status(meta)
            if status != meta.get("status"):
                meta = {**meta, "stored_status": meta.get("status"), "status": status}
        config = _load_config(raw) if raw is not None else None
        return RunRecord(run_id, path, config, meta, raw or {}, problems, _damaged_parts(path))

    def _check_root(self) -> None:
        """Raise NotADirectoryError when the store path, or a folder above it, is a file."""
        if self.root.is_dir():
            return
        if self.root.exists() or any(p.exists() and not p.is_dir() for p in self.root.absolute().parents):
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(self.root))

    def ids(self) -> list[str]:
        """Ids of every folder that looks like a run (has meta.json), unsorted."""
        if not self.root.is_dir():
            return []
        out = []
        for p in self.root.iterdir():
            if p.name.startswith(".") or not p.is_dir():
                continue
            if _RUN_ID_RE.fullmatch(p.name) and ".." not in p.name and (p / "meta.json").is_file():
                out.append(p.name)
        return out

    def running(self) -> pd.DataFrame:
        """The runs being written now (status "running": their process is alive, or another host's sent a
        heartbeat lately), newest first: run_id, name, dataset, backbone, epochs (the latest evaluated epoch of
        a monitored run, else the planned number), started. Reads each run's meta.json, and the config of the
        running ones, so the app can look every few seconds."""
        rows = []
        for run_id in self.ids():
            try:
                if _derived_status(_read_json(self.path(run_id) / "meta.json")) is not RunStatus.RUNNING:
                    continue                        # most runs have ended: their config is not read
                rec = self.load(run_id, damaged_ok=True)
            except Exception:                       # noqa: BLE001 - written or deleted right now: not listed
                continue
            if rec.status is not RunStatus.RUNNING or rec.problems:
                continue
            cfg = rec.config_dict
            rows.append({"run_id": run_id, "name": rec.name, "dataset": cfg.get("dataset"),
                         "backbone": cfg.get("backbone"), "epochs": _epochs(rec), "started": rec.meta.get("started")})
        df = pd.DataFrame(rows, columns=["run_id", "name", "dataset", "backbone", "epochs", "started"])
        return df.sort_values(["started", "run_id"], ascending=False, kind="stable").reset_index(drop=True)

    def list(self) -> pd.DataFrame:
        """One row per run, newest first: run_id, name, status, dataset, backbone, strategy, epochs,
        seeds, started, best_layer, g, heldout_accuracy, damage. A run whose config.json or meta.json is
        missing or unreadable is listed with status "damaged"; one with unreadable table parts keeps its
        status and says "partially damaged" in ``damage``; folders that are no run are skipped with a
        warning. Raises NotADirectoryError when the store path is a file."""
        rows = []
        self._check_root()
        if self.root.is_dir():
            candidates = [p for p in self.root.iterdir() if p.is_dir() and not p.name.startswith(".")]
        else:
            candidates = []
        for p in candidates:
            try:
                rec = self.load(p.name, damaged_ok=True)
                summ = rec.meta.get("summary") if RunStatus.has_ended(rec.status) else None
                if rec.problems:
                    summ = {}
                elif not isinstance(summ, dict):
                    summ = rec.summary()
            except Exception as exc:     # noqa: BLE001 - one unreadable folder must not hide the others
                warnings.warn(f"skipping {p.name!r} in {self.root}: {_one_line(exc)}", stacklevel=2)
                continue
            cfg = rec.config_dict
            seeds = cfg.get("seeds")
            rows.append({
                "run_id": rec.run_id, "name": rec.name, "status": str(rec.status),
                "dataset": cfg.get("dataset"), "backbone": cfg.get("backbone"),
                "strategy": cfg.get("strategy"), "epochs": _epochs(rec),
                "seeds": ",".join(map(str, seeds)) if isinstance(seeds, (list, tuple)) else seeds,
                "started": rec.meta.get("started"), "best_layer": summ.get("best_layer"),
                "g": summ.get("g"), "heldout_accuracy": summ.get("heldout_accuracy"), "damage": rec.damage,
            })
        df = pd.DataFrame(rows, columns=_LIST_COLUMNS)
        if len(df):
            when = df["started"].map(lambda s: (_parse_time(s) or _dt.datetime.min.replace(
                tzinfo=_dt.timezone.utc)).timestamp())
            order = sorted(range(len(df)), key=lambda i: (when.iloc[i], df["run_id"].iloc[i]), reverse=True)
            df = df.iloc[order].reset_index(drop=True)
        for col in ("g", "heldout_accuracy"):
            df[col] = pd.to_numeric(df[col], errors="coerce").astype("float64")
        return df

    def compare(self, run_ids: Iterable[str]) -> pd.DataFrame:
        """The metrics of several runs in one long frame, with ``run_id`` and ``name`` columns first."""
        frames = []
        for run_id in run_ids:
            rec = self.load(run_id)
            m = rec.metrics.copy()
            m.insert(0, "name", rec.name)
            m.insert(0, "run_id", rec.run_id)
            frames.append(m)
        if not frames:
            return pd.concat([pd.DataFrame(columns=["run_id", "name"]), _empty("metrics")], axis=1)
        return pd.concat(frames, ignore_index=True)

    def delete(self, run_id: str, *, force: bool = False) -> None:
        """Remove a run's folder. A run still running (live process) needs ``force=True``."""
        path = self.path(run_id)
        self._check_root()
        if not path.is_dir():
            raise RunNotFoundError(f"no run {run_id!r} in the store {self.root.resolve()}; "
                                   f"`python -m lab runs list` shows the stored runs")
        if not force and (path / "meta.json").is_file():
            try:
                meta = _read_json(path / "meta.json")
            except (OSError, ValueError):
                meta = None               # damaged: deleting it is what the user wants
            if isinstance(meta, dict) and _derived_status(meta) is RunStatus.RUNNING:
                raise ValueError(f"run {run_id!r} is still running (pid {meta.get('pid')} on "
                                 f"{meta.get('host')}); cancel it first, or delete it anyway with force=True "
                                 f"(`python -m lab runs delete {run_id} --force`)")
        # validated to resolve to a direct child of root; a link to a sibling run loses the link only
        if path.is_symlink():
            path.unlink()
            return
        # Rename it out of sight first: on a read-only store this fails before anything is lost, and a
        # reader never sees half a run; then remove the hidden folder.
        hidden = self.root / f"{_TMP_PREFIX}deleted-{secrets.token_hex(4)}-{run_id}"
        os.rename(path, hidden)
        shutil.rmtree(hidden)

    # -- checkpoints -------------------------------------------------------------------------
    def run_weights(self, spec: str) -> Path:
        """The weights file that ``"run:ID[/SEED]"`` names (default seed: the run's first): this store's run,
        else the default store's, as a run looks up its checkpoint.

        The store's side of :func:`lab.backbones.resolve_checkpoint` and :func:`lab.backbones.check_checkpoint`,
        which call it on the store they are given: the model layer never imports the store.

        Raises
        ------
        lab.errors.CheckpointError
            No such run in either store (naming the closest runs), an id that is not valid, a damaged run, a
            seed that is no integer; :class:`lab.errors.CheckpointNotFoundError` (also a FileNotFoundError)
            for a run without weights for that seed.
        """
        body = spec[4:] if spec.startswith("run:") else spec
        run_id, _, seed = body.partition("/")
        if seed and not re.fullmatch(r"\d+", seed):
            raise CheckpointError(spec, f"checkpoint {spec!r} is not valid: expected 'run:ID' or 'run:ID/SEED' with an "
                                        f"integer seed; got seed {seed!r}")
        stores = [self] + ([] if self.root.resolve() == default_root().resolve() else [RunStore()])
        for store in stores:
            try:
                record = store.load(run_id)
            except RunNotFoundError:
                continue
            except ValueError as exc:             # an id that is not valid, a damaged run
                raise CheckpointError(spec, _one_line(exc)) from exc
            try:
                return record.weights_path(int(seed) if seed else None)
            except FileNotFoundError as exc:
                raise CheckpointNotFoundError(spec, str(exc)) from exc
        where = f"the store {stores[0].root.resolve()}"
        if len(stores) > 1:
            where += f" (nor in the default store {stores[1].root.resolve()})"
        ids = list(dict.fromkeys(f"run:{i}" for s in stores for i in s.ids()))
        raise CheckpointError(spec, f"no such run in {where}", difflib.get_close_matches(spec, ids, n=5, cutoff=0.6),
                              "`python -m lab runs list` shows the stored runs; give run:ID[/SEED] of one of them, "
                              "or the path of a weights file")
