"""The Markdown of an exported notebook: each run's summary and the runs side by side.

Everything a user typed reaches it through :func:`escape_markdown` (entities and backslash
escapes), so that it renders as the same characters and never as markup. Numbers come from
:meth:`lab.store.RunRecord.summary` (that is :mod:`lab.analysis`).
"""
from __future__ import annotations

import datetime as _dt
import math
import string
import unicodedata
from pathlib import Path
from typing import Any

from lab import analysis
from lab.export.tables import run_axis
from lab.status import RunStatus

__all__ = ["escape_markdown", "run_summary_markdown", "comparison_markdown", "config_dict"]

_HTML_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}
_BIDI_CONTROLS = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f")
_MAX_LISTED_CLASSES = 24
_STATUS_NOTES = {        # {units}: what the run's epoch numbers count, "epochs" or "steps" (tables.run_axis)
    RunStatus.RUNNING: ("⚠️ **still running**: this notebook shows the {units} completed when it was "
                "exported; execute it again (or export again) to see later {units}."),
    RunStatus.INTERRUPTED: ("⚠️ **interrupted**: the process stopped before the run finished (it was "
                    "killed, crashed or lost its machine); every completed {unit} is shown, the "
                    "rest is missing."),
    RunStatus.FAILED: "❌ **failed**: the run stopped with an error; the {units} completed before it are shown.",
    RunStatus.CANCELLED: "⏹ **cancelled**: the run was stopped by the user; the {units} completed before it are shown.",
    RunStatus.FINISHED: "✅ finished",
}


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


# ----------------------------------------------------------------------------------------------
# reading what the summary needs
# ----------------------------------------------------------------------------------------------

def _as_list(value: Any) -> list:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def config_dict(record) -> dict:
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


def run_summary_markdown(index: int, record, store_root: Path) -> str:
    meta = record.meta
    cfg = config_dict(record)
    status = str(record.status)
    summary = record.summary()
    name = record.name or record.run_id
    n_epochs = getattr(record.config, "n_epochs", cfg.get("epochs"))
    axis = run_axis(record)         # what its epoch numbers count: "epoch", or "step" (a loop's optimizer steps)
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
    layers = analysis.layer_order(meta.get("layers"))
    if layers:
        backbone += f"; {len(layers)} layers measured, {escape_markdown(layers[0])} … {escape_markdown(layers[-1])}"

    strategy = escape_markdown(cfg.get("strategy"))
    if cfg.get("block") is not None:
        strategy += f" \\(block {escape_markdown(cfg['block'])}\\)"
    if axis == "epoch":
        details = [f"{escape_markdown(n_epochs)} epoch{'' if n_epochs == 1 else 's'}"]
    else:                           # a monitored loop: open-ended, counted in its own unit
        details = [f"counted in {escape_markdown(axis)}s, the last evaluated at {escape_markdown(axis)} "
                   f"{escape_markdown(meta.get('epochs', summary.get('epoch')))}"]
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
                + f" \\(unseen NMI, {escape_markdown(axis)} {escape_markdown(summary.get('epoch'))}, "
                  f"{escape_markdown(summary.get('n_seeds'))} seed{'s' if summary.get('n_seeds') != 1 else ''}\\)")
    else:
        best = "– \\(no unseen NMI stored yet\\)"
    seen_acc = _fmt_number(summary.get("heldout_accuracy"))
    if summary.get("heldout_epoch") is not None:
        seen_acc += (f" \\(held\\-out seen images, {escape_markdown(axis)} "
                     f"{escape_markdown(summary['heldout_epoch'])}\\)")

    note = (_STATUS_NOTES[status].format(unit=escape_markdown(axis), units=escape_markdown(axis + "s"))
            if status in _STATUS_NOTES else f"**{escape_markdown(status)}**")
    status_text = f"**{escape_markdown(status)}**" if status != "finished" else "finished"
    if status != RunStatus.FINISHED and RunStatus.read(status) is not None:
        status_text = note + (f" Epochs completed: {_epochs_done(record)} of {escape_markdown(n_epochs)}."
                              if axis == "epoch" else
                              f" Last {escape_markdown(axis)} evaluated: {escape_markdown(summary.get('epoch'))}.")
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


def comparison_markdown(records: list) -> str:
    lines = ["### The runs side by side", "",
             "| run | dataset | backbone | strategy | status | best layer | g | seen accuracy |",
             "|---|---|---|---|---|---|---|---|"]
    for rec in records:
        cfg, summ = config_dict(rec), rec.summary()
        lines.append("| " + " | ".join([
            escape_markdown(rec.name or rec.run_id), escape_markdown(cfg.get("dataset")),
            escape_markdown(cfg.get("backbone")), escape_markdown(cfg.get("strategy")),
            escape_markdown(rec.status), escape_markdown(summ.get("best_layer") or "–"),
            _fmt_number(summ.get("g")), _fmt_number(summ.get("heldout_accuracy")),
        ]) + " |")
    return "\n".join(lines)
