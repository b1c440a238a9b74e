"""Do the measures agree? The small table under the live view's verdict.

:class:`AgreementTable` shows :func:`lab.analysis.measure_agreement` of the shown run's latest complete
evaluation: per measure, its best layer, the share of bootstrap resamples in which that layer is best, and
Spearman's rho between its layer order and NMI's. It is read from the run store when an evaluation completes,
never on a layer's event; the text says what was measured and draws no conclusion.
"""
from __future__ import annotations

import html
import math

import pandas as pd
import panel as pn

from lab import catalogue

__all__ = ["AgreementTable", "agreement_html"]

_LABEL_FREE = " <span style='color:#777'>(no labels)</span>"


class AgreementTable(pn.viewable.Viewer):
    """The measures' best layers of one run's latest evaluation (``table``: lab's DataFrame, None: none)."""

    def __init__(self, **params):
        super().__init__(**params)
        self.table: pd.DataFrame | None = None
        self._pane = pn.pane.HTML("", sizing_mode="stretch_width", margin=(0, 10), css_classes=["ls-agreement"])

    def show(self, store, run_id: str | None, axis: str = "epoch") -> None:
        """Read ``run_id``'s agreement from ``store`` (None: none known) and show it; a run that cannot be read
        gives one line. ``axis``: what the run's evaluation numbers count ("epoch", or "step")."""
        from lab import analysis
        from lab.errors import user_message

        self.table = None
        if store is None or run_id is None:
            self._pane.object = ""
            return
        try:
            self.table = analysis.measure_agreement(run_id, store=store)
        except Exception as exc:     # the run not (yet) in that store: one line (a bug: the file with its traceback)
            self._pane.object = (f"<span style='color:#777;font-size:12px'>No best layer by each measure: "
                                 f"{html.escape(user_message(exc))}</span>")
            return
        self._pane.object = agreement_html(self.table, axis=axis)

    def clear(self) -> None:
        self.table = None
        self._pane.object = ""

    def __panel__(self):
        return self._pane


def _percent(value) -> str:
    # "—": the measure has no bootstrap (all but NMI and kNN accuracy; the label-free ones among them)
    return f"{100 * float(value):.0f} %" if value is not None and math.isfinite(float(value)) else "—"


def _rho(value) -> str:
    return f"{float(value):.2f}" if value is not None and math.isfinite(float(value)) else ""


def agreement_html(table: pd.DataFrame, axis: str = "epoch") -> str:
    """:func:`lab.analysis.measure_agreement` as a small HTML table: measure, best layer, best share (%, "—"
    without a bootstrap), Spearman with NMI (blank where it cannot be given), then the table's notes. The
    label-free measures (no label read) say so after their name."""
    if table is None or table.empty:
        return ""
    epoch = table.attrs.get("epoch")
    head = (f"<b>Best layer by each measure, this evaluation</b>"
            f"{f' ({axis} {int(epoch)})' if epoch is not None else ''}")
    rows = "".join(
        f"<tr data-measure='{html.escape(str(name))}'><td>{html.escape(str(r['label']))}"
        f"{' (seen, epoch 0)' if r['split'] == 'seen' else ''}{_LABEL_FREE if name in catalogue.metric_names(family='label_free') else ''}</td><td>{html.escape(str(r['best_layer']))}</td>"
        f"<td style='text-align:right'>{_percent(r['best_share'])}</td>"
        f"<td style='text-align:right'>{_rho(r['spearman'])}</td></tr>"
        for name, r in table.iterrows())
    cells = "style='padding:1px 10px 1px 0;text-align:left'"
    notes = "".join(f"<li>{html.escape(str(n))}</li>" for n in table.attrs.get("notes") or [])
    notes = f"<ul style='margin:2px;color:#777'>{notes}</ul>" if notes else ""
    return (f"<div class='ls-agreement-table' style='font-size:12px;margin:4px 0'>{head}"
            f"<table style='border-collapse:collapse'><tr><th {cells}>measure</th><th {cells}>best layer</th>"
            f"<th {cells}>best in (bootstrap resamples)</th><th {cells}>Spearman ρ with NMI (layer order)</th></tr>"
            f"{rows}</table>{notes}</div>")
