"""Run archives: whole run folders packed into one file, and imported atomically.

Studies ship finished runs from Dask workers back to the client this way (the workers need
not share the client's filesystem), and ``python -m lab runs pack|unpack`` uses the same
format for sharing runs.

Format: a gzip-compressed tar holding ``layerscope-archive.json`` (format version and run
ids) and one top-level folder per run, exactly as the store lays it out.

Importing is atomic per run: the folder is extracted under a hidden staging name inside
the store (Python's ``data`` extraction filter refuses links, devices and paths that leave
the folder) and renamed into place once whole, so a reader never sees half a run and an
interrupted import leaves nothing behind but a hidden ``.tmp-*`` folder.
"""
from __future__ import annotations

import io
import json
import os
import secrets
import shutil
import tarfile
from pathlib import Path
from typing import Iterable

from lab.status import RunStatus
from lab.store import RunStore, atomic_file, validate_run_id
from lab.store.lookup import is_record, open_store, run_id_of

__all__ = ["pack", "unpack", "pack_bytes", "unpack_bytes", "ArchiveError"]

_MANIFEST = "layerscope-archive.json"
_FORMAT = 1


class ArchiveError(ValueError):
    """The file is not a layerscope run archive, or holds something unsafe."""


def _runs_to_tar(runs: Iterable, store: RunStore, fileobj) -> list[str]:
    runs = [runs] if isinstance(runs, str) or is_record(runs) else runs
    ids = [validate_run_id(run_id_of(r), store.root) for r in runs]
    if not ids:
        raise ValueError("give at least one run id to pack; `python -m lab runs list` shows them")
    for run_id in ids:
        rec = store.load(run_id)              # RunNotFoundError names the store
        if rec.status is RunStatus.RUNNING:
            raise ValueError(f"run {run_id!r} is still running; pack it once it has finished or been cancelled")
    with tarfile.open(fileobj=fileobj, mode="w:gz") as tar:
        manifest = json.dumps({"format": _FORMAT, "runs": ids}).encode()
        info = tarfile.TarInfo(_MANIFEST)
        info.size = len(manifest)
        tar.addfile(info, io.BytesIO(manifest))
        for run_id in ids:
            # skip the store's hidden temporary files (a write in flight)
            tar.add(store.path(run_id), arcname=run_id,
                    filter=lambda t: None if Path(t.name).name.startswith(".tmp-") else t)
    return ids


def pack(runs: Iterable, path: str | os.PathLike, *, store=None) -> Path:
    """Write the given runs (ids or records, of ``store``: None the default store, a RunStore or a folder
    path) into one archive file at ``path`` (written atomically)."""
    store = open_store(store)
    path = Path(path)
    with atomic_file(path) as f:
        _runs_to_tar(runs, store, f)
    return path


def pack_bytes(runs: Iterable, *, store=None) -> bytes:
    """The archive of the given runs as bytes (what a study worker sends back)."""
    buf = io.BytesIO()
    _runs_to_tar(runs, open_store(store), buf)
    return buf.getvalue()


def _read_manifest(tar: tarfile.TarFile, where: str) -> list[str]:
    try:
        member = tar.getmember(_MANIFEST)
        manifest = json.loads(tar.extractfile(member).read())
    except (KeyError, AttributeError, ValueError) as exc:
        raise ArchiveError(f"{where} is not a layerscope run archive (no {_MANIFEST}); "
                           f"make one with `python -m lab runs pack RUN_ID... -o FILE`") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != _FORMAT or not isinstance(manifest.get("runs"), list):
        raise ArchiveError(f"{where} has an unknown archive format {manifest!r:.80}; it was written by "
                           f"another version of layerscope")
    return [validate_run_id(r) for r in manifest["runs"]]


def _import(store: RunStore, tar: tarfile.TarFile, where: str) -> list[str]:
    ids = _read_manifest(tar, where)
    names = set(ids)
    for member in tar.getmembers():
        top = member.name.split("/", 1)[0]
        if member.name != _MANIFEST and top not in names:
            raise ArchiveError(f"{where} holds {member.name!r}, which belongs to no run of its manifest")
    store.root.mkdir(parents=True, exist_ok=True)
    imported = []
    for run_id in ids:
        target = store.root / run_id
        if target.exists():
            continue                          # already imported (a retried study cell, a second unpack)
        staging = store.root / f".tmp-import-{secrets.token_hex(6)}"
        staging.mkdir()
        try:
            members = [m for m in tar.getmembers() if m.name == run_id or m.name.startswith(run_id + "/")]
            try:
                tar.extractall(staging, members=members, filter="data")
            except tarfile.FilterError as exc:
                raise ArchiveError(f"{where} holds an unsafe entry ({exc}); nothing of run {run_id!r} "
                                   f"was imported") from exc
            if not (staging / run_id / "meta.json").is_file():
                raise ArchiveError(f"run {run_id!r} in {where} has no meta.json; it was not imported")
            try:
                os.rename(staging / run_id, target)
            except OSError:
                if not target.exists():
                    raise
                continue                      # another process imported it meanwhile
            imported.append(run_id)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return imported


def unpack(path: str | os.PathLike, *, store=None) -> list[str]:
    """Import every run of the archive at ``path`` that ``store`` (None: the default store, a RunStore or a
    folder path) lacks; returns their ids."""
    store = open_store(store)
    path = Path(path)
    try:
        tar = tarfile.open(path, mode="r:*")
    except FileNotFoundError:
        # the path the user typed is input: a usage error (exit 2), not a failing disk
        raise ValueError(f"no archive at {path}; check the path") from None
    except tarfile.TarError as exc:        # its text lists every compression tried: not for the user
        raise ArchiveError(f"{path} is not a layerscope run archive (not a tar.gz file); make one with "
                           f"`python -m lab runs pack RUN_ID... -o FILE`") from exc
    with tar:
        return _import(store, tar, str(path))


def unpack_bytes(data: bytes, *, store=None) -> list[str]:
    """Import the runs of an archive held in memory (see :func:`pack_bytes`) into ``store``."""
    store = open_store(store)
    try:
        tar = tarfile.open(fileobj=io.BytesIO(data), mode="r:*")
    except tarfile.TarError as exc:
        raise ArchiveError(f"the archive sent back is damaged ({exc})") from exc
    with tar:
        return _import(store, tar, "the archive")
