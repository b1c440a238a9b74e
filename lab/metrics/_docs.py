"""Docstring sections the metrics share, written once and filled in by :func:`metric_doc` (as pandas' ``@doc``).

A metric's docstring names a section on a line of its own, ``{X_y}``; :func:`lab._numpydoc.doc` puts the section
there, indented as the placeholder. The docs site shows the filled docstrings (docs/_griffe_docs.py).
"""
from __future__ import annotations

from lab._numpydoc import doc

_X = "X : torch.Tensor or numpy.ndarray, shape (N, d)"
_Y = "y : array-like of int, shape (N,)"
_PARAMETERS = "Parameters\n----------"

SECTIONS = {
    "X_y": f"{_PARAMETERS}\n{_X}\n{_Y}",
    "X_y_two_per_class": f"{_PARAMETERS}\n{_X}\n{_Y}; every class needs ≥ 2 samples.",
    "X_y_two_classes": f"{_PARAMETERS}\n{_X}\n{_Y}, at least 2 classes",
    "X_one_layer": f"{_PARAMETERS}\n{_X}\n    One layer's pooled features of N images; computed on X's device.",
    "raises_degenerate": "Raises\n------\nDegenerateFeaturesError",
    "raises_identical": "Raises\n------\nDegenerateFeaturesError\n    When all samples are identical.",
}
"""The shared sections by placeholder name: the parameters X (and y) of a metric, and the heading of its
``DegenerateFeaturesError``."""

metric_doc = doc(**SECTIONS)
"""Decorator filling a metric's docstring placeholders from :data:`SECTIONS`."""
