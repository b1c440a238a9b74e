"""File utilities of the run store: atomic writes, JSON, fsync, umask, process liveness, versions.

Every file is written to a temporary name (``.tmp-*``) in its own folder and renamed
into place, so a reader never sees half a file.
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import functools
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np

_TMP_PREFIX = ".tmp-"


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


def _one_line(text: Any) -> str:
    return " ".join(str(text).split())


def _layer_file(layer: str) -> str:
    if not isinstance(layer, str) or not layer:
        raise ValueError(f"layer must be a non-empty string; got {layer!r}")
    name = quote(layer, safe="")
    if name.startswith("."):
        name = "%2E" + name[1:]
    return name + ".npz"

