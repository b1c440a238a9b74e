"""The datasets of a run, resolved from its config (deterministic)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lab.config import RunConfig

__all__ = ["RunData", "prepare_data"]


@dataclass
class RunData:
    """The datasets of a run, resolved from its config (deterministic; the app and notebooks
    rebuild them with :func:`prepare_data` to show the images behind a projection).

    Attributes
    ----------
    dataset : lab dataset (all classes)
    split : lab.data.Split
    train : seen classes, training partition (labels index ``split.seen``)
    heldout : seen classes, held-out partition, capped at ``seen_per_class``
    unseen : unseen classes, capped at ``unseen_per_class`` (labels index ``split.unseen``);
        ``ProjectionReady.indices`` index this dataset
    """

    dataset: Any
    split: Any
    train: Any
    heldout: Any
    unseen: Any

    @property
    def n_images(self) -> dict[str, int]:
        return {"train": len(self.train), "heldout": len(self.heldout), "unseen": len(self.unseen)}


def prepare_data(config: RunConfig) -> RunData:
    """Load the dataset and build the split, train/held-out partitions and evaluation samples."""
    import lab.data

    cfg = config
    ds = lab.data.load(cfg.dataset, image_size=cfg.img_size)
    Split = lab.data.Split
    if cfg.seen is None and cfg.unseen is None:
        if cfg.n_unseen > len(ds.classes) - 2:
            raise ValueError(
                f"n_unseen={cfg.n_unseen} leaves fewer than 2 seen classes of the {len(ds.classes)} in "
                f"{cfg.dataset!r}; choose n_unseen <= {len(ds.classes) - 2}."
            )
        split = Split.random(ds.classes, n_unseen=cfg.n_unseen, seed=cfg.split_seed)
    else:
        unknown = [c for c in (cfg.seen or ()) + (cfg.unseen or ()) if c not in ds.classes]
        if unknown:
            shown = ", ".join(map(repr, ds.classes[:12])) + (" ..." if len(ds.classes) > 12 else "")
            raise ValueError(f"class {unknown[0]!r} is not in dataset {cfg.dataset!r}; its classes are {shown}.")
        unseen = list(cfg.unseen) if cfg.unseen is not None else [c for c in ds.classes if c not in cfg.seen]
        seen = list(cfg.seen) if cfg.seen is not None else [c for c in ds.classes if c not in unseen]
        split = Split(seen=seen, unseen=unseen)
    split.validate(ds.classes, need_seen=2)
    seen_ds = ds.subset(list(split.seen))
    train = seen_ds.partition("train", test_fraction=cfg.heldout_fraction, seed=cfg.split_seed)
    heldout = seen_ds.partition("test", test_fraction=cfg.heldout_fraction, seed=cfg.split_seed)
    if cfg.seen_per_class is not None:
        heldout = heldout.sample_per_class(cfg.seen_per_class, seed=cfg.split_seed)
    unseen = ds.subset(list(split.unseen))
    if cfg.unseen_per_class is not None:
        unseen = unseen.sample_per_class(cfg.unseen_per_class, seed=cfg.split_seed)
    for name, part in (("training", train), ("held-out", heldout), ("unseen", unseen)):
        if len(part) == 0:
            raise ValueError(f"the {name} set of {cfg.dataset!r} is empty; check the split and heldout_fraction.")
    return RunData(ds, split, train, heldout, unseen)
