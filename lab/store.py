"""The durable run store: one folder per run, written atomically while it runs.

Layout of one run (``<root>/<run_id>/``)::

    config.json                      the RunConfig, as given
    meta.json                        status, pid, host, timestamps, versions, device, layers, split ...
    tables/<table>/s<seed>-e<epoch>-<seq>.parquet    appended parts (metrics, training, utilization)
    tables/<table>/s<seed>-e<epoch>-c<seq>.parquet   a compacted group: every part of that group up to <seq>
    tables/contribution/s<seed>-<seq>.parquet
    arrays/embeddings/s<seed>/e<epoch>/<layer>.npz            X float16 (n, d), labels, indices
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

import contextlib
import dataclasses
import datetime as _dt
import errno
import functools
import itertools
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Any, Iterable, Mapping
from urllib.parse import quote, unquote

import numpy as np
import pandas as pd

from lab import analysis

__all__ = [
    "RunStore", "RunWriter", "RunRecord", "RunNotFoundError", "DamagedRunError", "validate_run_id",
    "resolve_checkpoint", "default_root", "STATUSES", "TERMINAL_STATUSES", "STALE_AFTER",
]

STATUSES = ("running", "finished", "failed", "cancelled", "interrupted")
TERMINAL_STATUSES = ("finished", "failed", "cancelled")
STALE_AFTER = 600.0
"""Seconds without a heartbeat after which a "running" run of another host reads as interrupted."""

_RUN_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_METHOD_RE = re.compile(r"[a-z0-9_]{1,32}")
_TMP_PREFIX = ".tmp-"

# Tables and their typed columns; extra keys in a row are kept with inferred types.
_TABLES: dict[str, dict[str, str]] = {
    "metrics": {"seed": "int64", "epoch": "int64", "layer": "string", "split": "string",
                "metric": "string", "value": "float64"},
    "training": {"seed": "int64", "epoch": "int64", "train_loss": "float64",
                 "train_accuracy": "float64", "heldout_accuracy": "float64",
                 "heldout_loss": "float64", "resilience": "float64", "seconds": "float64"},
    "utilization": {"seed": "int64", "epoch": "int64", "layer": "string",
                    "absolute": "float64", "relative": "float64"},
    "contribution": {"seed": "int64", "layer": "string", "metric": "string", "value": "float64"},
}
# Columns a row must carry to be stored (the rest of the typed columns may be missing).
_REQUIRED = {
    "metrics": ("seed", "epoch", "layer", "split", "metric", "value"),
    "training": ("seed", "epoch"),
    "utilization": ("seed", "epoch", "layer", "absolute", "relative"),
    "contribution": ("seed", "layer", "metric", "value"),
}
_PART_RE = re.compile(r"s(?P<seed>-?\d+)(?:-e(?P<epoch>-?\d+))?-(?P<compact>c?)(?P<seq>\d+)\.parquet")

_KNOWN_ROOTS: list[Path] = []
_KNOWN_ROOTS_LOCK = threading.Lock()


# ----------------------------------------------------------------------------------------------
# small helpers: time, json, atomic files, process liveness
# ----------------------------------------------------------------------------------------------

def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).astimezone().isoformat(timespec="seconds")


def _parse_time(value: Any) -> _dt.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        t = _dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=_dt.timezone.utc)


def _json_default(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (np.floating, np.integer, np.bool_)):
        return value.item()
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if isinstance(value, Path):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if hasattr(value, "tolist"):          # torch tensors, without importing torch
        return value.tolist()
    raise TypeError(f"cannot store a value of type {type(value).__name__} in JSON: {value!r}")


def _fsync_dir(folder: Path) -> None:
    # Makes the rename itself durable; not possible (nor needed) on every platform.
    if os.name == "nt":
        return
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@functools.lru_cache(maxsize=1)
def _umask() -> int:
    try:                                  # Linux: read it without changing it
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def _atomic_file(path: Path, sync_dir: bool = False):
    """Yield a binary file object; on success it replaces ``path`` in one rename.

    The temporary file lives in the same folder (so the rename is atomic) under a
    name readers skip (``.tmp-*``); it is removed if writing fails.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX + path.name + ".", dir=path.parent)
    try:
        if os.name != "nt":               # mkstemp makes 0600 files; give the usual permissions
            os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if sync_dir:
        _fsync_dir(path.parent)


