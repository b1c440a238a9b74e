"""Decode one image file to a square uint8 array, whatever its mode; the worker side of the cache.

This module imports only numpy and Pillow (never torch) so that decoding worker
processes start fast.
"""
from __future__ import annotations

import os
import warnings

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

__all__ = ["ImageError", "decode", "decode_chunk", "show_path", "worker_init"]

_GRAY_MODES = ("1", "L", "LA", "La", "I", "I;16", "I;16L", "I;16B", "I;16N", "F")
_WIDE_MODES = ("I", "I;16", "I;16L", "I;16B", "I;16N", "F")   # more than 8 bits per pixel
_LIMIT_HINT = ("if the image is genuine, raise the limit with lab.data.load(..., max_image_pixels=N) "
               "or PIL.Image.MAX_IMAGE_PIXELS = N; otherwise remove the file")


class ImageError(ValueError):
    """An image file that cannot be used; the message names the file."""


def show_path(path) -> str:
    """A path as text that always prints: bytes that are not UTF-8 appear as ``\\xNN``."""
    raw = os.fsencode(path)
    return raw.decode("utf-8", "backslashreplace")


def _to_8bit(img, path) -> "np.ndarray":
    """A 16-bit, 32-bit integer or float image -> uint8 (H, W), scaled by its own range.

    A constant image keeps its value when it lies in 0..255 (0..1 for floats), else is clipped.
    """
    x = np.asarray(img)
    x = x.astype(np.float64)                                   # (H, W)
    if not np.isfinite(x).all():
        raise ImageError(f"image {show_path(path)} ({img.mode}) holds NaN or infinite values; "
                         "it cannot be scaled to 8 bits. Fix or remove the file.")
    lo, hi = float(x.min()), float(x.max())
    if hi > lo:
        x = (x - lo) * (255.0 / (hi - lo))
    elif img.mode == "F" and 0.0 <= lo <= 1.0:
        x = x * 255.0
    elif img.mode != "F" and img.mode != "I" and lo > 255:      # a constant 16-bit image
        x = x / 257.0
    return np.clip(np.rint(x), 0, 255).astype(np.uint8)


def _flatten_alpha(img, gray: bool):
    """Composite an image with alpha onto white (the paper of scans and glyphs)."""
    rgba = img.convert("LA" if gray else "RGBA")
    out = Image.new("L" if gray else "RGB", rgba.size, 255 if gray else (255, 255, 255))
    out.paste(rgba.convert("L" if gray else "RGB"), mask=rgba.getchannel("A"))
    return out


def _normalise_mode(img, path):
    """Any Pillow mode -> "L" or "RGB" (8 bits per channel)."""
    mode = img.mode
    if mode in ("L", "RGB"):
        return img
    if mode in _WIDE_MODES:
        return Image.fromarray(_to_8bit(img, path))
    if mode == "1":
        return img.convert("L")
    if mode in ("LA", "La"):
        return _flatten_alpha(img, gray=True)
    if mode in ("RGBA", "RGBa", "PA"):
        return _flatten_alpha(img, gray=False)
    if mode == "P":
        return _flatten_alpha(img, gray=False) if "transparency" in img.info else img.convert("RGB")
    try:   # CMYK, YCbCr, LAB, HSV, ...
        return img.convert("RGB")
    except (ValueError, OSError) as err:
        raise ImageError(f"image {show_path(path)} has mode {mode!r}, which cannot be converted to RGB "
                         f"({err}). Convert it to an 8-bit PNG or JPEG.") from err


def _may_be_rotated(img) -> bool:
    """Whether ``img`` may carry an EXIF orientation (cheap: parsing EXIF costs more than decoding a
    small JPEG). JPEG, PNG and WebP keep EXIF in ``info`` once loaded; other formats are checked fully."""
    if img.format in ("JPEG", "PNG", "WEBP"):
        return "exif" in img.info or "Raw profile type exif" in img.info
    return img.format not in ("BMP", "GIF", "PPM", "ICO", "PCX", "TGA")


def _square(img, size: int):
    """Resize the shorter side to ``size`` and keep the centre square (one resampling pass)."""
    w, h = img.size
    if (w, h) == (size, size):
        return img
    m = min(w, h)
    box = ((w - m) / 2, (h - m) / 2, (w + m) / 2, (h + m) / 2)
    return img.resize((size, size), Image.Resampling.BILINEAR, box=box)


