"""Tables over stored runs, for people to read: what exported and shipped notebooks show.

Every number comes from :mod:`lab.analysis` (seed aggregation, g and its best layer, layer
order) or :meth:`lab.store.RunRecord.summary`; this module only picks the rows and lays them
out, one row per run, layer or epoch. Pure pandas, torch-free, no plotting library: the
figures are drawn by ``app.plots`` from these tables.

``runs`` is a mapping ``{key: RunRecord}`` (the key is usually the run id; the shipped
notebooks key by backbone or noise level) or a list of records (keyed by run id).

Examples
--------
>>> import lab                                                        # doctest: +SKIP
>>> from lab.export import tables                                           # doctest: +SKIP
>>> store = lab.RunStore("runs")                                      # doctest: +SKIP
>>> runs = {run_id: store.load(run_id) for run_id in store.ids()}     # doctest: +SKIP
>>> tables.generalization_table(runs)                                 # doctest: +SKIP
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from lab import analysis

__all__ = [
    "as_runs", "run_labels", "run_layers", "run_axis", "runs_axis", "run_generalization", "status_table",
    "layer_table", "curve_table", "epoch_table", "generalization_table", "utilization_table", "contribution_table",
    "cka_matrix", "separation_law_table",
]

STATUS_COLUMNS = ["run", "run_id", "status", "epoch", "best_layer", "g", "g_std", "n_seeds", "heldout_accuracy"]
GENERALIZATION_COLUMNS = ["run", "run_id", "epoch", "seen_accuracy", "g", "g_std", "g_layer", "g_low", "g_high",
                          "best_share"]
LAW_COLUMNS = ["run", "run_id", "split", *analysis.LATEST_LAW_KEYS]
CURVE_COLUMNS = ["key", "run", "layer", "layer_index", "depth", "mean", "std", "n", "low", "high"]


def as_runs(runs: Mapping[Any, Any] | Iterable[Any]) -> dict:
    """``{key: record}`` from a mapping (kept as is) or a list of records (keyed by run id)."""
    if isinstance(runs, Mapping):
        return dict(runs)
    try:
        return {record.run_id: record for record in runs}
    except (TypeError, AttributeError):
        raise ValueError(f"runs must be a dict of lab RunRecords or a list of them. Got {runs!r} instead.") from None


def run_labels(runs) -> dict:
    """Each run's display label: its name (or key when unnamed), with the key appended where names repeat.

    Labels are data (a user typed them): plots pass them through ``plot_text``.
    """
    runs = as_runs(runs)
    names = {key: str(record.name or key) for key, record in runs.items()}
    counts = pd.Series(list(names.values()), dtype=object).value_counts()
    return {key: (name if counts[name] == 1 else f"{name} ({key})") for key, name in names.items()}


def run_layers(record) -> list[str]:
    """The run's layers from input to output (:func:`lab.analysis.layer_order` of its meta and metrics)."""
    return analysis.layer_order(record.meta.get("layers"), record.metrics)


def run_axis(record) -> str:
    """What the run's epoch numbers count: "epoch", or "step" for a loop that :class:`lab.Monitor` evaluated every
    so many optimizer steps (``unit="step"``; the run's meta ``axis``). Tables keep the column name ``epoch``
    whatever it counts; what shows them names it with this."""
    return str(record.meta.get("axis") or "epoch")


def runs_axis(runs) -> str:
    """The unit the runs' epoch numbers share (:func:`run_axis`): "epoch", "step", or "epoch or step" when they
    differ."""
    return " or ".join(dict.fromkeys(run_axis(record) for record in as_runs(runs).values())) or "epoch"


def run_generalization(record, **kwargs: Any) -> pd.DataFrame:
    """:func:`lab.analysis.generalization` of a stored run, with the layers and aliases its meta records."""
    meta = record.meta
    return analysis.generalization(record.metrics, layers=meta.get("layers"),
                                   aliases=meta.get("layer_aliases"), **kwargs)


