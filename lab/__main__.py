"""The ``python -m lab`` (or ``layerscope``) command line.

::

    python -m lab run --dataset glyphs --backbone resnet18 --epochs 2
    python -m lab run --config my_run.json --seeds 0 1 2
    python -m lab runs list
    python -m lab runs show RUN_ID
    python -m lab runs delete RUN_ID
    python -m lab export RUN_ID [RUN_ID ...] -o runs.ipynb --execute
    python -m lab export --study NAME_OR_SPEC -o study.ipynb
    python -m lab pretrain --arch resnet18 --out lab/zoo/glyph_resnet18 --epochs 8 --seed 0

Every :class:`lab.config.RunConfig` field is a flag of ``run`` (``n_unseen`` is
``--n-unseen``, booleans are ``--augment/--no-augment``, lists take several
values, ``none`` sets an optional field to None); flags override ``--config``.
Bad input exits with status 2 and one line on stderr; a run that fails exits 1,
a cancelled one (Ctrl-C) 130. An operating-system error (permissions, a full disk, a
path whose parent is a file, a read-only file system) exits 1 with one line naming the
path and the fix (:mod:`lab.errors`); only a genuine bug says so, and then names the file
that keeps its traceback (``--traceback`` shows it). Warnings are one line each.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import inspect
import json
import math
import re
import sys
import types
import typing
import warnings
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from lab import analysis
from lab._cli_study import add_archive_parsers, add_study_parser
from lab.catalogue import metric_label
from lab.config import RunConfig
from lab.errors import find_os_error, is_bug_message, os_error_message, user_message
from lab.store import RunNotFoundError, RunStore

__all__ = ["main", "build_parser"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_CANCELLED = 0, 1, 2, 130


class _UsageError(Exception):
    """Bad input from the user: reported in one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (no usage dump), exit status 2."""

    def error(self, message: str) -> typing.NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {_one_line(message)} (see --help)\n")


def _one_line(text: Any) -> str:
    return " ".join(str(text).split())


# ----------------------------------------------------------------------------------------------
# RunConfig fields -> flags
# ----------------------------------------------------------------------------------------------

def _none_or(convert, name: str):
    def parse(text: str):
        return None if text.lower() in ("none", "null") else convert(text)

    parse.__name__ = name                 # argparse names the type in "invalid int value: 'x'"
    return parse


def _int_or_str(text: str):
    return int(text) if re.fullmatch(r"[+-]?\d+", text) else text


def _flag_spec(hint: Any) -> dict[str, Any]:
    """argparse keyword arguments for a field annotated ``hint``."""
    args = typing.get_args(hint)
    optional = type(None) in args
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        inner = [a for a in args if a is not type(None)]
    else:
        inner = [hint]
    if inner == [bool]:
        return {"action": argparse.BooleanOptionalAction}
    if len(inner) == 1 and typing.get_origin(inner[0]) in (tuple, list):
        elem = typing.get_args(inner[0])[0]
        spec = {"nargs": "+", "type": elem if elem in (int, float) else str, "metavar": elem.__name__.upper()}
        if optional:
            spec["type"] = _none_or(spec["type"], elem.__name__)
        return spec
    if set(inner) == {str, int}:
        return {"type": _none_or(_int_or_str, "value") if optional else _int_or_str, "metavar": "NAME|INDEX"}
    base = inner[0] if len(inner) == 1 and inner[0] in (int, float, str) else str
    return {"type": _none_or(base, base.__name__) if optional else base, "metavar": base.__name__.upper()}


def _config_flags() -> list[tuple[str, str, dict[str, Any]]]:
    """(field, flag, argparse kwargs) for every RunConfig field."""
    hints = typing.get_type_hints(RunConfig)
    docs = RunConfig.field_docs()
    out = []
    for f in dataclasses.fields(RunConfig):
        spec = _flag_spec(hints[f.name])
        default = f.default if f.default is not dataclasses.MISSING else None
        if isinstance(default, tuple):
            default = " ".join(map(str, default))
        helptext = docs.get(f.name, "").replace("``", "")
        spec["help"] = f"{helptext} (default: {default})".strip().replace("%", "%%")
        out.append((f.name, "--" + f.name.replace("_", "-"), spec))
    return out


# ----------------------------------------------------------------------------------------------
# parser
# ----------------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``python -m lab``."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--runs-dir", metavar="DIR", default=argparse.SUPPRESS,
                        help="run store folder (default: $LAB_RUNS_DIR or ./runs)")
    common.add_argument("--traceback", action="store_true", default=argparse.SUPPRESS,
                        help="show the full traceback of an error (for debugging)")

    parser = _Parser(prog="python -m lab", parents=[common],
                     description="layerscope: which layer of a vision backbone generalizes to unseen "
                                 "classes, and how its features collapse.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    run = sub.add_parser("run", parents=[common], help="run one experiment and store it",
                         description="Fine-tune on the seen classes and measure every layer, epoch by "
                                     "epoch. Flags override the values of --config.")
    run.add_argument("--config", metavar="FILE", help="a RunConfig JSON file (e.g. a stored config.json)")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    fields = run.add_argument_group("RunConfig fields")
    for name, flag, spec in _config_flags():
        fields.add_argument(flag, dest=name, default=argparse.SUPPRESS, **spec)
    run.set_defaults(func=_cmd_run)

    runs = sub.add_parser("runs", parents=[common], help="list, show, delete, pack, unpack or export stored runs",
                          description="Stored runs.")
    runs_sub = runs.add_subparsers(dest="runs_command", metavar="ACTION", parser_class=_Parser)
    p = runs_sub.add_parser("list", parents=[common], help="table of the stored runs, newest first")
    p.set_defaults(func=_cmd_list)
    p = runs_sub.add_parser("show", parents=[common], help="config, summary and per-layer table of a run")
    p.add_argument("run_id", metavar="RUN_ID")
    p.set_defaults(func=_cmd_show)
    p = runs_sub.add_parser("delete", parents=[common], help="delete a stored run")
    p.add_argument("run_id", metavar="RUN_ID")
    p.add_argument("--force", action="store_true", help="delete even if the run is still running")
    p.set_defaults(func=_cmd_delete)
    p = runs_sub.add_parser("to-tensorboard", parents=[common], help="write runs as TensorBoard event files",
                            description="Per-layer metrics, training curves and the unseen-class embeddings "
                                        "(projector, with labels and image sprites); then tensorboard --logdir DIR.")
    p.add_argument("run_ids", nargs="+", metavar="RUN_ID")
    p.add_argument("logdir", metavar="DIR", help="folder of the event files (one sub-folder per run)")
    p.set_defaults(func=_cmd_to_tensorboard)
    p = runs_sub.add_parser("to-mlflow", parents=[common], help="log runs to MLflow (needs mlflow)",
                            description="Params, metrics per epoch and layer, and the run folder as artefacts.")
    p.add_argument("run_ids", nargs="+", metavar="RUN_ID")
    p.add_argument("--tracking-uri", metavar="URI", default=None,
                   help="MLflow tracking URI, e.g. file:///path/mlruns (default: $MLFLOW_TRACKING_URI)")
    p.set_defaults(func=_cmd_to_mlflow)
    add_archive_parsers(runs_sub, common)
    runs.set_defaults(func=lambda args: _missing(
        runs, "an action: list, show, delete, pack, unpack, to-tensorboard or to-mlflow"))

    exp = sub.add_parser("export", parents=[common], help="write stored runs or a study into a Jupyter notebook",
                         description="Write a notebook that reloads and re-plots the given runs, or (--study) "
                                     "a study's figures and tables.")
    exp.add_argument("run_ids", nargs="*", metavar="RUN_ID")
    exp.add_argument("--study", metavar="NAME_OR_SPEC", default=None,
                     help="export a study instead: a study name run into this store, or its spec file")
    exp.add_argument("-o", "--output", required=True, metavar="NOTEBOOK", help="the .ipynb file to write")
    exp.add_argument("--execute", action="store_true", help="also execute the notebook (nbclient)")
    exp.set_defaults(func=_cmd_export)

    pre = sub.add_parser("pretrain", parents=[common], help="pretrain a zoo backbone on the glyph source task",
                         description="Render CJK fonts disjoint from the glyphs typefaces and train a backbone "
                                     "on them from a seed on the CPU (the recipe of lab.zoo).")
    from lab.zoo import pretrain as _pretrain

    _pretrain.add_arguments(pre)
    pre.set_defaults(func=_cmd_pretrain)

    add_study_parser(sub, common, _Parser)
    parser.set_defaults(func=lambda args: _missing(parser, "a command: run, runs, export, study or pretrain"))
    return parser


def _missing(parser: argparse.ArgumentParser, what: str) -> int:
    print(f"{parser.prog}: error: give {what} (see --help)", file=sys.stderr)
    return EXIT_USAGE


def _store(args) -> RunStore:
    return RunStore(getattr(args, "runs_dir", None))


# ----------------------------------------------------------------------------------------------
# run
# ----------------------------------------------------------------------------------------------

def _build_config(args) -> RunConfig:
    data: dict[str, Any] = {}
    if args.config:
        path = Path(args.config)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise _UsageError(f"cannot read --config {path}: {os_error_message(exc) or exc}") from exc
        except json.JSONDecodeError as exc:
            raise _UsageError(f"--config {path} is not valid JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise _UsageError(f"--config {path} must hold a JSON object of RunConfig fields; "
                              f"got {type(data).__name__}")
    names = {f.name for f in dataclasses.fields(RunConfig)}
    data.update({k: v for k, v in vars(args).items() if k in names})
    try:
        return RunConfig.from_dict(data)
    except (ValueError, TypeError) as exc:
        raise _UsageError(str(exc)) from exc


class _Console:
    """Turns events into a tqdm bar and one summary line per epoch.

    The per-seed best layer of an epoch is :func:`lab.analysis.generalization` over that seed's
    rows, so it follows the same rules as every other place that names a best layer.
    """

    def __init__(self, progress: bool):
        from tqdm.auto import tqdm

        self._tqdm = tqdm
        self._progress = progress
        self.bar = None                   # made on the first Progress event
        self.rows: dict[int, list[dict]] = {}        # seed -> its unseen rows of self.metric
        self.metric: str | None = None
        self.layers: list[str] | None = None
        self.aliases: dict[str, str] = {}
        self.seeds: list[int] = []
        self.started = False
        self.run_id: str | None = None
        self._stage: tuple | None = None

    def line(self, text: str) -> None:
        self._tqdm.write(text, file=sys.stdout)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

    def best(self, seed: int, epoch: int) -> dict | None:
        """The best layer of one seed's epoch: its row of :func:`lab.analysis.generalization` over
        that seed's rows, or None (nothing measured, or the epoch did not reach every layer)."""
        rows = self.rows.get(seed)
        if not rows or self.metric is None:
            return None
        table = analysis.generalization(pd.DataFrame(rows), layers=self.layers, aliases=self.aliases,
                                        metric=self.metric)
        table = table[table["epoch"] == epoch]
        return None if table.empty else table.iloc[0].to_dict()

    def handle(self, ev) -> None:
        kind = ev.kind
        self.run_id = self.run_id or getattr(ev, "run_id", None)
        self.aliases = getattr(ev, "aliases", None) or self.aliases
        if kind == "run_started":
            self.started = True
            self.seeds = list(ev.seeds)
            self.layers = [layer["name"] if isinstance(layer, dict) else str(layer) for layer in ev.layers] or None
            n = ev.n_images or {}
            sizes = ", ".join(f"{v} {k}" for k, v in n.items())
            self.line(f"run {ev.run_id}: {len(ev.layers)} layers, {len(ev.seen)} seen / {len(ev.unseen)} "
                      f"unseen classes ({sizes}), device {ev.device}")
        elif kind == "progress":
            stage = (ev.seed, ev.epoch, ev.stage, ev.total)
            if self.bar is None:
                self.bar = self._tqdm(total=1, disable=None if self._progress else True, leave=False,
                                      file=sys.stderr, dynamic_ncols=True, unit="step")
            if stage != self._stage:
                self.bar.reset(total=max(int(ev.total), 1))
                where = [f"seed {ev.seed}"] if ev.seed is not None and len(self.seeds) > 1 else []
                where += [f"epoch {ev.epoch}"] if ev.epoch is not None else []
                self.bar.set_description(" ".join([*where, ev.stage]))
                self._stage = stage
            self.bar.n = int(ev.done)
            self.bar.refresh()
        elif kind == "layer_metrics" and ev.split == "unseen":
            self.metric = self.metric or ("nmi" if "nmi" in ev.values else next(iter(ev.values), None))
            if self.metric in ev.values:
                value = ev.values[self.metric]
                self.rows.setdefault(ev.seed, []).append(
                    {"seed": ev.seed, "epoch": ev.epoch, "layer": ev.layer, "split": "unseen",
                     "metric": self.metric, "value": math.nan if value is None else float(value)})
        elif kind == "epoch_finished":
            parts = [f"epoch {ev.epoch}" if len(self.seeds) <= 1 else f"seed {ev.seed} epoch {ev.epoch}"]
            best = self.best(ev.seed, ev.epoch)
            if best:
                parts.append(f"best layer {best['layer']} (unseen {self.metric} {best['g']:.3f})")
            if ev.heldout_accuracy is not None:
                parts.append(f"seen held-out acc {ev.heldout_accuracy:.3f}")
            if ev.train_loss is not None:
                parts.append(f"train loss {ev.train_loss:.3f}")
            parts.append(f"{ev.seconds:.1f} s")
            self.line(" | ".join(parts))
        elif kind == "generalization" and ev.seed is None and len(self.seeds) > 1:
            std = f" ± {ev.g_std:.3f}" if ev.g_std is not None else ""
            self.line(f"epoch {ev.epoch} over {len(self.seeds)} seeds: g = {ev.g:.3f}{std} at layer {ev.layer}")