def _write_json(path: Path, obj: Any) -> None:
    text = json.dumps(obj, indent=2, default=_json_default, allow_nan=True)
    with _atomic_file(path) as f:
        f.write(text.encode("utf-8"))


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _proc_start_time(pid: int) -> int | None:
    """Start time of a process in clock ticks since boot (Linux), to detect reused pids."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    try:
        return int(stat[stat.rindex(")") + 2:].split()[19])
    except (ValueError, IndexError):
        return None


def _pid_alive(pid: int, start_time: int | None = None) -> bool:
    """Whether process ``pid`` (started at ``start_time`` ticks, if known) is still running here."""
    if os.name == "nt":                   # os.kill(pid, 0) would terminate the process on Windows
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass                              # exists, owned by someone else
    except OSError:
        return False
    proc = Path(f"/proc/{pid}/stat")
    if proc.exists():
        try:
            stat = proc.read_text()
            fields = stat[stat.rindex(")") + 2:].split()
        except (OSError, ValueError):
            return True
        if fields and fields[0] in ("Z", "X"):     # killed but not yet reaped
            return False
        if start_time is not None and len(fields) > 19 and int(fields[19]) != int(start_time):
            return False                  # the pid now belongs to another process
    return True


@functools.lru_cache(maxsize=1)
def _versions() -> dict[str, str | None]:
    from importlib import metadata

    out: dict[str, str | None] = {"python": sys.version.split()[0]}
    for dist in ("numpy", "torch", "timm"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    try:
        import lab

        out["lab"] = getattr(lab, "__version__", None)
    except ImportError:               # pragma: no cover - store is part of lab
        out["lab"] = None
    out["git_commit"] = _git_commit(Path(__file__).resolve().parent)
    return out


def _git_commit(folder: Path) -> str | None:
    try:
        res = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=3, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = res.stdout.strip()
    return commit if res.returncode == 0 and re.fullmatch(r"[0-9a-f]{40,64}", commit) else None


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


def _layer_file(layer: str) -> str:
    if not isinstance(layer, str) or not layer:
        raise ValueError(f"layer must be a non-empty string; got {layer!r}")
    name = quote(layer, safe="")
    if name.startswith("."):
        name = "%2E" + name[1:]
    return name + ".npz"


def _as_numpy(x: Any, dtype: Any = None) -> np.ndarray:
    if hasattr(x, "detach"):              # torch tensor, without importing torch
        x = x.detach().cpu().numpy()
    arr = np.asarray(x)
    return arr.astype(dtype, copy=False) if dtype is not None else arr


def _check_int(name: str, value: Any) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer; got {value!r}")
    return int(value)


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


def _one_line(text: Any) -> str:
    return " ".join(str(text).split())


def _damaged_parts(path: Path) -> list[str]:
    """Table parts of a run (relative paths) that are not whole parquet files (checked by their
    magic bytes at both ends: a truncated file loses its footer)."""
    bad = []
    tables = path / "tables"
    if not tables.is_dir():
        return bad
    for folder in sorted(tables.iterdir()):
        for _key, live in sorted(_group_files(folder).items(), key=lambda kv: str(kv[0])):
            for _seq, part in live:
                try:
                    with open(part, "rb") as f:
                        head = f.read(4)
                        f.seek(0, os.SEEK_END)
                        size = f.tell()
                        f.seek(max(size - 4, 0))
                        tail = f.read(4)
                except FileNotFoundError:
                    continue              # merged away meanwhile
                except OSError:
                    head = tail = b""
                if size < 12 or head != b"PAR1" or tail != b"PAR1":
                    bad.append(part.relative_to(path).as_posix())
    return bad


# ----------------------------------------------------------------------------------------------
# tables: parquet parts
# ----------------------------------------------------------------------------------------------

def _frame(table: str, rows: list[dict]) -> pd.DataFrame:
    columns = _TABLES[table]
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise ValueError(f"{table} rows must be dicts; row {i} is {type(row).__name__}")
        missing = [c for c in _REQUIRED[table] if c not in row]
        if missing:
            raise ValueError(f"{table} row {i} lacks {missing}; expected keys {list(_REQUIRED[table])}, "
                             f"got {sorted(row)}")
    df = pd.DataFrame([dict(r) for r in rows])
    for col, dtype in columns.items():
        if col not in df:
            if col in _REQUIRED[table]:
                continue
            df[col] = np.nan if dtype == "float64" else None
        if dtype == "int64":
            try:
                df[col] = df[col].astype("int64")
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{table} column {col!r} must hold integers; got "
                                 f"{df[col].tolist()!r}") from exc
        elif dtype == "float64":
            df[col] = pd.to_numeric(df[col].astype(object).where(df[col].notna(), np.nan),
                                    errors="coerce").astype("float64")
        else:
            df[col] = df[col].astype(object).where(df[col].notna(), None).map(
                lambda v: v if v is None else str(v))
    ordered = [c for c in columns if c in df] + [c for c in df if c not in columns]
    return df[ordered]


def _empty(table: str) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="object" if t == "string" else t)
                         for c, t in _TABLES[table].items()})


def _write_parquet(path: Path, df: pd.DataFrame) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    tab = pa.Table.from_pandas(df, preserve_index=False)
    with _atomic_file(path) as f:
        pq.write_table(tab, f, compression="zstd")


def _group_files(folder: Path) -> dict[tuple, list[tuple[int, Path]]]:
    """{(seed, epoch|None): [(seq, path)]} of the live files of a table, in seq order.

    For each group: the newest compacted file and the raw parts written after it.
    """
    groups: dict[tuple, dict[str, Any]] = {}
    if not folder.is_dir():
        return {}
    for path in folder.iterdir():
        m = _PART_RE.fullmatch(path.name)
        if m is None:
            continue                      # temp files and strangers
        key = (int(m["seed"]), None if m["epoch"] is None else int(m["epoch"]))
        g = groups.setdefault(key, {"compact": None, "parts": []})
        seq = int(m["seq"])
        if m["compact"]:
            if g["compact"] is None or seq > g["compact"][0]:
                g["compact"] = (seq, path)
        else:
            g["parts"].append((seq, path))
    out = {}
    for key, g in groups.items():
        floor = g["compact"][0] if g["compact"] else -1
        live = ([g["compact"]] if g["compact"] else []) + sorted(p for p in g["parts"] if p[0] > floor)
        out[key] = live
    return out


def _read_table(folder: Path, table: str, damaged: list[str] | None = None,
                run_path: Path | None = None) -> pd.DataFrame:
    """One table of a run. A part that cannot be read (truncated, corrupt) is skipped with a warning
    naming it, and its relative path is appended to ``damaged``; the other parts load."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for _attempt in range(5):             # a concurrent merge may delete a part we listed
        groups = _group_files(folder)
        tables = []
        skipped = []
        try:
            for key in sorted(groups, key=lambda k: (k[0], -1 if k[1] is None else k[1])):
                for _seq, path in groups[key]:
                    try:
                        tables.append(pq.read_table(path))
                    except FileNotFoundError:
                        raise
                    except (pa.ArrowException, OSError) as exc:
                        skipped.append((path, exc))
        except FileNotFoundError:
            continue
        break
    else:
        raise OSError(f"table {table!r} in {folder} kept changing while being read; try again")
    for path, exc in skipped:
        name = path.relative_to(run_path).as_posix() if run_path is not None else str(path)
        if damaged is not None and name not in damaged:
            damaged.append(name)
        where = f"run {run_path.name}: " if run_path is not None else ""
        warnings.warn(f"{where}skipping the damaged table part {name} ({type(exc).__name__}: {_one_line(exc)}); "
                      f"the rest of the run loads; delete that file to drop it for good", stacklevel=4)
    if not tables:
        return _empty(table)
    df = pa.concat_tables(tables, promote_options="default").to_pandas()
    for col, dtype in _TABLES[table].items():
        if col in df and dtype != "string":
            df[col] = df[col].astype(dtype)
    return df.reset_index(drop=True)


