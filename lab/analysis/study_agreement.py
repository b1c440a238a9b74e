"""Do the measures agree over a study? (part of :mod:`lab.analysis`)

Per measure, over a study's finished runs: how often its best layer is NMI's best layer, and the median of
its Spearman correlation with NMI across layers. Every run's numbers are :func:`lab.analysis.measure_agreement`'s
(at the run's last complete NMI evaluation): nothing here re-derives a best layer or a correlation.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Iterable

import numpy as np
import pandas as pd

from lab import catalogue
from lab.analysis.agreement import agreement_table
from lab.status import RunStatus
from lab.store.lookup import load_run, run_stamp

__all__ = ["study_agreement", "STUDY_AGREEMENT_COLUMNS"]

STUDY_AGREEMENT_COLUMNS = ["label", "n_runs", "same_best_layer", "share_same", "median_spearman", "n_spearman"]
"""The columns of :func:`study_agreement` (index: measure)."""


def _records(study_or_records, store) -> list:
    if hasattr(study_or_records, "records") and hasattr(study_or_records, "cells"):     # a lab.Study
        return list(study_or_records.records(store=store))
    if isinstance(study_or_records, (str, bytes)) or not isinstance(study_or_records, Iterable):
        raise ValueError("study_agreement needs a lab.Study or a list of its runs (RunRecords or run ids). Got "
                         f"{type(study_or_records).__name__} instead.")
    return [load_run(run, store) for run in study_or_records]


# A finished run's agreement table changes only when the run is written again: the Studies tab re-reads a running
# study each time a cell lands, and without this every finished run's table was computed again each time (half the
# time of lab.study.figures). Keyed by lab.store.lookup.run_stamp, which changes whenever the run is written.
_TABLES: OrderedDict = OrderedDict()
_MAX_TABLES = 2048


def _table(rec) -> pd.DataFrame:
    key = None
    path = getattr(rec, "path", None)
    if path is not None and getattr(rec, "status", None) == RunStatus.FINISHED:      # a live run still grows
        stamp = run_stamp(path)
        key = None if stamp is None else (*stamp, catalogue.g_metric())
    if key is not None and key in _TABLES:
        _TABLES.move_to_end(key)
        return _TABLES[key]
    table = agreement_table(rec.metrics, layers=rec.meta.get("layers"), aliases=rec.meta.get("layer_aliases"))
    if key is not None:
        _TABLES[key] = table
        while len(_TABLES) > _MAX_TABLES:
            _TABLES.popitem(last=False)
    return table


def study_agreement(study_or_records, *, store=None) -> pd.DataFrame:
    """Per measure, over a study's runs: how often its best layer is NMI's, and its median Spearman with NMI.

    Parameters
    ----------
    study_or_records : a :class:`lab.Study` (its finished runs in ``store``), or its runs: RunRecords or run ids
    store : None (the default store), a :class:`lab.store.RunStore` or a folder path; unused for records

    Returns
    -------
    DataFrame, one row per measure other than NMI that some run computed (index ``measure``, in
    ``lab.catalogue.metric_names(compared=True)`` order), with label; n_runs (the runs with both the measure's
    and NMI's best layer at the run's last complete NMI evaluation); same_best_layer (of those, how many have the
    same best layer as NMI, identical taps as the deeper tap); share_same (same_best_layer / n_runs);
    median_spearman (the median over runs of Spearman's rho between the measure's layer order and NMI's, NaN
    where no run gave one) and n_spearman (the runs that gave one). ``attrs["notes"]`` names the runs left out
    (no complete NMI evaluation).
    """
    rows, notes = [], []
    g = catalogue.g_metric()
    for rec in _records(study_or_records, store):
        table = _table(rec)
        if g not in table.index:
            notes.append(f"run {rec.run_id}: no complete {catalogue.metric_label(g)} evaluation, left out")
            continue
        g_best = table.loc[g, "best_layer"]
        for measure, row in table.drop(index=g).iterrows():
            rows.append({"measure": measure, "label": row["label"], "same": row["best_layer"] == g_best,
                         "spearman": float(row["spearman"])})
    if not rows:
        out = pd.DataFrame(columns=["measure", *STUDY_AGREEMENT_COLUMNS]).set_index("measure")
        out.attrs["notes"] = notes
        return out
    frame = pd.DataFrame(rows)
    out = []
    order = [m for m in catalogue.metric_names(compared=True) if m in set(frame["measure"])]
    order += [m for m in dict.fromkeys(frame["measure"]) if m not in order]
    for measure in order:
        own = frame[frame["measure"] == measure]
        rho = own["spearman"].to_numpy(dtype=float)
        rho = rho[np.isfinite(rho)]
        same = int(own["same"].sum())
        out.append({"measure": measure, "label": own["label"].iloc[0], "n_runs": len(own), "same_best_layer": same,
                    "share_same": same / len(own), "median_spearman": float(np.median(rho)) if rho.size else np.nan,
                    "n_spearman": int(rho.size)})
    table = pd.DataFrame(out).set_index("measure")[STUDY_AGREEMENT_COLUMNS]
    table.attrs["notes"] = notes
    return table