def _cmd_run(args) -> int:
    config = _build_config(args)
    store = _store(args)
    try:
        from lab.runs import run as run_engine
    except ImportError as exc:
        print(f"error: the run engine is not available ({exc})", file=sys.stderr)
        return EXIT_FAILED
    console = _Console(progress=not args.no_progress)
    outcome = None
    events = run_engine(config, store=store)
    try:
        # iterate to the end even after the terminal event, so the engine closes the run itself
        for ev in events:
            console.handle(ev)
            if ev.kind in ("run_finished", "run_failed", "run_cancelled"):
                outcome = ev
    except KeyboardInterrupt:
        events.close()                    # cooperative cancel: the engine marks the run cancelled
        console.close()
        where = f" (partial results in {store.root / console.run_id})" if console.run_id else ""
        print(f"cancelled{where}", file=sys.stderr)
        return EXIT_CANCELLED
    except Exception as exc:              # noqa: BLE001 - reported in one line, like RunFailed
        console.close()
        if not console.started and isinstance(exc, (ValueError, KeyError, FileNotFoundError)):
            raise _UsageError(_message(exc)) from exc       # the config could not be resolved
        if getattr(args, "traceback", False):
            raise
        where = f" (partial results in {store.root / console.run_id})" if console.run_id else ""
        folder = store.root / console.run_id if console.run_id else None
        print(f"error: the run failed: {user_message(exc, folder=folder)}{where}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        console.close()
    if outcome is None:
        print("error: the run ended without a final event", file=sys.stderr)
        return EXIT_FAILED
    where = store.root / outcome.run_id
    if outcome.kind == "run_finished":
        print(f"finished in {outcome.seconds:.1f} s: run {outcome.run_id} stored in {where}")
        return EXIT_OK
    if outcome.kind == "run_cancelled":
        print(f"cancelled: run {outcome.run_id} (partial results in {where})", file=sys.stderr)
        return EXIT_CANCELLED
    if not console.started and not is_bug_message(outcome.message):
        # failed while resolving dataset/backbone/split: bad input, nothing was measured, so keep no
        # record of it (a bug's run folder is kept: it holds the traceback the message names)
        with contextlib.suppress(Exception):
            store.delete(outcome.run_id)
        raise _UsageError(outcome.message)
    print(f"error: run {outcome.run_id} failed: {_one_line(outcome.message)} (partial results in {where})",
          file=sys.stderr)
    return EXIT_FAILED


# ----------------------------------------------------------------------------------------------
# runs list / show / delete
# ----------------------------------------------------------------------------------------------

def _fmt(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _cmd_list(args) -> int:
    store = _store(args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        df = store.list()
    for w in caught:
        print(f"warning: {_one_line(w.message)}", file=sys.stderr)
    if df.empty:
        print(f"no runs in {store.root.resolve()}")
        return EXIT_OK
    df = df.copy()
    if "damage" in df and df["damage"].isna().all():
        df = df.drop(columns="damage")    # the column only when a run is damaged
    elif "damage" in df:
        df["damage"] = df["damage"].map(lambda d: d[:57] + "..." if isinstance(d, str) and len(d) > 60 else d)
    df["started"] = df["started"].map(lambda s: str(s)[:16].replace("T", " ") if s else "-")
    for col in df.columns:
        df[col] = df[col].map(_fmt)
    print(df.to_string(index=False))
    return EXIT_OK


def _layer_table(rec, epoch: int | None = None) -> tuple[int | None, Any]:
    """Mean over seeds (:func:`lab.analysis.aggregate_seeds`) of every metric at ``epoch`` (default the
    last epoch stored), one row per layer in the run's layer order."""
    m = rec.metrics
    if m.empty:
        return None, None
    epoch = int(m["epoch"].max()) if epoch is None else int(epoch)
    agg = analysis.aggregate_seeds(m[m["epoch"] == epoch], by=("layer", "split", "metric"))
    table = agg.pivot_table(index="layer", columns=["split", "metric"], values="mean", aggfunc="first",
                            sort=False, dropna=False)
    order = analysis.layer_order(rec.meta.get("layers"), m)
    table = table.loc[[layer for layer in order if layer in table.index]]
    table.columns = [f"{split}:{metric}" for split, metric in table.columns]
    return epoch, table


def _cmd_show(args) -> int:
    store = _store(args)
    rec = store.load(args.run_id, damaged_ok=True)
    meta = rec.meta
    title = f"run {rec.run_id}" + (f" ({rec.name})" if rec.name else "")
    print(title)
    print(f"  status: {meta.get('status')}" + (f" - {_one_line(meta['message'])}" if meta.get("message") else ""))
    if rec.problems:
        print(f"  damaged: {'; '.join(rec.problems)}; restore the file from a backup or delete the run with "
              f"`python -m lab runs delete {rec.run_id}`")
    print(f"  started: {meta.get('started')}  ended: {meta.get('ended') or '-'}  host: {meta.get('host')}  "
          f"device: {meta.get('device')}")
    versions = meta.get("versions") or {}
    print("  versions: " + ", ".join(f"{k} {v}" for k, v in versions.items() if v))
    print(f"  path: {rec.path}")
    if rec.config is None:
        print("config: unknown (config.json is missing or unreadable)")
    else:
        print("config:")
        cfg = rec.config.to_dict() if hasattr(rec.config, "to_dict") else rec.config
        for key, value in cfg.items():
            print(f"  {key}: {json.dumps(value)}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s = rec.summary()                 # lab.analysis.run_summary (reads the tables)
    for w in caught:
        print(f"warning: {_one_line(w.message)}", file=sys.stderr)
    if rec.damaged_parts:
        print(f"  partially damaged: {len(rec.damaged_parts)} unreadable table part(s) skipped: "
              f"{', '.join(rec.damaged_parts)}; the rest of the run is shown")
    print("summary:")
    if s.get("g") is not None:
        spread = f" ± {s['g_std']:.3f}" if s.get("g_std") is not None else ""
        print(f"  best layer at epoch {s['epoch']}: {s['best_layer']} (g = unseen {metric_label('nmi')} "
              f"{s['g']:.3f}{spread}, {s['n_seeds']} seed{'s' if s['n_seeds'] != 1 else ''})")
        where = "is" if s.get("best_is_final") else "is not"
        print(f"  the best layer {where} the final representation ({s['final_layer']})")
    else:
        print(f"  no complete unseen {metric_label('nmi')} evaluation stored yet")
    if s.get("heldout_accuracy") is not None:
        print(f"  seen held-out accuracy at epoch {s['heldout_epoch']}: {s['heldout_accuracy']:.3f}")
    epoch, table = _layer_table(rec, s.get("epoch"))    # the last complete evaluation
    if table is not None:
        print(f"layers at epoch {epoch} (mean over seeds):")
        print(table.to_string(float_format=lambda v: f"{v:.3f}"))
    return EXIT_OK


def _cmd_delete(args) -> int:
    store = _store(args)
    store.delete(args.run_id, force=args.force)
    print(f"deleted run {args.run_id} from {store.root.resolve()}")
    return EXIT_OK


def _cmd_to_tensorboard(args) -> int:
    from lab.sinks import to_tensorboard

    try:
        folders = to_tensorboard(_store(args), args.run_ids, args.logdir)
    except ModuleNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for folder in folders:
        print(f"wrote {folder}")
    print(f"view them with: tensorboard --logdir {args.logdir}")
    return EXIT_OK


def _cmd_to_mlflow(args) -> int:
    from lab.sinks import to_mlflow

    try:
        ids = to_mlflow(_store(args), args.run_ids, tracking_uri=args.tracking_uri)
    except ModuleNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for run_id, mlflow_id in zip(args.run_ids, ids):
        print(f"logged run {run_id} as MLflow run {mlflow_id}")
    return EXIT_OK


# ----------------------------------------------------------------------------------------------
# export
# ----------------------------------------------------------------------------------------------

def _check_writable(output: Path) -> None:
    """Raise the OSError that writing ``output`` would meet (missing folder, a file in the way, a
    folder at its name, no permission), so that it is reported before any work."""
    import errno
    import os

    parent = output.parent
    if output.is_dir():
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(output))
    if not parent.is_dir():
        if parent.exists() or any(p.exists() and not p.is_dir() for p in parent.absolute().parents):
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(output))
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(parent))
    if not os.access(parent, os.W_OK) or (output.exists() and not os.access(output, os.W_OK)):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(output))


