"""Numpydoc text written once: a class's ``Parameters`` read back as ``{name: description}``, and shared
sections filled into docstrings.

:meth:`lab.config.RunConfig.field_docs` reads its field help here, so that the command line's
``--help`` and the app's form show the text written once, in the class's docstring. :func:`doc` fills a
docstring's placeholder lines with sections several functions share (as pandas' ``@doc``), e.g. the metrics'
``X, y`` parameters; the docs site reads the filled docstrings (docs/_griffe_docs.py).
"""
from __future__ import annotations

import inspect
import re
from typing import Callable, TypeVar

__all__ = ["parameter_docs", "doc", "PLACEHOLDER"]

PLACEHOLDER = re.compile(r"^(?P<indent>[ \t]*)\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)\}[ \t]*$", re.MULTILINE)
"""A docstring line that is only ``{name}`` (indented): where :func:`doc` puts the section ``name``."""

_F = TypeVar("_F", bound=Callable)


def doc(**sections: str) -> Callable[[_F], _F]:
    """Decorator: replace each line of the docstring that is only ``{name}`` by ``sections[name]``, every line of
    it indented as the placeholder was (so a section is written flush left, once).

    Only whole-line placeholders are filled: braces in prose (``{"equinorm": ...}``) stay as they are.

    Raises
    ------
    KeyError
        At import, when a placeholder names no section given (the message names both).
    """
    def fill(match: re.Match) -> str:
        name, indent = match["name"], match["indent"]
        if name not in sections:
            raise KeyError(f"docstring placeholder {{{name}}} has no section; doc() was given "
                           f"{', '.join(sorted(sections)) or 'none'}. Pass {name}=... or remove the line.")
        return "\n".join(indent + line if line.strip() else "" for line in sections[name].splitlines())

    def decorate(func: _F) -> _F:
        if func.__doc__:
            func.__doc__ = PLACEHOLDER.sub(fill, func.__doc__)
        return func

    return decorate


def parameter_docs(cls: type) -> dict[str, str]:
    """Descriptions of the numpydoc ``Parameters`` section of ``cls``, by name (``a, b : ...`` gives both)."""
    lines = (inspect.getdoc(cls) or "").splitlines()
    out: dict[str, str] = {}
    names: list[str] = []
    text: list[str] = []
    inside = False
    for i, line in enumerate(lines):
        underline = i + 1 < len(lines) and lines[i + 1].strip() and set(lines[i + 1].strip()) == {"-"}
        if underline:
            if inside:
                break                     # the next section
            inside = line.strip() == "Parameters"
            continue
        if not inside or (line.strip() and set(line.strip()) == {"-"}):
            continue
        if line and not line[0].isspace():
            for n in names:
                out[n] = " ".join(text)
            names = [n.strip() for n in line.split(" : ")[0].split(",")]
            text = []
        elif line.strip():
            text.append(line.strip())
    for n in names:
        out[n] = " ".join(text)
    return out
