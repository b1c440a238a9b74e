"""The page model: every number an exported HTML page shows, gathered from :mod:`lab.analysis` into plain JSON.

The page's script only draws what is here; it computes no measure. The tables are the ones the app draws:
seed means by :func:`lab.analysis.aggregate_seeds` (the per-layer curves, the heatmap and the neural-collapse
panels read the same grid), the verdict by :func:`lab.analysis.latest_generalization`, the agreement table by
:func:`lab.analysis.agreement_table`, the simplex by :func:`lab.analysis.simplex`, the law of equi-separation by
:func:`lab.analysis.separation_law`, :func:`~lab.analysis.separation_law_points` and
:func:`~lab.analysis.law_across_seeds`, the terminal phase by :func:`lab.analysis.terminal_phase`.

Grids are ``[epoch][layer]`` lists in the order of the run's ``epochs`` and ``layers``; ``None`` where a value
is missing or not finite (JSON has no NaN).
"""
from __future__ import annotations

import datetime as _dt
import math

import numpy as np
import pandas as pd

from lab import analysis, catalogue
from lab.export import tables
from lab.export.html._thumbs import layout_thumbnails

__all__ = ["page_model", "run_model", "COLLAPSE_PANELS", "MAX_LAYOUT_POINTS", "LAYOUT_SCALE"]

MAX_LAYOUT_POINTS = 2000
"""The most points of one layout a page carries; a larger layout keeps a fixed random subset of its images
(the same images at every layer and epoch, drawn with seed 0)."""
LAYOUT_SCALE = 9999
"""Layout coordinates travel as integers 0..LAYOUT_SCALE across each layout's own range (a 2-D projection's
axes have no unit; this keeps a point within 1/10,000 of its place at a fifth of the size of a float)."""

# The six panels of the app's collapse card (app/collapse/_rows.py PANELS, Papyan et al. figures 6, 2, 4, 3, 5, 7);
# lab may not import the app, so tests/lab/export/test_html.py checks that the two lists agree.
COLLAPSE_PANELS = (
    ("nc1", "NC1 = tr(Σ_W Σ_B⁺)/K\nwithin-class variability", ("nc1",)),
    ("equinorm", "Equinorm: std/mean of the norms\nclass means; classifier rows black",
     ("nc2_equinorm", "nc2_classifier_equinorm")),
    ("equiangularity", "Equiangularity: mean |cos + 1/(K−1)|\nclass means; classifier rows black",
     ("nc2_equiangularity", "nc2_classifier_equiangularity")),
    ("cosine_std", "Cosine std\nstd of the cosines of the centred means", ("nc2_cosine_std",)),
    ("self_duality", "NC3 self-duality ‖W/‖W‖ − Mᵀ/‖M‖‖²\nclassifier rows against the means", ("nc3_self_duality",)),
    ("ncc", "NC4 disagreement\nhead's answer ≠ nearest class centre", ("nc4_ncc_disagreement",)),
)
_DEFAULT_NC_LAYERS = 4
_TRAINING = ("train_loss", "heldout_loss", "train_accuracy", "heldout_accuracy")


def _num(value) -> float | None:
    """A finite float, or None (JSON has no NaN)."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _plain(value):
    """A config or meta value as JSON: tuples to lists, numpy scalars to Python, anything else to its text."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (bool, str)) or value is None:
        return value
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return _num(value)
    return str(value)


def _grid(frame: pd.DataFrame, column: str, epochs: list[int], layers: list[str]) -> list[list]:
    """``frame[column]`` at every (epoch, layer) as ``[epoch][layer]`` lists."""
    table = {(int(e), str(l)): v for e, l, v in zip(frame["epoch"], frame["layer"], frame[column])}
    return [[_num(table.get((e, l))) for l in layers] for e in epochs]


def _values(record, epochs, layers) -> dict:
    """``{metric: {split: {"mean", "std", "n" grids}}}``: the seed aggregate of every metric the run measured,
    the one table the curves, the heatmap and the collapse panels are drawn from."""
    metrics = record.metrics
    agg = analysis.aggregate_seeds(metrics, by=("metric", "split", "epoch", "layer"))
    out: dict = {}
    for (metric, split), part in agg.groupby(["metric", "split"], sort=False):
        out.setdefault(str(metric), {})[str(split)] = {
            "mean": _grid(part, "mean", epochs, layers), "std": _grid(part, "std", epochs, layers),
            "n": _grid(part, "n", epochs, layers)}
    return out


