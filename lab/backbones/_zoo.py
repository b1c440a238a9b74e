"""The offline zoo: timm models pretrained on a glyph source task, loadable by name.

Each zoo model is ``<name>.json`` (a card) next to ``<name>.safetensors`` (an fp16 state
dict of the timm model *including* its source classifier head) in the zoo folder:
``$LAB_ZOO_DIR`` when set, else the ``lab/zoo`` folder of the package. The card::

    {"name": str, "architecture": timm model name, "model_kwargs": dict for timm.create_model,
     "num_classes": int (source head), "weights": file name, "input_size": [C, H, W],
     "mean": [..C], "std": [..C], "source": str, "recipe": str, "epochs": int,
     "source_accuracy": float, "seed": int}

Cards written by the current recipe add fields after these (``lab.zoo.RECIPE_KEYS``: both source
accuracies, the data, the augmentation, wall time, training settings, per-epoch history); the
loader reads only the ones above.
"""
from __future__ import annotations

import difflib
import json
import os
from pathlib import Path

__all__ = ["zoo_dir", "zoo_names", "read_card"]

_REQUIRED = {"name": str, "architecture": str, "model_kwargs": dict, "num_classes": int, "weights": str,
             "input_size": list, "mean": list, "std": list}


def zoo_dir() -> Path:
    """The zoo folder: ``$LAB_ZOO_DIR``, else ``lab/zoo`` inside the package."""
    env = os.environ.get("LAB_ZOO_DIR")
    return Path(env) if env else Path(__file__).resolve().parent.parent / "zoo"


def zoo_names() -> list[str]:
    """Names of the zoo models shipped (cards in :func:`zoo_dir`), sorted; [] when none."""
    folder = zoo_dir()
    if not folder.is_dir():
        return []
    return sorted(p.stem for p in folder.glob("*.json") if p.is_file())


def unknown_zoo_name(name: str) -> ValueError:
    names = zoo_names()
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
    hint = (f" Did you mean {', '.join(map(repr, close))}?" if close
            else f" Zoo models: {', '.join(names)}." if names else "")
    return ValueError(f"no zoo model {name!r} in {zoo_dir()}.{hint}")


def read_card(name: str) -> tuple[dict, Path]:
    """The card of zoo model ``name`` (validated) and the path of its weights."""
    folder = zoo_dir()
    path = folder / f"{name}.json"
    if not name or "/" in name or os.sep in name or not path.is_file():
        raise unknown_zoo_name(name)
    try:
        card = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"zoo card {str(path)!r} is not readable JSON ({exc}); restore it from the "
                         f"repository.") from exc
    if not isinstance(card, dict):
        raise ValueError(f"zoo card {str(path)!r} must hold a JSON object. Got {type(card).__name__} instead.")
    for key, kind in _REQUIRED.items():
        if not isinstance(card.get(key), kind) or isinstance(card.get(key), bool):
            raise ValueError(f"zoo card {str(path)!r}: {key!r} must be a {kind.__name__}. "
                             f"Got {card.get(key)!r} instead.")
    size = card["input_size"]
    if len(size) != 3 or not all(isinstance(v, int) and v > 0 for v in size):
        raise ValueError(f"zoo card {str(path)!r}: 'input_size' must be [C, H, W]. Got {size!r} instead.")
    if len(card["mean"]) != size[0] or len(card["std"]) != size[0]:
        raise ValueError(f"zoo card {str(path)!r}: 'mean' and 'std' need {size[0]} values (input_size[0]). "
                         f"Got {card['mean']!r} and {card['std']!r} instead.")
    weights = folder / card["weights"]
    if Path(card["weights"]).name != card["weights"] or not weights.is_file():
        raise ValueError(f"zoo model {name!r}: weights file {str(weights)!r} is missing; expected it next to "
                         f"the card (git lfs / a fresh clone restores it).")
    return card, weights


def build(name: str, *, num_classes: int, img_size: int | None = None):
    """The timm model of zoo card ``name`` with its pretrained weights (float32) and a fresh
    classifier of ``num_classes`` outputs (0: none). Returns (model, card, input_size).

    A model with a fixed input size (timm's ``pretrained_cfg["fixed_input_size"]``: a ViT, whose position
    embedding has one entry per patch) is set to ``img_size`` when one is given: its weights load at the card's
    size, then timm's ``set_input_size`` resamples the position embedding to the new patch grid (bicubic, as
    timm does for pretrained weights created at another ``img_size``). Any other model keeps the card's size
    and its images are resized to it (``input_size`` is the card's).
    """
    import timm

    from lab.backbones._checkpoint import load_checkpoint

    card, weights = read_card(name)
    kwargs = dict(card["model_kwargs"])
    kwargs.setdefault("in_chans", card["input_size"][0])
    try:
        model = timm.create_model(card["architecture"], pretrained=False, num_classes=card["num_classes"], **kwargs)
    except (RuntimeError, TypeError, ValueError) as exc:  # unknown architecture or keyword
        raise ValueError(f"zoo card {name!r} names timm model {card['architecture']!r} with options "
                         f"{kwargs}, which timm cannot build ({exc}).") from exc
    load_checkpoint(model, str(weights))   # strict fit check; copies into the float32 parameters
    model.reset_classifier(int(num_classes))
    size = tuple(int(v) for v in card["input_size"])
    if img_size is not None and int(img_size) != size[1] and _fixed_input_size(model):
        _set_input_size(model, name, int(img_size))
        size = (size[0], int(img_size), int(img_size))
    return model, card, size


def _fixed_input_size(model) -> bool:
    cfg = getattr(model, "pretrained_cfg", None) or {}
    return bool(cfg.get("fixed_input_size")) and callable(getattr(model, "set_input_size", None))


def _set_input_size(model, name: str, side: int) -> None:
    """The model set to ``side`` px inputs by timm's own ``set_input_size`` (position embedding resampled)."""
    patch = getattr(getattr(model, "patch_embed", None), "patch_size", None)
    step = int(patch[0]) if patch else 1
    if side % step:
        lower, upper = side // step * step, -(-side // step) * step
        use = f"{lower} or {upper}" if lower else f"{upper}"
        raise ValueError(f"zoo model {name!r} cuts images into {step} px patches, so its img_size must be a "
                         f"multiple of {step}. Got {side} instead; use {use}.")
    model.set_input_size(img_size=(side, side))
