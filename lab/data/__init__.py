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

from lab.lazy import lazy_exports

__all__ = ["load", "Dataset", "ImageDataset", "Split", "SPECS", "UnsafePickleError", "standardize",
           "cache_dir", "check_name", "png_data_uri"]
__getattr__, __dir__ = lazy_exports(__name__, {
    "load": "._sources:load", "SPECS": "._names:SPECS", "check_name": "._names:check_name",
    "ImageDataset": "._dataset:ImageDataset", "standardize": "._dataset:standardize", "Split": ".splits:Split",
    "UnsafePickleError": "._cifar:UnsafePickleError", "cache_dir": "._folder:cache_dir",
    "Dataset": "._dataset:ImageDataset",     # the name used in the shared contracts
    "glyphs": ".glyphs", "splits": ".splits", "png_data_uri": ".thumbnails:png_data_uri",
})