def _labels(runs: dict, labels: Mapping | None) -> dict:
    return dict(labels) if labels is not None else run_labels(runs)


def status_table(runs, labels: Mapping | None = None) -> pd.DataFrame:
    """One row per run: status and :meth:`RunRecord.summary` (epoch, best layer, g, its spread, seen accuracy).

    Returns
    -------
    DataFrame with columns run, run_id, status, epoch, best_layer, g, g_std, n_seeds, heldout_accuracy
    """
    runs = as_runs(runs)
    labels = _labels(runs, labels)
    rows = []
    for key, record in runs.items():
        summary = record.summary()
        rows.append({"run": labels[key], "run_id": record.run_id, "status": record.status,
                     **{col: summary.get(col) for col in STATUS_COLUMNS[3:]}})
    return pd.DataFrame(rows, columns=STATUS_COLUMNS)


def _latest_epoch(record, split: str) -> int | None:
    """The last epoch at which some metric on ``split`` was measured at every layer."""
    m = record.metrics
    if not len(m):
        return None
    layers = run_layers(record) if record.meta.get("layers") else []     # as analysis.layer_curve judges it
    epochs = [analysis.complete_evaluations(m, layers, metric=name, split=split)["epoch"].max()
              for name in dict.fromkeys(m.loc[m["split"] == split, "metric"])]
    epochs = [int(e) for e in epochs if pd.notna(e)]
    return max(epochs) if epochs else None


def curve_table(runs, metric: str, *, split: str = "unseen", epoch: int | None = None,
                labels: Mapping | None = None) -> pd.DataFrame:
    """One metric at every layer of every run, mean ± std over seeds (:func:`lab.analysis.layer_curve`).

    Parameters
    ----------
    epoch : None = each run's last complete evaluation

    Returns
    -------
    DataFrame with columns key, run (label), layer, layer_index, depth (0 = input, 1 = output), mean, std, n,
    low, high (the bootstrap interval over the unseen images; NaN for runs recorded without it)
    """
    runs = as_runs(runs)
    labels = _labels(runs, labels)
    parts = []
    for key, record in runs.items():
        curve = analysis.layer_curve(record.metrics, layers=record.meta.get("layers"), metric=metric,
                                     split=split, epoch=epoch)
        if len(curve):
            parts.append(curve.assign(key=key, run=labels[key]))
    if not parts:
        return pd.DataFrame(columns=CURVE_COLUMNS)
    return pd.concat(parts, ignore_index=True)[CURVE_COLUMNS]


def layer_table(runs, *, split: str = "unseen", epoch: int | None = None, labels: Mapping | None = None,
                metrics: Iterable[str] | None = None) -> pd.DataFrame:
    """Per run and layer, the mean over seeds of every metric at one epoch (default: the run's last).

    Returns
    -------
    DataFrame with columns run, epoch, layer, then one column per metric (in the order stored)
    """
    runs = as_runs(runs)
    labels = _labels(runs, labels)
    parts = []
    for key, record in runs.items():
        at = _latest_epoch(record, split) if epoch is None else int(epoch)
        if at is None:
            continue
        m = record.metrics
        names = list(metrics) if metrics is not None else list(dict.fromkeys(m.loc[m["split"] == split, "metric"]))
        wide = pd.DataFrame({"layer": run_layers(record)})
        for name in names:
            curve = analysis.layer_curve(m, layers=record.meta.get("layers"), metric=name, split=split, epoch=at)
            wide[name] = wide["layer"].map(dict(zip(curve["layer"], curve["mean"]))).astype(float)
        wide = wide.dropna(subset=names, how="all") if names else wide.iloc[:0]
        wide.insert(0, "epoch", at)
        wide.insert(0, "run", labels[key])
        parts.append(wide)
    if not parts:
        return pd.DataFrame(columns=["run", "epoch", "layer"])
    return pd.concat(parts, ignore_index=True)