def _curves(record, values: dict) -> list[dict]:
    """The per-layer curves the app draws (:func:`lab.catalogue.curve_specs`, the splits measured), each with its
    interval rows (``{metric}_low`` / ``_high``, the bootstrap over the unseen images) where the run has them."""
    out = []
    for metric, splits in catalogue.curve_specs():
        present = [s for s in splits if s in values.get(metric, {})]
        if not present:
            continue
        out.append({"metric": metric, "label": catalogue.metric_label(metric), "splits": present,
                    "interval": {s: [f"{metric}_low", f"{metric}_high"] for s in present
                                 if s in values.get(f"{metric}_low", {}) and s in values.get(f"{metric}_high", {})}})
    return out


def _verdict(record) -> dict | None:
    meta = record.meta
    gen = analysis.latest_generalization(record.metrics, layers=meta.get("layers") or None,
                                         aliases=meta.get("layer_aliases"))
    if gen is None:
        return None
    out = {key: _plain(gen[key]) for key in ("epoch", "g", "g_std", "g_low", "g_high", "best_share", "layer",
                                            "n_seeds", "final_layer", "is_final")}
    out["metric"] = catalogue.g_metric()
    out["label"] = catalogue.metric_label(out["metric"])
    out["confidence"] = (analysis.confidence_text(gen["g_low"], gen["g_high"], gen["best_share"])
                         if None not in (gen["g_low"], gen["g_high"], gen["best_share"]) else None)
    accuracy, at = analysis.heldout_accuracy(record.training)
    out["heldout_accuracy"], out["accuracy_epoch"] = _num(accuracy), at
    return out


def _agreement(record) -> dict | None:
    meta = record.meta
    table = analysis.agreement_table(record.metrics, layers=meta.get("layers"), aliases=meta.get("layer_aliases"))
    if table is None or table.empty:
        return None
    label_free = set(catalogue.metric_names(family="label_free"))
    rows = [{"measure": str(name), "label": str(r["label"]), "split": str(r["split"]),
             "best_layer": str(r["best_layer"]), "value": _num(r["value"]), "best_share": _num(r["best_share"]),
             "spearman": _num(r["spearman"]), "label_free": name in label_free} for name, r in table.iterrows()]
    epoch = table.attrs.get("epoch")
    return {"epoch": None if epoch is None else int(epoch), "rows": rows,
            "notes": [str(n) for n in table.attrs.get("notes") or []]}


def _training(record) -> dict | None:
    t = record.training
    if not len(t):
        return None
    epochs = sorted({int(e) for e in t["epoch"]})
    out = {"epochs": epochs, "series": {}}
    for column in _TRAINING:
        if column not in t:
            continue
        agg = analysis.aggregate_seeds(t[["seed", "epoch", column]].rename(columns={column: "value"}), by=("epoch",))
        by_epoch = dict(zip(agg["epoch"].astype(int), agg["mean"]))
        spread = dict(zip(agg["epoch"].astype(int), agg["std"]))
        series = [_num(by_epoch.get(e)) for e in epochs]
        if any(v is not None for v in series):
            out["series"][column] = {"mean": series, "std": [_num(spread.get(e)) for e in epochs]}
    return out if out["series"] else None


def _nc_layers(layers: list[str], measured: set[str]) -> list[str]:
    """The collapse panels' layers: up to four spread over the depth, the head input among them (the app's
    default choice)."""
    options = [name for name in layers if name in measured] or list(layers)
    if len(options) <= _DEFAULT_NC_LAYERS:
        return options
    picks = sorted({round(i * (len(options) - 1) / (_DEFAULT_NC_LAYERS - 1)) for i in range(_DEFAULT_NC_LAYERS)})
    chosen = [options[i] for i in picks]
    if catalogue.HEAD_LAYER in options and catalogue.HEAD_LAYER not in chosen:
        chosen[-1] = catalogue.HEAD_LAYER
    return chosen