# ----------------------------------------------------------------------------------------------
# writer
# ----------------------------------------------------------------------------------------------

class RunWriter:
    """Appends the results of one run to its folder; every write is atomic.

    Obtained from :meth:`RunStore.create`. Thread-safe (a background projection
    thread may save while the engine appends). Usable as a context manager: an
    exception marks the run "failed", a clean exit "finished" (unless
    :meth:`finish` was called already).
    """

    def __init__(self, store: "RunStore", run_id: str, path: Path, meta: dict):
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
            _write_json(self.path / "meta.json", meta)    # raises before anything changes
            self._meta = meta

    def heartbeat(self) -> None:
        """Refresh meta's ``updated`` time, so readers on other hosts know the run is alive."""
        self.update_meta()

    def finish(self, status: str, message: str | None = None, summary: dict | None = None) -> None:
        """Close the run with ``status`` in finished|failed|cancelled; merges every table."""
        if status not in TERMINAL_STATUSES:
            raise ValueError(f"status must be one of {list(TERMINAL_STATUSES)}; got {status!r}")
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
                _write_parquet(self.path / "tables" / table / name, part)

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
            self.finish("finished")
        elif issubclass(exc_type, (KeyboardInterrupt, GeneratorExit)):
            self.finish("cancelled", message="cancelled")
        else:
            self.finish("failed", message=f"{exc_type.__name__}: {exc}")

    def __repr__(self) -> str:
        return f"RunWriter({self.run_id!r}, path={str(self.path)!r})"


