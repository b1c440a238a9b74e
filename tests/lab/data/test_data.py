"""lab.data: shipped glyphs, digits, folders, CIFAR files, derived datasets, splits."""
from __future__ import annotations

import base64
import io
import json
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
import torch
from PIL import Image

import lab
from lab.data import ImageDataset, Split, UnsafePickleError, load
from lab.data import glyphs
from tests.fixtures.paths import REPO


@pytest.fixture(autouse=True)
def _image_cache(tmp_path_factory, monkeypatch):
    """Decoded image folders go to a per-test cache, not the user's."""
    monkeypatch.setenv("LAB_CACHE_DIR", str(tmp_path_factory.mktemp("lab-cache")))


def _toy(k: int = 3, n: int = 10) -> ImageDataset:
    """k classes of n images each; pixel (0, 0) holds the image's original index."""
    images = torch.zeros(k * n, 1, 4, 4, dtype=torch.uint8)
    images[:, 0, 0, 0] = torch.arange(k * n, dtype=torch.uint8)
    return ImageDataset(images, np.repeat(np.arange(k), n), [f"c{i}" for i in range(k)], "toy")


def _ids(ds: ImageDataset) -> list[int]:
    return ds.images[:, 0, 0, 0].tolist()


# -- embedded glyphs ------------------------------------------------------------

def test_glyphs_load_from_shipped_file():
    ds = load("glyphs")
    assert glyphs.DEFAULT_PATH.stat().st_size <= 15e6
    assert ds.name == "glyphs" and len(ds.classes) == 20
    assert ds.images.dtype == torch.uint8 and ds.images.shape[1:] == (1, 64, 64)
    assert ds.in_chans == 1 and ds.image_size == 64
    counts = ds.class_counts()
    assert list(counts) == ds.classes and min(counts.values()) >= 300
    assert sum(counts.values()) == len(ds) == len(ds.targets)
    assert "AR PL UKai" in ds.classes
    assert repr(ds).startswith("ImageDataset('glyphs': 6260 images, 20 classes [AR PL UKai")


def test_loading_glyphs_does_not_import_the_font_builder():
    code = "import sys, lab; lab.data.load('glyphs'); print('lab.data.build_glyphs' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "False", out.stderr


def test_glyph_metadata_names_fonts_and_packages():
    meta = glyphs.read()["meta"]
    assert len(meta["fonts"]) == 20 and all(f["package"].startswith("fonts-") for f in meta["fonts"])
    assert json.loads(glyphs.DEFAULT_PATH.with_suffix(".json").read_text("utf-8"))["seed"] == meta["seed"]


def test_glyphs_by_character_is_same_images_other_labels():
    by_style, by_char = load("glyphs"), load("glyphs:character")
    assert torch.equal(by_style.images, by_char.images)
    assert len(by_char.classes) == 313 and all(len(c) == 1 for c in by_char.classes)
    assert min(by_char.class_counts().values()) == 20


def test_loads_do_not_share_mutable_images():
    a = load("glyphs")
    a.images[0].zero_()
    assert load("glyphs").images[0].max() == 255


def test_glyph_datasets_read_the_shared_cache_without_copies():
    ds = load("glyphs")
    part = ds.subset(ds.classes[2:5]).partition("test", seed=1).sample_per_class(7, seed=2)
    cache = ds._source.untyped_storage().data_ptr()
    assert part._source.untyped_storage().data_ptr() == cache     # derived datasets index the cache
    x, y = next(iter(part.eval_loader(len(part))))
    images = part.images                                           # copied out on first access
    assert images.untyped_storage().data_ptr() != cache and images.shape == (21, 1, 64, 64)
    assert torch.equal(x, images.float() / 255) and torch.equal(y, torch.as_tensor(part.targets))
    assert torch.equal(part[3][0], x[3]) and part.in_chans == 1 and part.image_size == 64
    images.zero_()                                                 # its own images: the cache is untouched
    assert part.images.max() == 0 and part.subset(part.classes[:1]).images.max() == 0
    assert load("glyphs").subset(ds.classes[2:5]).partition("test", seed=1).images.max() == 255


