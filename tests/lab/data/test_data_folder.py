"""Image folders: the decoded on-disk cache, pre-split layouts, image modes, bad files, memory."""
from __future__ import annotations

import json
import os
import pickle
import struct
import subprocess
import sys
import warnings
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

import lab
from lab.data import load


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    """Every test gets its own empty cache folder."""
    monkeypatch.setenv("LAB_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _rgb_tree(root: Path, classes=("a", "b"), n=3, size=8, seed=0) -> dict[str, list[np.ndarray]]:
    """PNG images of exactly ``size`` px (so a load at that size must return them unchanged)."""
    rng = np.random.default_rng(seed)
    out = {}
    for c in classes:
        (root / c).mkdir(parents=True, exist_ok=True)
        out[c] = []
        for i in range(n):
            arr = rng.integers(0, 256, (size, size, 3), dtype=np.uint8)
            Image.fromarray(arr).save(root / c / f"{i:03d}.png")
            out[c].append(arr)
    return out


class _Calls:
    def __init__(self):
        self.calls: list[tuple[int, int]] = []

    def __call__(self, done: int, total: int) -> None:
        self.calls.append((done, total))


def _entries(cache: Path) -> list[str]:
    return sorted(p.name for p in (cache / "images").glob("*.npy") if not p.name.endswith(".labels.npy"))


# -- the cache ---------------------------------------------------------------------------------------

def test_first_load_decodes_exactly_and_later_loads_map_the_cache(tmp_path, _cache):
    arrays = _rgb_tree(tmp_path / "imgs")
    calls = _Calls()
    ds = load(f"folder:{tmp_path / 'imgs'}", image_size=8, progress=calls)
    expected = np.stack([a.transpose(2, 0, 1) for c in ("a", "b") for a in arrays[c]])
    assert np.array_equal(ds.images.numpy(), expected)
    assert ds.targets.tolist() == [0, 0, 0, 1, 1, 1] and ds.classes == ["a", "b"]
    assert calls.calls[0] == (0, 6) and calls.calls[-1] == (6, 6)
    assert [d for d, _ in calls.calls] == sorted(d for d, _ in calls.calls)
    assert len(_entries(_cache)) == 1 and "memory-mapped" in repr(ds)
    assert isinstance(ds.images.numpy().base, np.memmap) or ds._mapped

    again = _Calls()
    ds2 = load(f"folder:{tmp_path / 'imgs'}", image_size=8, progress=again)
    assert again.calls == []                                   # a hit: nothing decoded
    assert np.array_equal(ds2.images.numpy(), expected)
    assert not list((_cache / "images").glob("*.tmp*"))


def test_cache_is_invalidated_by_touch_add_and_size_option(tmp_path, _cache):
    root = tmp_path / "imgs"
    _rgb_tree(root)
    spec = f"folder:{root}"
    load(spec, image_size=8, progress=False)
    first = _entries(_cache)

    st = os.stat(root / "a" / "000.png")
    os.utime(root / "a" / "000.png", ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    calls = _Calls()
    load(spec, image_size=8, progress=calls)
    assert calls.calls and calls.calls[-1] == (6, 6)            # touched: decoded again
    assert _entries(_cache) != first and len(_entries(_cache)) == 1   # the stale entry is gone

    Image.new("RGB", (8, 8), (1, 2, 3)).save(root / "b" / "new.png")
    calls = _Calls()
    ds = load(spec, image_size=8, progress=calls)
    assert calls.calls[-1] == (7, 7) and len(ds) == 7
    assert ds.images[-1, :, 0, 0].tolist() == [1, 2, 3]

    calls = _Calls()
    small = load(spec, image_size=4, progress=calls)
    assert calls.calls and small.image_size == 4
    assert len(_entries(_cache)) == 2                           # one entry per size
    calls = _Calls()
    load(spec, image_size=8, progress=calls)
    assert calls.calls == []                                    # the 8 px entry is still valid


def test_mode_option_forces_channels_and_has_its_own_entry(tmp_path, _cache):
    _rgb_tree(tmp_path / "imgs")
    rgb = load(f"folder:{tmp_path / 'imgs'}", image_size=8)
    gray = load(f"folder:{tmp_path / 'imgs'}", image_size=8, mode="L")
    assert rgb.in_chans == 3 and gray.in_chans == 1 and len(_entries(_cache)) == 2
    ref = np.asarray(Image.fromarray(rgb.images[0].permute(1, 2, 0).numpy()).convert("L"))
    assert np.array_equal(gray.images[0, 0].numpy(), ref)
    with pytest.raises(ValueError, match=r"mode must be one of \('auto', 'L', 'RGB'\); got 'CMYK'"):
        load(f"folder:{tmp_path / 'imgs'}", mode="CMYK")


def test_parallel_decode_matches_single_process(tmp_path, _cache, monkeypatch):
    _rgb_tree(tmp_path / "imgs", classes=("a", "b", "c"), n=30, size=12)
    par = load(f"folder:{tmp_path / 'imgs'}", image_size=10, workers=2).images.clone()
    monkeypatch.setenv("LAB_CACHE_DIR", str(tmp_path / "other"))
    one = load(f"folder:{tmp_path / 'imgs'}", image_size=10, workers=1).images
    assert torch.equal(par, one) and par.shape == (90, 3, 10, 10)


def test_two_processes_build_the_same_cache_once(tmp_path, _cache):
    root = tmp_path / "imgs"
    _rgb_tree(root, classes=("a", "b", "c", "d"), n=40, size=16)
    script = (
        "import sys, json, lab\n"
        "calls = []\n"
        "ds = lab.data.load(sys.argv[1], image_size=16, progress=lambda d, t: calls.append(d), workers=1)\n"
        "print(json.dumps({'built': bool(calls), 'sum': int(ds.images.sum()), 'n': len(ds)}))\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(lab.__file__).parents[1])] + sys.path))
    procs = [subprocess.Popen([sys.executable, "-c", script, f"folder:{root}"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    res = [json.loads(o[0].strip().splitlines()[-1]) for o in outs]
    assert [r["built"] for r in res].count(True) == 1           # the other waited on the lock, then mapped
    assert res[0]["sum"] == res[1]["sum"] and res[0]["n"] == 160
    assert len(_entries(_cache)) == 1 and not list((_cache / "images").glob("*.tmp*"))
    assert load(f"folder:{root}", image_size=16).images.sum().item() == res[0]["sum"]


def test_progress_callback_can_cancel_and_leaves_no_entry(tmp_path, _cache):
    _rgb_tree(tmp_path / "imgs", n=40)

    def stop(done, total):
        if done > 0:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        load(f"folder:{tmp_path / 'imgs'}", image_size=8, progress=stop, workers=1)
    assert _entries(_cache) == [] and not list((_cache / "images").glob("*.tmp*"))
    assert len(load(f"folder:{tmp_path / 'imgs'}", image_size=8)) == 80
    with pytest.raises(ValueError, match=r"progress must be True, False, None or a callable"):
        load(f"folder:{tmp_path / 'imgs'}", progress="yes")


def test_progress_true_shows_a_bar(tmp_path, capsys):
    _rgb_tree(tmp_path / "imgs")
    load(f"folder:{tmp_path / 'imgs'}", image_size=8, progress=True)
    assert "Decoding imgs" in capsys.readouterr().err


def test_cache_location_and_unwritable_cache(tmp_path, monkeypatch):
    monkeypatch.delenv("LAB_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if sys.platform.startswith("linux"):
        assert lab.data.cache_dir() == tmp_path / "xdg" / "layerscope"
    (tmp_path / "file").write_text("not a folder")
    monkeypatch.setenv("LAB_CACHE_DIR", str(tmp_path / "file" / "sub"))
    _rgb_tree(tmp_path / "imgs")
    with pytest.raises(ValueError, match=r"cannot create the image cache folder .*Set LAB_CACHE_DIR"):
        load(f"folder:{tmp_path / 'imgs'}")


def test_damaged_cache_entry_is_rebuilt(tmp_path, _cache):
    _rgb_tree(tmp_path / "imgs")
    ref = load(f"folder:{tmp_path / 'imgs'}", image_size=8).images.clone()
    (_cache / "images" / _entries(_cache)[0]).write_bytes(b"garbage")
    calls = _Calls()
    assert torch.equal(load(f"folder:{tmp_path / 'imgs'}", image_size=8, progress=calls).images, ref)
    assert calls.calls


def test_mapped_dataset_pickles_as_its_path_and_feeds_dataloader_workers(tmp_path):
    _rgb_tree(tmp_path / "imgs", n=20, size=16)
    ds = load(f"folder:{tmp_path / 'imgs'}", image_size=16).subset(["b", "a"])
    blob = pickle.dumps(ds)
    assert len(blob) < ds.images.numel() // 2                   # pixels do not travel
    back = pickle.loads(blob)
    assert torch.equal(back.images, ds.images) and back.classes == ["b", "a"]
    one = [x for x, _ in ds.eval_loader(7)]
    two = [x for x, _ in ds.eval_loader(7, num_workers=2)]
    assert all(torch.equal(a, b) for a, b in zip(one, two)) and len(one) == len(two)
    aug = [x for x, _ in ds.train_loader(7, seed=3, num_workers=2)]
    assert [x for x, _ in ds.train_loader(7, seed=3, num_workers=2)][0].equal(aug[0])


# -- pre-split layouts ---------------------------------------------------------------------------------

def _split_tree(root: Path, test_dir: str = "test") -> None:
    counts = {"train": {"x": 6, "y": 4, "z": 2}, test_dir: {"x": 2, "y": 3, "z": 1}}
    for split, per in counts.items():
        for c, n in per.items():
            (root / split / c).mkdir(parents=True)
            for i in range(n):
                # pixel value tells split and class apart
                v = (0 if split == "train" else 128) + ord(c) - ord("x")
                Image.new("L", (6, 6), v).save(root / split / c / f"{i}.png")


@pytest.mark.parametrize("test_dir", ["test", "val"])
def test_presplit_folder_is_one_dataset_partitioned_by_its_splits(tmp_path, test_dir):
    _split_tree(tmp_path / "imgs", test_dir)
    ds = load(f"folder:{tmp_path / 'imgs'}", image_size=6)
    assert ds.classes == ["x", "y", "z"] and len(ds) == 18      # not classes "train" and "test"
    assert ds.split_names == ["train", "test" if test_dir == "test" else "val"]
    for fraction in (0.1, 0.5):
        train = ds.partition("train", test_fraction=fraction, seed=1)
        test = ds.partition("test", test_fraction=fraction, seed=1)
        assert train.class_counts() == {"x": 6, "y": 4, "z": 2}
        assert test.class_counts() == {"x": 2, "y": 3, "z": 1}
        assert (train.images < 128).all() and (test.images >= 128).all()
    seen = ds.subset(["z", "x"])                                # as the run engine does it
    train, test = seen.partition("train"), seen.partition("test")
    assert train.class_counts() == {"z": 2, "x": 6} and test.class_counts() == {"z": 1, "x": 2}
    assert ((test.images[:, 0, 0, 0] - 128) == torch.tensor([0, 0, 2])).all()
    assert seen.sample_per_class(1).partition("train").class_counts() == {"z": 1, "x": 1}
    text = ds.summary()
    assert "train: 12 images, 2-6 per class" in text and "imbalanced train: 'x' has 6 images, 'z' 2" in text


def test_run_engine_uses_the_folder_splits(tmp_path):
    from lab.runs import prepare_data

    _split_tree(tmp_path / "imgs")
    (tmp_path / "imgs" / "train" / "w").mkdir()
    (tmp_path / "imgs" / "test" / "w").mkdir()
    for split in ("train", "test"):
        for i in range(3):
            Image.new("L", (6, 6), 200).save(tmp_path / "imgs" / split / "w" / f"{i}.png")
    cfg = lab.RunConfig(dataset=f"folder:{tmp_path / 'imgs'}", backbone="mlp", seen=("x", "y"),
                        unseen=("z", "w"), img_size=8, heldout_fraction=0.5)
    data = prepare_data(cfg)
    assert data.train.class_counts() == {"x": 6, "y": 4} and data.heldout.class_counts() == {"x": 2, "y": 3}
    assert data.unseen.class_counts() == {"z": 3, "w": 6}


def test_presplit_classes_missing_from_a_split_and_mixed_folders(tmp_path):
    _split_tree(tmp_path / "imgs")
    (tmp_path / "imgs" / "train" / "only_train").mkdir()
    Image.new("L", (6, 6), 9).save(tmp_path / "imgs" / "train" / "only_train" / "0.png")
    with pytest.warns(UserWarning, match=r"classes \['only_train'\] have no images in test/"):
        ds = load(f"folder:{tmp_path / 'imgs'}", image_size=6)
    assert ds.partition("test").class_counts()["only_train"] == 0
    assert "imbalanced test: 'y' has 3 images, 'only_train' 0" in ds.summary()
    (tmp_path / "imgs" / "extra").mkdir()
    with pytest.raises(ValueError, match=r"holds the split folders \['test', 'train'\] next to other folders "
                                         r"\['extra'\]; a pre-split folder holds only train/ and test/"):
        load(f"folder:{tmp_path / 'imgs'}")
    with pytest.raises(ValueError, match=r"has no splits"):
        lab.data.load("digits").class_counts(split="train")


# -- image modes -----------------------------------------------------------------------------------------

def _one(root: Path, name: str, img_or_writer, size: int = 6, **kw) -> torch.Tensor:
    """Load a one-image class folder and return its image (C, S, S)."""
    (root / "c").mkdir(parents=True, exist_ok=True)
    if callable(img_or_writer):
        img_or_writer(root / "c" / name)
    else:
        img_or_writer.save(root / "c" / name)
    return load(f"folder:{root}", image_size=size, **kw).images[0]


def _scaled(a: np.ndarray) -> np.ndarray:
    a = a.astype(np.float64)
    return np.rint((a - a.min()) * 255.0 / (a.max() - a.min())).astype(np.uint8)


def test_16bit_32bit_and_float_images_are_scaled_by_their_range(tmp_path):
    a = (np.arange(36).reshape(6, 6) * 50 + 1000).astype(np.uint16)     # 1000..2750: near-white if clipped
    got = _one(tmp_path / "i16", "x.png", Image.fromarray(a))
    assert Image.open(tmp_path / "i16" / "c" / "x.png").mode == "I;16"
    assert got.shape == (1, 6, 6) and np.array_equal(got[0].numpy(), _scaled(a))
    b = (np.arange(36).reshape(6, 6) * 100_000 - 7).astype(np.int32)
    got = _one(tmp_path / "i32", "x.tif", Image.fromarray(b))
    assert np.array_equal(got[0].numpy(), _scaled(b)) and got.max() == 255 and got.min() == 0
    f = (np.arange(36).reshape(6, 6) / 35.0 * 0.01 - 0.5).astype(np.float32)   # all 0 if cast
    got = _one(tmp_path / "f", "x.tif", Image.fromarray(f))
    assert np.array_equal(got[0].numpy(), _scaled(f))


def test_constant_wide_images_keep_their_level(tmp_path):
    assert _one(tmp_path / "a", "x.png", Image.fromarray(np.full((6, 6), 65535, np.uint16))).min() == 255
    assert _one(tmp_path / "b", "x.tif", Image.fromarray(np.full((6, 6), 0.5, np.float32))).max() == 128


def test_float_image_with_nan_is_refused_naming_it(tmp_path):
    f = np.ones((6, 6), np.float32)
    f[2, 2] = np.nan
    with pytest.raises(ValueError, match=r"image .*nan\.tif \(F\) holds NaN or infinite values; it cannot be "
                                         r"scaled to 8 bits"):
        _one(tmp_path, "nan.tif", Image.fromarray(f))


def test_alpha_palette_and_cmyk_are_converted(tmp_path):
    rgba = np.zeros((6, 6, 4), np.uint8)
    rgba[..., 0] = 200
    rgba[:3, :, 3] = 255                                          # top opaque red-ish, bottom transparent
    got = _one(tmp_path / "rgba", "x.png", Image.fromarray(rgba, "RGBA"))
    assert got[:, :3].tolist() == torch.tensor([200, 0, 0]).view(3, 1, 1).expand(3, 3, 6).tolist()
    assert (got[:, 3:] == 255).all()                              # transparent -> white, not black

    la = Image.fromarray(np.stack([np.full((6, 6), 10, np.uint8), np.full((6, 6), 0, np.uint8)], -1), "LA")
    assert (_one(tmp_path / "la", "x.png", la) == 255).all()

    pal = Image.new("P", (6, 6), 1)
    pal.putpalette([0, 0, 0, 10, 20, 30] + [0] * 762)
    pal.info["transparency"] = 0
    assert _one(tmp_path / "p", "x.png", pal)[:, 0, 0].tolist() == [10, 20, 30]

    cmyk = Image.new("CMYK", (6, 6), (0, 255, 255, 0))            # pure red in CMYK
    got = _one(tmp_path / "cmyk", "x.jpg", lambda p: cmyk.save(p, quality=100))
    assert got.shape == (3, 6, 6) and (got[0] > 240).all() and (got[1:] < 15).all()

    one_bit = Image.fromarray(np.eye(6, dtype=bool))
    got = _one(tmp_path / "bits", "x.png", one_bit)
    assert got.shape == (1, 6, 6) and torch.equal(got[0], torch.eye(6, dtype=torch.uint8) * 255)


def test_exif_orientation_is_applied(tmp_path):
    arr = (np.arange(24, dtype=np.uint8).reshape(4, 6) * 10)
    exif = Image.Exif()
    exif[0x0112] = 6                                             # rotate 90 degrees clockwise to display
    got = _one(tmp_path, "x.png", lambda p: Image.fromarray(arr).save(p, exif=exif), size=4)
    shown = np.rot90(arr, -1)                                    # (6, 4) as displayed
    assert np.array_equal(got[0].numpy(), np.asarray(Image.fromarray(shown).resize(
        (4, 4), Image.Resampling.BILINEAR, box=(0, 1, 4, 5))))


def test_pillow_warnings_are_summarised_not_raw(tmp_path):
    img = Image.new("RGB", (6, 6), (10, 20, 30))
    bad_exif = b"Exif\x00\x00MM\x00\x2a\x00\x00\x00\x08\x00\x05\x01\x12\x00\x03\x00\x00\x00\x01\x00\x06"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _one(tmp_path, "x.jpg", lambda p: img.save(p, exif=bad_exif))
    assert caught, "the corrupt EXIF should be reported"
    assert all("PIL" not in Path(w.filename).parts for w in caught), [str(w.message) for w in caught]
    assert any("decoded with warnings from Pillow, e.g." in str(w.message) and "x.jpg: Corrupt EXIF" in
               str(w.message) for w in caught)


# -- bad files ------------------------------------------------------------------------------------------

def _png_header_only(path: Path, w: int, h: int) -> None:
    """A PNG that declares ``w`` x ``h`` pixels but holds almost nothing: a decompression bomb's header."""
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))  # noqa: E731
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64))
                     + chunk(b"IEND", b""))


def test_decompression_bomb_is_refused_naming_file_and_limit(tmp_path, monkeypatch):
    _rgb_tree(tmp_path / "imgs", n=20)
    _png_header_only(tmp_path / "imgs" / "b" / "bomb.png", 14000, 14000)
    for workers in (1, 2):
        with pytest.raises(ValueError, match=r"image .*bomb\.png has 14000x14000 = 196,000,000 pixels, over the "
                                             r"limit of 89,478,485 \(PIL.Image.MAX_IMAGE_PIXELS\), so it is "
                                             r"refused as a possible decompression bomb; if the image is genuine, "
                                             r"raise the limit"):
            load(f"folder:{tmp_path / 'imgs'}", workers=workers)
    (tmp_path / "imgs" / "b" / "bomb.png").unlink()
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 50)            # the user's Pillow setting is honoured
    with pytest.raises(ValueError, match=r"has 8x8 = 64 pixels, over the limit of 50"):
        load(f"folder:{tmp_path / 'imgs'}", workers=2)
    ds = load(f"folder:{tmp_path / 'imgs'}", max_image_pixels=100, workers=2)   # ... or the argument
    assert len(ds) == 40 and Image.MAX_IMAGE_PIXELS == 50
    with pytest.raises(ValueError, match=r"max_image_pixels must be a positive int or None; got 0"):
        load(f"folder:{tmp_path / 'imgs'}", max_image_pixels=0)


def test_undecodable_file_is_named_by_workers_too(tmp_path, _cache):
    _rgb_tree(tmp_path / "imgs", n=30)
    (tmp_path / "imgs" / "b" / "015_truncated.png").write_bytes(
        (tmp_path / "imgs" / "b" / "001.png").read_bytes()[:60])
    with pytest.raises(ValueError, match=r"cannot read image .*015_truncated\.png: .*Remove or fix the file"):
        load(f"folder:{tmp_path / 'imgs'}", image_size=8, workers=2)
    assert _entries(_cache) == [] and not list((_cache / "images").glob("*.tmp*"))


@pytest.mark.skipif(sys.platform in ("darwin", "win32"), reason="the file system needs UTF-8 names")
def test_non_utf8_names(tmp_path):
    root = tmp_path / "imgs"
    _rgb_tree(root)
    bad = os.path.join(os.fsencode(root / "b"), b"caf\xe9.png")
    Image.new("RGB", (8, 8), (5, 5, 5)).save(os.fsdecode(bad))    # a file name: fine, loaded
    assert len(load(f"folder:{root}", image_size=8)) == 7
    with open(bad, "wb") as f:
        f.write(b"broken")
    with pytest.raises(ValueError, match=r"cannot read image .*/b/caf\\xe9\.png"):
        load(f"folder:{root}", image_size=8)
    os.remove(bad)
    os.mkdir(os.path.join(os.fsencode(root), b"r\xe9sum\xe9"))
    Image.new("RGB", (8, 8)).save(os.fsdecode(os.path.join(os.fsencode(root), b"r\xe9sum\xe9", b"0.png")))
    with pytest.raises(ValueError, match=r"class folder .*/r\\xe9sum\\xe9 has a name that is not valid UTF-8 "
                                         r"\(b'r\\xe9sum\\xe9'\); rename it to UTF-8"):
        load(f"folder:{root}")


# -- memory: a 224 px folder larger than the RAM budget runs in batches -----------------------------------

_MEMORY_RUN = """
import json, sys, threading
import lab, lab.features

def anon():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("RssAnon:"))

bb = lab.backbones.load("mlp:depth=2,width=8", in_chans=3, img_size=224, device="cpu")
peak, stop = [0], threading.Event()
def sample():
    while not stop.wait(0.002):
        peak[0] = max(peak[0], anon())
start = peak[0] = anon()
sampler = threading.Thread(target=sample, daemon=True)
sampler.start()
ds = lab.data.load(sys.argv[1], image_size=224, progress=False)
seen = sum(len(y) for _, y in ds.partition("train").train_loader(8, seed=0))
feats = lab.features.extract(bb, ds.subset(["c1", "c3"]), batch_size=8)
stop.set()
sampler.join()
print(json.dumps({"decoded": ds.images.numel(), "rise": max(peak[0], anon()) - start, "seen": seen,
                  "n_feats": [v.shape[0] for v in feats.values()], "mapped": bool(ds._mapped)}))
"""


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads RssAnon from /proc and glibc settings")
def test_224px_folder_larger_than_the_ram_budget_runs_in_batches(tmp_path):
    """Load, train-loader epoch and feature extraction at 224 px on a folder whose decoded size is
    over twice the budget: the process's anonymous memory (what it owns; the map's file pages are
    the kernel's cache, dropped under pressure) stays within the budget.

    Run in a fresh process with a fixed glibc mmap threshold: otherwise glibc's heap keeps freed
    batch buffers resident by chance, which says nothing about the data path.
    """
    root = tmp_path / "imgs"
    rng = np.random.default_rng(0)
    for c in range(4):
        (root / f"c{c}").mkdir(parents=True)
        for i in range(150):
            Image.fromarray(rng.integers(0, 256, (12, 16, 3), dtype=np.uint8)).save(root / f"c{c}" / f"{i}.png")
    budget = 40 << 20
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="131072",
               PYTHONPATH=os.pathsep.join([str(Path(lab.__file__).parents[1])] + sys.path))
    out = subprocess.run([sys.executable, "-c", _MEMORY_RUN, f"folder:{root}"], env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["decoded"] == 600 * 3 * 224 * 224 and res["decoded"] > 2 * budget     # 86 MiB
    assert res["seen"] == 480 and res["n_feats"] == [300, 300, 300] and res["mapped"]
    assert res["rise"] < budget, f"anonymous memory grew {res['rise'] / 2**20:.1f} MiB"


def test_a_cache_inside_the_image_folder_is_not_a_class(tmp_path, monkeypatch):
    _rgb_tree(tmp_path / "imgs")
    monkeypatch.setenv("LAB_CACHE_DIR", str(tmp_path / "imgs" / "cache"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load(f"folder:{tmp_path / 'imgs'}", image_size=8).classes == ["a", "b"]
        assert load(f"folder:{tmp_path / 'imgs'}", image_size=8).classes == ["a", "b"]


def test_views_of_a_mapped_folder_copy_only_what_they_select(tmp_path):
    _rgb_tree(tmp_path / "imgs", n=4)
    ds = load(f"folder:{tmp_path / 'imgs'}", image_size=8)
    part = ds.subset(["b"])
    assert part._mapped and part._rows is not None
    own = part.images                                             # copied out: the view now owns its rows
    assert own.shape == (4, 3, 8, 8) and part._mapped is None and torch.equal(own, ds.images[4:])
    back = pickle.loads(pickle.dumps(part))
    assert torch.equal(back.images, own)
    relabelled = ds.relabel(np.arange(8) % 2)
    assert relabelled._mapped and relabelled.class_counts() == {"a": 4, "b": 4}
    assert torch.equal(relabelled.images, ds.images)

