"""One self-contained HTML file of stored runs: a small template, the page model as JSON and a hand-written script.

Why not Bokeh (as the app draws): lab may not import Panel or Bokeh (ARCHITECTURE.md), the page needs only lines,
interval bands, points and heatmap cells, and BokehJS inlined would add about 1.5 MB to every file. So the file is
``page.css`` and the scripts ``draw.js``, ``collapse.js`` and ``page.js`` (beside this module, read with
importlib.resources) around the JSON of :func:`lab.export.html.model.page_model`; the script draws inline SVG and the
players are ``<input type=range>``.
Nothing in the file refers outside it: no font, no CDN, no URL.
"""
from __future__ import annotations

import json
import os
from importlib import resources
from pathlib import Path

from lab.export.html.model import page_model

__all__ = ["to_html", "study_to_html", "render_page", "check_html_path", "MODEL_ELEMENT_ID"]

MODEL_ELEMENT_ID = "ls-model"
"""The id of the ``<script type="application/json">`` element that holds the page model."""

_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="layerscope {version}">
<title>{title}</title>
<style>
{css}
</style>
</head>
<body>
<noscript><p>This page draws its figures with JavaScript, which is turned off; the numbers are in the JSON
element <code>#{model_id}</code> of its source.</p></noscript>
<main id="ls-page"></main>
<script type="application/json" id="{model_id}">{model}</script>
<script>
{js}
</script>
</body>
</html>
"""


_SCRIPTS = ("draw.js", "collapse.js", "study.js", "page.js")
"""The page's script, in this order: the drawing kit, the neural-collapse card, a study's figures, the page."""


def _asset(name: str) -> str:
    return resources.files("lab.export.html").joinpath(name).read_text(encoding="utf-8")


def _model_json(model: dict) -> str:
    """The model as JSON safe inside ``<script>``: ``<``, ``>``, ``&`` and ``/`` escaped (a run or class name such
    as ``</script><img ...>`` stays a string, and no ``http://`` of a name reads as a link in the file)."""
    text = json.dumps(model, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    return (text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("/", "\\/"))


def _escape_text(text: str) -> str:
    """Text for the HTML template (the title): markup characters as entities, ``/`` too (no URL in the file)."""
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
            .replace("/", "&#47;"))


def render_page(model: dict) -> str:
    """The HTML text of a page model (:func:`lab.export.html.model.page_model`)."""
    return _TEMPLATE.format(version=_escape_text(str(model.get("version", ""))),
                            title=_escape_text(str(model.get("title", "layerscope"))), css=_asset("page.css"),
                            js="\n".join(_asset(name) for name in _SCRIPTS), model=_model_json(model),
                            model_id=MODEL_ELEMENT_ID)


def check_html_path(path: str | os.PathLike) -> Path:
    """``path`` as a Path when it names a ``.html`` (or ``.htm``) file; a ValueError that says how to fix it
    otherwise."""
    target = Path(path)
    if target.suffix.lower() not in (".html", ".htm"):
        raise ValueError(f"path must name a .html file. Got {str(target)!r} instead; add the .html suffix.")
    return target


def to_html(runs, path: str | os.PathLike, *, store=None, title: str | None = None, thumbnails: bool = True) -> Path:
    """Write stored runs into one self-contained HTML file that opens offline, players working, with no server.

    Parameters
    ----------
    runs : str, RunRecord, or a list of them
        Runs in ``store``, by id or record; each gets its section of the page.
    path : path
        The ``.html`` file to write (its folder is created; written beside it and renamed into place).
    store : lab.RunStore, path or None
        Where the runs live; None = ``$LAB_RUNS_DIR`` or ``./runs``.
    title : str, optional
        The page's title (default: the run's name).
    thumbnails : bool
        Show each layout point's picture on hover: the pictures the run kept, else its unseen images read again
        from its dataset where that loads here (about 1 kB an image). False leaves them out (a smaller file).

    Returns
    -------
    pathlib.Path
        The file written.

    Raises
    ------
    ValueError
        A path that is not ``.html``, no runs, a malformed run id or a bad store.
    lab.store.RunNotFoundError
        A run id not in the store.

    Examples
    --------
    >>> lab.export.to_html([run_id], "run.html", store=store)          # doctest: +SKIP
    """
    from lab.store.lookup import load_run, open_store

    target = check_html_path(path)
    items = [runs] if isinstance(runs, str) or hasattr(runs, "run_id") else list(runs)
    if not items:
        raise ValueError("runs must name at least one run (a run id or a RunRecord); got none. "
                         "`python -m lab runs list` shows the stored runs.")
    opened = open_store(store) if any(isinstance(r, str) for r in items) else None
    records = [load_run(r, opened) for r in items]
    return _write_page(target, page_model(records, title=title, thumbnails=thumbnails))


def study_to_html(study, path: str | os.PathLike, *, store=None, summary="last") -> Path:
    """Write a study's figures into one self-contained HTML file, seeds as replicates (each condition's mean over
    its seeds with the 95 % Student-t interval of that mean and n), as the Studies tab shows them.

    Parameters
    ----------
    study : lab.Study, or the name of a study run into ``store`` or its spec file
    path : path
        The ``.html`` file to write.
    store : lab.RunStore, path or None
        Where the study's runs live; None = ``$LAB_RUNS_DIR`` or ``./runs``.
    summary : "last", "best" or int
        The epoch each run is read at (:func:`lab.study.figures`): its last complete evaluation (default), its
        best by unseen g, or a given epoch; the page says which, and names the runs left out.

    Returns
    -------
    pathlib.Path
        The file written.

    Examples
    --------
    >>> lab.export.study_to_html("which-layer", "study.html", store=store)     # doctest: +SKIP
    """
    from lab.export.html.model import _page
    from lab.export.html.study_model import study_model
    from lab.study import find_study

    target = check_html_path(path)
    if isinstance(study, str):
        study = find_study(study, store=store)
    return _write_page(target, _page(f"Study: {study.name}", [],
                                     study=study_model(study, store=store, summary=summary)))


def _write_page(target: Path, model: dict) -> Path:
    """The page of ``model`` written to ``target`` in one rename (a reader never sees half a file)."""
    from lab.store import atomic_file

    with atomic_file(target) as f:
        f.write(render_page(model).encode("utf-8"))
    return target