def test_unknown_spec_lists_valid_specs():
    with pytest.raises(ValueError, match=r"unknown dataset spec 'nope'; expected one of 'glyphs', "
                                         r"'glyphs:character', 'digits', 'folder:PATH'"):
        load("nope")
    with pytest.raises(ValueError, match="unknown dataset spec 'folder'"):
        load("folder")
    with pytest.raises(ValueError, match="unknown dataset spec 'glyphs:style'"):
        load("glyphs:style")
    with pytest.raises(ValueError, match=r"image_size must be an int >= 4 or None; got 2"):
        load("digits", image_size=2)


def test_digits_and_resize():
    ds = load("digits")
    assert (len(ds), ds.classes, ds.in_chans, ds.image_size) == (1797, [str(i) for i in range(10)], 1, 32)
    assert ds.images.max() == 255
    small = load("digits", image_size=16)
    assert small.images.shape == (1797, 1, 16, 16) and small.images.dtype == torch.uint8


def test_lab_top_level_access():
    assert lab.data.load is load and lab.data.Dataset is ImageDataset


# -- derived datasets -----------------------------------------------------------

def test_partition_deterministic_disjoint_and_covering():
    ds = _toy(k=3, n=10)
    train, test = ds.partition("train"), ds.partition("test")
    assert _ids(train) == _ids(ds.partition("train")) and _ids(test) == _ids(ds.partition("test"))
    assert not set(_ids(train)) & set(_ids(test))
    assert sorted(_ids(train) + _ids(test)) == list(range(30))
    assert train.classes == test.classes == ds.classes
    assert set(test.class_counts().values()) == {2} and set(train.class_counts().values()) == {8}
    assert _ids(ds.partition("test", seed=1)) != _ids(test)


def test_partition_per_class_independent_of_other_classes():
    ds = _toy(k=4, n=10)
    a = ds.subset(["c2", "c0"]).partition("test", seed=3)
    b = ds.partition("test", seed=3).subset(["c2", "c0"])
    assert sorted(_ids(a)) == sorted(_ids(b))


def test_partition_errors():
    with pytest.raises(ValueError, match=r"which must be 'train' or 'test'; got 'val'"):
        _toy().partition("val")
    with pytest.raises(ValueError, match=r"test_fraction must be in \(0, 1\); got 1.5"):
        _toy().partition("test", test_fraction=1.5)
    tiny = ImageDataset(torch.zeros(3, 1, 4, 4, dtype=torch.uint8), [0, 0, 1], ["a", "b"], "t")
    with pytest.raises(ValueError, match=r"class 'b' has 1 image\(s\); a train/test partition needs "
                                         r"at least 2 per class"):
        tiny.partition("test")


def test_glyph_partition_keeps_every_class_in_both():
    ds = load("glyphs")
    train, test = ds.partition("train"), ds.partition("test")
    assert len(train) + len(test) == len(ds)
    assert set(test.class_counts().values()) == {63} and set(train.class_counts().values()) == {250}   # 313 each


def test_subset_reindexes_in_given_order():
    ds = _toy(k=3, n=5)
    sub = ds.subset(["c2", "c0"])
    assert sub.classes == ["c2", "c0"] and len(sub) == 10
    assert sub.targets.tolist() == [1] * 5 + [0] * 5          # original order of images is kept
    assert _ids(sub)[5:] == list(range(10, 15))
    with pytest.raises(ValueError, match=r"unknown classes \['zz'\] for dataset 'toy'; expected names "
                                         r"from \['c0', 'c1', 'c2'\]"):
        ds.subset(["c0", "zz"])
    with pytest.raises(ValueError, match=r"classes must not repeat; got \['c0'\] more than once"):
        ds.subset(["c0", "c0"])


def test_sample_per_class():
    ds = _toy(k=3, n=10)
    s = ds.sample_per_class(4, seed=1)
    assert set(s.class_counts().values()) == {4} and _ids(s) == _ids(ds.sample_per_class(4, seed=1))
    assert len(ds.sample_per_class(50)) == 30
    with pytest.raises(ValueError, match="n must be a positive number of images per class; got 0"):
        ds.sample_per_class(0)