def _collapse(record, layers, values) -> dict | None:
    wanted = {m for _key, _title, names in COLLAPSE_PANELS for m in names}
    if not wanted & set(values):
        return None
    metrics = record.metrics
    stored = (record.meta.get("summary") or {}).get("terminal_phase")
    terminal = ({int(s): e for s, e in stored.items()} if isinstance(stored, dict) and stored
                else analysis.terminal_phase(metrics))
    measured = set(metrics.loc[metrics["metric"].isin(wanted), "layer"]) if len(metrics) else set()
    classifier = set(catalogue.metric_names(family="classifier_collapse"))
    panels = [{"key": key, "title": title, "metrics": [m for m in names if m in values],
               "missing": [m for m in names if m not in values],
               "log": bool(getattr(catalogue.METRICS.get(names[0]), "log_scale", False))}
              for key, title, names in COLLAPSE_PANELS]
    return {"panels": panels, "layers": _nc_layers(layers, measured),
            "options": [name for name in layers if name in measured] or list(layers), "classifier": sorted(classifier),
            "terminal": {str(s): (None if e is None else int(e)) for s, e in terminal.items()},
            "splits": [s for s in catalogue.SPLITS if any(s in values.get(m, {}) for m in wanted)]}


def _simplex(record, layers) -> dict | None:
    """The class means' geometry of the first seed at every (layer, split, epoch) the run recorded."""
    means = record.class_means
    if not isinstance(means, pd.DataFrame) or not len(means):
        return None
    seed = int(means["seed"].min())
    rows = means[means["seed"] == seed]
    present = set(rows["layer"].astype(str))
    order = [l for l in layers if l in present] + sorted(present - set(layers))
    out: dict = {"seed": seed, "n_seeds": int(means["seed"].nunique()), "layers": order, "splits": [s for s in catalogue.class_mean_splits()
                                                           if s in set(rows["split"])], "at": {}}
    for row in rows.itertuples(index=False):
        result = analysis.simplex(row.gram)
        out["at"].setdefault(str(row.layer), {}).setdefault(str(row.split), {})[str(int(row.epoch))] = {
            "classes": [str(c) for c in row.classes],
            "cosines": [[_num(v) for v in line] for line in result["cosines"]],
            "ideal": _num(result["ideal"][0, 1]), "deviation": _num(result["deviation"]),
            "coords": [[_num(v) for v in line] for line in result["coords"]]}
    return out


def _law(record) -> dict | None:
    law = analysis.separation_law(record)
    if not len(law):
        return None
    seed = int(law["seed"].min())
    points = analysis.separation_law_points(record, seed=seed)
    across = analysis.law_across_seeds(law)
    mine = law[law["seed"] == seed]
    fits: dict = {}
    for row in mine.itertuples(index=False):
        reason = row.reason if isinstance(row.reason, str) else None
        fits.setdefault(str(int(row.epoch)), {})[str(row.split)] = {
            "ratio": _num(row.ratio), "r": _num(row.r), "slope": _num(row.slope), "n_layers": int(row.n_layers),
            "reason": reason}
    pts: dict = {}
    for row in points.itertuples(index=False):
        pts.setdefault(str(int(row.epoch)), {}).setdefault(str(row.split), []).append(
            {"layer": str(row.layer), "index": int(row.index), "log10_nc1": _num(row.log10_nc1),
             "fitted": _num(row.fitted), "in_fit": bool(row.in_fit)})
    r_curve: dict = {}
    for row in across.itertuples(index=False):
        r_curve.setdefault(str(row.split), []).append([int(row.epoch), _num(row.r)])
    present = set(mine["split"])
    return {"seed": seed, "n_seeds": int(law["seed"].nunique()), "epochs": sorted({int(e) for e in mine["epoch"]}),
            "splits": [s for s in catalogue.SPLITS if s in present] + sorted(present - set(catalogue.SPLITS)),
            "fits": fits, "points": pts, "r": r_curve}


