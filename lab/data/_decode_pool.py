"""Decode the images of a folder with all cores into one uint8 ``.npy``: the process side of the image cache.

:mod:`lab.data._folder` lays the folder out and commits the cache entry; this module runs the decoding (a
process pool, or this process for few images), reports progress and keeps one channel of gray images.
Each worker runs :func:`lab.data._decode.decode_chunk`.
"""
from __future__ import annotations

import math
import os
import sys
import threading
import warnings
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from ._decode import decode_chunk, worker_init

__all__ = ["Progress", "decode_all", "keep_first_channel", "n_workers"]

_PIL_LIMIT_LOCK = threading.Lock()


def n_workers(workers: int | None) -> int:
    if workers is not None:
        return max(1, int(workers))
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:   # pragma: no cover - macOS, Windows
        return os.cpu_count() or 1


def _mp_context():
    """fork on Linux (workers start at once and re-import nothing; they only run Pillow and numpy,
    never torch), spawn elsewhere."""
    import multiprocessing as mp

    return mp.get_context("fork" if sys.platform.startswith("linux") else "spawn")


@contextmanager
def _pil_limit_lifted():
    """In this process, lift Pillow's own pixel limit while our check (same or configured) applies."""
    from PIL import Image

    with _PIL_LIMIT_LOCK:
        old = Image.MAX_IMAGE_PIXELS
        Image.MAX_IMAGE_PIXELS = None
        try:
            yield
        finally:
            Image.MAX_IMAGE_PIXELS = old


class Progress:
    """Calls the user's ``progress(done, total)`` and/or drives a tqdm bar."""

    def __init__(self, progress, total: int, root: Path):
        self.fn, self.bar = None, None
        if callable(progress):
            self.fn = progress
        elif progress is True or (progress is None and _interactive()):
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, unit="img", desc=f"Decoding {root.name} (once; cached)",
                            leave=False, dynamic_ncols=True)
        self.done, self.total = 0, total
        self.update(0)

    def update(self, n: int) -> None:
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
        if self.fn is not None:
            self.fn(self.done, self.total)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _interactive() -> bool:
    if "ipykernel" in sys.modules:
        return True
    try:
        return sys.stderr is not None and sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def decode_all(files: list[str], out: Path, offset: int, size: int, channels: int, max_pixels, workers: int,
               bar: Progress) -> tuple[np.ndarray, list[str]]:
    """Decode every one of ``files`` into rows of ``out``; (gray flags (N,), Pillow notes)."""
    n = len(files)
    step = max(8, min(256, math.ceil(n / (workers * 8))))
    starts = list(range(0, n, step))
    gray = np.empty(n, dtype=bool)
    notes: list[str] = []
    args = (size, channels, max_pixels)
    todo = set(starts)
    if workers > 1 and len(starts) > 1:
        try:
            _decode_parallel(files, out, offset, starts, step, args, workers, gray, notes, todo, bar)
        except BrokenProcessPool as err:   # e.g. spawn from an unguarded script; the rest on one core
            warnings.warn(f"parallel decoding stopped ({err}); decoding the remaining {len(todo)} chunk(s) in "
                          "this process.", UserWarning, stacklevel=5)
    with _pil_limit_lifted():
        for s in sorted(todo):
            gray[s:s + step], more = decode_chunk(str(out), offset, s, files[s:s + step], *args)
            notes += more
            bar.update(len(files[s:s + step]))
    return gray, notes


def _decode_parallel(files, out, offset, starts, step, args, workers, gray, notes, todo, bar) -> None:
    """Decode chunks ``starts`` with a process pool, removing each finished one from ``todo``."""
    pool = ProcessPoolExecutor(max_workers=min(workers, len(starts)), mp_context=_mp_context(),
                               initializer=worker_init)
    try:
        with warnings.catch_warnings():   # Python >= 3.12 warns about fork() next to threads; see _mp_context
            warnings.filterwarnings("ignore", message=".*fork.*", category=DeprecationWarning)
            pending = {pool.submit(decode_chunk, str(out), offset, s, files[s:s + step], *args): s
                       for s in starts}
        while pending:
            done, _ = wait(pending, return_when=FIRST_EXCEPTION)
            for fut in done:
                s = pending.pop(fut)
                gray[s:s + step], more = fut.result()     # re-raises a worker's ImageError here
                notes += more
                todo.discard(s)
                bar.update(len(files[s:s + step]))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def keep_first_channel(src: Path, dst: Path, shape: tuple) -> None:
    """Write channel 0 of the (N, 3, S, S) ``.npy`` at ``src`` as an (N, 1, S, S) ``.npy`` at ``dst``."""
    n, _, s, _ = shape
    blank = np.lib.format.open_memmap(dst, mode="w+", dtype=np.uint8, shape=(n, 1, s, s))
    del blank   # closes the map: the file now has its header and full (sparse) length
    src_off = np.load(src, mmap_mode="r").offset
    dst_off = np.load(dst, mmap_mode="r").offset
    rows = max(1, (64 << 20) // (3 * s * s))            # ~64 MB at a time
    buf = np.empty((rows, 3, s, s), dtype=np.uint8)
    with open(src, "rb") as fin, open(dst, "r+b") as fout:
        fin.seek(src_off)
        fout.seek(dst_off)
        for start in range(0, n, rows):
            k = min(rows, n - start)
            fin.readinto(memoryview(buf)[:k])
            fout.write(np.ascontiguousarray(buf[:k, :1]).tobytes())