def test_eval_is_deterministic_and_standardised():
    ds = load("glyphs").sample_per_class(4)
    x0, y0 = ds[0]
    assert torch.equal(x0, ds[0][0]) and isinstance(y0, int)
    assert x0.dtype == torch.float32 and x0.shape == (1, 64, 64)
    assert x0.min() == 0.0 and x0.max() == 1.0             # x / 255: the backbone normalizes
    xb, yb = next(iter(ds.eval_loader(8)))
    assert torch.equal(xb, torch.stack([ds[i][0] for i in range(8)]))
    assert yb.dtype == torch.int64 and yb.tolist() == ds.targets[:8].tolist()
    plain, _ = next(iter(ds.train_loader(8, augment=False, shuffle=False)))
    assert torch.equal(plain, xb)


def test_augmentation_only_in_train_loader_and_seeded():
    ds = load("glyphs").sample_per_class(4)
    xe, _ = next(iter(ds.eval_loader(16)))
    xa, ya = next(iter(ds.train_loader(16, shuffle=False, seed=5)))
    xb, yb = next(iter(ds.train_loader(16, shuffle=False, seed=5)))
    assert torch.equal(xa, xb) and torch.equal(ya, yb)
    assert not torch.allclose(xa, xe)
    assert (xa - xe).abs().mean() < 0.25                   # mild: same glyphs, slightly moved
    assert xa.min() >= 0.0 and xa.max() <= 1.0
    first = [y.tolist() for _, y in ds.train_loader(16, seed=0)]
    assert first == [y.tolist() for _, y in ds.train_loader(16, seed=0)]
    assert sorted(sum(first, [])) == sorted(ds.targets.tolist())


def test_thumbnails_are_png_data_uris():
    ds = load("glyphs")
    uri = ds.thumbnail(3, size=24)
    assert uri.startswith("data:image/png;base64,")
    img = Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1])))
    assert img.size == (24, 24) and img.mode == "L"
    assert ds.class_thumbnail("Smiley Sans").startswith("data:image/png;base64,")
    assert ds.class_thumbnail("Smiley Sans") is ds.class_thumbnail("Smiley Sans")     # made once: every page shows it
    assert ds.class_thumbnail("Smiley Sans", size=16) != ds.class_thumbnail("Smiley Sans")
    with pytest.raises(ValueError, match="unknown class 'nobody'; expected one of"):
        ds.class_thumbnail("nobody")


def test_dataset_checks_its_inputs():
    with pytest.raises(ValueError, match=r"images must be uint8 \(N, C, H, W\) with C in \(1, 3\) "
                                         r"and H == W; got torch.float32"):
        ImageDataset(torch.zeros(2, 1, 4, 4), [0, 1], ["a", "b"], "x")
    with pytest.raises(ValueError, match=r"targets must lie in 0..1; got 0..2"):
        ImageDataset(torch.zeros(2, 1, 4, 4, dtype=torch.uint8), [0, 2], ["a", "b"], "x")


# -- image folders ----------------------------------------------------------------

def _tree(root, mode: str) -> None:
    rng = np.random.default_rng(0)
    for cls, ext in (("cat", "png"), ("dog", "jpg")):
        (root / cls).mkdir(parents=True)
        for i in range(3):
            shape = (20 + 4 * i, 30) if mode == "L" else (20 + 4 * i, 30, 3)
            Image.fromarray(rng.integers(0, 255, shape, dtype=np.uint8), mode).save(root / cls / f"{i}.{ext}")


def test_folder_grayscale(tmp_path):
    _tree(tmp_path, "L")
    (tmp_path / "cat" / "notes.txt").write_text("not an image")
    (tmp_path / "cat" / "scan.pdf").write_bytes(b"%PDF-1.4")        # Pillow can write PDF, not read it
    ds = load(f"folder:{tmp_path}")
    assert ds.classes == ["cat", "dog"] and ds.targets.tolist() == [0, 0, 0, 1, 1, 1]
    assert ds.images.shape == (6, 1, 64, 64) and ds.name == f"folder:{tmp_path.resolve()}"
    assert load(f"folder:{tmp_path}", image_size=16).images.shape == (6, 1, 16, 16)


