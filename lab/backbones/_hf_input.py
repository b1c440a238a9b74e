"""What a Hugging Face backbone reads: input size and normalization from its image processor.

Private: :mod:`lab.backbones._hf` re-exports :func:`input_size` and :func:`normalization`.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from lab.backbones._normalize import Normalization, from_stats

if TYPE_CHECKING:
    from lab.backbones._hf_types import Loaded

__all__ = ["input_size", "normalization"]


def _processor(path: str | None) -> dict:
    if path is None:
        return {}
    proc = Path(path) / "preprocessor_config.json"
    if not proc.is_file():
        return {}
    try:
        stats = json.loads(proc.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return stats if isinstance(stats, dict) else {}


def input_size(loaded: Loaded, img_size) -> tuple[int, int, int]:
    """(C, H, W): ``img_size`` if given, else the processor's crop/resize size, else ``config.image_size``."""
    config = loaded.config
    size = img_size if img_size is not None else (_processor_size(loaded.processor)
                                                  or getattr(config, "image_size", 224))
    hw = (size, size) if isinstance(size, int) else tuple(size)[-2:]
    return (int(getattr(config, "num_channels", 3)), int(hw[0]), int(hw[1]))


def _processor_size(stats: dict):
    """(H, W) the image processor hands the model, or None when it does not say."""
    for key in ("crop_size", "size"):
        if key == "crop_size" and stats.get("do_center_crop") is False:
            continue
        value = stats.get(key)
        if isinstance(value, int):
            return (value, value)
        if isinstance(value, dict):
            if "height" in value and "width" in value:
                return (int(value["height"]), int(value["width"]))
            if key == "size" and "shortest_edge" in value:
                return (int(value["shortest_edge"]),) * 2
    return None


def normalization(loaded: Loaded, path: str | None, label: str) -> Normalization:
    """The model's image processor statistics (its preprocessor_config.json, with its size
    unless ``img_size`` is given), else the family image processor's defaults, else ImageNet's."""
    config = loaded.config
    channels = int(getattr(config, "num_channels", 3))
    stats = loaded.processor
    if "image_mean" in stats and "image_std" in stats:
        try:
            size = _processor_size(stats) if loaded.img_size is None else None
            return from_stats(stats["image_mean"], stats["image_std"], channels,
                              f"hf image processor ({label})", size=size)
        except (ValueError, TypeError):
            pass   # incomplete: the family defaults below
    from transformers.models.auto.image_processing_auto import (IMAGE_PROCESSOR_MAPPING_NAMES,
                                                                get_image_processor_class_from_name)

    for model_type in (loaded.plan.model_type, config.model_type):
        names = IMAGE_PROCESSOR_MAPPING_NAMES.get(model_type) or {}
        for class_name in (names.values() if isinstance(names, dict) else names):
            cls = get_image_processor_class_from_name(class_name) if class_name else None
            if cls is None:
                continue
            try:
                defaults = cls()
                mean, std = defaults.image_mean, defaults.image_std
            except Exception:   # a processor that needs arguments or packages: try the next one
                continue
            if mean is not None and std is not None:
                return from_stats(mean, std, channels, f"hf {class_name} defaults ({model_type})")
    return from_stats((0.485, 0.456, 0.406), (0.229, 0.224, 0.225), channels,
                      f"ImageNet statistics (no image processor for model type {config.model_type!r})")
