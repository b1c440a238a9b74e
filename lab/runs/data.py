"""The datasets of a run, resolved from its config (deterministic)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lab.config import RunConfig

__all__ = ["RunData", "prepare_data", "absolute_dataset", "cap_train", "images_needed", "train_sample"]

_PATH_KINDS = ("folder", "cifar10", "cifar100")


@dataclass
class RunData:
    """The datasets of a run, resolved from its config (deterministic; the app and notebooks
    rebuild them with :func:`prepare_data` to show the images behind a projection).

    Attributes
    ----------
    dataset : lab dataset (all classes)
    split : lab.data.Split
    train : seen classes, training partition (labels index ``split.seen``), capped at ``train_per_class``
    heldout : seen classes, held-out partition, capped at ``seen_per_class``
    unseen : unseen classes, capped at ``unseen_per_class`` (labels index ``split.unseen``);
        ``ProjectionReady.indices`` index this dataset
    train_sample : the fixed sample of ``train`` for split "train" (``train_sample_per_class`` images per
        class, drawn with ``split_seed``; its targets are the true labels), or None when it is off
    train_sample_indices : ndarray (n,) int64, the sample's positions in ``train`` (to read the labels the
        network trains on under label noise), or None
    """

    dataset: Any
    split: Any
    train: Any
    heldout: Any
    unseen: Any
    train_sample: Any = None
    train_sample_indices: Any = None

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
        n_classes = len(ds.classes)
        if n_classes < 4:
            raise ValueError(
                f"dataset {cfg.dataset!r} has {n_classes} class{'es' if n_classes != 1 else ''}; a run needs at "
                f"least 4 (2 seen to train on, 2 unseen to measure); add classes (one sub-folder each) or "
                f"choose another dataset.")
        if cfg.n_unseen > n_classes - 2:
            raise ValueError(
                f"n_unseen={cfg.n_unseen} leaves fewer than 2 seen classes of the {n_classes} in "
                f"{cfg.dataset!r}; choose n_unseen between 2 and {n_classes - 2}."
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
    _check_counts(seen_ds, 2, "training and the held-out evaluation", "seen",
                  "add images to it or list it in unseen")
    train = seen_ds.partition("train", test_fraction=cfg.heldout_fraction, seed=cfg.split_seed)
    heldout = seen_ds.partition("test", test_fraction=cfg.heldout_fraction, seed=cfg.split_seed)
    if cfg.train_per_class is not None:
        train = cap_train(train, cfg.train_per_class, seed=cfg.split_seed)
    if cfg.seen_per_class is not None:
        heldout = heldout.sample_per_class(cfg.seen_per_class, seed=cfg.split_seed)
    unseen = ds.subset(list(split.unseen))
    if cfg.unseen_per_class is not None:
        unseen = unseen.sample_per_class(cfg.unseen_per_class, seed=cfg.split_seed)
    need, why = images_needed(cfg.unseen_metrics)
    _check_counts(unseen, need, why, "unseen", _advice(cfg, "unseen_per_class", need, why))
    need, why = images_needed(cfg.seen_metrics(0))
    _check_counts(heldout, need, why, "seen", _advice(cfg, "seen_per_class", need, why),
                  part_name="held-out ")
    for name, part in (("training", train), ("held-out", heldout), ("unseen", unseen)):
        if len(part) == 0:
            raise ValueError(f"the {name} set of {cfg.dataset!r} is empty; check the split and heldout_fraction.")
    sample, indices = train_sample(train, cfg.train_sample_per_class, seed=cfg.split_seed)
    return RunData(ds, split, train, heldout, unseen, sample, indices)


def cap_train(train, per_class: int, *, seed: int):
    """Exactly ``per_class`` images of every class of ``train``: the first of each class's permutation drawn
    with ``seed`` (:meth:`lab.data.ImageDataset.sample_per_class`), so a smaller cap takes a subset of a larger
    one's images. A class with fewer raises ValueError naming it, its count and the fix."""
    import numpy as np

    if per_class < 1:
        raise ValueError(f"train_per_class must be an integer >= 1 or None (all). Got {per_class} instead.")
    counts = np.bincount(np.asarray(train.targets, dtype=np.int64), minlength=len(train.classes))
    short = [k for k, n in enumerate(counts) if n < per_class]
    if short:
        k = min(short, key=lambda i: counts[i])
        raise ValueError(
            f"train_per_class={per_class}, but seen class {train.classes[k]!r} has {int(counts[k])} training "
            f"image{'s' if counts[k] != 1 else ''} (after the held-out partition; {len(short)} of "
            f"{len(counts)} classes have fewer than {per_class}); lower train_per_class to at most "
            f"{int(counts.min())}, lower heldout_fraction, or set train_per_class=None to train on all.")
    return train.sample_per_class(per_class, seed=seed)


