"""Image folders: read the layout, decode once in parallel into an on-disk cache, map it afterwards.

A folder is either ``ROOT/<class>/<image>`` or pre-split, ``ROOT/train/<class>/<image>`` plus
``ROOT/test/<class>/<image>`` (or ``val/``). The first load at a given size decodes every image
with all cores into a uint8 ``.npy`` file in the cache folder; later loads map that file, so
they take about a second and use no memory for images until batches are read.

Cache entries (in ``$LAB_CACHE_DIR``, default the user cache folder + ``/layerscope``)::

    images/<slot>.json                 what the entry holds; written last, so it commits the entry
    images/<slot>-<digest>.npy         uint8 (N, C, S, S)
    images/<slot>-<digest>.labels.npy  int64 (N, 2): class index, split index
    images/<slot>.lock                 serialises builders (fcntl)

``slot`` names the folder and the size/mode options; ``digest`` also covers every file's
path, size and mtime, so touching, adding or removing a file makes the next load rebuild.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ._decode import show_path
from ._decode_pool import Progress, decode_all, keep_first_channel, n_workers

__all__ = ["cache_dir", "load_folder", "scan", "MODES"]

CACHE_VERSION = 1          # bump when decoding changes what a cached image holds
MODES = ("auto", "L", "RGB")
_SPLITS = {"train": "train", "test": "test", "val": "val", "valid": "val", "validation": "val"}


# ---------------------------------------------------------------------------------------------- layout

@dataclass
class Layout:
    """The images of a folder, in a fixed order: split, then class, then file name."""

    root: Path
    classes: list[str]
    splits: list[str]                  # [] for a plain folder, else e.g. ["train", "test"]
    files: list[str] = field(default_factory=list)
    targets: list[int] = field(default_factory=list)
    split_codes: list[int] = field(default_factory=list)
    stamps: list[tuple[int, int]] = field(default_factory=list)   # (size in bytes, mtime in ns)
    notes: list[str] = field(default_factory=list)                # warnings about the layout

    def digest(self, size: int, mode: str) -> str:
        """Hash of the file list, sizes, mtimes and the decode options."""
        h = hashlib.sha256(f"v{CACHE_VERSION}|{size}|{mode}|{self.classes}|{self.splits}\n".encode())
        for f, (n, t), k, s in zip(self.files, self.stamps, self.targets, self.split_codes):
            h.update(os.fsencode(f) + f"|{n}|{t}|{k}|{s}\n".encode())
        return h.hexdigest()


def _utf8_name(path: str, what: str) -> str:
    name = os.path.basename(path)
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{what} {show_path(path)} has a name that is not valid UTF-8 "
                         f"({os.fsencode(name)!r}); rename it to UTF-8 (e.g. `convmv -f latin1 -t utf8 -r "
                         f"--notest DIR`) so it can be used as a class name.") from None
    return name


def _subdirs(folder: str, skip: Path | None = None) -> list[os.DirEntry]:
    """Sub-folders by name, without hidden ones and without ``skip`` (the cache) or its parents."""
    with os.scandir(folder) as it:
        dirs = [e for e in it if not e.name.startswith(".") and e.is_dir()]
    if skip is not None:
        dirs = [e for e in dirs if not (Path(e.path) == skip or Path(e.path) in skip.parents)]
    return sorted(dirs, key=lambda e: e.name)


def _image_exts() -> set[str]:
    from PIL import Image

    return {e.lower() for e, fmt in Image.registered_extensions().items() if fmt in Image.OPEN}


def _images_in(folder: str, exts: set[str]) -> list[tuple[str, int, int]]:
    """(path, size, mtime_ns) of the image files directly in ``folder``, by name."""
    out = []
    with os.scandir(folder) as it:
        for e in it:
            if e.name.startswith(".") or os.path.splitext(e.name)[1].lower() not in exts:
                continue
            try:
                if not e.is_file():
                    continue
                st = e.stat()
            except OSError:   # a dangling link
                continue
            out.append((e.path, st.st_size, st.st_mtime_ns))
    out.sort(key=lambda t: os.fsencode(t[0]))
    return out


def _split_layout(root: str, dirs: list[os.DirEntry]) -> dict[str, str] | None:
    """{split name: folder} when ``root`` holds train/ and test/ (or val/) folders, else None."""
    names = {e.name.lower(): e.path for e in dirs}
    split_dirs = {k: v for k, v in names.items() if k in _SPLITS}
    if "train" not in split_dirs or len(split_dirs) < 2:
        return None
    others = sorted(k for k in names if k not in _SPLITS)
    if others:
        raise ValueError(f"{show_path(root)} holds the split folders {sorted(split_dirs)} next to other folders "
                         f"{others}; a pre-split folder holds only train/ and test/ (or val/), each with one "
                         "sub-folder per class. Move the other folders into the splits or elsewhere.")
    out: dict[str, str] = {}
    for k, v in sorted(split_dirs.items(), key=lambda kv: ("train", "test", "val").index(_SPLITS[kv[0]])):
        if _SPLITS[k] in out:
            raise ValueError(f"{show_path(root)} has more than one {_SPLITS[k]!r} split folder "
                             f"({sorted(n for n in split_dirs if _SPLITS[n] == _SPLITS[k])}); keep one.")
        out[_SPLITS[k]] = v
    return out


def scan(path: str | os.PathLike) -> Layout:
    """Read the layout of an image folder (no image is opened).

    Raises
    ------
    ValueError
        Not a folder, no images, a class folder name that is not UTF-8, or mixed split/class folders.
    """
    root = Path(path).expanduser()
    if not root.is_dir():
        raise ValueError(f"folder dataset {show_path(root)!r} is not a directory; expected a folder "
                         "with one sub-folder of images per class.")
    root = root.resolve()
    try:
        cache = cache_dir().resolve()
    except OSError:   # pragma: no cover - an unreadable home folder
        cache = None
    top = _subdirs(str(root), cache)
    splits = _split_layout(str(root), top) or {"": str(root)}
    exts = _image_exts()
    found: dict[str, dict[str, list]] = {}          # split -> class -> files
    empty: list[str] = []
    for split, folder in splits.items():
        found[split] = {}
        for d in (_subdirs(folder, cache) if split else top):
            name = _utf8_name(d.path, "class folder")
            files = _images_in(d.path, exts)
            if files:
                found[split][name] = files
            else:
                empty.append(f"{split}/{name}" if split else name)
    classes = sorted({c for per in found.values() for c in per})
    if not classes:
        raise ValueError(f"no images found in {show_path(root)!r}: expected one sub-folder per class, "
                         "each holding image files (PNG, JPEG, ...), e.g. ROOT/cat/1.png "
                         "(or ROOT/train/cat/1.png and ROOT/test/cat/1.png).")
    layout = Layout(root, classes, [s for s in splits if s])
    if empty:
        layout.notes.append(f"ignoring sub-folders without images in {show_path(root)}: {empty}")
    for s, split in enumerate(splits):
        missing = [c for c in classes if c not in found[split]]
        if split and missing:
            layout.notes.append(f"classes {missing} have no images in {split}/ of {show_path(root)}; "
                                f"partition({split!r}) will lack them.")
        for k, c in enumerate(classes):
            for f, n, t in found[split].get(c, ()):
                layout.files.append(f)
                layout.stamps.append((n, t))
                layout.targets.append(k)
                layout.split_codes.append(s)
    return layout


# ---------------------------------------------------------------------------------------------- cache

def cache_dir() -> Path:
    """Where decoded folders are cached: ``$LAB_CACHE_DIR`` or the user cache folder + ``/layerscope``."""
    env = os.environ.get("LAB_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "layerscope"


@contextmanager
def _locked(path: Path):
    """Hold an exclusive lock on ``path`` (POSIX ``flock``); yields whether it is exclusive."""
    try:
        import fcntl
    except ImportError:   # pragma: no cover - Windows: concurrent builders each write their own temp files
        yield False
        return
    with open(path, "a+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield True
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError:   # pragma: no cover - directories on some filesystems
        pass
    finally:
        os.close(fd)


def _open_entry(folder: Path, slot: str, digest: str, n: int):
    """(images memmap, labels, meta) of a complete cache entry for ``digest``, or None."""
    try:
        meta = json.loads((folder / f"{slot}.json").read_text())
        if meta.get("version") != CACHE_VERSION or meta.get("digest") != digest:
            return None
        images = np.load(folder / meta["images"], mmap_mode="c", allow_pickle=False)
        labels = np.load(folder / meta["labels"], allow_pickle=False)
    except (OSError, ValueError, KeyError, TypeError):   # missing, half-removed or damaged: rebuild
        return None
    if images.dtype != np.uint8 or images.ndim != 4 or images.shape[0] != n or labels.shape != (n, 2):
        return None
    return images, labels, meta


def _build(layout: Layout, folder: Path, slot: str, digest: str, size: int, mode: str, max_pixels,
           workers: int, progress) -> None:
    """Decode ``layout`` into a new cache entry and commit it (the caller holds the slot's lock)."""
    n = len(layout.files)
    channels = 1 if mode == "L" else 3
    need = n * channels * size * size
    free = shutil.disk_usage(folder).free
    if free < need * (1.4 if mode == "auto" else 1.05):
        raise ValueError(f"not enough disk space to cache {n} decoded images of {size} px "
                         f"({need / 2**30:.2f} GiB) in {folder} ({free / 2**30:.2f} GiB free); free some space "
                         "or set LAB_CACHE_DIR to a folder on a larger disk.")
    tag = f"{slot}-{digest[:16]}"
    tmp = folder / f"{tag}.npy.tmp{os.getpid()}"
    tmp_gray = folder / f"{tag}.gray.tmp{os.getpid()}"
    tmp_labels = folder / f"{tag}.labels.tmp{os.getpid()}"
    bar = Progress(progress, n, layout.root)
    try:
        blank = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.uint8, shape=(n, channels, size, size))
        del blank   # closes the map: workers write rows with plain file writes
        offset = np.load(tmp, mmap_mode="r").offset
        # below ~200 images starting worker processes costs more than it saves
        n_proc = n_workers(workers) if workers is not None or n >= 200 else 1
        gray, notes = decode_all(layout.files, tmp, offset, size, channels, max_pixels, n_proc, bar)
        if mode == "auto" and gray.all():   # gray images converted to three equal channels: keep one
            keep_first_channel(tmp, tmp_gray, (n, channels, size, size))
            os.replace(tmp_gray, tmp)
            channels = 1
        with open(tmp_labels, "wb") as f:
            np.save(f, np.stack([np.asarray(layout.targets, np.int64),
                                 np.asarray(layout.split_codes, np.int64)], 1))   # (N, 2)
        for p in (tmp, tmp_labels):
            _fsync(p)
        os.replace(tmp, folder / f"{tag}.npy")
        os.replace(tmp_labels, folder / f"{tag}.labels.npy")
        meta = {"version": CACHE_VERSION, "digest": digest, "root": show_path(layout.root), "size": size,
                "mode": mode, "n": n, "channels": channels, "classes": layout.classes, "splits": layout.splits,
                "images": f"{tag}.npy", "labels": f"{tag}.labels.npy", "created": time.time(),
                "pillow_warnings": notes[:20], "n_pillow_warnings": len(notes)}
        meta_tmp = folder / f"{slot}.json.tmp{os.getpid()}"
        meta_tmp.write_text(json.dumps(meta, indent=1))
        _fsync(meta_tmp)
        os.replace(meta_tmp, folder / f"{slot}.json")      # the commit point
        _fsync(folder)
    finally:
        bar.close()
        for p in (tmp, tmp_gray, tmp_labels):
            p.unlink(missing_ok=True)
    for old in folder.glob(f"{slot}-*.npy"):   # earlier versions of this folder; open maps keep their data
        if not old.name.startswith(tag):
            old.unlink(missing_ok=True)
    if notes:
        warnings.warn(f"{len(notes)} image(s) in {show_path(layout.root)} decoded with warnings from Pillow, "
                      f"e.g. {notes[0]}; they were used as decoded.", UserWarning, stacklevel=4)


