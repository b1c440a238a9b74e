"""The class-mean geometry of a run: one small npz per evaluation, ``arrays/class_means/s{seed}-e{epoch:04d}.npz``.

Each file holds, for every (layer, split) the evaluation measured (``ClassMeans`` events: every chosen layer on
splits "train" and "unseen"), the Gram matrix MᵀM of the centred class means (K × K float64) and the class
names, flattened so that one file holds matrices of different K:

- ``layer``, ``split`` (M,) str; ``n_classes`` (M,) int64;
- ``classes`` (Σ K,) str, ``gram`` (Σ K²,) float64, in the entries' order.

Written atomically (a temporary file renamed into place), like every file of the store; a run recorded without
these files reads as an empty table with a reason (``RunRecord.class_means_problem``).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np
import pandas as pd

from lab.errors import not_evaluated, not_recorded
from lab.status import RunStatus
from lab.store._files import _atomic_file

__all__ = ["CLASS_MEANS_DIR", "CLASS_MEANS_COLUMNS", "write_class_means", "read_class_means", "class_means_file",
           "class_means_problem"]

CLASS_MEANS_DIR = ("arrays", "class_means")
CLASS_MEANS_COLUMNS = ["seed", "epoch", "layer", "split", "classes", "gram"]
_NAME_RE = re.compile(r"s(?P<seed>\d+)-e(?P<epoch>\d+)\.npz")


def class_means_file(run_path: Path, seed: int, epoch: int) -> Path:
    """Where the class means of evaluation (seed, epoch) live in a run folder."""
    return run_path.joinpath(*CLASS_MEANS_DIR, f"s{int(seed)}-e{int(epoch):04d}.npz")


def write_class_means(path: Path, entries: Iterable[Mapping]) -> None:
    """Write one evaluation's entries ``{layer, split, classes, gram}`` to ``path`` atomically."""
    entries = list(entries)
    grams = [np.asarray(e["gram"], dtype=np.float64) for e in entries]
    for entry, gram in zip(entries, grams):
        K = len(entry["classes"])
        if gram.shape != (K, K):
            raise ValueError(f"class means of layer {entry['layer']!r} ({entry['split']}): gram must be (K, K) = "
                             f"({K}, {K}) for its {K} classes; got {gram.shape}")
    arrays = {
        "layer": np.array([str(e["layer"]) for e in entries], dtype=str),
        "split": np.array([str(e["split"]) for e in entries], dtype=str),
        "n_classes": np.array([len(e["classes"]) for e in entries], dtype=np.int64),
        "classes": np.array([str(c) for e in entries for c in e["classes"]], dtype=str),
        "gram": np.concatenate([g.ravel() for g in grams]) if grams else np.zeros(0),
    }
    with _atomic_file(path) as f:
        np.savez(f, **arrays)


def _read_file(path: Path, seed: int, epoch: int) -> list[dict]:
    with np.load(path, allow_pickle=False) as z:
        layers, splits, sizes = z["layer"], z["split"], z["n_classes"]
        classes, flat = z["classes"], z["gram"]
    rows, c, g = [], 0, 0
    for layer, split, K in zip(layers, splits, sizes):
        K = int(K)
        gram = flat[g:g + K * K].reshape(K, K)
        rows.append({"seed": seed, "epoch": epoch, "layer": str(layer), "split": str(split),
                     "classes": [str(x) for x in classes[c:c + K]], "gram": gram})
        c, g = c + K, g + K * K
    if c != len(classes) or g != len(flat):
        raise ValueError(f"{path.name}: the class names and Gram entries do not add up to the listed classes")
    return rows


def read_class_means(run_path: Path, damaged: list[str]) -> pd.DataFrame:
    """Every stored evaluation's class means: one row per (seed, epoch, layer, split), ``classes`` a list of
    names and ``gram`` a (K, K) float64 array; an unreadable file is skipped and named in ``damaged``."""
    folder = run_path.joinpath(*CLASS_MEANS_DIR)
    rows: list[dict] = []
    files = sorted(folder.glob("s*-e*.npz")) if folder.is_dir() else []
    for path in files:
        m = _NAME_RE.fullmatch(path.name)
        if m is None:
            continue
        try:
            rows.extend(_read_file(path, int(m["seed"]), int(m["epoch"])))
        except (OSError, ValueError, KeyError):   # a damaged file: the others still load
            name = path.relative_to(run_path).as_posix()
            if name not in damaged:
                damaged.append(name)
    frame = pd.DataFrame(rows, columns=CLASS_MEANS_COLUMNS)
    return frame.sort_values(["seed", "epoch"], kind="stable").reset_index(drop=True)


def class_means_problem(run_id: str, run_path: Path, status: str, frame: pd.DataFrame, *,
                        evaluated: bool = True) -> str | None:
    """Why a run has no class means, in one line, or None when it has some (``evaluated``: whether the run
    measured anything at all)."""
    if len(frame):
        return None
    folder = run_path.joinpath(*CLASS_MEANS_DIR)
    if folder.is_dir() and any(folder.glob("s*-e*.npz")):
        return f"run {run_id!r}: its class-means files are damaged; run it again to get new ones"
    if status == RunStatus.RUNNING:
        return f"run {run_id!r} has not finished an evaluation yet; its class means come with the first"
    if not evaluated:
        return not_evaluated(run_id, "class means", status)
    return not_recorded(run_id, "class means")
