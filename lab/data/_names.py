"""Dataset specs, parsed in one place and resolved up front without loading any image.

Imports neither torch nor numpy, so that ``lab.data.check_name`` and ``lab.data.SPECS``
stay cheap (a study validates every cell before its cluster starts).

>>> check_name("glyphs")
>>> check_name("glyph")
Traceback (most recent call last):
...
lab.errors.UnknownNameError: unknown dataset 'glyph'; closest: 'glyphs'; use one of 'glyphs', 'glyphs:character', \
'digits', 'folder:PATH', 'cifar10:PATH', 'cifar100:PATH'
"""
from __future__ import annotations

import difflib
from pathlib import Path

from lab.errors import UnknownNameError

__all__ = ["SPECS", "split_spec", "check_name"]

SPECS = ("glyphs", "glyphs:character", "digits", "folder:PATH", "cifar10:PATH", "cifar100:PATH")
"""The dataset specs :func:`lab.data.load` takes."""

_NAMED = ("glyphs", "glyphs:character", "digits")        # the specs without a path
_PATH_KINDS = ("folder", "cifar10", "cifar100")          # the specs ``KIND:PATH``
_FIX = "use one of " + ", ".join(repr(s) for s in SPECS)


def split_spec(spec: str) -> tuple[str, str]:
    """``"KIND:ARG"`` -> (kind, lower-cased and stripped; arg, as given). ``"glyphs"`` -> ("glyphs", "")."""
    kind, _, arg = spec.partition(":")
    return kind.strip().lower(), arg


def _closest(spec: str, kind: str, arg: str) -> list[str]:
    close = difflib.get_close_matches(spec.strip().lower(), _NAMED, n=5, cutoff=0.6)
    if arg:   # a misspelt kind keeps its path: 'foldr:/data' -> 'folder:/data'
        close += [f"{k}:{arg}" for k in difflib.get_close_matches(kind, _PATH_KINDS, n=3, cutoff=0.6)]
    return close[:5]


def check_name(name: str) -> None:
    """Raise :class:`lab.errors.UnknownNameError` unless :func:`lab.data.load` can load ``name`` here.

    Loads nothing: ``glyphs``/``glyphs:character`` ship with the package and ``digits`` with
    scikit-learn; ``folder:PATH`` must be an existing folder; ``cifar10:PATH``/``cifar100:PATH``
    must exist and hold the python-version CIFAR files (their presence is checked, not their
    contents).

    Raises
    ------
    UnknownNameError
        With ``kind="dataset"``, the closest valid specs and the fix.
    """
    if not isinstance(name, str) or not name.strip():
        raise UnknownNameError("dataset", name, [], _FIX, reason="a dataset spec must be a non-empty string")
    kind, arg = split_spec(name)
    if (kind == "glyphs" and arg in ("", "character")) or (kind == "digits" and not arg):
        return
    if kind not in _PATH_KINDS or not arg:
        raise UnknownNameError("dataset", name, _closest(name, kind, arg), _FIX)
    path = Path(arg).expanduser()
    if not path.exists():
        raise UnknownNameError("dataset", name, [], f"check the path, or {_FIX}",
                               reason=f"{path.absolute()} does not exist")
    if kind == "folder":
        if not path.is_dir():
            raise UnknownNameError("dataset", name, [], "give a folder with one sub-folder of images per class "
                                   "(or train/ and test/ sub-folders of class folders)",
                                   reason=f"{path.absolute()} is not a folder")
        return
    from ._cifar import _find_root   # the loader's own search for the batch files (reads none of them)

    try:
        _find_root(kind, arg)
    except ValueError as exc:
        raise UnknownNameError("dataset", name, [], "", reason=str(exc)) from exc