# ----------------------------------------------------------------------------------------------
# reader
# ----------------------------------------------------------------------------------------------

def _derived_status(meta: dict) -> str:
    status = meta.get("status", "unknown")
    if status != "running":
        return status
    pid, host = meta.get("pid"), meta.get("host")
    if host == socket.gethostname() and isinstance(pid, int) and os.name != "nt":
        return "running" if _pid_alive(pid, meta.get("pid_start")) else "interrupted"
    updated = _parse_time(meta.get("updated") or meta.get("started"))
    if updated is None:
        return "interrupted"
    age = (_dt.datetime.now(_dt.timezone.utc) - updated).total_seconds()
    return "running" if age < STALE_AFTER else "interrupted"


def _summary(record: "RunRecord") -> dict:
    """:func:`lab.analysis.run_summary` of a stored run, plus its status."""
    meta = record.meta
    out = analysis.run_summary(record.metrics, record.training, layers=meta.get("layers"),
                               aliases=meta.get("layer_aliases"))
    return {"status": record.status, **out}


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
    def status(self) -> str:
        return self.meta.get("status", "unknown")

    @property
    def name(self) -> str | None:
        return self.meta.get("name")

    @functools.cached_property
    def metrics(self) -> pd.DataFrame:
        """Long table: seed, epoch, layer, split, metric, value."""
        return self._table("metrics")

    @functools.cached_property
    def training(self) -> pd.DataFrame:
        """One row per (seed, epoch): train_loss, train_accuracy, heldout_accuracy, heldout_loss, ..."""
        return self._table("training")

    @functools.cached_property
    def utilization(self) -> pd.DataFrame:
        """seed, epoch, layer, absolute, relative."""
        return self._table("utilization")

    @functools.cached_property
    def contribution(self) -> pd.DataFrame:
        """seed, layer, metric, value."""
        return self._table("contribution")

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
            raise KeyError(f"run {self.run_id!r} has no embeddings for seed={seed}, epoch={epoch}, "
                           f"layer={layer!r}; see RunRecord.embedding_keys() for what is stored")
        with np.load(path, allow_pickle=False) as z:
            return z["X"], z["labels"], z["indices"]

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

    def summary(self) -> dict:
        """What the run measured (:func:`lab.analysis.run_summary`: g, its best layer and seed spread at
        the last complete epoch, whether that layer is the final representation, the seen held-out
        accuracy) and the status."""
        return _summary(self)

    def __repr__(self) -> str:
        return f"RunRecord({self.run_id!r}, status={self.status!r}, path={str(self.path)!r})"