def _cmd_export(args) -> int:
    store = _store(args)
    if args.study is not None and args.run_ids:
        raise _UsageError("give run ids or --study, not both")
    if args.study is None and not args.run_ids:
        raise _UsageError("give the RUN_IDs to export, or --study NAME_OR_SPEC")
    if args.study is not None:
        return _export_study(args, store)
    for run_id in args.run_ids:
        store.load(run_id)                # unknown or invalid ids: exit 2 before any work
    output = Path(args.output)
    if output.suffix != ".ipynb":
        raise _UsageError(f"-o must name a .ipynb file; got {str(output)!r}")
    _check_writable(output)               # before any work: nothing is computed for nothing
    try:
        from lab.export import to_notebook
    except ImportError as exc:
        print(f"error: notebook export is not available ({exc})", file=sys.stderr)
        return EXIT_FAILED
    kwargs: dict[str, Any] = {"store": store}
    params = inspect.signature(to_notebook).parameters
    if args.execute:
        if "execute" not in params:
            print("error: this version of lab.export cannot execute notebooks; run without --execute",
                  file=sys.stderr)
            return EXIT_FAILED
        kwargs["execute"] = True
    result = to_notebook(list(args.run_ids), output, **kwargs)
    print(f"wrote {result if isinstance(result, (str, Path)) else output}")
    return EXIT_OK


