"""The live view's probe: the counts of what it shows, written into the page's hidden probe element, so that
tests (and the browser tests' hook) read the view's Python state without reading its plots."""
from __future__ import annotations

__all__ = ["live_probe"]


def live_probe(view) -> dict:
    """Counts of what a :class:`~app.live.view.LiveView` shows: its status, the layers with curves drawn, the
    heatmap's cells, the layout's points and layer (and whether it follows the best layer), and the redraws still
    waiting (0: every plot is current), and the models of the session's document."""
    m = view.model
    frame = m.metrics
    unseen = frame[(frame["split"] == "unseen") & frame["value"].notna()] if len(frame) else frame
    heat = view.streams.get("heatmap")
    drawn = getattr(view, "_heatmap_pane", None) is not None and view._heatmap_pane.object is not None
    cells = int(heat.data["frame"]["value"].notna().sum()) if heat is not None and drawn else 0
    shown = getattr(view, "embedding", None) is not None and view.embedding.n_points > 0
    return {
        "status": view.status, "run_id": m.run_id, "events": view._n_events,
        "layers": len(m.layers),
        "metric_layers": int(unseen["layer"].nunique()) if len(unseen) and view._curves_drawn else 0,
        "heatmap_cells": cells, "projection_points": view._projection_points if shown else 0,
        "layout_layer": view.picker.layer if shown else None,
        # whether the layout still follows the verdict's best layer (a pick on the player stops it), and that layer
        "follow_best": getattr(getattr(view, "picker", None), "follow_best", None),
        "picked": getattr(getattr(view, "picker", None), "picked", None),     # what made the last pick, if any
        "best_layer": getattr(view, "_verdict_data", {}).get("layer"),
        "epochs_done": m.epochs_done, "message": m.message, "notice": view._message,
        "stage": m.progress.stage if m.progress is not None else None,
        "redraws": len(view._redraws),
        "doc_models": _document_models(view),
    }


def _document_models(view) -> int | None:
    """The models of the session's document (server side), or None outside one: what every message walks, so it
    must stay the size of what the page shows."""
    doc = getattr(getattr(view, "_dispatcher", None), "doc", None)
    return len(doc.models) if doc is not None else None