# ----------------------------------------------------------------------------------------------
# the store
# ----------------------------------------------------------------------------------------------

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
        resolved = self.root.resolve()
        with _KNOWN_ROOTS_LOCK:
            if resolved in _KNOWN_ROOTS:
                _KNOWN_ROOTS.remove(resolved)
            _KNOWN_ROOTS.insert(0, resolved)

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
            _write_json(staging / "config.json", cfg)
            for _ in range(64):
                run_id = validate_run_id(f"{base}-{secrets.token_hex(2)}", self.root)
                meta["run_id"] = run_id
                _write_json(staging / "meta.json", meta)
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
                summ = rec.meta.get("summary") if rec.status in TERMINAL_STATUSES else None
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
                "run_id": rec.run_id, "name": rec.name, "status": rec.status,
                "dataset": cfg.get("dataset"), "backbone": cfg.get("backbone"),
                "strategy": cfg.get("strategy"), "epochs": getattr(rec.config, "n_epochs", cfg.get("epochs")),
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
            if isinstance(meta, dict) and _derived_status(meta) == "running":
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
    def checkpoint_path(self, spec: str) -> Path:
        """``"run:ID"`` or ``"run:ID/SEED"`` (or ``"ID[/SEED]"``) → path of the fine-tuned weights."""
        run_id, seed = _parse_checkpoint_spec(spec)
        return self.load(run_id).weights_path(seed)


def _parse_checkpoint_spec(spec: str) -> tuple[str, int | None]:
    body = spec[4:] if spec.startswith("run:") else spec
    run_id, _, seed = body.partition("/")
    if seed and not re.fullmatch(r"\d+", seed):
        raise ValueError(f"checkpoint {spec!r} is not valid: expected 'run:ID' or 'run:ID/SEED' with an "
                         f"integer seed; got seed {seed!r}")
    return run_id, int(seed) if seed else None


def resolve_checkpoint(spec: str, root: str | os.PathLike | None = None) -> Path:
    """Resolve ``"run:ID[/seed]"`` to the run's ``weights/seed{seed}.safetensors``.

    Looks in ``root`` when given, else in the default store and in every store
    opened in this process (most recent first).
    """
    if root is not None:
        return RunStore(root).checkpoint_path(spec)
    run_id, _seed = _parse_checkpoint_spec(spec)
    with _KNOWN_ROOTS_LOCK:
        roots = [default_root().resolve()] + [r for r in _KNOWN_ROOTS]
    seen: list[Path] = []
    for r in roots:
        if r in seen:
            continue
        seen.append(r)
        validate_run_id(run_id, r)
        if (r / run_id / "meta.json").is_file():
            return RunStore(r).checkpoint_path(spec)
    raise RunNotFoundError(f"no run {run_id!r} for checkpoint {spec!r} in the stores "
                           f"{[str(s) for s in seen]}; set $LAB_RUNS_DIR or open the store first")