def _clear_stale(folder: Path, slot: str) -> None:
    """Temp files of builders that died (only the lock holder writes, so any left are stale)."""
    for p in folder.glob(f"{slot}*.tmp*"):
        p.unlink(missing_ok=True)


def load_folder(path: str, size: int, *, mode: str = "auto", progress=None, max_image_pixels=-1,
                workers: int | None = None):
    """The images of a folder, decoded at ``size`` px, as a memory-mapped :class:`ImageDataset`.

    See :func:`lab.data.load` for the parameters.
    """
    import torch

    from ._dataset import ImageDataset

    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}; got {mode!r}.")
    if max_image_pixels == -1:
        from PIL import Image

        max_image_pixels = Image.MAX_IMAGE_PIXELS
    if progress not in (None, True, False) and not callable(progress):
        raise ValueError(f"progress must be True, False, None or a callable(done, total); "
                         f"got {type(progress).__name__}.")
    layout = scan(path)
    for note in layout.notes:
        warnings.warn(note, UserWarning, stacklevel=3)
    folder = cache_dir() / "images"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(f"cannot create the image cache folder {folder}: {err}. Set LAB_CACHE_DIR to a "
                         "writable folder.") from None
    slot = hashlib.sha256(f"{os.fsencode(layout.root)!r}|{size}|{mode}".encode()).hexdigest()[:20]
    digest = layout.digest(size, mode)
    n = len(layout.files)
    entry = _open_entry(folder, slot, digest, n)
    if entry is None:
        with _locked(folder / f"{slot}.lock") as exclusive:
            entry = _open_entry(folder, slot, digest, n)      # another process may have built it meanwhile
            if entry is None:
                if exclusive:
                    _clear_stale(folder, slot)
                _build(layout, folder, slot, digest, size, mode, max_image_pixels, workers, progress)
                entry = _open_entry(folder, slot, digest, n)
    if entry is None:   # pragma: no cover - the entry vanished between commit and open
        raise RuntimeError(f"the image cache entry for {show_path(layout.root)} in {folder} disappeared right "
                           "after it was written; is another program cleaning that folder?")
    images, labels, meta = entry
    with warnings.catch_warnings():   # a private (copy-on-write) map: writes never reach the file
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        source = torch.from_numpy(images)                      # (N, C, S, S), memory-mapped
    info = {"path": show_path(layout.root), "cache": str(folder / meta["images"]), "splits": list(layout.splits)}
    splits = (list(layout.splits), labels[:, 1].astype(np.int8)) if layout.splits else None
    return ImageDataset._view(source, None, labels[:, 0], layout.classes, f"folder:{show_path(layout.root)}",
                              info, splits=splits, mapped=str(folder / meta["images"]))