def _layouts(record, layers, thumbnails: bool) -> dict | None:
    """The unseen classes' 2-D layouts of the first seed at every stored (layer, epoch): UMAP where stored, else
    PCA; at most :data:`MAX_LAYOUT_POINTS` images each, the same images everywhere; with ``thumbnails``, the
    pictures of those images where the run has them (:func:`~lab.export.html._thumbs.layout_thumbnails`)."""
    keys = record.projection_keys()
    if not len(keys):
        return None
    seed = int(keys["seed"].min())
    keys = keys[keys["seed"] == seed]
    chosen: dict[tuple[str, int], str] = {}
    for row in keys.itertuples(index=False):
        key = (str(row.layer), int(row.epoch))
        if key not in chosen or row.method == "umap":
            chosen[key] = str(row.method)
    present = {layer for layer, _ in chosen}
    order = [l for l in layers if l in present] + sorted(present - set(layers))
    keep: np.ndarray | None = None
    total = 0
    names: list[str] | None = None
    at: dict = {}
    for layer in order:
        for epoch in sorted(e for l, e in chosen if l == layer):
            method = chosen[(layer, epoch)]
            coords, labels, indices = record.projection(seed, epoch, layer, method)
            if keep is None:
                total = len(indices)
                rng = np.random.default_rng(0)
                keep = (np.sort(rng.choice(np.asarray(indices), MAX_LAYOUT_POINTS, replace=False))
                        if total > MAX_LAYOUT_POINTS else np.sort(np.asarray(indices)))
                names = (record.projection_class_names(seed, epoch, layer, method)
                         or (record.meta.get("split") or {}).get("unseen"))
            mask = np.isin(indices, keep)
            c = np.asarray(coords, dtype=np.float64)[mask]
            finite = np.isfinite(c).all(axis=1)
            c, lab, idx = c[finite], np.asarray(labels)[mask][finite], np.asarray(indices)[mask][finite]
            lo, hi = (c.min(axis=0), c.max(axis=0)) if len(c) else (np.zeros(2), np.ones(2))
            span = np.where(hi > lo, hi - lo, 1.0)
            q = np.rint((c - lo) / span * LAYOUT_SCALE).astype(int) if len(c) else np.zeros((0, 2), int)
            at.setdefault(layer, {})[str(epoch)] = {
                "method": method, "x": q[:, 0].tolist(), "y": q[:, 1].tolist(), "label": lab.astype(int).tolist(),
                "index": idx.astype(int).tolist(), "range": [float(lo[0]), float(hi[0]), float(lo[1]), float(hi[1])]}
    k = 1 + max((max(v["label"], default=-1) for per in at.values() for v in per.values()), default=-1)
    names = [str(n) for n in names] if names and len(names) >= k else [str(i) for i in range(k)]
    pictures = layout_thumbnails(record, keep) if thumbnails and keep is not None else None
    return {"seed": seed, "layers": order, "classes": names, "total": int(total),
            "shown": int(min(total, MAX_LAYOUT_POINTS)), "max_points": MAX_LAYOUT_POINTS, "at": at,
            "thumbnails": pictures}


def run_model(record, label: str | None = None, *, thumbnails: bool = True) -> dict:
    """Everything one run's section of the page shows, as JSON-ready dicts and lists (no NaN); ``thumbnails``:
    carry the pictures of the layouts' images for the hover, where the run has them."""
    layers = tables.run_layers(record)
    metrics = record.metrics
    epochs = sorted({int(e) for e in metrics["epoch"]}) if len(metrics) else []
    values = _values(record, epochs, layers)
    return {
        "run_id": str(record.run_id), "name": str(label or record.name or record.run_id),
        "status": str(record.status), "axis": tables.run_axis(record), "layers": layers, "epochs": epochs,
        "aliases": {str(k): str(v) for k, v in (record.meta.get("layer_aliases") or {}).items()},
        "split": _plain(record.meta.get("split") or {}),
        "values": values, "labels": {m: catalogue.metric_label(m) for m in values},
        "g_metric": catalogue.g_metric(),
        "curves": _curves(record, values), "verdict": _verdict(record), "agreement": _agreement(record),
        "training": _training(record), "collapse": _collapse(record, layers, values),
        "simplex": _simplex(record, layers), "law": _law(record), "layouts": _layouts(record, layers, thumbnails),
        "settings": _plain(record.config_dict), "device": _plain(record.meta.get("device")),
        "started": _plain(record.meta.get("started")), "ended": _plain(record.meta.get("ended")),
    }


def page_model(records, *, title: str | None = None, thumbnails: bool = True) -> dict:
    """The whole page: one :func:`run_model` per record (``records``: a list of RunRecords or ``{key: record}``),
    layerscope's version and the date the file was written (UTC)."""
    runs = tables.as_runs(records)
    labels = tables.run_labels(runs)
    models = [run_model(record, labels[key], thumbnails=thumbnails) for key, record in runs.items()]
    return _page(title or (models[0]["name"] if len(models) == 1 else f"{len(models)} layerscope runs"), models)


def _page(title: str, runs: list, **more) -> dict:
    """A page model's head (its title, layerscope's version, the date the file was written (UTC), the splits'
    words), its ``runs`` and ``more`` (a study's page: ``study``)."""
    import lab

    return {"title": title, "version": lab.__version__,
            "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "splits": {s: catalogue.split_label(s) for s in catalogue.SPLITS}, "runs": runs, **more}
