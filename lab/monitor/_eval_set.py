"""The images a monitor evaluates, in every form :func:`lab.features.extract` reads, with their labels read once.

Accepted forms (each evaluation reads the images in the same order, so their labels are read once, up front):

- a lab dataset (``lab.data.load("digits").subset([...])``): its ``targets`` and ``classes``;
- a tuple ``(images, labels)``: a tensor (N, C, H, W) and N integer labels (tensor, array or list);
- a torch ``Dataset`` of ``(image, label)``: its ``targets`` attribute when it has one, else one pass over it;
- a ``DataLoader`` of ``(images, labels)`` batches that does not shuffle: one pass over it.

Labels may be any integers; they are numbered 0..K-1 in sorted order, and the classes are named by the
dataset's ``classes`` where it has them, else by the label itself (``"3"``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, SequentialSampler, TensorDataset

__all__ = ["EvalSet", "eval_set", "thumbnail_images", "THUMBNAIL_SIZE", "MAX_THUMBNAILS"]

THUMBNAIL_SIZE = 32
"""Longest side in pixels of the thumbnails a monitored run keeps of its unseen images (the app's hover)."""
MAX_THUMBNAILS = 20_000
"""A set of more images keeps no thumbnails (about 3 kB each at 32 px in colour)."""

_FORMS = ("a lab dataset, a tuple (images (N, C, H, W), labels (N,)), a torch Dataset of (image, label), or a "
          "DataLoader of (images, labels) batches")


@dataclass
class EvalSet:
    """One evaluation set.

    Attributes
    ----------
    data : what :func:`lab.features.extract` reads (a lab dataset, a Dataset or a DataLoader)
    labels : LongTensor (N,) on the CPU, 0..K-1
    classes : list of K class names (label k is ``classes[k]``)
    image_shape : (C, H, W) of one image
    description : a few words for the run's config (``"digits (120 images)"``)
    """

    data: Any
    labels: torch.Tensor
    classes: list
    image_shape: tuple
    description: str

    def __len__(self) -> int:
        return int(self.labels.shape[0])


def _integer_labels(raw, role: str) -> np.ndarray:
    if torch.is_tensor(raw):
        raw = raw.detach().cpu().numpy()
    try:
        labels = np.asarray(raw)
    except (TypeError, ValueError):
        labels = np.asarray(list(raw), dtype=object)
    if labels.ndim != 1:
        raise ValueError(f"{role}: labels must be one integer class per image, shape (N,). Got shape "
                         f"{labels.shape} instead; pass class indices, not one-hot vectors or images.")
    if labels.dtype == bool or not (np.issubdtype(labels.dtype, np.integer) or labels.size == 0):
        # floats that are whole numbers are the usual accident of a float tensor of class indices
        shown = ", ".join(map(repr, labels[:3].tolist()))
        raise ValueError(f"{role}: labels must be integer class indices. Got {labels.dtype} labels ({shown} ...) "
                         f"instead; convert them, e.g. labels.long() or np.asarray(labels, dtype=int).")
    return labels.astype(np.int64)


def _first_image(batch) -> torch.Tensor:
    x = batch[0] if isinstance(batch, (tuple, list)) else batch
    if not torch.is_tensor(x):
        raise ValueError(f"images must be tensors (C, H, W) or batches (B, C, H, W). Got {type(x).__name__} "
                         f"instead; add a transform that returns tensors (torchvision's ToTensor).")
    return x


def _read(data, role: str) -> tuple[Any, np.ndarray, list | None, tuple, str]:
    """(what extract reads, raw labels, class names or None, (C, H, W), description)."""
    if isinstance(data, tuple) and len(data) == 2 and torch.is_tensor(data[0]):
        images, labels = data
        if images.dim() != 4:
            raise ValueError(f"{role}: images must be a tensor (N, C, H, W). Got shape {tuple(images.shape)} "
                             f"instead.")
        labels = _integer_labels(labels, role)
        if labels.shape[0] != images.shape[0]:
            raise ValueError(f"{role}: {images.shape[0]} images but {labels.shape[0]} labels; give one label "
                             f"per image.")
        return (TensorDataset(images, torch.as_tensor(labels)), labels, None, tuple(images.shape[1:]),
                f"{images.shape[0]} images")
    if torch.is_tensor(data):
        raise ValueError(f"{role}: an image tensor needs its labels: pass (images, labels). Got a tensor of shape "
                         f"{tuple(data.shape)} alone.")
    if callable(getattr(data, "eval_loader", None)) and hasattr(data, "targets"):     # a lab dataset
        labels = _integer_labels(data.targets, role)
        name = getattr(data, "name", None) or type(data).__name__
        return data, labels, list(data.classes), tuple(_first_image(data[0]).shape), f"{name} ({len(data)} images)"
    if isinstance(data, DataLoader):
        sampler = getattr(data.batch_sampler, "sampler", data.sampler)
        if not isinstance(sampler, SequentialSampler):
            raise ValueError(f"{role}: the DataLoader draws its images in a random order ({type(sampler).__name__}); "
                             f"every evaluation must read the same images in the same order: use "
                             f"DataLoader(..., shuffle=False).")
        labels, shape = [], None
        for batch in data:
            if not (isinstance(batch, (tuple, list)) and len(batch) >= 2):
                raise ValueError(f"{role}: the DataLoader must yield (images, labels) batches. Got "
                                 f"{type(batch).__name__} instead.")
            shape = shape or tuple(_first_image(batch).shape[1:])
            labels.append(_integer_labels(batch[1], role).reshape(-1))
        if not labels:
            raise ValueError(f"{role}: the DataLoader yields no batches; expected at least one image per class.")
        labels = np.concatenate(labels)
        classes = getattr(data.dataset, "classes", None)
        return data, labels, classes, shape, f"{len(labels)} images (DataLoader)"
    if isinstance(data, Dataset) or (hasattr(data, "__getitem__") and hasattr(data, "__len__")):
        if len(data) == 0:
            raise ValueError(f"{role}: the dataset is empty; expected at least one image per class.")
        first = data[0]
        if not (isinstance(first, (tuple, list)) and len(first) >= 2):
            raise ValueError(f"{role}: a Dataset must give (image, label) pairs. Got {type(first).__name__} "
                             f"instead.")
        targets = getattr(data, "targets", None)
        raw = targets if targets is not None and len(targets) == len(data) else [data[i][1] for i in range(len(data))]
        labels = _integer_labels([int(v) if torch.is_tensor(v) and v.numel() == 1 else v for v in raw]
                                 if not torch.is_tensor(raw) else raw, role)
        return (data, labels, getattr(data, "classes", None), tuple(_first_image(first).shape),
                f"{len(data)} images ({type(data).__name__})")
    raise ValueError(f"{role} must be {_FORMS}. Got {type(data).__name__} instead.")


def eval_set(data, role: str, *, min_classes: int) -> EvalSet:
    """``data`` read as an :class:`EvalSet`; ValueError naming the problem and the fix.

    Parameters
    ----------
    role : ``"unseen"`` or ``"seen"`` (messages start with it)
    min_classes : the fewest classes the set must have (2 for unseen: separability needs two)
    """
    data, raw, names, shape, description = _read(data, role)
    if len(shape) != 3:
        raise ValueError(f"{role}: each image must be (C, H, W). Got shape {shape} instead.")
    present, labels = np.unique(raw, return_inverse=True)
    if present.size < min_classes:
        only = f"only class {present[0]}" if present.size == 1 else "no images"
        raise ValueError(f"{role}: the images have {only}; separability and collapse compare classes, so give "
                         f"images of at least {min_classes} classes.")
    if names is not None and (present.min() < 0 or present.max() >= len(names)):
        names = None
    classes = [str(names[int(k)]) if names is not None else str(int(k)) for k in present]
    return EvalSet(data, torch.as_tensor(labels.astype(np.int64)), classes, tuple(int(v) for v in shape),
                   description)


def _batches(data):
    """(images (B, C, H, W)) of ``data`` in evaluation order, whatever its form."""
    if callable(getattr(data, "eval_loader", None)):                 # a lab dataset: raw uint8 pixels
        gather = getattr(data, "_gather", None)
        if gather is not None:
            for start in range(0, len(data), 256):
                yield gather(torch.arange(start, min(start + 256, len(data))))
            return
        loader = data.eval_loader(256)
    elif isinstance(data, DataLoader):
        loader = data
    else:
        loader = DataLoader(data, batch_size=256, shuffle=False)
    for batch in loader:
        yield _first_image(batch)


def _as_uint8(x: torch.Tensor) -> torch.Tensor:
    """Images (B, C, H, W) as uint8 pixels: kept when uint8, x 255 when within [0, 1], else each image
    stretched to its own range (normalised inputs)."""
    if x.dtype == torch.uint8:
        return x
    x = x.float()
    if float(x.min()) >= 0.0 and float(x.max()) <= 1.0:
        return (x * 255).round().to(torch.uint8)
    flat = x.flatten(1)
    low, high = flat.min(1).values.view(-1, 1, 1, 1), flat.max(1).values.view(-1, 1, 1, 1)
    return ((x - low) / (high - low).clamp_min(1e-12) * 255).round().to(torch.uint8)


def thumbnail_images(data: EvalSet, size: int = THUMBNAIL_SIZE) -> np.ndarray | None:
    """Thumbnails of the set's images, uint8 (N, h, w, C) with the longest side at most ``size`` pixels, in
    evaluation order; None when they are not images (not 1 or 3 channels, smaller than 8 px) or more than
    :data:`MAX_THUMBNAILS`. One pass over the images."""
    c, h, w = data.image_shape
    if c not in (1, 3) or min(h, w) < 8 or len(data) > MAX_THUMBNAILS:
        return None
    scale = min(1.0, size / max(h, w))
    out_size = (max(1, round(h * scale)), max(1, round(w * scale)))
    parts = []
    with torch.no_grad():
        for x in _batches(data.data):
            x = x.detach().cpu()
            if x.dim() != 4 or tuple(x.shape[1:]) != (c, h, w):
                return None                     # images of other shapes: no grid of thumbnails
            x = _as_uint8(x)
            if out_size != (h, w):
                x = torch.nn.functional.interpolate(x.float(), size=out_size, mode="bilinear", antialias=True,
                                                    align_corners=False).round().clamp(0, 255).to(torch.uint8)
            parts.append(x.permute(0, 2, 3, 1).numpy())                    # (B, h, w, C)
    images = np.concatenate(parts) if parts else np.zeros((0, *out_size, c), np.uint8)
    return images if len(images) == len(data) else None
