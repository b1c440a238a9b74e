"""``load(spec)``: build an :class:`ImageDataset` from a dataset spec string."""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import torch

from ._cifar import load_cifar
from ._dataset import ImageDataset

__all__ = ["load", "SPECS"]

SPECS = ("glyphs", "glyphs:character", "digits", "folder:PATH", "cifar10:PATH", "cifar100:PATH")
_DEFAULT_FOLDER_SIZE = 64


def load(spec: str, image_size: int | None = None) -> ImageDataset:
    """Load a dataset from disk or from the package; never downloads.

    Parameters
    ----------
    spec : str
        ``"glyphs"`` (20 CJK typefaces as calligraphy styles, 64 px),
        ``"glyphs:character"`` (the same images labelled by character),
        ``"digits"`` (scikit-learn's 8x8 digits upsampled to 32 px),
        ``"folder:PATH"`` (one sub-folder per class; any image format Pillow reads),
        ``"cifar10:PATH"`` / ``"cifar100:PATH"`` (the python-pickle CIFAR files,
        train and test batches together).
    image_size : int, optional
        Resize (bilinear, antialiased) to this many pixels square. Folders default
        to 64 px.

    Returns
    -------
    ImageDataset
    """
    if not isinstance(spec, str):
        raise ValueError(f"spec must be a string such as 'glyphs'; got {type(spec).__name__}.")
    if image_size is not None and (not isinstance(image_size, int) or image_size < 4):
        raise ValueError(f"image_size must be an int >= 4 or None; got {image_size!r}.")
    kind, _, arg = spec.partition(":")
    kind = kind.strip().lower()
    if kind == "glyphs" and arg in ("", "character"):
        ds = _glyphs(by_character=arg == "character")
    elif kind == "digits" and not arg:
        ds = _digits()
    elif kind == "folder" and arg:
        ds = _folder(arg, image_size or _DEFAULT_FOLDER_SIZE)
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


def _image_files(folder: Path) -> list[Path]:
    from PIL import Image

    exts = {e.lower() for e, fmt in Image.registered_extensions().items() if fmt in Image.OPEN}
    return sorted(p for p in folder.iterdir()
                  if p.is_file() and not p.name.startswith(".") and p.suffix.lower() in exts)


def _open_image(path: Path):
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as img:
            img.load()
            return img.copy()
    except (OSError, UnidentifiedImageError) as err:
        raise ValueError(f"cannot read image {path}: {err}. Remove or fix the file.") from err


def _is_gray(img) -> bool:
    if img.mode in ("1", "L", "LA", "I", "I;16", "F"):
        return True
    rgb = np.asarray(img.convert("RGB"))
    return bool((rgb[..., 0] == rgb[..., 1]).all() and (rgb[..., 1] == rgb[..., 2]).all())


def _square(img, size: int):
    """Resize the shorter side to ``size`` and crop the centre square."""
    from PIL import Image

    w, h = img.size
    s = size / min(w, h)
    img = img.resize((max(size, round(w * s)), max(size, round(h * s))), Image.Resampling.BILINEAR)
    left, top = (img.size[0] - size) // 2, (img.size[1] - size) // 2
    return img.crop((left, top, left + size, top + size))


def _folder(path: str, size: int) -> ImageDataset:
    root = Path(path).expanduser()
    if not root.is_dir():
        raise ValueError(f"folder dataset {str(root)!r} is not a directory; expected a folder "
                         "with one sub-folder of images per class.")
    subdirs = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    files = {d.name: _image_files(d) for d in subdirs}
    empty = [name for name, fs in files.items() if not fs]
    files = {name: fs for name, fs in files.items() if fs}
    if not files:
        raise ValueError(f"no images found in {str(root)!r}: expected one sub-folder per class, "
                         "each holding image files (PNG, JPEG, ...), e.g. ROOT/cat/1.png.")
    if empty:
        warnings.warn(f"ignoring sub-folders without images in {root}: {empty}", stacklevel=3)
    arrays, targets, gray = [], [], True
    for k, fs in enumerate(files.values()):
        for f in fs:
            img = _open_image(f)
            gray = gray and _is_gray(img)
            arrays.append(np.asarray(_square(img.convert("RGB"), size)))   # (size, size, 3)
            targets.append(k)
    x = torch.from_numpy(np.stack(arrays)).permute(0, 3, 1, 2)             # (N, 3, H, W)
    if gray:
        x = x[:, :1]   # gray images convert to three equal channels
    return ImageDataset(x.contiguous(), targets, list(files), f"folder:{root.resolve()}",
                        {"path": str(root.resolve())})
