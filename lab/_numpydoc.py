"""The numpydoc ``Parameters`` section of a class, read back as ``{name: description}``.

:meth:`lab.config.RunConfig.field_docs` reads its field help here, so that the command line's
``--help`` and the app's form show the text written once, in the class's docstring.
"""
from __future__ import annotations

import inspect

__all__ = ["parameter_docs"]


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
