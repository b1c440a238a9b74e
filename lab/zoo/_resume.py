"""Resume state of the zoo recipe: per-epoch checkpoints, so that an interrupted pretraining run resumes
where it stopped (not weight files to load: those are lab.backbones' checkpoints).

After every epoch :func:`save` writes ``OUT.partial/epoch-NNNN/`` holding
``state.safetensors`` (the model, the optimizer's tensors and the torch random state) and
``state.json`` (everything else: the recipe, the epoch, the history so far, the optimizer's
and the scheduler's numbers, elapsed time). Both are written in a temporary folder that is
renamed into place, so a checkpoint is either whole or absent; older epochs are then
removed. Nothing is pickled: tensors go to safetensors, the rest to JSON, and nested state
dicts are split between the two by :func:`_split` / :func:`_join`.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from pathlib import Path

__all__ = ["partial_dir", "save", "load_latest", "recipe_differences", "remove"]

FORMAT = 1
_EPOCH = re.compile(r"epoch-(\d{4,})")


def partial_dir(out: Path) -> Path:
    """The checkpoint folder of the run writing ``out`` (``DIR/NAME``): ``DIR/NAME.partial``."""
    return out.parent / f"{out.name}.partial"


def _split(obj, prefix: str, tensors: dict):
    """JSON-able copy of ``obj`` with every tensor moved into ``tensors`` under a dotted key.

    Dicts with keys other than strings (an optimizer's ``state``) become ``{"__items__": [[k, v]...]}``.
    """
    import torch

    if isinstance(obj, torch.Tensor):
        tensors[prefix] = obj.detach().cpu().contiguous()
        return {"__tensor__": prefix}
    if isinstance(obj, dict):
        if all(isinstance(k, str) for k in obj):
            return {k: _split(v, f"{prefix}.{k}", tensors) for k, v in obj.items()}
        return {"__items__": [[k, _split(v, f"{prefix}.{k}", tensors)] for k, v in obj.items()]}
    if isinstance(obj, (list, tuple)):
        return [_split(v, f"{prefix}.{i}", tensors) for i, v in enumerate(obj)]
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise TypeError(f"cannot checkpoint a value of type {type(obj).__name__} at {prefix!r}")


def _join(obj, tensors: dict):
    """Inverse of :func:`_split`."""
    if isinstance(obj, dict):
        if set(obj) == {"__tensor__"}:
            return tensors[obj["__tensor__"]]
        if set(obj) == {"__items__"}:
            return {k: _join(v, tensors) for k, v in obj["__items__"]}
        return {k: _join(v, tensors) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_join(v, tensors) for v in obj]
    return obj


def save(folder: Path, epoch: int, *, recipe: dict, model, optimizer, scheduler, info: dict) -> Path:
    """Write the checkpoint after ``epoch`` into ``folder`` atomically; returns its path.

    ``info`` is JSON-able run state (history, elapsed seconds); the torch random state is
    saved too, though the recipe draws its batches from generators seeded per epoch.
    """
    import torch
    from safetensors.torch import save_file

    tensors: dict = {}
    state = {
        "format": FORMAT, "epoch": int(epoch), "recipe": recipe, "info": info,
        "model": _split(model.state_dict(), "model", tensors),
        "optimizer": _split(optimizer.state_dict(), "optimizer", tensors),
        "scheduler": _split(scheduler.state_dict(), "scheduler", tensors),
        "torch_rng": _split(torch.get_rng_state(), "torch_rng", tensors),
    }
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / f"epoch-{int(epoch):04d}"
    tmp = folder / f".tmp-{final.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        save_file(tensors, str(tmp / "state.safetensors"), metadata={"format": str(FORMAT)})
        (tmp / "state.json").write_text(json.dumps(state, indent=1, ensure_ascii=False), encoding="utf-8")
        for name in ("state.safetensors", "state.json"):
            with open(tmp / name, "rb") as f:
                os.fsync(f.fileno())
        shutil.rmtree(final, ignore_errors=True)      # a stale copy of this epoch from an older run
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    for old in folder.iterdir():
        match = _EPOCH.fullmatch(old.name)
        if (match and int(match.group(1)) < epoch) or old.name.startswith(".tmp-"):
            shutil.rmtree(old, ignore_errors=True)
    return final


def load_latest(folder: Path) -> dict | None:
    """The newest whole checkpoint in ``folder`` as a dict (``epoch``, ``recipe``, ``info``, and the
    ``model``, ``optimizer``, ``scheduler`` state dicts and ``torch_rng`` with their tensors); None if
    there is none. A damaged newest checkpoint raises ValueError naming ``--restart``."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    if not folder.is_dir():
        return None
    epochs = sorted((int(m.group(1)), p) for p in folder.iterdir() if (m := _EPOCH.fullmatch(p.name)))
    if not epochs:
        return None
    _, path = epochs[-1]
    try:
        state = json.loads((path / "state.json").read_text(encoding="utf-8"))
        tensors = load_file(str(path / "state.safetensors"))
        if state.get("format") != FORMAT:
            raise ValueError(f"format {state.get('format')!r}, expected {FORMAT}")
        return {k: _join(v, tensors) for k, v in state.items()}
    except (OSError, ValueError, KeyError, SafetensorError) as exc:
        raise ValueError(f"the checkpoint {path} cannot be read ({exc}); start over with --restart "
                         f"(deletes {folder}).") from exc


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def recipe_differences(saved: dict, now: dict) -> list[str]:
    """``"field: A in the checkpoint, B now"`` for every field where two recipe dicts differ
    (nested dicts compared field by field, named with dots)."""
    a, b = _flat(saved), _flat(now)
    out = []
    for key in [*a, *(k for k in b if k not in a)]:
        if a.get(key, "(absent)") != b.get(key, "(absent)"):
            out.append(f"{key}: {_show(a.get(key, '(absent)'))} in the checkpoint, {_show(b.get(key, '(absent)'))} now")
    return out


def _show(value) -> str:
    if isinstance(value, list) and len(value) > 4:
        return f"[{', '.join(map(repr, value[:3]))}, ... {len(value)} in all]"
    return repr(value)


def remove(folder: Path) -> None:
    """Delete a checkpoint folder (after the run's files are written, or on ``--restart``)."""
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(folder)
