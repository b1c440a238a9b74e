"""``load(spec)``: build an :class:`ImageDataset` from a dataset spec string."""
from __future__ import annotations

import warnings

import torch

from ._cifar import load_cifar
from ._dataset import ImageDataset
from ._names import SPECS, split_spec

__all__ = ["load", "SPECS"]
_DEFAULT_FOLDER_SIZE = 64


def load(spec: str, image_size: int | None = None, *, progress=None, mode: str = "auto",
         max_image_pixels: int | None = -1, workers: int | None = None) -> ImageDataset:
    """Load a dataset from disk or from the package; never downloads.

    The other parameters apply to ``folder:`` specs, which are decoded once (in parallel) into a
    cache (``$LAB_CACHE_DIR``, default the user cache folder + ``/layerscope``) and memory-mapped
    afterwards.

    Parameters
    ----------
    spec : str
        ``"glyphs"`` (20 CJK typefaces as calligraphy styles, 64 px),
        ``"glyphs:character"`` (the same images labelled by character),
        ``"digits"`` (scikit-learn's 8x8 digits upsampled to 32 px),
        ``"folder:PATH"`` (one sub-folder per class, or pre-split ``PATH/train/<class>`` +
        ``PATH/test/<class>`` (or ``val/``); any image format Pillow reads),
        ``"cifar10:PATH"`` / ``"cifar100:PATH"`` (the python-pickle CIFAR files,
        train and test batches together).
    image_size : int, optional
        Resize (bilinear, antialiased) to this many pixels square. Folders default
        to 64 px: the shorter side is resized and the centre square kept.

    Other Parameters
    ----------------
    progress : None, bool or callable
        Progress of the first decode: ``callable(done, total)`` is called after every chunk
        of images (raise from it to cancel); True shows a tqdm bar; False nothing; None
        (default) a tqdm bar when stderr is a terminal or in Jupyter.
    mode : {"auto", "L", "RGB"}
        "auto" keeps one channel when every image is gray, else three; "L"/"RGB" force it.
    max_image_pixels : int or None
        Refuse larger images as possible decompression bombs, naming the file; -1 (default):
        ``PIL.Image.MAX_IMAGE_PIXELS`` at call time; None: no limit.
    workers : int, optional
        Decoding processes; default all cores this process may use.

    Returns
    -------
    ImageDataset
    """
    if not isinstance(spec, str):
        raise ValueError(f"spec must be a string such as 'glyphs'; got {type(spec).__name__}.")
    if image_size is not None and (not isinstance(image_size, int) or image_size < 4):
        raise ValueError(f"image_size must be an int >= 4 or None; got {image_size!r}.")
    if max_image_pixels not in (None, -1) and (not isinstance(max_image_pixels, int) or max_image_pixels < 1):
        raise ValueError(f"max_image_pixels must be a positive int or None; got {max_image_pixels!r}.")
    kind, arg = split_spec(spec)
    if mode != "auto" and kind != "folder":
        raise ValueError(f"mode={mode!r} applies to 'folder:PATH' datasets only; leave it at 'auto' for {spec!r}.")
    if kind == "glyphs" and arg in ("", "character"):
        ds = _glyphs(by_character=arg == "character")
    elif kind == "digits" and not arg:
        ds = _digits()
    elif kind == "folder" and arg:
        from ._folder import load_folder

        return load_folder(arg, image_size or _DEFAULT_FOLDER_SIZE, mode=mode, progress=progress,
                           max_image_pixels=max_image_pixels, workers=workers)
    elif kind in ("cifar10", "cifar100") and arg:
        images, targets, classes, root = load_cifar(kind, arg)
        ds = ImageDataset(images, targets, classes, f"{kind}:{root}", {"path": str(root)})
    else:
        valid = ", ".join(repr(s) for s in SPECS)
        raise ValueError(f"unknown dataset spec {spec!r}; expected one of {valid}.")
    if image_size is not None and image_size != ds.image_size:
        ds = ImageDataset(_resize(ds.images, image_size), ds.targets, ds.classes, ds.name, ds.info)
    return ds


def _resize(images: torch.Tensor, size: int) -> torch.Tensor:
    """uint8 (N, C, H, W) -> uint8 (N, C, size, size), bilinear with antialiasing."""
    out = []
    for chunk in images.split(1024):
        x = torch.nn.functional.interpolate(chunk.float(), size=(size, size), mode="bilinear",
                                            align_corners=False, antialias=True)
        out.append(x.round_().clamp_(0, 255).to(torch.uint8))
    return torch.cat(out)


def _glyphs(by_character: bool) -> ImageDataset:
    from . import glyphs

    data = glyphs.read()
    info = {"styles": data["styles"].tolist(), "characters": data["characters"].tolist(),
            "fonts": data["meta"]["fonts"]}
    # The cached array is read-only and only ever read through ImageDataset._view: no copy of it.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        images = torch.from_numpy(data["images"])[:, None]                   # (N, 1, 64, 64)
    if by_character:
        return ImageDataset._view(images, None, data["char"], info["characters"], "glyphs:character", info)
    return ImageDataset._view(images, None, data["style"], info["styles"], "glyphs", info)


def _digits() -> ImageDataset:
    from sklearn.datasets import load_digits

    d = load_digits()
    x = torch.from_numpy(d.images * (255.0 / 16.0))[:, None].float()        # (N, 1, 8, 8)
    x = torch.nn.functional.interpolate(x, size=(32, 32), mode="bilinear", align_corners=False)
    images = x.round_().clamp_(0, 255).to(torch.uint8)
    return ImageDataset(images, d.target, [str(k) for k in range(10)], "digits",
                        {"source": "sklearn.datasets.load_digits"})
