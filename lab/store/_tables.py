"""Tables of the run store: appended parquet parts, merged per group, read back skipping damaged parts.

``tables/<table>/s<seed>-e<epoch>-<seq>.parquet`` are appended parts and
``s<seed>-e<epoch>-c<seq>.parquet`` a compacted group (every part of that group up to
``<seq>``); a reader takes the newest compacted file of a group plus the parts written
after it, so a kill during a merge loses nothing and duplicates nothing.
"""
from __future__ import annotations

import os
import re
import warnings
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from lab.store._files import _atomic_file, _one_line

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

