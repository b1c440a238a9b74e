"""CIFAR-10/100 from the official python-pickle files, read without arbitrary unpickling.

The files are pickled dicts of bytes, lists and numpy arrays. :class:`_CifarUnpickler`
resolves only the few globals numpy needs to rebuild an array, so a tampered
file cannot run code: anything else is refused before it is called.
"""
from __future__ import annotations

import codecs
import pickle
from pathlib import Path

import numpy as np

__all__ = ["load_cifar", "UnsafePickleError"]

try:  # numpy >= 2
    from numpy._core.multiarray import _reconstruct
    from numpy._core.numeric import _frombuffer
except ImportError:  # pragma: no cover - numpy 1.x
    from numpy.core.multiarray import _reconstruct
    from numpy.core.numeric import _frombuffer

_ALLOWED = {
    ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy.core.numeric", "_frombuffer"): _frombuffer,
    ("numpy._core.numeric", "_frombuffer"): _frombuffer,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("_codecs", "encode"): codecs.encode,   # how Python 3 pickles bytes at protocol 2
}

_LAYOUT = {
    "cifar10": {
        "title": "CIFAR-10", "folder": "cifar-10-batches-py", "archive": "cifar-10-python.tar.gz",
        "parts": [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"],
        "meta": "batches.meta", "names": "label_names", "labels": "labels",
    },
    "cifar100": {
        "title": "CIFAR-100", "folder": "cifar-100-python", "archive": "cifar-100-python.tar.gz",
        "parts": ["train", "test"], "meta": "meta", "names": "fine_label_names",
        "labels": "fine_labels",
    },
}


class UnsafePickleError(ValueError):
    """A pickle asked for something other than plain data and numpy arrays."""


class _CifarUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise UnsafePickleError(
                f"refusing to load {module}.{name} from a CIFAR file: only plain data and numpy "
                "arrays are allowed, so this is not an original CIFAR python file. Replace it "
                "with a fresh copy from the official archive.") from None


def _read(path: Path) -> dict:
    with open(path, "rb") as f:
        try:
            obj = _CifarUnpickler(f, encoding="bytes").load()
        except UnsafePickleError as err:
            raise UnsafePickleError(f"{path}: {err}") from None
        except Exception as err:  # corrupt or truncated file
            raise ValueError(f"cannot read CIFAR file {path}: {err}. Replace it with a fresh "
                             "copy from the official archive.") from err
    if not isinstance(obj, dict):
        raise ValueError(f"{path} holds a {type(obj).__name__}; expected a CIFAR batch dict.")
    return {k.decode("latin1") if isinstance(k, bytes) else k: v for k, v in obj.items()}


def _find_root(kind: str, path: str) -> Path:
    lay = _LAYOUT[kind]
    needed = lay["parts"] + [lay["meta"]]
    given = Path(path).expanduser()
    for root in (given, given / lay["folder"]):
        if all((root / f).is_file() for f in needed):
            return root
    closest = given / lay["folder"] if (given / lay["folder"]).is_dir() else given
    missing = [f for f in needed if not (closest / f).is_file()]
    raise ValueError(
        f"{lay['title']} python files not found: expected {', '.join(needed)} in {given} "
        f"(or in {given / lay['folder']}); missing in {closest}: {', '.join(missing)}. Download "
        f"'{lay['archive']}' (the python version) from https://www.cs.toronto.edu/~kriz/cifar.html, "
        f"unpack it with `tar xzf {lay['archive']}` and pass {kind}:<path to {lay['folder']}>. "
        "Nothing is downloaded automatically.")


def load_cifar(kind: str, path: str) -> tuple[np.ndarray, np.ndarray, list[str], Path]:
    """Read every batch (train then test) of CIFAR-10 or CIFAR-100.

    Returns
    -------
    images : numpy.ndarray
        uint8 (N, 3, 32, 32).
    targets : numpy.ndarray
        int64 (N,); fine labels for CIFAR-100.
    classes : list of str
    root : Path
        The folder the files were read from.
    """
    lay = _LAYOUT[kind]
    root = _find_root(kind, path).resolve()
    meta = _read(root / lay["meta"])
    classes = [n.decode("utf-8") if isinstance(n, bytes) else str(n) for n in meta[lay["names"]]]
    images, targets = [], []
    for part in lay["parts"]:
        batch = _read(root / part)
        data = np.asarray(batch["data"], dtype=np.uint8)
        if data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
            raise ValueError(f"{root / part}: data must be (N, 3072) uint8; got {data.shape}.")
        images.append(data.reshape(-1, 3, 32, 32))
        targets.append(np.asarray(batch[lay["labels"]], dtype=np.int64))
    return np.concatenate(images), np.concatenate(targets), classes, root
