"""The checkpoint sources of :data:`lab.backbones._registry.SOURCES`: a spec -> a :class:`Checkpoint`.

Two forms: the path of a weights file (``.safetensors``, or a PyTorch state_dict read with
``weights_only=True``), and ``run:ID[/SEED]``, the fine-tuned weights of a stored run. A run is
looked up by the store (:func:`lab.store.resolve_run_checkpoint`) in the store it is given, then in the
default store (``$LAB_RUNS_DIR`` or ``./runs``), as a run looks up its own checkpoint; the store is always
passed down, never remembered. Every problem is
a :class:`lab.errors.CheckpointError` (a ValueError) that names the spec, the problem and the fix.

:mod:`lab.store` is imported only here, and only to resolve a ``run:`` spec: building a backbone from
a file, or from no checkpoint, never loads the store.
"""
from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from pathlib import Path

from lab.errors import CheckpointError, CheckpointNotFoundError

__all__ = ["Checkpoint", "resolve_file", "check_file", "resolve_run", "check_run", "run_names"]

_EXTS = (".safetensors", ".pt", ".pth", ".bin", ".ckpt")
_FILE_FIX = ("give the path of a .safetensors or PyTorch state_dict file, or run:ID[/SEED] for the fine-tuned "
             "weights of a stored run")


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
    raise CheckpointNotFoundError(name, f"no such file ({os.path.abspath(spec)} does not exist)", _close_files(spec),
                                  _FILE_FIX)


def check_file(name: str, spec: str, *, store=None) -> None:
    resolve_file(spec, name=name)


def resolve_run(body: str, *, name: str, store=None) -> Checkpoint:
    """The fine-tuned weights of stored run ``run:ID[/SEED]`` (default seed: the run's first), looked up in
    ``store`` (a RunStore or its folder), then the default store (:func:`lab.store.resolve_run_checkpoint`)."""
    from lab.store import resolve_run_checkpoint

    path = resolve_run_checkpoint(name, store)
    return Checkpoint(name, path, _kind(path), "run")


def check_run(name: str, body: str, *, store=None) -> None:
    """As :func:`resolve_run`, worded for an up-front check (:func:`lab.store.check_run_checkpoint`)."""
    from lab.store import check_run_checkpoint

    check_run_checkpoint(name, store)


def run_names() -> list[str]:
    """``run:ID`` of every run in the default store."""
    from lab.store import RunStore

    return [f"run:{i}" for i in sorted(RunStore().ids())]
