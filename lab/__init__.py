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

from lab.lazy import lazy_exports

__version__ = "0.1.0"

_SUBMODULES = ("data", "backbones", "features", "metrics", "finetune", "runs", "events", "config", "store",
               "projection", "export", "device", "analysis", "catalogue", "progress", "study", "archive",
               "errors", "zoo", "monitor", "lessons", "status")
_ATTRS = {
    "RunConfig": "lab.config:RunConfig",
    "run": "lab.runs:run",
    "RunStore": "lab.store:RunStore",
    "RunStatus": "lab.status:RunStatus",
    "Cancelled": "lab._cancel:Cancelled",
    "Study": "lab.study:Study",
    "Monitor": "lab.monitor:Monitor",
}

__all__ = sorted({*_SUBMODULES, *_ATTRS, "__version__"})
__getattr__, __dir__ = lazy_exports(__name__, {**{name: f"lab.{name}" for name in _SUBMODULES}, **_ATTRS})