def _export_study(args, store: RunStore) -> int:
    from lab._cli_study import _find_study
    from lab.export import study_to_notebook

    study = _find_study(args.study, store)  # unknown name or bad spec: exit 2 before any work
    output = Path(args.output)
    if output.suffix != ".ipynb":
        raise _UsageError(f"-o must name a .ipynb file; got {str(output)!r}")
    _check_writable(output)
    result = study_to_notebook(study, output, store=store, execute=args.execute)
    print(f"wrote {result}")
    return EXIT_OK


# ----------------------------------------------------------------------------------------------
# pretrain
# ----------------------------------------------------------------------------------------------

def _cmd_pretrain(args) -> int:
    from lab.zoo import pretrain

    card = pretrain.run_from_args(args)
    print(f"pretrained {card['name']}: source accuracy {card['source_accuracy']:.3f} after {card['epochs']} epochs")
    return EXIT_OK


# ----------------------------------------------------------------------------------------------
# entry point
# ----------------------------------------------------------------------------------------------

def _message(exc: BaseException) -> str:
    if isinstance(exc, OSError) and getattr(exc, "errno", None) is not None:
        return os_error_message(exc)
    return _one_line(exc.args[0] if isinstance(exc, KeyError) and exc.args else exc)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings as one clean line (no source file, line or code)."""
    print(f"warning: {_one_line(message)}", file=sys.stderr if file is None else file)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 failed run or operating-system error,
    2 bad input, 130 cancelled)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    debug = getattr(args, "traceback", False)
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        try:
            return int(args.func(args) or EXIT_OK)
        except (_UsageError, RunNotFoundError, ValueError) as exc:
            if debug:
                raise
            print(f"{parser.prog}: error: {_message(exc)}", file=sys.stderr)
            return EXIT_USAGE
        except KeyboardInterrupt:
            print("cancelled", file=sys.stderr)
            return EXIT_CANCELLED
        except BrokenPipeError:           # `python -m lab runs list | head`
            return EXIT_OK
        except Exception as exc:          # noqa: BLE001 - OS errors and bugs: one line, never a traceback
            if debug:
                raise
            os_error = find_os_error(exc)
            if os_error is not None:
                text = os_error_message(os_error, fix=_fix_for(args, os_error))
            else:
                text = user_message(exc)  # a bug: its traceback is kept in a file the message names
            print(f"{parser.prog}: error: {text}", file=sys.stderr)
            return EXIT_FAILED


def _fix_for(args, exc: OSError) -> str | None:
    """The advice for an OS error on a path the user chose: the store or the notebook."""
    import os

    filename = os.path.abspath(str(exc.filename)) if exc.filename is not None else None
    output = getattr(args, "output", None)
    if output is not None and filename == os.path.abspath(output):
        return "write the notebook elsewhere with -o"
    root = os.path.abspath(str(_store(args).root))
    if filename is not None and (filename == root or filename.startswith(root + os.sep)
                                 or root.startswith(filename + os.sep)):
        return "choose another run store with --runs-dir or $LAB_RUNS_DIR"
    return None


if __name__ == "__main__":
    sys.exit(main())
