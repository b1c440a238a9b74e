"""Stored runs as one self-contained HTML file: :func:`to_html` (:mod:`.write`) around the page model
(:mod:`.model`, every number from :mod:`lab.analysis`) and a small script (``page.js``) that draws it offline."""
from __future__ import annotations

from lab.export.html.model import MAX_LAYOUT_POINTS, page_model, run_model
from lab.export.html.write import MODEL_ELEMENT_ID, check_html_path, render_page, to_html

__all__ = ["to_html", "page_model", "run_model", "render_page", "check_html_path", "MODEL_ELEMENT_ID",
           "MAX_LAYOUT_POINTS"]
