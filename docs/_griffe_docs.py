"""A Griffe extension for the API reference (mkdocs.yml, mkdocstrings ``extensions``): docstrings that the code
fills at import (:func:`lab._numpydoc.doc`, e.g. the metrics' shared ``X, y`` parameters) are read from the
imported object, since Griffe reads the source, where only the ``{name}`` placeholder line stands."""
from __future__ import annotations

import importlib
import inspect

import griffe

from lab._numpydoc import PLACEHOLDER


class FilledDocstrings(griffe.Extension):
    """Replace a function's docstring that holds a ``{name}`` placeholder line by the imported function's."""

    def on_function_instance(self, *, func: griffe.Function, **kwargs) -> None:
        if func.docstring is None or not PLACEHOLDER.search(func.docstring.value):
            return
        obj = importlib.import_module(func.module.path)
        for part in func.path.removeprefix(func.module.path + ".").split("."):
            obj = getattr(obj, part)
        func.docstring.value = inspect.getdoc(obj)