def epoch_table(record, metric: str, *, split: str = "unseen") -> pd.DataFrame:
    """One metric of one run at every (epoch, layer), mean ± std over seeds (:func:`lab.analysis.aggregate_seeds`).

    Returns
    -------
    DataFrame with columns epoch, layer, layer_index, mean, std, n, sorted by epoch then layer order
    """
    m = record.metrics
    rows = m[(m["metric"] == metric) & (m["split"] == split)] if len(m) else m
    agg = analysis.aggregate_seeds(rows, by=("epoch", "layer"))
    index = {name: i for i, name in enumerate(run_layers(record))}
    agg["layer_index"] = agg["layer"].map(index).fillna(len(index)).astype(int)
    cols = ["epoch", "layer", "layer_index", "mean", "std", "n"]
    return agg.sort_values(["epoch", "layer_index"])[cols].reset_index(drop=True)


def generalization_table(runs, labels: Mapping | None = None) -> pd.DataFrame:
    """Per run and epoch: seen held-out accuracy (mean over seeds) and g with its spread and best layer.

    g, g_std and g_layer are :func:`lab.analysis.generalization` with the run's layers and aliases, so the
    row at the summary's epoch shows the summary's g and best layer.

    Returns
    -------
    DataFrame with columns run, run_id, epoch, seen_accuracy, g, g_std, g_layer, and the bootstrap's g_low,
    g_high, best_share (NaN for runs recorded without it)
    """
    runs = as_runs(runs)
    labels = _labels(runs, labels)
    rows = []
    for key, record in runs.items():
        training = record.training
        accuracy = pd.Series(dtype=float)
        if len(training) and "heldout_accuracy" in training:
            acc = analysis.aggregate_seeds(training.rename(columns={"heldout_accuracy": "value"}), by=("epoch",))
            accuracy = acc.set_index("epoch")["mean"]
        for row in run_generalization(record).itertuples(index=False):
            rows.append({"run": labels[key], "run_id": record.run_id, "epoch": int(row.epoch),
                         "seen_accuracy": float(accuracy.get(row.epoch, np.nan)), "g": float(row.g),
                         "g_std": float(row.g_std), "g_layer": row.layer, "g_low": float(row.g_low),
                         "g_high": float(row.g_high), "best_share": float(row.best_share)})
    return pd.DataFrame(rows, columns=GENERALIZATION_COLUMNS)


def separation_law_table(runs, labels: Mapping | None = None) -> pd.DataFrame:
    """Per run and split (train, seen, unseen): the law of equi-separation at the split's last evaluation, as
    the run's summary gives it (:func:`lab.analysis.latest_separation_law`: ratio per layer and r, mean and std
    over seeds, the layers fitted, or why the law is absent). A run without NC1 has no row.

    Returns
    -------
    DataFrame with columns run, run_id, split, epoch, ratio, ratio_std, r, r_std, slope, n_layers, n_seeds, reason
    (NaN where undefined)
    """
    runs = as_runs(runs)
    labels = _labels(runs, labels)
    rows = [{"run": labels[key], "run_id": record.run_id, "split": split, **entry}
            for key, record in runs.items() for split, entry in (record.summary()["separation_law"] or {}).items()]
    return pd.DataFrame(rows, columns=LAW_COLUMNS).astype(
        {q: float for q in ("ratio", "ratio_std", "r", "r_std", "slope")})


def utilization_table(record, *, epoch: int | None = None) -> pd.DataFrame:
    """Distance of every layer's weights from their initial values at one epoch (default: the last),
    mean over seeds (Wang & Yang).

    Returns
    -------
    DataFrame with columns layer, layer_index, absolute, relative, in layer order
    """
    u = record.utilization
    cols = ["layer", "layer_index", "absolute", "relative"]
    if not len(u):
        return pd.DataFrame(columns=cols)
    at = int(u["epoch"].max()) if epoch is None else int(epoch)
    long = u[u["epoch"] == at].melt(id_vars=["seed", "layer"], value_vars=["absolute", "relative"],
                                    var_name="metric")
    wide = analysis.aggregate_seeds(long, by=("layer", "metric")).pivot(index="layer", columns="metric",
                                                                         values="mean")
    return _in_layer_order(wide.reset_index(), record)[cols]


