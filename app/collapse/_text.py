"""The neural-collapse view's text: the key of its lines and the one-line notes (what was measured, no conclusion)."""
from __future__ import annotations

import html

from lab import catalogue

from app.base import plots

__all__ = ["key_html", "notes_html", "deviation_html", "INTRO", "SIMPLEX_INTRO"]

INTRO = ("Neural collapse over training (Papyan, Han &amp; Donoho 2020), measured at each evaluation on a fixed sample "
         "of the seen classes' training images, on held-out images of the same classes and on the unseen classes. "
         "Lines: mean over seeds.")
SIMPLEX_INTRO = ("Cosines between the centred class means at one layer and {axis}, beside the simplex equiangular "
                 "tight frame's (1 on the diagonal, −1/(K−1) off it).")
_DASHES = {"solid": "", "dashed": "6,3", "dotted": "2,3"}


def _line(color: str, dash: str, width: int = 2) -> str:
    pattern = _DASHES.get(dash, "")
    dasharray = f' stroke-dasharray="{pattern}"' if pattern else ""
    return (f'<svg width="30" height="8" style="vertical-align:middle"><line x1="0" y1="4" x2="30" y2="4" '
            f'stroke="{color}" stroke-width="{width}"{dasharray}/></svg>')


def key_html(layers: list[str], *, classifier: bool, splits=catalogue.SPLITS) -> str:
    """The legend of the panels: the dash of each split measured (``splits``), the colour of each layer, the
    classifier and the mark."""
    splits = " &nbsp; ".join(f"{_line('#444', plots.SPLIT_DASH_COLLAPSE[s])} {html.escape(plots.SPLIT_NAMES[s])}"
                             for s in splits)
    colors = plots.layer_colors(layers)
    layer_keys = " &nbsp; ".join(f"{_line(colors[name], 'solid', 3)} {html.escape(str(name))}" for name in layers)
    head = f" &nbsp; {_line(plots.CLASSIFIER_COLOR, 'solid', 3)} classifier rows (head input)" if classifier else ""
    mark = f" &nbsp; {_line('#b2182b', 'dashed', 2)} {html.escape(plots.TERMINAL_LABEL)}"
    return (f"<div class='ls-collapse-key' style='font-size:12px;line-height:1.9'>"
            f"<b>Splits:</b> {splits}<br><b>Layers:</b> {layer_keys or '<i>none chosen</i>'}{head}{mark}</div>")


def notes_html(notes: dict[str, str | None], terminal: dict[int, int | None]) -> str:
    """The reasons a part of the view is empty, and the terminal-phase epoch of each seed, one line each."""
    lines = [html.escape(text) for text in notes.values() if text]
    if terminal:
        reached = {seed: epoch for seed, epoch in terminal.items() if epoch is not None}
        if reached:
            where = ", ".join(f"seed {seed}: epoch {epoch}" for seed, epoch in sorted(reached.items()))
            lines.append(f"First epoch with 100 % accuracy of the head on the training sample: {where}.")
        if len(reached) < len(terminal):
            missing = ", ".join(str(seed) for seed in sorted(set(terminal) - set(reached)))
            lines.append(f"The training-sample accuracy did not reach 100 % (seed {missing}).")
    return "".join(f"<div class='ls-collapse-note' style='color:#555'>{line}</div>" for line in lines)


def deviation_html(result: dict | None, layer, epoch, split: str, axis: str = "epoch") -> str:
    """The deviation of the measured cosines from the simplex ETF's, with where it was measured (``axis``: what the
    run's evaluation numbers count, "epoch" or "step")."""
    if result is None:
        return f"<i>No class means recorded for this layer, split and {axis}.</i>"
    k = len(result["classes"])
    return (f"<span class='ls-simplex-deviation'>{html.escape(str(layer))}, {axis} {epoch}, "
            f"{html.escape(plots.SPLIT_NAMES.get(split, split))}, seed {result['seed']}, K = {k}: mean |cos − ideal| "
            f"off the diagonal = <b>{float(result['deviation']):.4f}</b> (0 for a simplex ETF)</span>")
