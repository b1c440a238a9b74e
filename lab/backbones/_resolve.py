"""The checkpoint sources of :data:`lab.backbones._registry.SOURCES`: a spec -> a :class:`Checkpoint`.

Two forms: the path of a weights file (``.safetensors``, or a PyTorch state_dict read with
``weights_only=True``), and ``run:ID[/SEED]``, the fine-tuned weights of a stored run. Only a run store
knows where a run keeps its weights: a ``run:`` spec is handed to the store passed down as ``store=``
(anything with ``run_weights(spec) -> path``, as :class:`lab.RunStore` has), so the model layer never
imports the store and nothing is remembered between calls. Every problem is a
:class:`lab.errors.CheckpointError` (a ValueError) that names the spec, the problem and the fix.
"""
from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from pathlib import Path

from lab.errors import CheckpointError, CheckpointNotFoundError

__all__ = ["Checkpoint", "resolve_file", "check_file", "resolve_run", "check_run"]

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
    """The fine-tuned weights of stored run ``run:ID[/SEED]``, found by ``store.run_weights`` (a
    :class:`lab.RunStore` looks in itself, then in the default store)."""
    lookup = getattr(store, "run_weights", None)
    if not callable(lookup):
        given = "no store" if store is None else f"store={store!r}"
        raise CheckpointError(name, f"names a stored run, which only its run store can find, and {given} was given",
                              [], f"pass the store: lab.backbones.resolve_checkpoint({name!r}, store=lab.RunStore()) "
                                  f"for the default store ($LAB_RUNS_DIR or ./runs), or store=lab.RunStore(FOLDER)")
    path = Path(lookup(name))
    return Checkpoint(name, path, _kind(path), "run")


def check_run(name: str, body: str, *, store=None) -> None:
    resolve_run(body, name=name, store=store)