def _too_large(path, w: int, h: int, max_pixels: int | None) -> None:
    if max_pixels is not None and w * h > max_pixels:
        raise ImageError(f"image {show_path(path)} has {w}x{h} = {w * h:,} pixels, over the limit of "
                         f"{max_pixels:,} (PIL.Image.MAX_IMAGE_PIXELS), so it is refused as a possible "
                         f"decompression bomb; {_LIMIT_HINT}.")


def decode(path, size: int, channels: int, max_pixels: int | None) -> tuple[np.ndarray, bool, list[str]]:
    """Read one image file as uint8 ``(channels, size, size)``.

    Parameters
    ----------
    path : str or Path
    size : int
        Side of the square output: the shorter side is resized to ``size`` and the centre kept.
    channels : {1, 3}
        1 converts to gray; 3 gives RGB (gray images get three equal channels).
    max_pixels : int or None
        Refuse images with more pixels than this (decompression bombs); None: no limit.

    Returns
    -------
    image : numpy.ndarray
        uint8 (channels, size, size).
    gray : bool
        Whether the image has no colour (gray mode, or three equal channels).
    notes : list of str
        Warnings Pillow raised while reading, as text.

    Raises
    ------
    ImageError
        The file cannot be decoded, is too large, or holds values that cannot be scaled.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with Image.open(path) as img:
                _too_large(path, img.size[0], img.size[1], max_pixels)
                if img.format == "JPEG":   # let libjpeg decode at 1/2, 1/4 or 1/8 scale when it can
                    img.draft("L" if channels == 1 else None, (size, size))
                img.load()
                if _may_be_rotated(img):
                    img = ImageOps.exif_transpose(img) or img
                img = _normalise_mode(img, path)
        except ImageError:
            raise
        except Image.DecompressionBombError as err:
            raise ImageError(f"image {show_path(path)} is refused as a possible decompression bomb: "
                             f"{err}; {_LIMIT_HINT}.") from None
        except (OSError, UnidentifiedImageError, SyntaxError, ValueError, EOFError, TypeError,
                IndexError, KeyError, MemoryError) as err:
            raise ImageError(f"cannot read image {show_path(path)}: {err}. Remove or fix the file.") from None
        img = _square(img, size)
        if channels == 1 and img.mode != "L":
            img = img.convert("L")
        arr = np.asarray(img)                                         # (S, S) or (S, S, 3)
    if arr.ndim == 2:
        gray = True
        out = arr[None] if channels == 1 else np.broadcast_to(arr, (3,) + arr.shape)
    else:
        out = arr.transpose(2, 0, 1)                                  # (3, S, S)
        gray = bool((out[0] == out[1]).all() and (out[1] == out[2]).all())
    notes = [f"{show_path(path)}: {w.message}" for w in caught]
    return out, gray, notes


def worker_init() -> None:
    """Set up a decoding worker process: our own pixel limit (with the caller's value) replaces Pillow's."""
    Image.MAX_IMAGE_PIXELS = None


def decode_chunk(out_path: str, offset: int, start: int, paths: list, size: int, channels: int,
                 max_pixels: int | None) -> tuple[np.ndarray, list[str]]:
    """Decode ``paths`` and write them as rows ``start, start + 1, ...`` of the ``.npy`` file ``out_path``.

    The rows go to the file with plain writes, not a memory map, so a worker's memory stays at
    one chunk. ``offset`` is where the array data starts in the file. Call it with Pillow's own
    pixel limit lifted (:func:`worker_init`): ``max_pixels`` is checked here instead.

    Returns
    -------
    gray : numpy.ndarray
        bool (len(paths),), whether each image has no colour.
    notes : list of str
        Pillow warnings, as text naming the file.
    """
    block = np.empty((len(paths), channels, size, size), dtype=np.uint8)   # (n, C, S, S)
    gray = np.empty(len(paths), dtype=bool)
    notes: list[str] = []
    for i, p in enumerate(paths):
        block[i], gray[i], more = decode(p, size, channels, max_pixels)
        notes += more
    with open(out_path, "r+b") as f:
        f.seek(offset + start * block[0].nbytes)
        f.write(block.tobytes())
    return gray, notes
