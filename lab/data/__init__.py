"""Datasets that work offline, and seen/unseen class splits.

>>> import lab
>>> ds = lab.data.load("glyphs")          # 20 CJK typefaces as calligraphy styles
>>> split = lab.data.Split.paper_default(ds)
>>> unseen = ds.subset(split.unseen)

Specs: ``"glyphs"``, ``"glyphs:character"``, ``"digits"``, ``"folder:PATH"``,
``"cifar10:PATH"``, ``"cifar100:PATH"``. Nothing is ever downloaded.
"""
from ._cifar import UnsafePickleError
from ._dataset import ImageDataset, standardize
from ._sources import SPECS, load
from .splits import Split

Dataset = ImageDataset  # the name used in the shared contracts

__all__ = ["load", "Dataset", "ImageDataset", "Split", "SPECS", "UnsafePickleError", "standardize"]
