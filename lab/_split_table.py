"""The one table of evaluation splits: each split's name, labels and order (torch-free).

:mod:`lab.catalogue` re-exports it (``lab.catalogue.SPLIT_TABLE``, ``split_label``, ...); read it from there.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from types import MappingProxyType

__all__ = ["SplitInfo", "SPLIT_TABLE", "SPLITS", "split_info", "split_label", "split_order", "class_mean_splits",
           "held_out_splits"]


@dataclass(frozen=True)
class SplitInfo:
    """One evaluation split: its name in the metrics table and how text names it.

    Attributes
    ----------
    name : the ``split`` column's value ("train", "seen", "unseen")
    label : its name in plot keys, hovers and the command line ("held-out (seen)")
    short_label : its name in a short subtitle ("held-out")
    phrase : its name inside a sentence or title that says what a view shows ("held-out")
    order : its place in :data:`SPLIT_TABLE`: the training sample, then held-out seen images, then unseen classes
    held_out : whether its images are ones the network never trained on (held-out seen images, unseen classes):
        the splits the live view's layer × epoch heatmap offers
    class_means : whether an evaluation records the geometry of its class means (``ClassMeans`` events, the
        simplex view): the training sample and the unseen classes
    """

    name: str
    label: str
    short_label: str
    phrase: str
    order: int
    held_out: bool = False
    class_means: bool = False


SPLIT_TABLE = (
    SplitInfo("train", "train sample", "train sample", "training sample", 0, class_means=True),
    SplitInfo("seen", "held-out (seen)", "held-out", "held-out", 1, held_out=True),
    SplitInfo("unseen", "unseen classes", "unseen classes", "unseen", 2, held_out=True, class_means=True),
)
"""The one table of evaluation splits, in order: a fixed sample of the seen classes' training images ("train",
with the labels the network trains on), the seen classes' held-out images ("seen") and the unseen classes'
images ("unseen")."""
_SPLITS_BY_NAME = MappingProxyType({s.name: s for s in SPLIT_TABLE})
SPLITS = tuple(s.name for s in SPLIT_TABLE)
"""The evaluation split names in :data:`SPLIT_TABLE` order."""


def split_info(name: str) -> SplitInfo:
    """The :data:`SPLIT_TABLE` entry of split ``name``."""
    try:
        return _SPLITS_BY_NAME[name]
    except (KeyError, TypeError):
        raise ValueError(f"split must be one of {', '.join(map(repr, SPLITS))}. Got {name!r} instead.") from None


def split_label(name: str, kind: str = "label") -> str:
    """How text names split ``name``: its ``"label"`` ("held-out (seen)"), ``"short_label"`` ("held-out") or
    ``"phrase"`` ("held-out"); a name not in :data:`SPLIT_TABLE` is returned unchanged."""
    if kind not in ("label", "short_label", "phrase"):
        raise ValueError(f"kind must be 'label', 'short_label' or 'phrase'. Got {kind!r} instead.")
    info = _SPLITS_BY_NAME.get(name)
    return name if info is None else getattr(info, kind)


def split_order(names: Iterable[str]) -> list[str]:
    """``names`` in :data:`SPLIT_TABLE` order (train, seen, unseen), each once; names not in the table last, in
    the order given."""
    names = list(dict.fromkeys(names))
    return sorted(names, key=lambda n: _SPLITS_BY_NAME[n].order if n in _SPLITS_BY_NAME else len(SPLIT_TABLE))


def class_mean_splits() -> tuple[str, ...]:
    """The splits whose class means an evaluation records (the simplex view's choices), in table order."""
    return tuple(s.name for s in SPLIT_TABLE if s.class_means)


def held_out_splits() -> tuple[str, ...]:
    """The splits of images the network never trained on (held-out seen images, unseen classes), in table order."""
    return tuple(s.name for s in SPLIT_TABLE if s.held_out)
