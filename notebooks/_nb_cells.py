"""What the shipped notebooks share: the cell constructors and the cells every notebook repeats.

Used by the notebook builders (``_nb_*.py``) that ``notebooks/_build.py`` assembles.
"""
from __future__ import annotations

from nbformat import v4

__all__ = ["FAST_SWITCH", "RUN_HELPER", "PLOTS", "md", "code"]

FAST_SWITCH = '''
import os

import lab

# FAST = True shrinks every run so the notebook finishes in about a minute on a 2-core CPU
# (the notebook tests set LAB_FAST=1). Leave it off to see the full setting described in the text.
FAST = os.environ.get("LAB_FAST", "0") == "1"
print("FAST mode" if FAST else "full setting")
'''

# A progress bar over lab.run's event stream (the library's, so every notebook shows the same).
RUN_HELPER = '''
# run_with_progress(cfg) streams lab.run(cfg) with a progress bar and returns the stored run id
from lab.progress import run_with_progress
'''

# The plotting module the app draws with, and the tables it draws from (numbers from lab.analysis).
PLOTS = '''
import holoviews as hv

import app
from app import plots
from lab.export import tables

app.extension()  # Panel, Bokeh and HoloViews JavaScript and CSS from the installed packages: works offline
'''


def md(text: str):
    """A markdown cell of ``text`` without its leading and trailing blank lines."""
    return v4.new_markdown_cell(text.strip("\n"))


def code(text: str, *tags: str):
    """A code cell of ``text`` (stripped like :func:`md`), tagged with ``tags`` (e.g. ``"claim"``)."""
    cell = v4.new_code_cell(text.strip("\n"))
    if tags:
        cell.metadata["tags"] = list(tags)
    return cell