def contribution_table(record, metric: str = "heldout_accuracy_delta") -> pd.DataFrame:
    """What re-initialising each layer changed (one contribution metric), mean ± std over seeds.

    Returns
    -------
    DataFrame with columns layer, layer_index, mean, std, n, in layer order
    """
    c = record.contribution
    rows = c[c["metric"] == metric] if len(c) else c
    agg = analysis.aggregate_seeds(rows, by=("layer",))
    return _in_layer_order(agg, record)[["layer", "layer_index", "mean", "std", "n"]]


def _in_layer_order(frame: pd.DataFrame, record) -> pd.DataFrame:
    index = {name: i for i, name in enumerate(run_layers(record))}
    frame = frame.assign(layer_index=frame["layer"].map(index).fillna(len(index)).astype(int))
    return frame.sort_values("layer_index", kind="stable").reset_index(drop=True)


def cka_matrix(record, *, seed: int | None = None, epoch: int | None = None, other=None,
               other_epoch: int | None = None, unbiased: bool = True) -> pd.DataFrame:
    """Linear CKA between the layers of a stored run (or of two runs) on the stored unseen embeddings.

    Parameters
    ----------
    record : the run (rows of the result)
    seed, epoch : which stored embeddings (default: the first seed, the last epoch that has any)
    other : a second run (columns), compared on the same images (same dataset, split and seed);
        None = ``record`` with itself (``other_epoch`` then picks its epoch, e.g. 0 against the last)
    unbiased : :func:`lab.metrics.cka`'s estimator

    Returns
    -------
    DataFrame (layers of ``record`` x layers of ``other``) in layer order, only layers with stored
    embeddings (by default the projected ones); NaN where CKA is undefined (a constant layer).
    """
    from lab.metrics import DegenerateFeaturesError, cka

    def features(rec, at_epoch):
        keys = rec.embedding_keys()
        if keys.empty:
            raise ValueError(f"run {rec.run_id!r} stored no embeddings; CKA needs the features of its layers.")
        at_seed = int(keys["seed"].min()) if seed is None else int(seed)
        keys = keys[keys["seed"] == at_seed]
        at = int(keys["epoch"].max()) if at_epoch is None else int(at_epoch)
        names = set(keys.loc[keys["epoch"] == at, "layer"])
        if not names:
            why = rec.missing_embeddings(at_seed, at)
            raise ValueError(f"run {rec.run_id!r} has no embeddings at seed {at_seed}, epoch {at}; stored epochs: "
                             f"{sorted(set(keys['epoch']))}" + (f". {why}." if why else "."))
        out = {}
        for layer in [n for n in run_layers(rec) if n in names] + sorted(names - set(run_layers(rec))):
            X, _, indices = rec.embeddings(at_seed, at, layer)
            out[layer] = (X.astype(np.float64), indices)
        return out

    rows = features(record, epoch)
    cols = features(other if other is not None else record, other_epoch if other_epoch is not None else epoch)
    table = pd.DataFrame(np.nan, index=list(rows), columns=list(cols))
    for a, (X, ia) in rows.items():
        for b, (Y, ib) in cols.items():
            if not np.array_equal(ia, ib):
                raise ValueError(f"layers {a!r} and {b!r} were stored for different images; CKA compares the "
                                 "same images (same dataset, split, seed and unseen_per_class).")
            try:
                table.loc[a, b] = cka(X, Y, unbiased=unbiased)
            except DegenerateFeaturesError:
                pass                                    # a constant layer: not defined, shown as a gap
    return table
