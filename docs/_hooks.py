"""MkDocs hooks for the docs site (mkdocs.yml ``hooks:``); no network, no plugin to install.

- Links from a page to a repository file outside ``docs/`` (``../benchmarks/results/preset.txt``, a
  notebook, a study spec) are kept as they are in the Markdown, so that they work on a code host and in
  an editor; in the site they point at a copy of that file under ``repo/``. A link to a file that does
  not exist is left alone, and ``mkdocs build --strict`` fails on it as on any broken link.
- Sphinx roles in docstrings (``:func:`load```) render as plain code in the API reference.
"""
from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File

_LINK = re.compile(r"(\]\()([^)\s#]+)((?:#[^)\s]*)?\))")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
_ROLE = re.compile(r":(?:func|class|meth|mod|data|attr|exc|obj|py:\w+):(?=<code>)")
_FENCE = re.compile(r"^(```|~~~)")


def _repo_link(target: str, page_uri: str, docs: Path, root: Path) -> str | None:
    """The site path (``repo/...``) of a link that leaves docs/ for an existing repository file."""
    if _SCHEME.match(target) or target.startswith("/"):
        return None
    resolved = (docs / posixpath.dirname(page_uri) / target).resolve()
    if resolved.is_relative_to(docs) or not resolved.is_relative_to(root) or not resolved.is_file():
        return None
    return "repo/" + resolved.relative_to(root).as_posix()


def on_page_markdown(markdown, page, config, files):
    docs = Path(config["docs_dir"]).resolve()
    root = docs.parent
    page_uri = page.file.src_uri
    out, fenced = [], False
    for line in markdown.splitlines(keepends=True):
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
        if not fenced:
            line = _LINK.sub(lambda m: _rewrite(m, page_uri, docs, root, config, files), line)
        out.append(line)
    return "".join(out)


def _rewrite(m, page_uri, docs, root, config, files):
    site_uri = _repo_link(m.group(2), page_uri, docs, root)
    if site_uri is None:
        return m.group(0)
    if files.get_file_from_path(site_uri) is None:
        files.append(File.generated(config, site_uri, abs_src_path=str(root / site_uri[len("repo/"):])))
    relative = posixpath.relpath(site_uri, posixpath.dirname(page_uri) or ".")
    return m.group(1) + relative + m.group(3)


def on_page_content(html, page, config, files):
    return _ROLE.sub("", html)
