"""Stored runs and studies as Jupyter notebooks, HTML pages, Markdown and tables.

- :func:`to_notebook` — runs -> a notebook that reloads, re-plots and can re-run them (:mod:`.run_notebook`);
- :func:`to_html` — runs -> one self-contained HTML file that opens offline, players working (:mod:`.html`);
- :func:`study_to_notebook` — a study -> a notebook of the papers' figures (:mod:`.study_notebook`);
- :func:`study_to_html` — a study's figures, seeds as replicates, as one HTML file (:mod:`.html`);
- :func:`execute_notebook` — run a notebook in a kernel of this interpreter (:mod:`.execute`);
- :mod:`lab.export.tables` — the tables notebooks and the app draw (every number from lab.analysis);
- :mod:`lab.export.markdown` — the escaped Markdown summaries.

Importing this package loads no plotting library and no notebook machinery until it is used.

>>> import lab
>>> lab.export.to_notebook([run_id], "run.ipynb", store=store)                     # doctest: +SKIP
>>> lab.export.study_to_notebook("utilization-vs-noise", "study.ipynb", store=store)   # doctest: +SKIP
"""
from __future__ import annotations

from lab.export._cells import py_literal
from lab.export.execute import execute_notebook
from lab.export.html import study_to_html, to_html
from lab.export.markdown import escape_markdown
from lab.export.run_notebook import SUMMARY_TAG, build_notebook, notebook_summary, to_notebook
from lab.export.study_notebook import build_study_notebook, notebook_tables, study_to_notebook, table_metadata

__all__ = ["to_notebook", "to_html", "build_notebook", "execute_notebook", "notebook_summary", "escape_markdown",
           "py_literal", "study_to_html", "study_to_notebook", "build_study_notebook", "notebook_tables",
           "table_metadata", "SUMMARY_TAG"]
