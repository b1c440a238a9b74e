"""lab._numpydoc.doc: a docstring section written once and filled into each function that names it (as pandas'
``@doc``); the metrics' docstrings read whole after import, as help() and the API reference show them."""
from __future__ import annotations

import inspect

import pytest

from lab._numpydoc import PLACEHOLDER, doc


def test_a_placeholder_line_is_filled_with_the_section_indented_as_it_was():
    @doc(xy="Parameters\n----------\nX : array, shape (N, d)\n    The features.\ny : array, shape (N,)")
    def f(X, y):
        """Title, with braces in prose: {"a": 1}.

        {xy}

        Returns
        -------
        float
        """

    assert inspect.getdoc(f) == ('Title, with braces in prose: {"a": 1}.\n\nParameters\n----------\n'
                                 "X : array, shape (N, d)\n    The features.\ny : array, shape (N,)\n\n"
                                 "Returns\n-------\nfloat")


def test_a_placeholder_without_its_section_fails_at_import_naming_both():
    with pytest.raises(KeyError, match=r"placeholder \{missing\} has no section; doc\(\) was given xy"):
        @doc(xy="text")
        def f():
            """Title.

            {missing}
            """


def test_every_metric_docstring_is_filled_and_keeps_its_parameters():
    import lab.metrics
    from lab.metrics._docs import SECTIONS

    docs = {name: inspect.getdoc(getattr(lab.metrics, name)) or "" for name in lab.metrics.__all__}
    assert not [name for name, text in docs.items() if PLACEHOLDER.search(text)]
    assert ("Parameters\n----------\nX : torch.Tensor or numpy.ndarray, shape (N, d)\n"
            "y : array-like of int, shape (N,); every class needs ≥ 2 samples.\n\nReturns") in docs["nc1"]
    assert "One layer's pooled features of N images; computed on X's device." in docs["rankme"]
    assert "DegenerateFeaturesError\n    When all samples are identical." in docs["knn_purity"]
    filled = sum(any(line in text for text in docs.values()) for line in
                 (s.splitlines()[-1] for s in SECTIONS.values()))
    assert filled == len({s.splitlines()[-1] for s in SECTIONS.values()})   # every section is used somewhere
