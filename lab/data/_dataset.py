"""Labelled image dataset shared by every source: held in memory (glyphs, digits, CIFAR) or
memory-mapped from the decoded-image cache (folders)."""
from __future__ import annotations

import math
import multiprocessing
import os
import warnings
import zlib
from typing import Sequence

import numpy as np
import torch
from torch.utils.data import DataLoader

__all__ = ["ImageDataset", "standardize"]

_SPLIT_ORDER = {"train": 0, "test": 1, "val": 2}

LOADER_WORKERS = min(4, max(0, (os.cpu_count() or 1) - 1))
"""Worker processes of a memory-mapped folder's loaders when the batches go to a CUDA device
(:meth:`ImageDataset.loader_options`): gathering, standardising and augmenting 224-px batches on
the main thread would keep a GPU waiting. One core is left to the main process."""


def standardize(images: torch.Tensor) -> torch.Tensor:
    """uint8 images (..., C, H, W) -> float32 pixels in [0, 1]: ``x / 255``.

    No mean/std here: the backbone applies the normalization its weights expect
    (``lab.backbones.Backbone.normalize``, used by extraction and fine-tuning).
    """
    return images.float().div_(255.0)


def _random_affine(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Mild random affine per image: rotation +-10 deg, scale 0.9-1.1, shift +-6 %.

    Edges are replicated (``padding_mode="border"``) so glyph paper stays white
    and photos do not grow black borders.
    """
    b = x.shape[0]
    u = torch.rand(b, 4, generator=generator) * 2 - 1                 # (B, 4) in [-1, 1]
    angle = u[:, 0] * math.radians(10)
    scale = 1 + 0.1 * u[:, 1]
    cos, sin = torch.cos(angle) / scale, torch.sin(angle) / scale
    theta = torch.stack([torch.stack([cos, -sin, 0.06 * u[:, 2]], 1),
                         torch.stack([sin, cos, 0.06 * u[:, 3]], 1)], 1)   # (B, 2, 3)
    grid = torch.nn.functional.affine_grid(theta, list(x.shape), align_corners=False)
    return torch.nn.functional.grid_sample(x, grid, mode="bilinear", padding_mode="border",
                                           align_corners=False)


class _Collate:
    """Turn a list of indices into a standardised (and maybe augmented) batch.

    In a DataLoader worker the augmentation generator is re-seeded per worker (from ``seed`` and
    the worker id), so workers draw different but repeatable augmentations.
    """

    def __init__(self, ds: "ImageDataset", generator: torch.Generator | None, seed: int = 0):
        self.ds, self.targets, self.generator, self.seed = ds, ds._targets_t, generator, seed
        self._worker = None

    def __call__(self, indices: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        idx = torch.as_tensor(indices, dtype=torch.long)
        x = standardize(self.ds._gather(idx))                              # (B, C, H, W)
        if self.generator is not None:
            info = torch.utils.data.get_worker_info()
            if info is not None and self._worker != info.id:
                self._worker = info.id
                self.generator = torch.Generator().manual_seed(self.seed * 1009 + info.id + 1)
            x = _random_affine(x, self.generator)
        return x, self.targets[idx]


class ImageDataset(torch.utils.data.Dataset):
    """Labelled uint8 images with class names, in memory or memory-mapped from the cache.

    Parameters
    ----------
    images : torch.Tensor or numpy.ndarray
        uint8 (N, C, H, W) with H == W and C in {1, 3}.
    targets : array-like of int
        (N,) indices into ``classes``.
    classes : sequence of str
        Class names; ``targets`` index them.
    name : str
        The spec it was loaded from (e.g. ``"glyphs"``), kept by derived datasets.
    info : dict, optional
        Source details (fonts, characters, paths) for display; not interpreted.
    splits : sequence of str, optional
        (N,) the split each image comes from (e.g. ``"train"``/``"test"`` of a pre-split folder);
        :meth:`partition` then returns those splits instead of drawing one.

    Notes
    -----
    ``ds[i]`` returns ``(x, y)`` with ``x`` float32 (C, H, W) pixels in [0, 1]
    (``x / 255``; the backbone normalizes them) and no augmentation. Random augmentation happens only
    in :meth:`train_loader`.

    The shipped glyphs are read from a per-process cache that is never written:
    their datasets and everything derived from them (:meth:`subset`, :meth:`partition`,
    :meth:`sample_per_class`) index that cache instead of copying images, and
    ``images`` copies a dataset's own images out on first access.

    Image folders are memory-mapped from their decoded cache (a private, copy-on-write map):
    batches read only the rows they need, so a dataset larger than RAM works; ``images`` of a
    whole folder is the mapped tensor itself, not a copy.
    """

    def __init__(self, images, targets, classes: Sequence[str], name: str, info: dict | None = None, *,
                 splits: Sequence[str] | None = None):
        if splits is not None:
            names = sorted(set(map(str, splits)), key=lambda s: (_SPLIT_ORDER.get(s, 9), s))
            codes = np.asarray([names.index(str(s)) for s in splits], dtype=np.int8)
            splits = (names, codes)
        self._init(torch.as_tensor(images), None, targets, classes, name, info, shared=False, splits=splits)

    @classmethod
    def _view(cls, source: torch.Tensor, rows: torch.Tensor | None, targets, classes: Sequence[str],
              name: str, info: dict | None = None, *, splits: tuple[list[str], np.ndarray] | None = None,
              mapped: str | None = None) -> "ImageDataset":
        """The images ``source[rows]`` (all of ``source`` when ``rows`` is None) of a tensor that
        nothing ever writes, read in place. ``splits`` is (split names, (N,) int codes);
        ``mapped`` the cache file ``source`` maps, if any."""
        ds = cls.__new__(cls)
        ds._init(source, rows, targets, classes, name, info, shared=True, splits=splits, mapped=mapped)
        return ds

    def _init(self, source: torch.Tensor, rows: torch.Tensor | None, targets, classes, name, info, *,
              shared: bool, splits: tuple[list[str], np.ndarray] | None = None, mapped: str | None = None) -> None:
        if source.dtype != torch.uint8 or source.ndim != 4 or source.shape[1] not in (1, 3) \
                or source.shape[2] != source.shape[3]:
            raise ValueError(f"images must be uint8 (N, C, H, W) with C in (1, 3) and H == W; "
                             f"got {source.dtype} {tuple(source.shape)}.")
        n = source.shape[0] if rows is None else len(rows)
        targets = np.asarray(targets, dtype=np.int64)
        classes = [str(c) for c in classes]
        if targets.shape != (n,):
            raise ValueError(f"targets must have shape ({n},); got {targets.shape}.")
        if len(set(classes)) != len(classes):
            raise ValueError(f"class names must be unique; got {classes}.")
        if targets.size and (targets.min() < 0 or targets.max() >= len(classes)):
            raise ValueError(f"targets must lie in 0..{len(classes) - 1}; "
                             f"got {targets.min()}..{targets.max()}.")
        if splits is not None and np.asarray(splits[1]).shape != (n,):
            raise ValueError(f"splits must name one split per image ({n}); got {np.asarray(splits[1]).shape}.")
        self._source, self._rows, self._shared, self._mapped = source, rows, shared, mapped
        self.split_names = list(splits[0]) if splits is not None else []
        self._split_codes = np.asarray(splits[1], dtype=np.int8) if splits is not None else None
        self.targets = targets
        self.classes = classes
        self.name = name
        self.info = dict(info or {})
        self._targets_t = torch.from_numpy(targets)

    # -- basic access ------------------------------------------------------
    @property
    def images(self) -> torch.Tensor:
        """uint8 (N, C, H, W), this dataset's own (a view's images are copied out on first access;
        a whole memory-mapped folder is returned as its private map, without a copy)."""
        if self._mapped is not None and self._rows is None:
            return self._source
        if self._shared:   # a mapped view's rows are copied out too: from now on it holds them in memory
            self._source = self._source.clone() if self._rows is None else self._source[self._rows]
            self._rows, self._shared, self._mapped = None, False, None
        return self._source

    def _gather(self, idx) -> torch.Tensor:
        """Images ``idx`` (an int or index tensor) without copying out the whole dataset."""
        return self._source[idx if self._rows is None else self._rows[idx]]

    @property
    def in_chans(self) -> int:
        """Number of channels (1 grayscale, 3 RGB)."""
        return int(self._source.shape[1])

    @property
    def image_size(self) -> int:
        """Width (= height) of the images in pixels."""
        return int(self._source.shape[-1])

    def __len__(self) -> int:
        return int(self._source.shape[0] if self._rows is None else len(self._rows))

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return standardize(self._gather(i)), int(self.targets[i])

    @property
    def splits(self) -> np.ndarray | None:
        """(N,) split name of every image (e.g. "train"/"test" of a pre-split folder), or None."""
        if self._split_codes is None:
            return None
        return np.asarray(self.split_names, dtype=object)[self._split_codes]

    def class_counts(self, split: str | None = None) -> dict[str, int]:
        """Number of images of every class, in ``classes`` order (of one ``split`` only, if given)."""
        targets = self.targets
        if split is not None:
            targets = targets[self._split_mask(split)]
        counts = np.bincount(targets, minlength=len(self.classes))
        return {c: int(n) for c, n in zip(self.classes, counts)}

    def summary(self, imbalance: float = 1.5) -> str:
        """A few lines: size, splits, images per class, and which classes are imbalanced.

        A set of counts is reported as imbalanced when its largest class has at least
        ``imbalance`` times the images of its smallest.
        """
        lines = [repr(self)]
        for split in self.split_names or [None]:
            counts = self.class_counts(split)
            vals = np.array(list(counts.values()))
            where = f"{split}: " if split else ""
            lines.append(f"{where}{int(vals.sum())} images, {vals.min()}-{vals.max()} per class "
                         f"(median {int(np.median(vals))})")
            lo, hi = min(counts, key=counts.get), max(counts, key=counts.get)
            if counts[lo] == 0 or counts[hi] >= imbalance * counts[lo]:
                lines.append(f"  imbalanced{' ' + split if split else ''}: {hi!r} has {counts[hi]} images, "
                             f"{lo!r} {counts[lo]}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        shown = ", ".join(self.classes[:4]) + (", ..." if len(self.classes) > 4 else "")
        extra = f", splits {self.split_names}" if self.split_names else ""
        extra += ", memory-mapped" if self._mapped else ""
        return (f"ImageDataset({self.name!r}: {len(self)} images, {len(self.classes)} classes "
                f"[{shown}], {self.image_size}x{self.image_size} px, in_chans={self.in_chans}{extra})")

    # -- pickling: a memory-mapped dataset travels as its cache path, not its pixels -------------
    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        if self._mapped is not None:
            state["_source"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if self._source is None:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
                self._source = torch.from_numpy(np.load(self._mapped, mmap_mode="c", allow_pickle=False))

    # -- derived datasets --------------------------------------------------
    def _take(self, indices: np.ndarray, targets: np.ndarray | None = None,
              classes: Sequence[str] | None = None, keep_splits: bool = True) -> "ImageDataset":
        indices = np.asarray(indices, dtype=np.int64)
        targets = self.targets[indices] if targets is None else targets
        classes = self.classes if classes is None else classes
        splits = None
        if keep_splits and self._split_codes is not None:
            splits = (self.split_names, self._split_codes[indices])
        picked = torch.from_numpy(indices)
        if self._shared:   # index the shared images instead of copying them
            rows = picked if self._rows is None else self._rows[picked]
            return ImageDataset._view(self._source, rows, targets, classes, self.name, self.info,
                                      splits=splits, mapped=self._mapped)
        ds = ImageDataset(self._source[picked], targets, classes, self.name, self.info)
        ds.split_names, ds._split_codes = (list(splits[0]), splits[1]) if splits else ([], None)
        return ds

    def relabel(self, targets) -> "ImageDataset":
        """The same images with other labels ``targets`` ((N,) indices into ``classes``), not copied."""
        targets = np.asarray(targets, dtype=np.int64)
        if targets.shape != (len(self),):
            raise ValueError(f"targets must have shape ({len(self)},); got {targets.shape}.")
        return self._take(np.arange(len(self)), targets)

    def _split_mask(self, split: str) -> np.ndarray:
        """(N,) bool: the images of ``split`` ("test" also finds a "val" split when there is no "test")."""
        if self._split_codes is None:
            raise ValueError(f"dataset {self.name!r} has no splits; class_counts(split=...) needs a pre-split "
                             "folder (ROOT/train/<class>, ROOT/test/<class>).")
        names = self.split_names
        name = "val" if split == "test" and "test" not in names and "val" in names else split
        if name not in names:
            raise ValueError(f"dataset {self.name!r} has no {split!r} split; its splits are {names}.")
        return self._split_codes == names.index(name)

    def subset(self, classes: Sequence[str]) -> "ImageDataset":
        """Keep only ``classes``; they become the class list, in that order.

        Targets are re-indexed ``0..len(classes) - 1``.
        """
        classes = [str(c) for c in classes]
        unknown = [c for c in classes if c not in self.classes]
        if unknown:
            raise ValueError(f"unknown classes {unknown} for dataset {self.name!r}; "
                             f"expected names from {self.classes}.")
        if len(set(classes)) != len(classes):
            dup = sorted({c for c in classes if classes.count(c) > 1})
            raise ValueError(f"classes must not repeat; got {dup} more than once.")
        old_to_new = np.full(len(self.classes), -1, dtype=np.int64)
        for new, c in enumerate(classes):
            old_to_new[self.classes.index(c)] = new
        keep = np.flatnonzero(old_to_new[self.targets] >= 0)
        return self._take(keep, old_to_new[self.targets[keep]], classes)

    def _per_class_order(self, seed: int) -> dict[int, np.ndarray]:
        """A shuffled index list per class; seeded by the class *name* so the
        result for a class does not depend on which other classes are present."""
        out = {}
        for k, name in enumerate(self.classes):
            idx = np.flatnonzero(self.targets == k)
            rng = np.random.default_rng([seed, zlib.crc32(name.encode("utf-8"))])
            out[k] = idx[rng.permutation(idx.size)]
        return out

    def partition(self, which: str, test_fraction: float = 0.2, seed: int = 0) -> "ImageDataset":
        """Deterministic per-class train/test split; the class list is unchanged.

        A dataset with splits (a pre-split folder) returns its own split instead: ``"train"``
        its train/ images, ``"test"`` its test/ images (val/ when there is no test/), whatever
        ``test_fraction`` and ``seed`` say.

        Parameters
        ----------
        which : {"train", "test"} or a split name
            Which part to return; the two are disjoint and cover the dataset.
        test_fraction : float
            Share of each class in the test part (rounded, at least one image and
            at least one image left for training).
        seed : int
            Same seed, same split.
        """
        if self._split_codes is not None and (which in ("train", "test") or which in self.split_names):
            return self._take(np.flatnonzero(self._split_mask(which)), keep_splits=False)
        if which not in ("train", "test"):
            raise ValueError(f"which must be 'train' or 'test'; got {which!r}.")
        if not 0 < test_fraction < 1:
            raise ValueError(f"test_fraction must be in (0, 1); got {test_fraction}.")
        keep = []
        for k, idx in self._per_class_order(seed).items():
            if idx.size < 2:
                raise ValueError(
                    f"class {self.classes[k]!r} has {idx.size} image(s); a train/test partition "
                    "needs at least 2 per class. Add images or drop it with subset().")
            n_test = min(max(1, round(test_fraction * idx.size)), idx.size - 1)
            keep.append(idx[:n_test] if which == "test" else idx[n_test:])
        return self._take(np.sort(np.concatenate(keep)))

    def sample_per_class(self, n: int, seed: int = 0) -> "ImageDataset":
        """At most ``n`` images per class, chosen deterministically from ``seed``."""
        if n < 1:
            raise ValueError(f"n must be a positive number of images per class; got {n}.")
        keep = [idx[:n] for idx in self._per_class_order(seed).values()]
        return self._take(np.sort(np.concatenate(keep)))

    # -- loaders -------------------------------------------------------------
    def loader_options(self, device) -> dict:
        """``num_workers`` and ``pin_memory`` for this dataset's loaders feeding ``device``.

        Pinned (page-locked) batches only for CUDA, where they make the copy to the device
        asynchronous; elsewhere pinning costs a copy and buys nothing. Worker processes
        (:data:`LOADER_WORKERS`) only for CUDA and a memory-mapped folder: each worker re-opens the
        cache file by its path (``__getstate__``), so no pixels are pickled, while an in-memory
        dataset would be copied into every worker. On CPU there are none, so CPU runs keep
        their batches (augmentation draws depend on the number of workers). Nor are there any in
        a daemonic process (a Dask worker of a study), which may not start processes.
        """
        cuda = device is not None and torch.device(device).type == "cuda"
        workers = LOADER_WORKERS if (cuda and self._mapped is not None) else 0
        # Dask's nanny starts its workers as daemons, and multiprocessing refuses children to a
        # daemon ("daemonic processes are not allowed to have children"): every batch of the run
        # would fail. Loading on the run's own thread is slower but works.
        if multiprocessing.current_process().daemon:
            workers = 0
        return {"num_workers": workers, "pin_memory": cuda}

    def train_loader(self, batch_size: int, augment: bool = True, seed: int = 0,
                     shuffle: bool = True, num_workers: int = 0, pin_memory: bool = False) -> DataLoader:
        """Batches ``(x float (B, C, H, W), y int64 (B,))`` for training.

        With ``augment`` every image gets a mild random affine (rotation,
        scale, shift); shuffling and augmentation follow ``seed``, so a new loader
        with the same seed repeats the same batches (for the same ``num_workers``).
        ``num_workers > 0`` gathers, standardises and augments batches in worker
        processes, which helps when a GPU waits for augmentation; a memory-mapped folder
        travels to them as its cache path. ``pin_memory`` puts batches in page-locked memory
        (for CUDA; :meth:`loader_options` picks both for a device).
        """
        order = torch.Generator().manual_seed(seed)
        aug = torch.Generator().manual_seed(seed + 1) if augment else None
        return DataLoader(range(len(self)), batch_size=batch_size, shuffle=shuffle,
                          generator=order if shuffle else None, num_workers=num_workers,
                          collate_fn=_Collate(self, aug, seed), pin_memory=pin_memory)

    def eval_loader(self, batch_size: int, num_workers: int = 0, pin_memory: bool = False) -> DataLoader:
        """Batches in dataset order without augmentation (options as in :meth:`train_loader`)."""
        return DataLoader(range(len(self)), batch_size=batch_size, shuffle=False, num_workers=num_workers,
                          collate_fn=_Collate(self, None), pin_memory=pin_memory)

    # -- thumbnails ------------------------------------------------------------
    def thumbnail(self, i: int, size: int = 32) -> str:
        """Image ``i`` as a PNG data URI (``"data:image/png;base64,..."``), its longest side ``size`` px
        (:func:`lab.data.png_data_uri`)."""
        from lab.data.thumbnails import png_data_uri

        return png_data_uri(self._gather(int(i)).permute(1, 2, 0).numpy(), size)      # (H, W, C)

    def class_thumbnail(self, name: str, size: int = 32) -> str:
        """Thumbnail of a typical image of class ``name``: of up to 64 of its
        images, the one closest to their mean. Made once per dataset object (every page's class gallery
        shows them: the app's datasets are shared by its sessions)."""
        if name not in self.classes:
            raise ValueError(f"unknown class {name!r}; expected one of {self.classes}.")
        made = self.__dict__.setdefault("_class_thumbnails", {})
        if (name, size) not in made:
            made[(name, size)] = self._class_thumbnail(name, size)
        return made[(name, size)]

    def _class_thumbnail(self, name: str, size: int) -> str:
        idx = np.flatnonzero(self.targets == self.classes.index(name))[:64]
        if idx.size == 0:
            raise ValueError(f"class {name!r} has no images in this dataset.")
        x = self._gather(torch.from_numpy(idx)).flatten(1).float()          # (n, C*H*W)
        best = int(torch.cdist(x, x.mean(0, keepdim=True)).argmin())
        return self.thumbnail(int(idx[best]), size)
