"""layerscope: which layer of a vision backbone generalizes to unseen classes,
and how its features collapse.

Submodules load lazily so that ``import lab`` stays cheap (torch and umap are
imported only when used)::

    import lab
    ds = lab.data.load("glyphs")
    split = lab.data.Split.random(ds.classes, n_unseen=5, seed=0)
    bb = lab.backbones.load("resnet18", pretrained=False)
    feats = lab.features.extract(bb, ds.subset(split.unseen))
    lab.metrics.layer_report(feats, feats.labels)
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

_SUBMODULES = {
    "data", "backbones", "features", "metrics", "finetune", "runs", "events",
    "config", "store", "projection", "export", "device", "analysis", "catalogue",
    "tables", "progress", "study", "archive",
}
# public name -> (module, attribute)
_ATTRS = {
    "RunConfig": ("lab.config", "RunConfig"),
    "run": ("lab.runs", "run"),
    "RunStore": ("lab.store", "RunStore"),
    "Cancelled": ("lab._cancel", "Cancelled"),
    "Study": ("lab.study", "Study"),
}

__all__ = sorted(_SUBMODULES | set(_ATTRS) | {"__version__"})


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f"lab.{name}")
    if name in _ATTRS:
        module, attr = _ATTRS[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'lab' has no attribute {name!r}")


def __dir__():
    return __all__
