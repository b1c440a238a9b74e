"""Export stored runs to a Jupyter notebook that reloads, re-plots and reproduces them.

:func:`to_notebook` writes an nbformat v4 notebook that

- opens with a markdown summary of each run (dataset, class split, backbone,
  strategy, seeds, status, best layer and g, when and where it ran, versions);
- reloads the runs from the :class:`lab.store.RunStore` by id and tabulates and
  draws them with HoloViews / hvPlot: metric-vs-layer curves (mean ± std over
  seeds), the layer × epoch heatmap, seen accuracy vs the generalization index g,
  and the 2-D layout (UMAP, else PCA) of a chosen layer; several runs are
  overlaid for comparison;
- ends with a cell holding each run's exact :class:`lab.config.RunConfig` as a
  Python literal, which re-runs it with :func:`lab.run` when ``RERUN = True``.

Security: everything a user typed (run names, class names, paths, ids) reaches
the notebook only as data. Markdown gets it escaped (HTML entities and
backslash-escaped punctuation, see :func:`escape_markdown`); code cells get it
only as Python literals built by :func:`repr` and checked with
:func:`ast.literal_eval` (see :func:`py_literal`), or read it from the store at
run time. A run named ``"); import os; os.system("echo pwned")  #`` therefore
shows that name and runs nothing else.

Examples
--------
>>> import lab
>>> store = lab.RunStore("runs")                                  # doctest: +SKIP
>>> lab.export.to_notebook([run_id], "run.ipynb", store=store)   # doctest: +SKIP
"""
from __future__ import annotations

import ast
import datetime as _dt
import json
import math
import os
import pprint
import re
import string
import sys
import unicodedata
from pathlib import Path
from typing import Any, Iterable

__all__ = ["to_notebook", "build_notebook", "execute_notebook", "escape_markdown", "py_literal"]

_HTML_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}
_BIDI_CONTROLS = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f")
_MAX_LISTED_CLASSES = 24
_PREFERRED_METRICS = ("nmi", "knn_accuracy", "linear_probe_accuracy", "nc1")
_STATUS_NOTES = {
    "running": ("⚠️ **still running**: this notebook shows the epochs completed when it was "
                "exported; execute it again (or export again) to see later epochs."),
    "interrupted": ("⚠️ **interrupted**: the process stopped before the run finished (it was "
                    "killed, crashed or lost its machine); every completed epoch is shown, the "
                    "rest is missing."),
    "failed": "❌ **failed**: the run stopped with an error; the epochs completed before it are shown.",
    "cancelled": "⏹ **cancelled**: the run was stopped by the user; the epochs completed before it are shown.",
    "finished": "✅ finished",
}


# ----------------------------------------------------------------------------------------------
# escaping: user text is data, never code or markup
# ----------------------------------------------------------------------------------------------

def escape_markdown(text: Any) -> str:
    """Return ``text`` as inert Markdown: it renders as the same characters, never as markup.

    HTML-significant characters become entities (no tags, no scripts), every other
    ASCII punctuation character is backslash-escaped (no emphasis, links, headings,
    table cells, math), and line breaks, control and bidirectional-override
    characters become spaces (no new blocks, no spoofed text direction).

    Parameters
    ----------
    text : Any
        Converted with ``str``.

    Returns
    -------
    str
        Safe to place anywhere in a Markdown line (paragraph, heading or table cell),
        but not inside a code span, where backslashes are literal.
    """
    out = []
    for ch in str(text):
        if ch in _HTML_ENTITIES:
            out.append(_HTML_ENTITIES[ch])
        elif ch in string.punctuation:
            out.append("\\" + ch)
        elif ch in _BIDI_CONTROLS or unicodedata.category(ch) in ("Cc", "Zl", "Zp"):
            out.append(" ")
        else:
            out.append(ch)
    return "".join(out)


def py_literal(value: Any, *, width: int = 96) -> str:
    """Python source that evaluates to ``value``, built from data only.

    Parameters
    ----------
    value : str, int, float, bool, None, or lists, tuples and dicts of them
        Strings are rendered with :func:`repr`, which always yields a valid,
        self-contained string literal whatever the string holds.
    width : int
        Line width of the pretty-printed result.

    Returns
    -------
    str
        A literal; :func:`ast.literal_eval` of it equals ``value``.

    Raises
    ------
    ValueError
        If ``value`` holds anything else (objects, NaN or infinite floats), since
        its source would not be a plain literal.
    """
    _check_literal(value)
    text = pprint.pformat(value, width=width, sort_dicts=False)
    if ast.literal_eval(text) != value:          # pragma: no cover - guards pprint itself
        raise ValueError(f"could not write {value!r} as a Python literal")
    return text


