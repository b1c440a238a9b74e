"""The checkpoint sources of :data:`lab.backbones._registry.SOURCES`: a spec -> a :class:`Checkpoint`.

Two forms: the path of a weights file (``.safetensors``, or a PyTorch state_dict read with
``weights_only=True``), and ``run:ID[/SEED]``, the fine-tuned weights of a stored run. A run is
looked up in the store it is given, then in the default store (``$LAB_RUNS_DIR`` or ``./runs``), as a
run looks up its own checkpoint; the store is always passed down, never remembered. Every problem is
a :class:`lab.errors.CheckpointError` (a ValueError) that names the spec, the problem and the fix.

:mod:`lab.store` is imported only here, and only to resolve a ``run:`` spec: building a backbone from
a file, or from no checkpoint, never loads the store.
"""
from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from lab.errors import CheckpointError, CheckpointNotFoundError

__all__ = ["Checkpoint", "resolve_file", "check_file", "resolve_run", "check_run", "run_names", "parse_run_spec"]

_EXTS = (".safetensors", ".pt", ".pth", ".bin", ".ckpt")
_FILE_FIX = ("give the path of a .safetensors or PyTorch state_dict file, or run:ID[/SEED] for the fine-tuned "
             "weights of a stored run")
_RUN_FIX = ("`python -m lab runs list` shows the stored runs; give run:ID[/SEED] of one of them, or the path of "
            "a weights file")


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint spec resolved to a file.

    Attributes
    ----------
    spec : str
        As given (``"w.safetensors"``, ``"run:ID/1"``).
    path : Path
        The weights file; it exists.
    kind : {"safetensors", "torch"}
        How it is read: safetensors, or ``torch.load(weights_only=True)``.
    source : str
        The registry entry that resolved it (``"file"`` or ``"run"``).
    """

    spec: str
    path: Path
    kind: str
    source: str

    def __fspath__(self) -> str:
        return str(self.path)


def _kind(path: str | Path) -> str:
    return "safetensors" if str(path).endswith(".safetensors") else "torch"


def _close_files(path: str) -> list[str]:
    """Checkpoint files next to ``path`` whose names are close to its name."""
    folder, base = os.path.split(os.path.abspath(path))
    try:
        names = [n for n in os.listdir(folder) if n.endswith(_EXTS)]
    except OSError:
        return []
    return [os.path.join(os.path.dirname(path), n) for n in difflib.get_close_matches(base, names, n=5, cutoff=0.6)]


def resolve_file(spec: str, *, name: str, store=None) -> Checkpoint:
    """A weights file that exists (``store`` is not used)."""
    if os.path.isfile(spec):
        return Checkpoint(name, Path(spec), _kind(spec), "file")
    if os.path.isdir(spec):
        raise CheckpointError(name, "is a folder, not a file", _close_files(spec), _FILE_FIX)
    raise CheckpointNotFoundError(name, f"no such file ({os.path.abspath(spec)})", _close_files(spec), _FILE_FIX)


def check_file(name: str, spec: str, *, store=None) -> None:
    resolve_file(spec, name=name)


def parse_run_spec(spec: str) -> tuple[str, int | None]:
    """``"run:ID"`` or ``"run:ID/SEED"`` (or ``"ID[/SEED]"``) -> (ID, SEED or None); a bad seed raises."""
    body = spec[4:] if spec.startswith("run:") else spec
    run_id, _, seed = body.partition("/")
    if seed and not re.fullmatch(r"\d+", seed):
        raise CheckpointError(spec, f"checkpoint {spec!r} is not valid: expected 'run:ID' or 'run:ID/SEED' with an "
                                    f"integer seed; got seed {seed!r}")
    return run_id, int(seed) if seed else None


def _stores(store) -> list:
    """``store`` (a RunStore or its folder), then the default store, each once."""
    from lab.store import RunStore

    given = [] if store is None else [store if isinstance(store, RunStore) else RunStore(store)]
    out = []
    for s in given + [RunStore()]:
        if all(s.root.resolve() != o.root.resolve() for o in out):
            out.append(s)
    return out


def _find(name: str, store) -> tuple[Path | None, list]:
    """The weights file of ``run:ID[/SEED]`` in the first store that holds the run (None: none does),
    and the stores searched. A bad id, a damaged run or missing weights raise."""
    from lab.store import RunNotFoundError

    run_id, seed = parse_run_spec(name)
    stores = _stores(store)
    for s in stores:
        try:
            record = s.load(run_id)
        except RunNotFoundError:
            continue
        except ValueError as exc:             # an id that is not valid, a damaged run
            raise CheckpointError(name, str(exc), [], "") from exc
        try:
            return record.weights_path(seed), stores
        except FileNotFoundError as exc:
            raise CheckpointNotFoundError(name, str(exc), [], "") from exc
    return None, stores


def _close_runs(name: str, stores) -> list[str]:
    ids = [f"run:{i}" for s in stores for i in s.ids()]
    return difflib.get_close_matches(name, list(dict.fromkeys(ids)), n=5, cutoff=0.6)


def resolve_run(body: str, *, name: str, store=None) -> Checkpoint:
    """The fine-tuned weights of stored run ``run:ID[/SEED]`` (default seed: the run's first)."""
    path, stores = _find(name, store)
    if path is None:
        run_id, _ = parse_run_spec(name)
        roots = [str(s.root.resolve()) for s in stores]
        raise CheckpointError(name, f"no run {run_id!r} for checkpoint {name!r} in the stores {roots}",
                              _close_runs(name, stores), _RUN_FIX)
    return Checkpoint(name, path, _kind(path), "run")


def check_run(name: str, body: str, *, store=None) -> None:
    """As :func:`resolve_run`, worded for an up-front check: the store given, the closest runs in it."""
    path, stores = _find(name, store)
    if path is None:
        where = f"the store {stores[0].root.resolve()}"
        if len(stores) > 1:
            where += f" (nor in the default store {stores[1].root.resolve()})"
        raise CheckpointError(name, f"no such run in {where}", _close_runs(name, stores), _RUN_FIX)


def run_names() -> list[str]:
    """``run:ID`` of every run in the default store."""
    from lab.store import RunStore

    return [f"run:{i}" for i in sorted(RunStore().ids())]
