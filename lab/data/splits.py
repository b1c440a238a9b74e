"""Class splits: which classes the backbone may be fine-tuned on (seen) and which
are withheld to measure how layers generalise (unseen)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

__all__ = ["Split", "GLYPHS_UNSEEN", "CIFAR100_UNSEEN"]

# Fixed withheld styles for the embedded glyphs: one of each family (brush, ming,
# hei, rounded, handwriting), each with a related style left among the seen ones
# (UnGungseo, AR PL UMing, M PLUS 1 Black, Motoya L Maru, RocknRoll One).
GLYPHS_UNSEEN = ("Kouzan Sosho", "IPA Mincho", "cwTeX HeiBold", "cwTeX Yen", "Yusei Magic")
# The seed code's withheld CIFAR-100 classes (the "flowers" superclass).
CIFAR100_UNSEEN = ("orchid", "poppy", "rose", "sunflower", "tulip")


def _names(values, what: str) -> list[str]:
    if isinstance(values, str):
        raise ValueError(f"{what} must be a list of class names; got the string {values!r}. "
                         f"Write [{values!r}] for a single class.")
    return [str(v) for v in values]


def _show(names: Sequence[str], limit: int = 20) -> str:
    names = list(names)
    more = f", ... ({len(names)} in all)" if len(names) > limit else ""
    return "[" + ", ".join(repr(n) for n in names[:limit]) + more + "]"


@dataclass
class Split:
    """Seen and unseen class names.

    Parameters
    ----------
    seen : list of str
        Classes available for fine-tuning.
    unseen : list of str
        Withheld classes whose separability is measured at every layer.

    Examples
    --------
    >>> s = Split(seen=["a", "b"], unseen=["c", "d"])
    >>> s.validate(["a", "b", "c", "d"], need_seen=2).unseen
    ['c', 'd']
    """

    seen: list[str] = field(default_factory=list)
    unseen: list[str] = field(default_factory=list)

    def __post_init__(self):
        self.seen = _names(self.seen, "seen")
        self.unseen = _names(self.unseen, "unseen")
        for what, names in (("seen", self.seen), ("unseen", self.unseen)):
            dup = sorted({n for n in names if names.count(n) > 1})
            if dup:
                raise ValueError(f"{what} lists {dup} more than once; list each class once.")
        both = [n for n in self.unseen if n in self.seen]
        if both:
            raise ValueError(f"classes {both} are both seen and unseen; "
                             "remove them from one of the two lists.")

    def validate(self, classes: Sequence[str], need_seen: int = 2) -> "Split":
        """Check the split against a dataset's classes; return it unchanged.

        Parameters
        ----------
        classes : sequence of str
            The dataset's class names.
        need_seen : int
            Seen classes required: 2 when the run fine-tunes, 0 when it does not.

        Raises
        ------
        ValueError
            Unknown class names, fewer than 2 unseen or fewer than ``need_seen`` seen classes.
        """
        classes = _names(classes, "classes")
        unknown = [n for n in self.seen + self.unseen if n not in classes]
        if unknown:
            raise ValueError(f"unknown classes {unknown} in split; expected names from "
                             f"{_show(classes)}. Check spelling or the dataset.")
        if len(self.unseen) < 2:
            raise ValueError(f"a split needs at least 2 unseen classes to measure separability; "
                             f"got {len(self.unseen)} ({self.unseen}). Add classes to unseen.")
        if len(self.seen) < need_seen:
            raise ValueError(f"fine-tuning needs at least {need_seen} seen classes; got "
                             f"{len(self.seen)} ({self.seen}). Move classes from unseen to seen, "
                             "or run without fine-tuning.")
        return self

    @classmethod
    def random(cls, classes: Sequence[str], n_unseen: int = 5, seed: int = 0) -> "Split":
        """Withhold ``n_unseen`` classes chosen at random with ``seed``.

        Both lists keep the order of ``classes``.
        """
        classes = _names(classes, "classes")
        if not isinstance(n_unseen, (int, np.integer)) or not 2 <= n_unseen <= len(classes):
            raise ValueError(f"n_unseen must be an int between 2 and {len(classes)} (the number "
                             f"of classes); got {n_unseen!r}.")
        pick = set(np.random.default_rng(seed).choice(len(classes), int(n_unseen), replace=False))
        return cls(seen=[c for i, c in enumerate(classes) if i not in pick],
                   unseen=[c for i, c in enumerate(classes) if i in pick])

    @classmethod
    def paper_default(cls, ds_or_name) -> "Split":
        """The seed papers' split for a dataset (or dataset spec string).

        Glyphs: 15 seen / 5 unseen styles (:data:`GLYPHS_UNSEEN`). CIFAR-100:
        unseen orchid, poppy, rose, sunflower, tulip. Otherwise ``random`` with
        seed 0 and ``n_unseen = max(2, round(0.25 * K))``.
        """
        if isinstance(ds_or_name, str):
            from ._sources import load

            ds_or_name = load(ds_or_name)
        name, classes = ds_or_name.name, list(ds_or_name.classes)
        if name == "glyphs":
            fixed = GLYPHS_UNSEEN
        elif name.partition(":")[0] == "cifar100":
            fixed = CIFAR100_UNSEEN
        else:
            fixed = ()
        if fixed and all(c in classes for c in fixed):
            return cls(seen=[c for c in classes if c not in fixed],
                       unseen=[c for c in classes if c in fixed])
        return cls.random(classes, n_unseen=max(2, round(0.25 * len(classes))), seed=0)

    def to_dict(self) -> dict:
        """``{"seen": [...], "unseen": [...]}``, JSON-ready."""
        return {"seen": list(self.seen), "unseen": list(self.unseen)}

    @classmethod
    def from_dict(cls, d: dict) -> "Split":
        """Inverse of :meth:`to_dict`."""
        if not isinstance(d, dict) or set(d) != {"seen", "unseen"}:
            got = sorted(d) if isinstance(d, dict) else type(d).__name__
            raise ValueError(f"a split dict needs exactly the keys 'seen' and 'unseen'; got {got}.")
        return cls(seen=d["seen"], unseen=d["unseen"])