def train_sample(train, per_class: int, *, seed: int):
    """``per_class`` images of every class of ``train`` (all of a class that has fewer), drawn with ``seed``.

    Returns
    -------
    (dataset, indices) : a lab dataset of the sample (its own copy of the few images, so a run that trains
        nothing need not keep the training set) and its positions in ``train`` (n,) int64, ascending;
        ``(None, None)`` when ``per_class`` is 0.
    """
    import zlib

    import numpy as np
    import torch

    import lab.data

    if not per_class:
        return None, None
    targets = np.asarray(train.targets, dtype=np.int64)
    keep = []
    for k, name in enumerate(train.classes):
        idx = np.flatnonzero(targets == k)
        # seeded by the class name, as the dataset's own samples are: a class's draw ignores the others
        rng = np.random.default_rng([seed, zlib.crc32(str(name).encode("utf-8")), 1])
        keep.append(idx[rng.permutation(idx.size)[:per_class]])
    indices = np.sort(np.concatenate(keep)).astype(np.int64)
    # the dataset gives float pixels x / 255; * 255 and rounding gives the stored uint8 back exactly
    images = torch.stack([train[int(i)][0] for i in indices]).mul_(255.0).round_().to(torch.uint8)  # (n, C, H, W)
    sample = lab.data.ImageDataset(images, targets[indices], train.classes, train.name, train.info)
    return sample, indices


def absolute_dataset(config: RunConfig) -> RunConfig:
    """``config`` with the path of a ``folder:``/``cifar10:``/``cifar100:`` dataset made absolute
    (``~`` expanded), so that the stored run can be rebuilt from any working directory."""
    import os

    kind, sep, arg = config.dataset.partition(":")
    if not sep or kind not in _PATH_KINDS or not arg:
        return config
    path = os.path.abspath(os.path.expanduser(arg))
    return config if path == arg else config.replace(dataset=f"{kind}:{path}")


def images_needed(metrics) -> tuple[int, str | None]:
    """The fewest images per class the metrics need, and the metric (with its reason) that needs them.

    Each entry of :data:`lab.catalogue.METRICS` says how many (``images_per_class``) and why, e.g. nc1's
    within-class spread 2, kNN accuracy's leave-one-out another image of the class, the linear probe's
    stratified k-fold ``folds``; the first of ``metrics`` that needs the most is named.
    """
    from lab import catalogue

    need, why = 1, None
    for name in metrics:
        count, reason = catalogue.METRICS[name].images_needed()
        if count > need:
            need, why = count, reason
    return need, why


def _advice(cfg: RunConfig, cap_name: str, need: int, why: str | None) -> str:
    cap = getattr(cfg, cap_name)
    if cap is not None and cap < need:
        return f"raise {cap_name} to at least {need}"
    metric = (why or "").split(" ")[0]
    more = ", raise heldout_fraction" if cap_name == "seen_per_class" else ""
    return f"add images to it{more}, or drop {metric} from metrics" if metric else "add images to it"


def _check_counts(part, need: int, why: str | None, role: str, advice: str, *, part_name: str = "") -> None:
    """Raise ValueError naming the first class of ``part`` with fewer than ``need`` images."""
    import numpy as np

    if need <= 1:
        return
    counts = np.bincount(np.asarray(part.targets, dtype=np.int64), minlength=len(part.classes))
    low = [i for i, n in enumerate(counts) if n < need]
    if not low:
        return
    i = low[0]
    more = f" ({len(low) - 1} more class{'es' if len(low) > 2 else ''} too)" if len(low) > 1 else ""
    raise ValueError(
        f"{role} class {part.classes[i]!r} has {int(counts[i])} {part_name}image{'s' if counts[i] != 1 else ''}"
        f"{more}, but {why or 'the run'} needs at least {need} per class; {advice}.")
