"""The text of :class:`app.EmbeddingView`: the hover card and the selection's grid (class names reach it escaped)."""
from __future__ import annotations

import html

__all__ = ["hover_html", "selection_html"]


def hover_html(index, name=None, color=None, uri="") -> str:
    if index is None:
        return "<div style='color:#777;font-size:12px'>Hover a point to see its image.</div>"
    img = (f"<img src='{uri}' width='96' height='96' style='image-rendering:pixelated;border:1px solid #ccc'>"
           if uri else "<div style='color:#777;font-size:11px'>(no image)</div>")
    return (f"<div class='ls-hover-card' data-index='{int(index)}'>{img}<div style='font-size:12px'>"
            f"<span style='color:{color or '#333'}'>&#9679;</span> <b>{html.escape(str(name))}</b><br>"
            f"image #{int(index)}</div></div>")


def selection_html(items, counts: dict[str, int], colors: dict[str, str], total: int) -> str:
    if not total:
        return "<div style='color:#777;font-size:12px'>No selection: draw a lasso or a box on a plot.</div>"
    parts = ", ".join(f"<span style='color:{colors.get(c, '#333')}'>&#9679;</span> {html.escape(c)} {n}"
                      for c, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    head = (f"<b>{total:,} image{'s' if total != 1 else ''} selected</b> ({len(counts)} "
            f"class{'es' if len(counts) != 1 else ''}: {parts})")
    if len(items) < total:
        head += f" · showing the first {len(items)}"
    cells = "".join(
        f"<img src='{uri}' title='{html.escape(name)} · #{int(i)}' width='48' height='48' "
        f"style='image-rendering:pixelated;border:2px solid {colors.get(name, '#ccc')};margin:1px'>"
        if uri else f"<span title='{html.escape(name)}' style='display:inline-block;width:48px;font-size:10px'>"
                    f"#{int(i)}</span>" for i, name, uri in items)
    return f"<div class='ls-selection' data-count='{total}'>{head}<div style='margin-top:4px'>{cells}</div></div>"
