"""A row that wraps, made of Bokeh layouts so that the plots inside it are laid out.

BokehJS computes a plot's canvas layout only through an unbroken chain of Bokeh layouts from the layout root, or
one level below the last one (bokeh#13384: ``_propagate_layout`` does not recurse). ``pn.FlexBox`` is ReactiveHTML,
outside those layouts: a plot behind one, two computed layouts below the page's root, kept a 0 x 0 frame (a blank
canvas; Compare's explorer drew nothing so). :func:`wrap_row` gives the same look, items side by side that wrap
onto the next line where the page is too narrow, as a Bokeh Column laid out by CSS as a wrapping row.
"""
from __future__ import annotations

__all__ = ["KEEP_SIZE", "wrap_row"]

KEEP_SIZE = {"flex": "0 0 auto"}
"""The ``styles`` of an item of a :func:`wrap_row` that keeps its own width (a fixed-size plot, a fixed-width
note). BokehJS sizes a Column's items along its own axis, the vertical: an item that says no ``flex`` gets its
*height* as its flex basis, which in a row is its width."""

_WRAP = {"flex-direction": "row", "flex-wrap": "wrap"}


def wrap_row(*objects, styles: dict | None = None, **params):
    """A ``pn.Column`` of ``objects`` laid out as a row that wraps (stretching with the page unless ``params`` say
    otherwise): use it instead of a ``pn.FlexBox`` wherever a plot may sit inside.

    A Column and not a Row: Panel gives a Column the least width of its widest item, a Row the sum of all of them
    (a hidden one's too), so the page may be as narrow as one item and the browser wraps what does not fit. Each
    item says its own CSS ``flex`` (``"1 1 380px"`` to grow from 380 px, :data:`KEEP_SIZE` to keep its size); see
    :data:`KEEP_SIZE` for why.
    """
    import panel as pn

    params.setdefault("sizing_mode", "stretch_width")
    return pn.Column(*objects, styles={**(styles or {}), **_WRAP}, **params)