def _check_literal(value: Any, where: str = "value") -> None:
    if value is None or isinstance(value, (str, bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where} must be a finite number to be written as a literal; got {value!r}")
        return
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_literal(item, f"{where}[{i}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{where} keys must be strings to be written as a literal; got {key!r}")
            _check_literal(item, f"{where}[{key!r}]")
        return
    raise ValueError(
        f"{where} must be made of str, int, float, bool, None, lists and dicts to be written as a "
        f"literal; got {type(value).__name__}")


_SLOT_RE = re.compile(r"\{\{([A-Z_]+)\}\}")


def _code(template: str, **slots: str) -> str:
    """Fill ``{{NAME}}`` slots of a code template in one pass (values are literals, never re-scanned)."""
    missing = set(_SLOT_RE.findall(template)) - set(slots)
    if missing:                                   # pragma: no cover - a template bug
        raise KeyError(f"template slots without values: {sorted(missing)}")
    source = _SLOT_RE.sub(lambda m: slots[m.group(1)], template).strip("\n")
    ast.parse(source)                             # every code cell must at least be valid Python
    return source


# ----------------------------------------------------------------------------------------------
# reading what the summary needs
# ----------------------------------------------------------------------------------------------

def _as_list(value: Any) -> list:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def _layer_names(meta: dict) -> list[str]:
    return [str(item["name"]) if isinstance(item, dict) else str(item) for item in _as_list(meta.get("layers"))]


def _config_dict(record) -> dict:
    config = record.config
    if hasattr(config, "to_dict"):
        return dict(config.to_dict())
    return dict(getattr(record, "config_dict", None) or config or {})


def _fmt_number(value: Any, digits: int = 3) -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "–"
    if not math.isfinite(number):
        return "–"
    return f"{number:.{digits}f}"


def _fmt_time(value: Any) -> str:
    if not value:
        return "–"
    try:
        when = _dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return escape_markdown(value)
    return escape_markdown(when.strftime("%Y-%m-%d %H:%M:%S %Z").strip())


def _class_list(names: list) -> str:
    shown = ", ".join(escape_markdown(n) for n in names[:_MAX_LISTED_CLASSES])
    more = len(names) - _MAX_LISTED_CLASSES
    return shown + (f", … (+{more} more)" if more > 0 else "")


def _epochs_done(record) -> str:
    training = record.training
    if not len(training):
        return "none yet"
    per_seed = training.groupby("seed")["epoch"].max()
    done = int(per_seed.min()) if len(per_seed) else 0
    return f"{done}"


def _run_summary_markdown(index: int, record, store_root: Path) -> str:
    meta = record.meta
    cfg = _config_dict(record)
    status = str(record.status)
    summary = record.summary()
    name = record.name or record.run_id
    n_epochs = getattr(record.config, "n_epochs", cfg.get("epochs"))
    seeds = _as_list(cfg.get("seeds"))

    split = meta.get("split") if isinstance(meta.get("split"), dict) else {}
    seen = _as_list(split.get("seen") or cfg.get("seen"))
    unseen = _as_list(split.get("unseen") or cfg.get("unseen"))
    if seen or unseen:
        split_text = (f"{len(seen)} seen: {_class_list(seen)}<br>{len(unseen)} unseen: {_class_list(unseen)}")
    else:
        split_text = (f"{escape_markdown(cfg.get('n_unseen'))} unseen classes drawn at random "
                      f"\\(split seed {escape_markdown(cfg.get('split_seed'))}\\)")

    backbone = escape_markdown(cfg.get("backbone"))
    if cfg.get("pretrained"):
        backbone += " \\(pretrained\\)"
    if cfg.get("checkpoint"):
        backbone += f" from checkpoint {escape_markdown(cfg['checkpoint'])}"
    if cfg.get("img_size"):
        backbone += f", {escape_markdown(cfg['img_size'])} px"
    layers = _layer_names(meta)
    if layers:
        backbone += f"; {len(layers)} layers measured, {escape_markdown(layers[0])} … {escape_markdown(layers[-1])}"

    strategy = escape_markdown(cfg.get("strategy"))
    if cfg.get("block") is not None:
        strategy += f" \\(block {escape_markdown(cfg['block'])}\\)"
    details = [f"{escape_markdown(n_epochs)} epoch{'' if n_epochs == 1 else 's'}"]
    lr = getattr(record.config, "learning_rate", cfg.get("lr"))
    if lr:
        details.append(f"lr {escape_markdown(format(lr, 'g'))}")
    if cfg.get("optimizer") and cfg.get("strategy") != "none":
        details.append(escape_markdown(cfg["optimizer"]))
    if cfg.get("label_noise"):
        details.append(f"label noise {escape_markdown(cfg['label_noise'])}")
    if cfg.get("contribution"):
        details.append("layer contribution measured")
    strategy += " · " + ", ".join(details)

    n_images = meta.get("n_images")
    dataset = escape_markdown(cfg.get("dataset"))
    if isinstance(n_images, dict) and n_images:
        dataset += " \\(" + ", ".join(f"{escape_markdown(k)} {escape_markdown(v)}" for k, v in n_images.items()) + " images\\)"

    if summary.get("g") is not None:
        best = (f"**{escape_markdown(summary.get('best_layer'))}**, g = {_fmt_number(summary['g'])}"
                + (f" ± {_fmt_number(summary['g_std'])}" if summary.get("g_std") is not None else "")
                + f" \\(unseen NMI, epoch {escape_markdown(summary.get('epoch'))}, "
                  f"{escape_markdown(summary.get('n_seeds'))} seed{'s' if summary.get('n_seeds') != 1 else ''}\\)")
    else:
        best = "– \\(no unseen NMI stored yet\\)"
    seen_acc = _fmt_number(summary.get("heldout_accuracy"))
    if summary.get("heldout_epoch") is not None:
        seen_acc += f" \\(held\\-out seen images, epoch {escape_markdown(summary['heldout_epoch'])}\\)"

    note = _STATUS_NOTES.get(status, f"**{escape_markdown(status)}**")
    status_text = f"**{escape_markdown(status)}**" if status != "finished" else "finished"
    if status in ("running", "interrupted", "failed", "cancelled"):
        status_text = note + f" Epochs completed: {_epochs_done(record)} of {escape_markdown(n_epochs)}."
    if meta.get("message") and status != "finished":
        status_text += f" Message: {escape_markdown(meta['message'])}"

    ran = f"started {_fmt_time(meta.get('started'))}"
    if meta.get("ended"):
        ran += f", ended {_fmt_time(meta.get('ended'))}"
    elif meta.get("updated"):
        ran += f", last update {_fmt_time(meta.get('updated'))}"
    where = []
    if meta.get("host"):
        where.append(f"host {escape_markdown(meta['host'])}")
    if meta.get("device"):
        where.append(f"device {escape_markdown(meta['device'])}")
    if meta.get("pid"):
        where.append(f"pid {escape_markdown(meta['pid'])}")
    if where:
        ran += " on " + ", ".join(where)

    versions = meta.get("versions") if isinstance(meta.get("versions"), dict) else {}
    version_text = ", ".join(f"{escape_markdown(k)} {escape_markdown(v)}" for k, v in versions.items()
                             if v is not None) or "–"

    rows = [
        ("run id", escape_markdown(record.run_id)),
        ("status", status_text),
        ("dataset", dataset),
        ("class split", split_text),
        ("backbone", backbone),
        ("strategy", strategy),
        ("seeds", escape_markdown(", ".join(map(str, seeds))) or "–"),
        ("best layer", best),
        ("seen accuracy", seen_acc),
        ("ran", ran),
        ("versions", version_text),
        ("stored in", escape_markdown(Path(store_root).resolve() / record.run_id)),
    ]
    lines = [f"## Run {index}: {escape_markdown(name)}", ""]
    if status != "finished":
        lines += [f"> {note}", ""]
    lines += ["| | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows]
    return "\n".join(lines)


def _comparison_markdown(records: list) -> str:
    lines = ["### The runs side by side", "",
             "| run | dataset | backbone | strategy | status | best layer | g | seen accuracy |",
             "|---|---|---|---|---|---|---|---|"]
    for rec in records:
        cfg, summ = _config_dict(rec), rec.summary()
        lines.append("| " + " | ".join([
            escape_markdown(rec.name or rec.run_id), escape_markdown(cfg.get("dataset")),
            escape_markdown(cfg.get("backbone")), escape_markdown(cfg.get("strategy")),
            escape_markdown(rec.status), escape_markdown(summ.get("best_layer") or "–"),
            _fmt_number(summ.get("g")), _fmt_number(summ.get("heldout_accuracy")),
        ]) + " |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# code cells (templates: {{SLOT}} is replaced by a Python literal, nothing else)
# ----------------------------------------------------------------------------------------------

_SETUP = r'''
# hvplot.pandas adds DataFrame.hvplot
import numpy as np, pandas as pd, holoviews as hv, hvplot.pandas  # noqa: E401, F401
from IPython.display import display

import lab

hv.extension("bokeh")
pd.set_option("display.precision", 4)
pd.set_option("display.max_columns", 40)
pd.set_option("display.width", 200)
pd.set_option("display.max_colwidth", None)   # show names in full
'''

_LOAD = r'''
# The store folder and the exported run ids (plain data: point them elsewhere if the runs moved).
STORE_ROOT = {{STORE_ROOT}}
RUN_IDS = {{RUN_IDS}}

store = lab.RunStore(STORE_ROOT)
runs = {run_id: store.load(run_id) for run_id in RUN_IDS}

# Legend label of each run: its name, or its id when the name is missing or shared.
names = [run.name or run_id for run_id, run in runs.items()]
LABELS = {run_id: (name if names.count(name) == 1 else f"{name} ({run_id})")
          for name, run_id in zip(names, RUN_IDS)}
COLORS = dict(zip(RUN_IDS, hv.Cycle("Category10").values * 10))


def plot_text(text):
    """Text for plot labels: Bokeh embeds plot data in a <script> tag, so keep '<' and '>' out of it."""
    return str(text).replace("<", "\uff1c").replace(">", "\uff1e")


def plot_title(text, limit=70):
    """A plot title: shortened, and with braces doubled (HoloViews formats titles with str.format)."""
    text = plot_text(text)
    text = text if len(text) <= limit else text[:limit - 1] + "…"
    return text.replace("{", "{{").replace("}", "}}")


PLOT_LABELS = {run_id: plot_text(label) for run_id, label in LABELS.items()}

for run_id, run in runs.items():
    if run.status != "finished":
        print(f"note: run {LABELS[run_id]!r} is {run.status}: only the epochs it completed are shown")

status = pd.DataFrame([{"run": LABELS[run_id], "run_id": run_id, "status": run.status,
                        **{k: run.summary().get(k) for k in ("epoch", "best_layer", "g", "heldout_accuracy")}}
                       for run_id, run in runs.items()])
status
'''

_TABLE = r'''
metrics = store.compare(RUN_IDS)                 # long: run_id, name, seed, epoch, layer, split, metric, value


def layer_order(run):
    """The run's layers from input to output (as the engine measured them)."""
    listed = [item["name"] if isinstance(item, dict) else str(item) for item in run.meta.get("layers") or []]
    stored = list(dict.fromkeys(run.metrics["layer"]))
    return [name for name in listed if name in stored] + [name for name in stored if name not in listed]


LAYERS = {run_id: layer_order(run) for run_id, run in runs.items()}
FINAL_EPOCH = {run_id: int(run.metrics["epoch"].max()) for run_id, run in runs.items() if len(run.metrics)}
METRIC_NAMES = list(dict.fromkeys(metrics["metric"]))

# Mean and standard deviation over seeds of every (run, split, metric, epoch, layer).
agg = (metrics.groupby(["run_id", "split", "metric", "epoch", "layer"], sort=False)["value"]
       .agg(mean="mean", std="std", n_seeds="count").reset_index())

# Per-layer means over seeds at each run's last epoch, unseen classes.
TABLE_SPLIT = "unseen"
parts = []
for run_id in RUN_IDS:
    if run_id not in FINAL_EPOCH:
        continue
    last = agg[(agg["run_id"] == run_id) & (agg["split"] == TABLE_SPLIT) & (agg["epoch"] == FINAL_EPOCH[run_id])]
    wide = last.pivot(index="layer", columns="metric", values="mean")
    wide = wide.reindex(index=[l for l in LAYERS[run_id] if l in wide.index],
                        columns=[m for m in METRIC_NAMES if m in wide.columns])
    wide.columns.name = None
    wide = wide.reset_index()
    wide.insert(0, "epoch", FINAL_EPOCH[run_id])
    wide.insert(0, "run", LABELS[run_id])
    parts.append(wide)
table = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
table
'''

_CURVES = r'''
# Pick what to draw: any of METRIC_NAMES; SPLIT "unseen" or "seen"; EPOCH None = each run's last epoch.
CURVE_METRICS = {{CURVE_METRICS}}
SPLIT = "unseen"
EPOCH = None


def layer_curves(metric, split=SPLIT, epoch=EPOCH):
    """Mean ± std over seeds of one metric at every layer, one curve per run."""
    overlays = []
    for run_id in RUN_IDS:
        ep = FINAL_EPOCH.get(run_id) if epoch is None else epoch
        d = agg[(agg["run_id"] == run_id) & (agg["split"] == split) & (agg["metric"] == metric) & (agg["epoch"] == ep)]
        d = d.set_index("layer").reindex(LAYERS[run_id]).dropna(subset=["mean"]).reset_index()
        if not len(d):
            continue
        d["std"] = d["std"].fillna(0.0)
        d["layer"] = d["layer"].map(plot_text)
        label, color = PLOT_LABELS[run_id], COLORS[run_id]
        overlays += [
            hv.Curve(d, "layer", ["mean", "std", "n_seeds"], label=label).opts(color=color, tools=["hover"]),
            hv.ErrorBars(d, "layer", ["mean", "std"], label=label).opts(color=color),
            hv.Scatter(d, "layer", ["mean", "std"], label=label).opts(color=color, size=6),
        ]
    if not overlays:
        return hv.Curve([]).relabel(f"no {metric} ({split}) values stored")
    return hv.Overlay(overlays).opts(
        width=480, height=360, xrotation=45, ylabel=metric, xlabel="layer (input → output)",
        legend_position="bottom", legend_cols=1,
        title=plot_title(f"{metric} ({split}) per layer, mean ± std over seeds"))


curves = [layer_curves(m) for m in CURVE_METRICS if m in METRIC_NAMES]
if not curves:
    print("no metrics stored yet")
hv.Layout(curves).opts(shared_axes=False).cols(2) if curves else None
'''

_HEATMAP = r'''
HEATMAP_METRIC = "nmi" if "nmi" in METRIC_NAMES else (METRIC_NAMES or [None])[0]
HEATMAP_SPLIT = "unseen"


def layer_epoch_heatmap(run_id, metric=HEATMAP_METRIC, split=HEATMAP_SPLIT):
    """Mean over seeds of one metric for every (epoch, layer): how training moves it, layer by layer."""
    d = agg[(agg["run_id"] == run_id) & (agg["split"] == split) & (agg["metric"] == metric)].copy()
    d["epoch"] = d["epoch"].astype(str)
    d["layer"] = d["layer"].map(plot_text)
    heat = hv.HeatMap(d, ["epoch", "layer"], ["mean", "std", "n_seeds"], label=PLOT_LABELS[run_id])
    heat = heat.redim.values(layer=[plot_text(l) for l in LAYERS[run_id]])
    return heat.opts(width=440, height=340, colorbar=True, cmap="viridis", tools=["hover"],
                     title=plot_title(f"{LABELS[run_id]}: {metric} ({split}), mean over seeds"),
                     xlabel="epoch", ylabel="layer")


heatmaps = [layer_epoch_heatmap(run_id) for run_id in RUN_IDS if run_id in FINAL_EPOCH]
if not heatmaps:
    print("no metrics stored yet")
hv.Layout(heatmaps).opts(shared_axes=False).cols(2) if heatmaps else None
'''

_GENERALIZATION = r'''
# Seen accuracy (held-out images of the seen classes) vs g = max over layers of the mean unseen NMI,
# epoch by epoch: does better accuracy on the training classes mean better generalization?
rows = []
for run_id, run in runs.items():
    acc = run.training.groupby("epoch")["heldout_accuracy"].mean() if len(run.training) else pd.Series(dtype=float)
    nmi = agg[(agg["run_id"] == run_id) & (agg["split"] == "unseen") & (agg["metric"] == "nmi")]
    for epoch, d in nmi.groupby("epoch"):
        best = d.loc[d["mean"].idxmax()]
        rows.append({"run": LABELS[run_id], "run_id": run_id, "epoch": int(epoch), "seen_accuracy": acc.get(epoch, np.nan),
                     "g": best["mean"], "g_std": best["std"], "g_layer": best["layer"]})
generalization = pd.DataFrame(rows, columns=["run", "run_id", "epoch", "seen_accuracy", "g", "g_std", "g_layer"])
display(generalization.drop(columns="run_id"))

points = generalization.assign(g_layer=generalization["g_layer"].map(plot_text),
                               run=generalization["run_id"].map(PLOT_LABELS))
plot = None
if not len(points):
    print("no unseen NMI stored yet")
elif points["seen_accuracy"].notna().any():
    plot = hv.Overlay([
        (hv.Curve(d, "seen_accuracy", ["g", "epoch", "g_layer"], label=PLOT_LABELS[run_id]).opts(color=COLORS[run_id])
         * hv.Scatter(d, "seen_accuracy", ["g", "epoch", "g_layer"], label=PLOT_LABELS[run_id])
           .opts(color=COLORS[run_id], size=8, tools=["hover"]))
        for run_id in RUN_IDS
        for d in [points[points["run_id"] == run_id].dropna(subset=["seen_accuracy"])]
        if len(d)
    ])
    plot = plot.opts(width=560, height=420, xlabel="seen accuracy (held-out)", ylabel="g (best-layer unseen NMI)",
                     legend_position="bottom", legend_cols=1,
                     title="seen accuracy vs unseen generalization, per epoch")
else:
    plot = points.hvplot.scatter("epoch", "g", by="run", hover_cols=["g_layer"], title="g per epoch (no seen accuracy stored)")
plot
'''

_PROJECTION = r'''
# The 2-D layout of the unseen images at one layer. Change LAYER (any of LAYERS[...]) and re-run.
LAYER = {{LAYER}}
SEED = None       # None: the first stored seed
EPOCH_2D = None   # None: the last epoch with a stored layout of LAYER
METHOD = None     # "umap", "pca" or None (UMAP when stored, else PCA)


def projection_plot(run_id, layer=LAYER):
    run = runs[run_id]
    keys = run.projection_keys()
    keys = keys[keys["layer"] == layer]
    for column, wanted in (("method", METHOD), ("seed", SEED), ("epoch", EPOCH_2D)):
        if wanted is not None:
            keys = keys[keys[column] == wanted]
    if not len(keys):
        return hv.Text(0, 0, plot_text(f"no stored layout of layer {layer!r}")).opts(
            width=420, height=360, title=plot_title(LABELS[run_id]), xaxis=None, yaxis=None)
    seed = int(keys["seed"].min())
    keys = keys[keys["seed"] == seed]
    epoch = int(keys["epoch"].max())
    methods = set(keys.loc[keys["epoch"] == epoch, "method"])
    method = "umap" if "umap" in methods else sorted(methods)[0]
    coords, labels, indices = run.projection(seed, epoch, layer, method)
    names = (run.projection_class_names(seed, epoch, layer, method)
             or (run.meta.get("split") or {}).get("unseen") or [str(i) for i in range(int(labels.max()) + 1)])
    points = pd.DataFrame({"x": coords[:, 0], "y": coords[:, 1],
                           "class": [plot_text(names[i]) for i in labels], "image": indices})
    return points.hvplot.scatter(
        "x", "y", c="class", cmap="Category20", hover_cols=["class", "image"], width=480, height=380,
        xaxis=None, yaxis=None, legend="right",
        title=plot_title(f"{method.upper()} of {layer}, seed {seed}, epoch {epoch}: {LABELS[run_id]}", 50))


hv.Layout([projection_plot(run_id) for run_id in RUN_IDS]).opts(shared_axes=False).cols(2)
'''

_RERUN = r'''
# The exact configuration of each exported run: plain Python literals, edit them to try variations.
CONFIGS = {{CONFIGS}}
RERUN = {{RERUN}}   # True: train and evaluate every configuration again, from scratch

configs = {run_id: lab.RunConfig.from_dict(config) for run_id, config in CONFIGS.items()}
for run_id, cfg in configs.items():
    print(f"{run_id}: {cfg.describe()}")

if RERUN:
    rerun_store = lab.RunStore(STORE_ROOT)
    for run_id, cfg in configs.items():
        new_id = None
        for event in lab.run(cfg, store=rerun_store):
            if event.kind == "run_started":
                new_id = event.run_id
            elif event.kind == "epoch_finished":
                print(f"  seed {event.seed} epoch {event.epoch}: seen accuracy {event.heldout_accuracy}")
            elif event.kind in ("run_finished", "run_failed", "run_cancelled"):
                print(f"{run_id} re-run as {new_id}: {event.kind} {getattr(event, 'message', '')}")
        if new_id is not None:
            old, new = runs[run_id].metrics, rerun_store.load(new_id).metrics
            keys = ["seed", "epoch", "layer", "split", "metric"]
            both = old.merge(new, on=keys, suffixes=("_stored", "_rerun"))
            print(f"  {len(both)} metric values in common, largest difference "
                  f"{(both['value_stored'] - both['value_rerun']).abs().max():.3g}")
'''


def _curve_metrics(records: list) -> list[str]:
    present: list[str] = []
    for rec in records:
        for m in dict.fromkeys(rec.metrics["metric"]) if len(rec.metrics) else []:
            if m not in present:
                present.append(m)
    chosen = [m for m in _PREFERRED_METRICS if m in present]
    return chosen or present[:4]


def _default_layer(records: list) -> str | None:
    for rec in records:
        best = rec.summary().get("best_layer")
        if best:
            return str(best)
    for rec in records:
        layers = _layer_names(rec.meta) or (list(dict.fromkeys(rec.metrics["layer"])) if len(rec.metrics) else [])
        if layers:
            return str(layers[-1])
    return None


def _config_literal(records: list) -> str:
    configs = {}
    for rec in records:
        cfg = _config_dict(rec)
        # JSON round trip: the literal holds exactly what config.json holds (tuples -> lists)
        configs[rec.run_id] = json.loads(json.dumps(cfg, allow_nan=False))
    return py_literal(configs)


# ----------------------------------------------------------------------------------------------
# public API
# ----------------------------------------------------------------------------------------------

def _resolve_store(store):
    from lab.store import RunStore

    if store is None:
        return RunStore()
    if isinstance(store, (str, os.PathLike)):
        return RunStore(store)
    if not hasattr(store, "load") or not hasattr(store, "root"):
        raise ValueError(f"store must be a lab.RunStore, a folder path or None. Got {type(store).__name__} instead.")
    return store


def _run_id_list(run_ids) -> list[str]:
    if isinstance(run_ids, str):
        run_ids = [run_ids]
    try:
        ids = list(run_ids)
    except TypeError:
        raise ValueError(f"run_ids must be a run id or a list of run ids. Got {run_ids!r} instead.") from None
    if not ids:
        raise ValueError("run_ids must name at least one run; `python -m lab runs list` shows the stored runs.")
    bad = [r for r in ids if not isinstance(r, str)]
    if bad:
        raise ValueError(f"run ids must be strings. Got {bad[0]!r} instead.")
    dups = sorted({r for r in ids if ids.count(r) > 1})
    if dups:
        raise ValueError(f"run_ids lists {', '.join(map(repr, dups))} more than once.")
    return ids


def build_notebook(run_ids: str | Iterable[str], store=None, *, rerun: bool = False):
    """Build (but do not write) the notebook of :func:`to_notebook`.

    Parameters
    ----------
    run_ids : str or list of str
        Stored run ids (validated by the store: unknown or malformed ids raise).
    store : lab.RunStore, path or None
        The store holding the runs; None = the default store (``$LAB_RUNS_DIR`` or ``./runs``).
    rerun : bool
        Initial value of the final cell's ``RERUN`` switch (re-train every run when executed).

    Returns
    -------
    nbformat.NotebookNode
        A valid nbformat v4 notebook without outputs.
    """
    import nbformat
    from nbformat import v4

    import lab

    ids = _run_id_list(run_ids)
    store = _resolve_store(store)
    records = [store.load(run_id) for run_id in ids]
    root = Path(store.root).resolve()
    now = _dt.datetime.now(_dt.timezone.utc).astimezone()

    title_names = ", ".join(escape_markdown(r.name or r.run_id) for r in records)
    unfinished = [r for r in records if r.status != "finished"]
    intro = [
        f"# layerscope {'run' if len(records) == 1 else 'runs'}: {title_names}",
        "",
        f"Exported by `lab.export` {escape_markdown(now.strftime('%Y-%m-%d %H:%M:%S %Z'))} "
        f"\\(layerscope {escape_markdown(lab.__version__)}\\). The cells below reload "
        f"{'this run' if len(records) == 1 else 'these runs'} from the run store by id, tabulate and draw "
        "them, and end with the exact configuration, which re-runs from scratch when `RERUN = True`.",
    ]
    if unfinished:
        intro += ["", "> ⚠️ Not every run had finished when this notebook was exported: "
                  + "; ".join(f"{escape_markdown(r.name or r.run_id)} is **{escape_markdown(r.status)}**"
                              for r in unfinished)
                  + ". Their completed epochs are shown."]
    cells = [v4.new_markdown_cell("\n".join(intro))]
    cells += [v4.new_markdown_cell(_run_summary_markdown(i + 1, rec, root)) for i, rec in enumerate(records)]
    if len(records) > 1:
        cells.append(v4.new_markdown_cell(_comparison_markdown(records)))

    layer = _default_layer(records)
    cells += [
        v4.new_markdown_cell("## Reload the runs\n\nThe notebook needs `lab` importable and the run store "
                             "at `STORE_ROOT`; nothing is recomputed, every number below is read from the store."),
        v4.new_code_cell(_code(_SETUP)),
        v4.new_code_cell(_code(_LOAD, STORE_ROOT=py_literal(str(root)), RUN_IDS=py_literal(ids))),
        v4.new_markdown_cell(
            "## Per-layer metrics\n\nMean over seeds of every metric at each layer, at each run's last "
            "evaluated epoch, on the **unseen** classes (NMI, kNN and linear-probe accuracy measure how well "
            "a layer separates classes it was never trained on; NC1, CDNV, rank and NC2 measure collapse)."),
        v4.new_code_cell(_code(_TABLE), metadata={"tags": ["metric-table"]}),
        v4.new_markdown_cell(
            "## Metric vs layer\n\nEach curve is one run; the bars are ± one standard deviation over seeds. "
            "The layer with the highest unseen NMI is the run's *best layer*, and that NMI is its "
            "generalization index *g*. Edit `CURVE_METRICS`, `SPLIT` or `EPOCH` to look elsewhere."),
        v4.new_code_cell(_code(_CURVES, CURVE_METRICS=py_literal(_curve_metrics(records)))),
        v4.new_markdown_cell(
            "## Layer × epoch\n\nHow fine-tuning changes each layer, epoch by epoch (epoch 0 is the backbone "
            "before any training)."),
        v4.new_code_cell(_code(_HEATMAP)),
        v4.new_markdown_cell(
            "## Seen accuracy vs unseen generalization\n\nThe seed papers' question: does accuracy on the "
            "classes a model was trained on predict how well its best layer separates classes it never saw?"),
        v4.new_code_cell(_code(_GENERALIZATION), metadata={"tags": ["generalization-table"]}),
        v4.new_markdown_cell(
            "## The unseen classes at one layer\n\nA 2-D layout (UMAP when the run stored one, else PCA) of "
            "the unseen images' features at `LAYER` (by default the best layer); colours are classes."),
        v4.new_code_cell(_code(_PROJECTION, LAYER=py_literal(layer))),
        v4.new_markdown_cell(
            "## Reproduce\n\nThe exact `RunConfig` of every run, as a Python literal. Set `RERUN = True` and "
            "execute the cell to train and evaluate it again from scratch (a new run in the same store); it "
            "then prints how far the new metric values are from the stored ones."),
        v4.new_code_cell(_code(_RERUN, CONFIGS=_config_literal(records), RERUN=py_literal(bool(rerun))),
                         metadata={"tags": ["reproduce"]}),
    ]
    nb = v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    nb.metadata["layerscope"] = {
        "run_ids": ids, "store": str(root), "exported": now.isoformat(timespec="seconds"),
        "lab_version": lab.__version__, "status": {r.run_id: r.status for r in records},
    }
    nbformat.validate(nb)
    return nb


def _current_python_kernel_manager():
    """A kernel manager whose kernel is this interpreter's ipykernel, whatever kernelspecs are installed."""
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager

    class _ThisPython(KernelSpecManager):
        def get_kernel_spec(self, kernel_name, *args, **kwargs):
            return KernelSpec(argv=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                              display_name="Python 3 (ipykernel)", language="python", resource_dir="")

    return AsyncKernelManager(kernel_name="python3", kernel_spec_manager=_ThisPython())


def execute_notebook(nb, cwd: str | os.PathLike | None = None, *, timeout: int = 600,
                     env: dict[str, str] | None = None):
    """Execute ``nb`` in place with nbclient, in a kernel running this Python interpreter.

    Parameters
    ----------
    nb : nbformat.NotebookNode
        Executed in place (outputs are added to its cells).
    cwd : path, optional
        Working folder of the kernel (default: the current one).
    timeout : int or float
        Seconds allowed per cell.
    env : dict, optional
        Extra environment variables for the kernel. The folder holding ``lab`` is
        prepended to ``PYTHONPATH`` so the kernel imports this very ``lab``.

    Returns
    -------
    nbformat.NotebookNode
        ``nb``, executed.

    Raises
    ------
    nbclient.exceptions.CellExecutionError
        When a cell raises; ``nb`` keeps the outputs up to and including that cell.
    """
    from nbclient import NotebookClient

    import lab

    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds. Got {timeout!r} instead.")
    timeout = int(math.ceil(timeout))
    kernel_env = dict(os.environ)
    kernel_env.update(env or {})
    lab_parent = str(Path(lab.__file__).resolve().parent.parent)
    paths = [p for p in kernel_env.get("PYTHONPATH", "").split(os.pathsep) if p]
    kernel_env["PYTHONPATH"] = os.pathsep.join([lab_parent] + [p for p in paths if p != lab_parent])
    kernel_env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    folder = str(Path(cwd).resolve()) if cwd is not None else os.getcwd()
    client = NotebookClient(nb, km=_current_python_kernel_manager(), timeout=timeout,
                            resources={"metadata": {"path": folder}})
    client.execute(env=kernel_env)
    return nb


def to_notebook(run_ids: str | Iterable[str], path: str | os.PathLike, store=None, execute: bool = False,
                timeout: int = 600, *, rerun: bool = False) -> Path:
    """Write a notebook that reloads, re-plots and can reproduce stored runs.

    Parameters
    ----------
    run_ids : str or list of str
        Run ids in ``store``; with several, the plots overlay them for comparison.
        Runs still running or interrupted export too; the summary says so.
    path : path
        The ``.ipynb`` file to write (its folder is created).
    store : lab.RunStore, path or None
        Where the runs live; None = ``$LAB_RUNS_DIR`` or ``./runs``.
    execute : bool
        Also execute the notebook with nbclient (kernel: this interpreter) and save
        it with its outputs.
    timeout : int
        Seconds allowed per cell when executing.
    rerun : bool
        Initial value of the final cell's ``RERUN`` switch; with ``execute=True``
        the runs are then trained again from scratch.

    Returns
    -------
    pathlib.Path
        The written notebook.

    Raises
    ------
    ValueError
        Malformed run ids, a path that is not ``.ipynb``, a bad store.
    lab.store.RunNotFoundError
        A run id not in the store.
    RuntimeError
        ``execute=True`` and a cell failed; the notebook is saved with its outputs
        (including the error) before this is raised.
    """
    import nbformat

    target = Path(path)
    if target.suffix != ".ipynb":
        raise ValueError(f"path must name a .ipynb file. Got {str(target)!r} instead; add the .ipynb suffix.")
    nb = build_notebook(run_ids, store, rerun=rerun)
    target.parent.mkdir(parents=True, exist_ok=True)
    if execute:
        from nbclient.exceptions import CellExecutionError

        try:
            execute_notebook(nb, target.parent, timeout=timeout)
        except CellExecutionError as exc:
            nbformat.write(nb, str(target))
            raise RuntimeError(
                f"the exported notebook {str(target)!r} failed while executing; it was saved with its outputs, "
                f"open it to see the failing cell. {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}"
            ) from exc
    nbformat.write(nb, str(target))
    return target
