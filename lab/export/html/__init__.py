"""Stored runs, or a study, as one self-contained HTML file: :func:`to_html` and :func:`study_to_html`
(:mod:`.write`) around the page model (:mod:`.model`, :mod:`.study_model`: every number from :mod:`lab.analysis`) and
a small script (``draw.js``, ``collapse.js``, ``study.js``, ``page.js``) that draws it offline."""
from __future__ import annotations

from lab.export.html.model import MAX_LAYOUT_POINTS, page_model, run_model
from lab.export.html.study_model import study_model
from lab.export.html.write import MODEL_ELEMENT_ID, check_html_path, render_page, study_to_html, to_html

__all__ = ["to_html", "study_to_html", "page_model", "run_model", "study_model", "render_page", "check_html_path",
           "MODEL_ELEMENT_ID", "MAX_LAYOUT_POINTS"]
