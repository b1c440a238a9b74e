"""Image-folder loading: first (decoding) load, cached load, peak memory, against the old loader.

Builds a folder of synthetic JPEGs (default 20,000 at 64 px in 20 classes, like the seed
paper's calligraphy folder), then measures in this one process:

- the old loader (``legacy_load``: the pre-cache ``lab.data.load("folder:...")``, kept here verbatim);
- the first ``lab.data.load`` (decodes with all cores into an empty cache);
- a cached ``lab.data.load`` (maps the cache).

Each load is timed once (wall and CPU seconds, workers included) and run again under a memory
sampler: peak RSS of this process plus the unique memory of its decoding workers, reported as
the rise over the value before the load, divided by the decoded size.
Goals (issue 14): first load <= 0.6x the old loader on 2 cores, cached load <= 2 s,
peak RSS / decoded size <= 1.5.

    python benchmarks/data.py [--n 20000] [--size 64] [--classes 20] [--folder DIR] [--skip-legacy] [--save]
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._results import add_save_option, recording  # noqa: E402


def make_folder(root: Path, n: int, classes: int, size: int, seed: int = 0) -> None:
    """``n`` synthetic RGB JPEGs of ``size`` px: per class a colour and a stroke direction, plus noise."""
    from PIL import Image, ImageDraw

    rng = np.random.default_rng(seed)
    for k in range(classes):
        d = root / f"class_{k:02d}"
        d.mkdir(parents=True, exist_ok=True)
        colour = tuple(int(c) for c in rng.integers(0, 200, 3))
        for i in range(k, n, classes):
            img = Image.fromarray(rng.integers(200, 256, (size, size, 3), dtype=np.uint8))
            draw = ImageDraw.Draw(img)
            for _ in range(4):
                x, y = rng.integers(0, size, 2)
                draw.line([(x, y), (x + size // 3 * np.cos(k), y + size // 3 * np.sin(k))], fill=colour, width=3)
            img.save(d / f"{i:06d}.jpg", quality=90)


def legacy_load(path: str, size: int = 64):
    """The folder loader before the cache (lab/data/_sources.py at 98561c5), unchanged in substance."""
    import torch
    from PIL import Image, UnidentifiedImageError

    from lab.data import ImageDataset

    def image_files(folder: Path) -> list[Path]:
        exts = {e.lower() for e, fmt in Image.registered_extensions().items() if fmt in Image.OPEN}
        return sorted(p for p in folder.iterdir()
                      if p.is_file() and not p.name.startswith(".") and p.suffix.lower() in exts)

    def open_image(p: Path):
        try:
            with Image.open(p) as img:
                img.load()
                return img.copy()
        except (OSError, UnidentifiedImageError) as err:
            raise ValueError(f"cannot read image {p}: {err}. Remove or fix the file.") from err

    def is_gray(img) -> bool:
        if img.mode in ("1", "L", "LA", "I", "I;16", "F"):
            return True
        rgb = np.asarray(img.convert("RGB"))
        return bool((rgb[..., 0] == rgb[..., 1]).all() and (rgb[..., 1] == rgb[..., 2]).all())

    def square(img, size: int):
        w, h = img.size
        s = size / min(w, h)
        img = img.resize((max(size, round(w * s)), max(size, round(h * s))), Image.Resampling.BILINEAR)
        left, top = (img.size[0] - size) // 2, (img.size[1] - size) // 2
        return img.crop((left, top, left + size, top + size))

    root = Path(path).expanduser()
    subdirs = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    files = {d.name: image_files(d) for d in subdirs}
    files = {name: fs for name, fs in files.items() if fs}
    arrays, targets, gray = [], [], True
    for k, fs in enumerate(files.values()):
        for f in fs:
            img = open_image(f)
            gray = gray and is_gray(img)
            arrays.append(np.asarray(square(img.convert("RGB"), size)))
            targets.append(k)
    x = torch.from_numpy(np.stack(arrays)).permute(0, 3, 1, 2)
    if gray:
        x = x[:, :1]
    return ImageDataset(x.contiguous(), targets, list(files), f"folder:{root.resolve()}",
                        {"path": str(root.resolve())})


class PeakRSS:
    """Peak memory during a block: RSS of this process (every 5 ms) plus the unique memory (USS)
    of its children (every 100 ms: reading it costs CPU the workers need, and theirs is steady).

    Forked decoding workers share the parent's pages, so their own RSS would count those twice;
    USS counts only what each worker adds. ``rise`` is the peak minus the value at the start;
    ``anon_rise`` the same for this process's anonymous memory alone (RssAnon: not counting
    file pages of a memory-mapped cache, which the kernel can drop at any time).
    """

    def __init__(self):
        import psutil

        self.proc = psutil.Process()
        self.children = 0
        self.start, self.anon_start = self.proc.memory_info().rss, self._anon()
        self.peak, self.anon_peak = self.start, self.anon_start
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _children_uss(self) -> int:
        total = 0
        for child in self.proc.children(recursive=True):
            try:
                total += child.memory_full_info().uss
            except Exception:   # the child has exited
                pass
        return total

    @staticmethod
    def _anon() -> int:
        try:
            with open("/proc/self/status") as f:
                for line in f:
                    if line.startswith("RssAnon:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    def _sample(self, children: bool) -> None:
        if children:
            self.children = self._children_uss()
        self.peak = max(self.peak, self.proc.memory_info().rss + self.children)
        self.anon_peak = max(self.anon_peak, self._anon())

    def _run(self) -> None:
        i = 0
        while not self._stop.wait(0.005):
            self._sample(children=i % 20 == 0)
            i += 1

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self._sample(children=False)

    @property
    def rise(self) -> int:
        return self.peak - self.start

    @property
    def anon_rise(self) -> int:
        return self.anon_peak - self.anon_start


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--classes", type=int, default=20)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--folder", help="reuse (or build) the image folder here instead of a temp folder")
    ap.add_argument("--skip-legacy", action="store_true", help="do not time the old loader")
    add_save_option(ap)
    args = ap.parse_args(argv)
    with recording(__file__, ap, args, argv=argv, ignore=("folder",), device="cpu"):
        _measure(args)


def _measure(args: argparse.Namespace) -> None:
    """Build (or reuse) the folder, time the loads and print the table."""
    work = Path(tempfile.mkdtemp(prefix="layerscope-bench-data-"))
    folder = Path(args.folder) if args.folder else work / "images"
    os.environ["LAB_CACHE_DIR"] = str(work / "cache")      # an empty cache: the first load decodes
    import lab.data

    try:
        if not folder.is_dir() or not any(folder.iterdir()):
            t = time.perf_counter()
            make_folder(folder, args.n, args.classes, args.size)
            print(f"built {args.n} JPEGs ({args.size} px, {args.classes} classes) in {time.perf_counter() - t:.1f} s")
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        print(f"folder {folder}, {cores} cores, cache {work / 'cache'}")
        spec = f"folder:{folder}"
        lab.data.load(spec, progress=False, workers=1)           # warm the file-system cache and imports
        shutil.rmtree(work / "cache")

        rows = []

        def timed(name, fn, again=None):
            """Wall and CPU time (this process + reaped workers) of ``fn``, then its peak memory in a
            second, sampled run (sampling costs CPU, so it is kept out of the timed run)."""
            cpu0 = os.times()
            t = time.perf_counter()
            out = fn()
            wall = time.perf_counter() - t
            cpu1 = os.times()
            cpu = sum(cpu1[i] - cpu0[i] for i in range(4))
            del out
            if again is not None:
                again()
            with PeakRSS() as mem:
                out = fn()
            rows.append((name, wall, cpu, mem.rise, mem.anon_rise))
            return out, wall

        def clear_cache():
            shutil.rmtree(work / "cache", ignore_errors=True)

        if not args.skip_legacy:
            ds, t_old = timed("old loader", lambda: legacy_load(str(folder), args.size))
            del ds
        with warnings.catch_warnings():
            warnings.simplefilter("error")                       # no warning may reach the user
            ds, t_first = timed("first load", lambda: lab.data.load(spec, progress=False), again=clear_cache)
            del ds
            ds, t_cached = timed("cached load", lambda: lab.data.load(spec, progress=False))
        decoded = ds.images.numel()
        timed("read all (eval_loader 256)", lambda: sum(len(x) for x, _ in ds.eval_loader(256)))

        print(f"decoded size {decoded / 2**20:.1f} MiB ({tuple(ds.images.shape)} uint8); "
              f"load average {os.getloadavg()[0]:.1f}")
        print(f"{'':28s} {'wall s':>7s} {'CPU s':>7s} {'peak RSS rise MiB':>18s} {'/ decoded':>10s} "
              f"{'anon rise MiB':>14s}")
        for name, t, cpu, rise, anon in rows:
            print(f"{name:28s} {t:7.2f} {cpu:7.2f} {rise / 2**20:18.1f} {rise / decoded:10.2f} {anon / 2**20:14.1f}")
        if not args.skip_legacy:
            print(f"first load / old loader: {t_first / t_old:.2f}x (goal <= 0.6)")
        print(f"cached load: {t_cached:.2f} s (goal <= 2 s)")
        first_ratio = max(r[3] for r in rows if r[0].startswith("first")) / decoded
        print(f"first load peak RSS / decoded: {first_ratio:.2f} (goal <= 1.5)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