def test_folder_rgb_and_mixed(tmp_path):
    _tree(tmp_path, "RGB")
    Image.new("L", (10, 10), 128).save(tmp_path / "cat" / "gray.bmp")
    ds = load(f"folder:{tmp_path}", image_size=32)
    assert ds.images.shape == (7, 3, 32, 32) and ds.in_chans == 3
    assert ds[0][0].shape == (3, 32, 32)


def test_folder_errors(tmp_path):
    with pytest.raises(ValueError, match=r"is not a directory; expected a folder with one sub-folder"):
        load(f"folder:{tmp_path / 'missing'}")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"no images found in .*: expected one sub-folder per class"):
        load(f"folder:{tmp_path}")
    _tree(tmp_path / "t", "L")
    (tmp_path / "t" / "dog" / "broken.png").write_bytes(b"not a png")
    with pytest.raises(ValueError, match=r"cannot read image .*broken.png.*Remove or fix the file"):
        load(f"folder:{tmp_path / 't'}")


def test_folder_ignores_empty_class_with_warning(tmp_path):
    _tree(tmp_path, "L")
    (tmp_path / "empty").mkdir()
    with pytest.warns(UserWarning, match=r"ignoring sub-folders without images .*\['empty'\]"):
        ds = load(f"folder:{tmp_path}")
    assert ds.classes == ["cat", "dog"]


# -- CIFAR files on disk ----------------------------------------------------------

def _dump(path, obj) -> None:
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=2)   # the protocol of the official files


def _fake_cifar10(root, n: int = 4):
    d = root / "cifar-10-batches-py"
    d.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        _dump(d / name, {b"data": rng.integers(0, 255, (n, 3072), dtype=np.uint8),
                         b"labels": [i % 10 for i in range(n)], b"batch_label": b"fake"})
    names = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
    _dump(d / "batches.meta", {b"label_names": [s.encode() for s in names], b"num_vis": 3072})
    return d


def test_cifar10_from_fake_files(tmp_path):
    d = _fake_cifar10(tmp_path)
    for spec in (f"cifar10:{tmp_path}", f"cifar10:{d}"):
        ds = load(spec)
        assert ds.images.shape == (24, 3, 32, 32) and ds.in_chans == 3 and ds.image_size == 32
        assert ds.classes[0] == "airplane" and len(ds.classes) == 10
        assert ds.targets[:4].tolist() == [0, 1, 2, 3] and ds.name == f"cifar10:{d.resolve()}"
    raw = pickle.load(open(d / "data_batch_1", "rb"), encoding="bytes")[b"data"]
    assert torch.equal(ds.images[0], torch.from_numpy(raw[0].reshape(3, 32, 32)))
    thumb = Image.open(io.BytesIO(base64.b64decode(ds.thumbnail(0).split(",", 1)[1])))
    assert thumb.mode == "RGB" and thumb.size == (32, 32)


def test_cifar100_from_fake_files(tmp_path):
    d = tmp_path / "cifar-100-python"
    d.mkdir()
    fine = [f"class{i}" for i in range(95)] + ["orchid", "poppy", "rose", "sunflower", "tulip"]
    for name, n in (("train", 6), ("test", 2)):   # str keys here; the official files use bytes
        _dump(d / name, {"data": np.zeros((n, 3072), np.uint8),
                         "fine_labels": [95 + i % 5 for i in range(n)], "coarse_labels": [0] * n})
    _dump(d / "meta", {"fine_label_names": fine, "coarse_label_names": ["x"] * 20})
    ds = load(f"cifar100:{d}")
    assert len(ds) == 8 and len(ds.classes) == 100 and ds.targets.tolist()[:6] == [95, 96, 97, 98, 99, 95]
    split = Split.paper_default(ds)
    assert split.unseen == ["orchid", "poppy", "rose", "sunflower", "tulip"] and len(split.seen) == 95


