"""``python -m lab runs list|show|follow|delete|pack|unpack|to-tensorboard|to-mlflow``: the stored runs."""
from __future__ import annotations

import json
import sys
import warnings
from typing import Any

from lab import analysis
from lab import events as ev
from lab.catalogue import g_metric, metric_label
from lab.errors import not_recorded
from lab.status import RunStatus
from lab.cli._common import (EXIT_FAILED, EXIT_OK, EXIT_USAGE, command_with_actions, fmt, law_lines, one_line,
                             store_of)

__all__ = ["add_runs_parser"]


def add_runs_parser(sub, common, parser_class) -> None:
    action = command_with_actions(sub, "runs", common, parser_class,
                                  help="list, show, delete, pack, unpack or export stored runs",
                                  description="Stored runs.")
    action("list", _cmd_list, help="table of the stored runs, newest first")
    p = action("show", _cmd_show, help="config, summary and per-layer table of a run")
    p.add_argument("run_id", metavar="RUN_ID")
    p = action("follow", _cmd_follow, help="print a run's evaluations as another process writes them",
               description="One line per evaluation of a run being written elsewhere (lab.Monitor in a training "
                           "loop, another `lab run`, a study), as `lab run` prints its own, until the run ends; "
                           "a finished run prints all of them. Ctrl-C stops following (the run goes on).")
    p.add_argument("run_id", metavar="RUN_ID")
    p.add_argument("--every", type=float, default=2.0, metavar="SECONDS",
                   help="seconds between looks at the store (default 2)")
    p = action("delete", _cmd_delete, help="delete a stored run")
    p.add_argument("run_id", metavar="RUN_ID")
    p.add_argument("--force", action="store_true", help="delete even if the run is still running")
    p = action("pack", _cmd_pack, help="pack stored runs into one archive file")
    p.add_argument("run_ids", nargs="+", metavar="RUN_ID")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="the archive to write (.tar.gz)")
    p = action("unpack", _cmd_unpack, help="import the runs of an archive into the store")
    p.add_argument("archive", metavar="FILE")
    p = action("to-tensorboard", _cmd_to_tensorboard, help="write runs as TensorBoard event files",
               description="Per-layer metrics, training curves and the unseen-class embeddings "
                           "(projector, with labels and image sprites); then tensorboard --logdir DIR.")
    p.add_argument("run_ids", nargs="+", metavar="RUN_ID")
    p.add_argument("logdir", metavar="DIR", help="folder of the event files (one sub-folder per run)")
    p = action("to-mlflow", _cmd_to_mlflow, help="log runs to MLflow (needs mlflow)",
               description="Params, metrics per epoch and layer, and the run folder as artefacts.")
    p.add_argument("run_ids", nargs="+", metavar="RUN_ID")
    p.add_argument("--tracking-uri", metavar="URI", default=None,
                   help="MLflow tracking URI, e.g. file:///path/mlruns (default: $MLFLOW_TRACKING_URI)")


