"""What every exported notebook is made of: user data as Python literals, code templates
filled with those literals, and writing (and optionally executing) it.

Everything a user typed reaches a code cell only through :func:`py_literal` (``repr`` checked
with :func:`ast.literal_eval`) and :func:`fill`; nothing typed is ever executed as code.
"""
from __future__ import annotations

import ast
import math
import os
import pprint
import re
from pathlib import Path
from typing import Any

__all__ = ["py_literal", "fill", "check_ipynb", "write_notebook", "WRITE_DOCS"]

WRITE_DOCS = {
    "returns": "Returns\n-------\npathlib.Path\n    The written notebook.",
    "execute_failed": "RuntimeError\n    ``execute=True`` and a cell failed; the notebook is saved with its outputs "
                      "(including the\n    error) before this is raised.",
}
"""The docstring sections of every function that writes a notebook through :func:`write_notebook`
(``lab._numpydoc.doc(**WRITE_DOCS)``): what it returns, and what a failed execution raises."""


def py_literal(value: Any, *, width: int = 96) -> str:
    """Python source that evaluates to ``value``, built from data only.

    Parameters
    ----------
    value : str, int, float, bool, None, or lists, tuples and dicts of them
        Strings are rendered with :func:`repr`, which always yields a valid,
        self-contained string literal whatever the string holds.
    width : int
        Line width of the pretty-printed result.

    Returns
    -------
    str
        A literal; :func:`ast.literal_eval` of it equals ``value``.

    Raises
    ------
    ValueError
        If ``value`` holds anything else (objects, NaN or infinite floats), since
        its source would not be a plain literal.
    """
    _check_literal(value)
    text = pprint.pformat(value, width=width, sort_dicts=False)
    if ast.literal_eval(text) != value:          # pragma: no cover - guards pprint itself
        raise ValueError(f"could not write {value!r} as a Python literal")
    return text


def _check_literal(value: Any, where: str = "value") -> None:
    if value is None or isinstance(value, (str, bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where} must be a finite number to be written as a literal; got {value!r}")
        return
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_literal(item, f"{where}[{i}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{where} keys must be strings to be written as a literal; got {key!r}")
            _check_literal(item, f"{where}[{key!r}]")
        return
    raise ValueError(
        f"{where} must be made of str, int, float, bool, None, lists and dicts to be written as a "
        f"literal; got {type(value).__name__}")


_SLOT_RE = re.compile(r"\{\{([A-Z_]+)\}\}")


def fill(template: str, **slots: str) -> str:
    """Fill ``{{NAME}}`` slots of a code template in one pass (values are literals, never re-scanned)."""
    missing = set(_SLOT_RE.findall(template)) - set(slots)
    if missing:                                   # pragma: no cover - a template bug
        raise KeyError(f"template slots without values: {sorted(missing)}")
    source = _SLOT_RE.sub(lambda m: slots[m.group(1)], template).strip("\n")
    ast.parse(source)                             # every code cell must at least be valid Python
    return source


def write_notebook(nb, path: str | os.PathLike, *, execute: bool, timeout: int, what: str = "notebook") -> Path:
    """Write ``nb`` to ``path`` (a ``.ipynb``), executing it first when asked.

    A cell that fails while executing still leaves the notebook written with its outputs (the
    error included) before a :class:`RuntimeError` names the file, so no work is lost.
    """
    import nbformat

    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    if execute:
        from nbclient.exceptions import CellExecutionError

        from lab.export.execute import execute_notebook

        try:
            execute_notebook(nb, target.parent, timeout=timeout)
        except CellExecutionError as exc:
            nbformat.write(nb, str(target))
            last = str(exc).strip().splitlines()[-1] if str(exc).strip() else ""
            raise RuntimeError(f"the exported {what} {str(target)!r} failed while executing; it was saved with its "
                               f"outputs, open it to see the failing cell. {last}") from exc
    nbformat.write(nb, str(target))
    return target


def check_ipynb(path: str | os.PathLike) -> Path:
    target = Path(path)
    if target.suffix != ".ipynb":
        raise ValueError(f"path must name a .ipynb file. Got {str(target)!r} instead; add the .ipynb suffix.")
    return target