def test_cifar_missing_files_say_where_and_how(tmp_path):
    with pytest.raises(ValueError, match=r"CIFAR-10 python files not found: expected data_batch_1, .*"
                                         r"test_batch, batches.meta in .*missing in .*: data_batch_1.*"
                                         r"cifar-10-python.tar.gz.*Nothing is downloaded automatically"):
        load(f"cifar10:{tmp_path}")
    with pytest.raises(ValueError, match=r"CIFAR-100 python files not found: expected train, test, meta"):
        load(f"cifar100:{tmp_path}")


class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_cifar_malicious_pickle_is_refused_and_nothing_runs(tmp_path):
    d = _fake_cifar10(tmp_path)
    marker = tmp_path / "pwned"
    _dump(d / "test_batch", {b"data": _Evil(marker), b"labels": []})
    with pytest.raises(UnsafePickleError, match=r"test_batch: refusing to load (posix|os)\.system from a "
                                                r"CIFAR file: only plain data and numpy arrays"):
        load(f"cifar10:{d}")
    assert not marker.exists()


# -- splits -------------------------------------------------------------------------

def test_split_construction_errors():
    with pytest.raises(ValueError, match=r"classes \['b'\] are both seen and unseen; remove them"):
        Split(seen=["a", "b"], unseen=["b", "c"])
    with pytest.raises(ValueError, match=r"unseen lists \['c'\] more than once"):
        Split(seen=["a"], unseen=["c", "c"])
    with pytest.raises(ValueError, match=r"seen must be a list of class names; got the string 'abc'"):
        Split(seen="abc", unseen=["x", "y"])


def test_split_validate_errors():
    classes = ["a", "b", "c", "d"]
    assert Split(["a", "b"], ["c", "d"]).validate(classes).seen == ["a", "b"]
    with pytest.raises(ValueError, match=r"unknown classes \['z'\] in split; expected names from "
                                         r"\['a', 'b', 'c', 'd'\]"):
        Split(["a", "z"], ["c", "d"]).validate(classes)
    with pytest.raises(ValueError, match=r"at least 2 unseen classes to measure separability; got 1 "
                                         r"\(\['d'\]\). Add classes to unseen"):
        Split(["a", "b"], ["d"]).validate(classes)
    with pytest.raises(ValueError, match=r"fine-tuning needs at least 2 seen classes; got 1 \(\['a'\]\). "
                                         r"Move classes from unseen to seen"):
        Split(["a"], ["c", "d"]).validate(classes)
    assert Split([], ["c", "d"]).validate(classes, need_seen=0).unseen == ["c", "d"]


def test_split_random_and_round_trip():
    classes = [f"k{i}" for i in range(12)]
    s = Split.random(classes, n_unseen=4, seed=7)
    assert s == Split.random(classes, n_unseen=4, seed=7) and s != Split.random(classes, 4, seed=8)
    assert len(s.unseen) == 4 and sorted(s.seen + s.unseen) == sorted(classes)
    assert s.unseen == [c for c in classes if c in s.unseen]          # dataset order kept
    assert Split.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    with pytest.raises(ValueError, match=r"n_unseen must be an int between 2 and 12 \(the number of "
                                         r"classes\); got 1"):
        Split.random(classes, n_unseen=1)
    with pytest.raises(ValueError, match=r"a split dict needs exactly the keys 'seen' and 'unseen'; "
                                         r"got \['seen'\]"):
        Split.from_dict({"seen": []})


def test_split_paper_defaults():
    ds = load("glyphs")
    s = Split.paper_default(ds).validate(ds.classes)
    assert len(s.seen) == 15 and len(s.unseen) == 5
    assert set(s.unseen) == {"Kouzan Sosho", "IPA Mincho", "cwTeX HeiBold", "cwTeX Yen", "Yusei Magic"}
    assert Split.paper_default("glyphs") == s
    d = Split.paper_default("digits")
    assert len(d.unseen) == 2 and d == Split.random([str(i) for i in range(10)], 2, seed=0)
    chars = Split.paper_default("glyphs:character")
    assert len(chars.unseen) == round(0.25 * 313) == 78 and len(chars.seen) == 313 - 78
