"""Datasets that work offline, and seen/unseen class splits.

>>> import lab
>>> ds = lab.data.load("glyphs")          # 20 CJK typefaces as calligraphy styles
>>> split = lab.data.Split.paper_default(ds)
>>> unseen = ds.subset(split.unseen)

Specs: ``"glyphs"``, ``"glyphs:character"``, ``"digits"``, ``"folder:PATH"``,
``"cifar10:PATH"``, ``"cifar100:PATH"``; :func:`check_name` tells, loading nothing, whether a
spec can load here. Nothing is ever downloaded. Image folders are
decoded once into a memory-mapped cache (``$LAB_CACHE_DIR``, see :func:`cache_dir`).

Names load lazily, so that image-decoding worker processes (which import
``lab.data._decode``) do not import torch.
"""
from __future__ import annotations

import importlib

_ATTRS = {
    "load": "._sources", "SPECS": "._names", "check_name": "._names", "ImageDataset": "._dataset",
    "standardize": "._dataset", "Split": ".splits", "UnsafePickleError": "._cifar", "cache_dir": "._folder",
}

__all__ = ["load", "Dataset", "ImageDataset", "Split", "SPECS", "UnsafePickleError", "standardize",
           "cache_dir", "check_name"]


def __getattr__(name: str):
    if name == "Dataset":   # the name used in the shared contracts
        name = "ImageDataset"
    if name in _ATTRS:
        return getattr(importlib.import_module(_ATTRS[name], __name__), name)
    if name in ("glyphs", "splits"):
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'lab.data' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