def _cmd_list(args) -> int:
    store = store_of(args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        df = store.list()
    for w in caught:
        print(f"warning: {one_line(w.message)}", file=sys.stderr)
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
        df[col] = df[col].map(fmt)
    print(df.to_string(index=False))
    return EXIT_OK


def _cmd_follow(args) -> int:
    from lab.cli.console import RunConsole
    from lab.runs.follow import follow

    store = store_of(args)
    if not store.exists(args.run_id):
        print(f"error: no run {args.run_id!r} in {store.root.resolve()} (python -m lab runs list shows them)",
              file=sys.stderr)
        return EXIT_USAGE
    if not args.every > 0:
        print(f"error: --every must be a positive number of seconds, not {args.every}", file=sys.stderr)
        return EXIT_USAGE
    console = RunConsole(progress=False)
    last = None
    try:
        for event in follow(args.run_id, store=store, every=args.every):
            console.handle(event)
            last = event
    except KeyboardInterrupt:
        print(f"stopped following run {args.run_id} (it goes on)", file=sys.stderr)
        return EXIT_OK
    finally:
        console.close()
    if last is not None and last.kind == ev.RunFinished.kind:
        print(f"finished: run {args.run_id}")
        return EXIT_OK
    print(f"run {args.run_id} ended {last.kind.removeprefix('run_') if last is not None else ''}: "
          f"{one_line(getattr(last, 'message', ''))}", file=sys.stderr)
    return EXIT_FAILED


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
    store = store_of(args)
    rec = store.load(args.run_id, damaged_ok=True)
    meta = rec.meta
    title = f"run {rec.run_id}" + (f" ({rec.name})" if rec.name else "")
    print(title)
    print(f"  status: {meta.get('status')}" + (f" - {one_line(meta['message'])}" if meta.get("message") else ""))
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
        print(f"warning: {one_line(w.message)}", file=sys.stderr)
    if rec.damaged_parts:
        print(f"  partially damaged: {len(rec.damaged_parts)} unreadable table part(s) skipped: "
              f"{', '.join(rec.damaged_parts)}; the rest of the run is shown")
    print("summary:")
    if s.get("g") is not None:
        spread = f" ± {s['g_std']:.3f}" if s.get("g_std") is not None else ""
        print(f"  best layer at epoch {s['epoch']}: {s['best_layer']} (g = unseen {metric_label(g_metric())} "
              f"{s['g']:.3f}{spread}, {s['n_seeds']} seed{'s' if s['n_seeds'] != 1 else ''})")
        where = "is" if s.get("best_is_final") else "is not"
        print(f"  the best layer {where} the final representation ({s['final_layer']})")
    else:
        print(f"  no complete unseen {metric_label(g_metric())} evaluation stored yet")
    if s.get("heldout_accuracy") is not None:
        print(f"  seen held-out accuracy at epoch {s['heldout_epoch']}: {s['heldout_accuracy']:.3f}")
    for line in law_lines(s.get("separation_law")):
        print(f"  {line}")
    epoch, table = _layer_table(rec, s.get("epoch"))    # the last complete evaluation
    if table is not None:
        print(f"layers at epoch {epoch} (mean over seeds):")
        print(table.to_string(float_format=lambda v: f"{v:.3f}"))
    status = RunStatus.read(rec.status)           # None: damaged, so no timings to wait for
    _print_timings(meta.get("timings"), ended=status is None or status.closed)
    return EXIT_OK


def _print_timings(timings: Any, *, ended: bool = True) -> None:
    """meta.json's ``"timings"`` (:mod:`lab.runs.timings`): the run's line, then one row per epoch. They are
    written when a run ends: a running or interrupted run has none yet, which is not a run recorded without."""
    import pandas as pd

    from lab.runs.timings import STAGES, describe

    if not isinstance(timings, dict) or not isinstance(timings.get("run"), dict):
        print("timings: none yet (written when the run ends)" if not ended
              else f"timings: {not_recorded(None, 'per-stage timings')}")
        return
    print(f"timings: {describe(timings['run'])}  (seconds per epoch below)")
    epochs = pd.DataFrame(timings.get("epochs") or [])
    if len(epochs):
        cols = ["seed", "epoch", *[c for c in (*STAGES, "total") if c in epochs]]
        print(epochs[cols].to_string(index=False, float_format=lambda v: f"{v:.2f}"))


def _cmd_delete(args) -> int:
    store = store_of(args)
    store.delete(args.run_id, force=args.force)
    print(f"deleted run {args.run_id} from {store.root.resolve()}")
    return EXIT_OK


def _cmd_to_tensorboard(args) -> int:
    from lab.sinks import to_tensorboard

    try:
        folders = to_tensorboard(args.run_ids, args.logdir, store=store_of(args))
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
        ids = to_mlflow(args.run_ids, tracking_uri=args.tracking_uri, store=store_of(args))
    except ModuleNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for run_id, mlflow_id in zip(args.run_ids, ids):
        print(f"logged run {run_id} as MLflow run {mlflow_id}")
    return EXIT_OK


def _cmd_pack(args) -> int:
    from lab.archive import pack

    path = pack(args.run_ids, args.output, store=store_of(args))
    print(f"packed {len(args.run_ids)} run(s) into {path}")
    return EXIT_OK


def _cmd_unpack(args) -> int:
    from lab.archive import unpack

    store = store_of(args)
    imported = unpack(args.archive, store=store)
    print(f"imported {len(imported)} run(s) into {store.root}" + (": " + ", ".join(imported) if imported else
                                                                   " (all were already there)"))
    return EXIT_OK
