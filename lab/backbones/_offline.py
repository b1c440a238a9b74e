"""The models that load here without a network: what ``python -m lab models`` lists and the app's picker shows first.

Four places, read without touching the network or building a model:

- the glyph-pretrained zoo (:func:`lab.backbones.zoo_names`, its cards and weight files);
- the ImageNet backbones whose weights come with an installed package (:func:`lab.backbones.imagenet_names`);
- the Hugging Face hub cache (``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else ``~/.cache/huggingface/hub``),
  laid out as ``models--ORG--NAME/snapshots/<revision>/...`` with ``refs/main`` naming the revision: a
  snapshot whose ``config.json`` has an ``architecture`` is a timm model (``timm/NAME`` loads as
  ``NAME`` with ``pretrained=True``, another org as ``hf-hub:ORG/NAME``); one with a ``model_type`` is a
  ``transformers`` model (``hf:ORG/NAME``), which ``hf:`` reads when it supports that type;
- torch hub's checkpoint folder (``torch.hub.get_dir()/checkpoints``, i.e. ``$TORCH_HOME``): timm's
  older weight files, matched to their architecture by the file name of timm's ``pretrained_cfg`` URL;
  they load as ``checkpoint=PATH`` on that architecture.

Each model source of :mod:`lab.backbones._registry` lists its own part (``offline``);
:func:`lab.backbones.offline_models` joins them in the registry's order.

Sizes are bytes on disk: the weight file, or the files of the snapshot (each stored blob once).
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["OfflineModel", "hub_cache_dir", "torch_checkpoints_dir", "cache_problems", "zoo_models", "imagenet_models",
           "hub_models", "torch_hub_models"]

_WEIGHT_EXTS = (".safetensors", ".bin", ".pth", ".pt", ".ckpt", ".npz", ".h5", ".msgpack")


@dataclass(frozen=True)
class OfflineModel:
    """One model that can load here without a network.

    Attributes
    ----------
    name : str
        What :func:`lab.backbones.load` takes (``--backbone``, the app's picker).
    kind : str
        ``"zoo"``, ``"imagenet"``, ``"timm"`` (timm weights in the hub cache), ``"torch-hub"`` (a timm
        weight file in torch hub's cache) or ``"hf"`` (a ``transformers`` model in the hub cache).
    size : int
        Bytes on disk.
    path : str
        The weight file, or the snapshot folder.
    about : str
        What it is, in a few words.
    loads : bool
        Whether this lab can load it (False: an unsupported model type, a snapshot without weights, a
        missing package; ``note`` says why).
    note : str
        How to load it (``pretrained=True``, ``checkpoint=PATH``) or why it cannot load.
    """

    name: str
    kind: str
    size: int
    path: str
    about: str
    loads: bool = True
    note: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def hub_cache_dir() -> Path:
    """The Hugging Face hub cache as set now: ``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else
    huggingface_hub's default (``~/.cache/huggingface/hub``)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE).expanduser()


def torch_checkpoints_dir() -> Path:
    """torch hub's checkpoint folder as set now (``$TORCH_HOME/hub/checkpoints``, default under ``~/.cache/torch``)."""
    import torch

    return Path(torch.hub.get_dir()).expanduser() / "checkpoints"


def _size(paths) -> int:
    """Bytes of the distinct files behind ``paths`` (a hub snapshot links each file to one blob)."""
    seen, total = set(), 0
    for path in paths:
        try:
            real = os.path.realpath(path)
            if real not in seen and os.path.isfile(real):
                seen.add(real)
                total += os.path.getsize(real)
        except OSError:
            continue
    return total


def zoo_models() -> list[OfflineModel]:
    """The zoo's models, each with its card's summary (a damaged card: listed with ``loads=False``)."""
    from lab.backbones import _zoo

    out = []
    for name in _zoo.zoo_names():
        try:
            card, weights = _zoo.read_card(name)
        except ValueError as exc:
            out.append(OfflineModel(name, "zoo", 0, str(_zoo.zoo_dir() / f"{name}.json"), "glyph-pretrained zoo",
                                    loads=False, note=str(exc)))
            continue
        acc = card.get("source_accuracy")
        about = (f"timm {card['architecture']}, {card['input_size'][0]}-channel {card['input_size'][-1]} px, "
                 f"glyph-pretrained" + (f" (source accuracy {acc:.3f})" if isinstance(acc, (int, float)) else ""))
        out.append(OfflineModel(name, "zoo", _size([weights]), str(weights), about))
    return out


def imagenet_models() -> list[OfflineModel]:
    """The ImageNet backbones, each with its package's weight file (a missing package: ``loads=False``)."""
    from lab.backbones import _imagenet

    out = []
    for name in _imagenet.imagenet_names():
        card = _imagenet.read_card(name)
        about = (f"timm {card['architecture']}, ImageNet-1k, {card['imagenet_top1']:.1%} top-1 as published, "
                 f"{card['license'].split(' ')[0]}")
        try:
            path = _imagenet.weights_file(card)
        except ValueError as exc:
            out.append(OfflineModel(name, "imagenet", 0, "", about, loads=False, note=str(exc)))
            continue
        out.append(OfflineModel(name, "imagenet", _size([path]), str(path), about,
                                note=f"weights from the {card['package']} package"))
    return out


def _snapshot(repo: Path) -> Path | None:
    """The snapshot ``refs/main`` names, else the most recently modified one, else None."""
    snapshots = repo / "snapshots"
    ref = repo / "refs" / "main"
    if ref.is_file():
        try:
            folder = snapshots / ref.read_text(encoding="utf-8").strip()
        except OSError:
            folder = None
        if folder is not None and folder.is_dir():
            return folder
    try:
        found = [p for p in snapshots.iterdir() if p.is_dir()]
    except OSError:
        return None
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def _hf_problem(model_type: str) -> str | None:
    """Why ``hf:`` cannot read ``model_type`` (None: it can); asks :mod:`lab.backbones._hf` with what it offers."""
    from lab.backbones import _hf

    check = getattr(_hf, "model_type_problem", None)
    if callable(check):
        try:
            return check(model_type)
        except Exception as exc:   # noqa: BLE001 - a check that fails says only that the type is unknown
            return f"model type {model_type!r} could not be checked ({type(exc).__name__})"
    supported = getattr(_hf, "supported_model_types", None)
    types = supported() if callable(supported) else _hf.HF_FAMILIES
    return None if model_type in types else f"hf: does not read model type {model_type!r}"


def _hub_entry(repo: Path) -> OfflineModel | None:
    """One ``models--ORG--NAME`` folder of the hub cache, or None when it holds no model config."""
    parts = repo.name.split("--")
    if len(parts) < 3 or parts[0] != "models":
        return None
    org, model = parts[1], "--".join(parts[2:])
    snapshot = _snapshot(repo)
    if snapshot is None:
        return None
    config_path = snapshot / "config.json"
    files = [p for p in snapshot.rglob("*") if p.is_file() or p.is_symlink()]
    size = _size(files)
    has_weights = any(p.name.endswith(_WEIGHT_EXTS) for p in files)
    repo_id = f"{org}/{model}"
    if not config_path.exists():
        return None                                  # a dataset-like or partial repo: no model to list
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        config = exc
    if not isinstance(config, dict):
        return OfflineModel(f"hf:{repo_id}", "hf", size, str(snapshot), "a hub snapshot", loads=False,
                            note=f"{config_path} is not a readable JSON object ({config}); `hf download "
                                 f"{repo_id}` again where there is network")
    if "architecture" in config and "model_type" not in config:       # timm's config.json
        name = model if org == "timm" else f"hf-hub:{repo_id}"
        about = f"timm {config['architecture']}, weights from the hub cache ({repo_id})"
        if not has_weights:
            return OfflineModel(name, "timm", size, str(snapshot), about, loads=False,
                                note=f"the snapshot has no weight file; `hf download {repo_id}` where there is network")
        return OfflineModel(name, "timm", size, str(snapshot), about, note="load with pretrained=True (--pretrained)")
    model_type = config.get("model_type")
    if not isinstance(model_type, str):
        return None
    about = f"transformers model_type {model_type}"
    problem = _hf_problem(model_type)
    if problem is None and not has_weights:
        problem = f"the snapshot has no weight file; `hf download {repo_id}` where there is network"
    return OfflineModel(f"hf:{repo_id}", "hf", size, str(snapshot), about, loads=problem is None, note=problem or "")


def hub_models(kind: str) -> list[OfflineModel]:
    """The models of ``kind`` (``"timm"`` or ``"hf"``) in the Hugging Face hub cache."""
    root = hub_cache_dir()
    try:
        repos = sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith("models--"))
    except OSError:
        return []
    return [entry for entry in map(_hub_entry, repos) if entry is not None and entry.kind == kind]


def _timm_files() -> dict[str, str]:
    """File name of each timm pretrained weight URL -> its tagged model name."""
    import timm
    from timm.models import get_pretrained_cfg

    out = {}
    for name in timm.list_pretrained():
        cfg = get_pretrained_cfg(name)
        url = getattr(cfg, "url", None) if cfg is not None else None
        if url:
            out.setdefault(url.rsplit("/", 1)[-1], name)
    return out


def torch_hub_models() -> list[OfflineModel]:
    """timm weight files in torch hub's cache (each loads as ``checkpoint=PATH`` on its architecture)."""
    folder = torch_checkpoints_dir()
    try:
        files = sorted(p for p in folder.iterdir() if p.is_file() and p.name.endswith(_WEIGHT_EXTS))
    except OSError:
        return []
    known = _timm_files()
    out = []
    for path in files:
        tagged = known.get(path.name)
        if tagged is None:
            out.append(OfflineModel(path.name, "torch-hub", _size([path]), str(path), "a weight file timm does not "
                                    "name", loads=False,
                                    note="give it as checkpoint=PATH to the model it was saved from"))
            continue
        arch = tagged.split(".", 1)[0]
        out.append(OfflineModel(arch, "torch-hub", _size([path]), str(path), f"timm {tagged} weights",
                                note=f"load as {arch} with checkpoint={path}"))
    return out


def cache_problems() -> list[str]:
    """One line per cache that an environment variable points at but that is not a folder: the variable,
    what was found, and what would work (an unset variable's default folder may simply not exist yet)."""
    out = []
    for var, path, what in (("HF_HUB_CACHE", os.environ.get("HF_HUB_CACHE"), "a Hugging Face hub cache (a folder "
                             "of models--ORG--NAME folders)"),
                            ("HF_HOME", os.environ.get("HF_HOME") if not os.environ.get("HF_HUB_CACHE") else None,
                             "the Hugging Face home folder (its hub/ is the cache)"),
                            ("TORCH_HOME", os.environ.get("TORCH_HOME"), "torch's home folder (hub/checkpoints "
                             "holds weight files)")):
        if path and not os.path.isdir(os.path.expanduser(path)):
            found = "a file" if os.path.exists(os.path.expanduser(path)) else "nothing"
            out.append(f"{var}={path}: found {found} there; set it to {what}, or unset it for the default")
    return out
