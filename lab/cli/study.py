"""``python -m lab study run|show|export|extend``: a grid of runs on Dask, its cells and figures as tables or one
HTML page, and growing its spec."""
from __future__ import annotations

import os
import sys
import threading

from lab import events as ev
from lab.cli._common import (
    EXIT_CANCELLED, EXIT_FAILED, EXIT_OK, add_summary_option, command_with_actions, store_of,
)
from lab.status import RunStatus

__all__ = ["add_study_parser"]


def add_study_parser(sub, common, parser_class) -> None:
    action = command_with_actions(sub, "study", common, parser_class,
                                  help="run, show, export or extend a grid of runs (a study) on Dask",
                                  description="Studies: a base RunConfig and axes over its fields, run as a grid.")
    p = action("run", _cmd_study_run, help="run every unfinished cell of a study spec")
    p.add_argument("spec", metavar="SPEC", help="a study YAML/JSON file (see studies/)")
    p.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="a Dask scheduler address (default: $DASK_SCHEDULER_ADDRESS, else a local cluster)")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="local cluster: worker processes (default: one per GPU for cells on cuda/auto on a machine "
                        "with GPUs, else cores / threads-per-worker)")
    p.add_argument("--threads-per-worker", type=int, default=None, metavar="T",
                   help="torch threads of each run (default 1; on GPUs the cores shared out among the runs)")
    p.add_argument("--cells-per-gpu", type=int, default=1, metavar="K",
                   help="local cluster on GPUs: runs that share one GPU at a time (default 1)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p = action("show", _cmd_study_show, help="every cell of a study with its status, and its figures")
    p.add_argument("name", metavar="NAME_OR_SPEC", help="a study name run into this store, or a spec file")
    add_summary_option(p)
    p = action("export", _cmd_study_export, help="write a study's figures into one HTML page or a notebook",
               description="The suffix of -o chooses: study.html, one page that opens offline (seeds as "
                           "replicates: each condition's mean with its 95 % interval and n), or study.ipynb.")
    p.add_argument("name", metavar="NAME_OR_SPEC", help="a study name run into this store, or a spec file")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="the .html or .ipynb file to write")
    p.add_argument("--execute", action="store_true", help="a notebook: also execute it (nbclient)")
    add_summary_option(p)
    p = action("extend", _cmd_study_extend, help="add (or remove) axis values in a study spec file, written in place",
               description="Grow a study spec: its existing cells keep their keys, so `study run FILE` afterwards "
                           "skips the stored cells and runs only the new ones.")
    p.add_argument("spec", metavar="SPEC", help="a study YAML/JSON file (rewritten in one rename)")
    p.add_argument("--add", action="append", default=[], metavar="AXIS=VALUE",
                   help="values to add to an axis, read as YAML: --add epochs=3, --add 'label_noise=[0.1, 0.2]', "
                        "--add seeds=3 (a seed; seeds may be added as a new axis); repeat for more")
    p.add_argument("--remove", action="append", default=[], metavar="AXIS=VALUE",
                   help="values to remove from an axis, read as --add reads them")


class _StudyConsole:
    """An overall bar of cells plus one bar per running run, fed by the workers' events."""

    def __init__(self, total: int, progress: bool):
        from tqdm.auto import tqdm

        self._tqdm, self._disable = tqdm, None if progress else True
        self._lock = threading.Lock()
        self.overall = tqdm(total=total, desc="study", unit="run", position=0, disable=self._disable,
                            file=sys.stderr, dynamic_ncols=True)
        self.bars: dict[int, object] = {}
        self.labels: dict[int, str] = {}

    def handle(self, event: ev.StudyEvent) -> None:
        with self._lock:
            if isinstance(event, ev.StudyStarted):
                self.overall.update(event.skipped)
                where = f", dashboard {event.dashboard}" if event.dashboard else ""
                self._write(f"{event.todo} run(s) to do, {event.skipped} already finished"
                            + (f"; {event.workers} worker(s) x {event.threads} thread(s)"
                               if event.workers is not None else "")
                            + (f" on {', '.join(event.devices)}"        # CPU studies: as before
                               if any(d != "cpu" for d in event.devices) else "")
                            + where)
            elif isinstance(event, ev.CellProgress):
                cell, total = event.cell, max(int(event.total), 1)
                bar = self.bars.get(cell)
                if bar is None:
                    bar = self._tqdm(total=total, position=len(self.bars) + 1, leave=False,
                                     disable=self._disable, file=sys.stderr, dynamic_ncols=True, unit="step")
                    self.bars[cell] = bar
                if bar.total != total:
                    bar.reset(total=total)
                epoch = f" epoch {event.epoch}" if event.epoch is not None else ""
                bar.set_description(f"{self.labels.get(cell, f'cell {cell + 1}')}:{epoch} {event.stage}")
                bar.n = int(event.done)
                bar.refresh()
            elif isinstance(event, (ev.CellDone, ev.CellFailed)):
                bar = self.bars.pop(event.cell, None)
                if bar is not None:
                    bar.close()
                self.overall.update(1)
                label = self.labels.get(event.cell, f"cell {event.cell + 1}")
                if isinstance(event, ev.CellDone):
                    extra = f": {event.message}" if event.status is not RunStatus.FINISHED and event.message else ""
                    self._write(f"{label}: {event.status} (run {event.run_id}){extra}")
                else:
                    self._write(f"{label}: failed on the cluster: {event.message}")

    def _write(self, text: str) -> None:
        self._tqdm.write(text, file=sys.stdout)

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()
        self.overall.close()


def _cmd_study_run(args) -> int:
    from lab.study import Study, save_spec

    study = Study.from_file(args.spec)             # ValueError/FileNotFoundError: exit 2, one line
    store = store_of(args)
    study.check_names(store=store)                 # a typo in any cell: exit 2, nothing started
    if not (args.scheduler or os.environ.get("DASK_SCHEDULER_ADDRESS")):
        study.check_devices()                      # "cuda" on a machine without: exit 2, nothing started
    if args.cells_per_gpu < 1:
        raise ValueError(f"--cells-per-gpu must be a positive integer. Got {args.cells_per_gpu} instead.")
    store.root.mkdir(parents=True, exist_ok=True)
    save_spec(study, store=store)
    cells = study.cells()
    console = _StudyConsole(len(cells), progress=not args.no_progress)
    console.labels = {c.index: f"cell {c.index + 1} ({c.label()})" for c in cells}
    print(f"study {study.name!r}: {len(cells)} run(s) into {store.root}")
    try:
        result = study.run(args.scheduler, store=store, workers=args.workers,
                           threads_per_worker=args.threads_per_worker, on_event=console.handle,
                           cells_per_gpu=args.cells_per_gpu)
    except KeyboardInterrupt:
        console.close()
        print("cancelled: the runs already imported stay in the store; run the study again to resume",
              file=sys.stderr)
        return EXIT_CANCELLED
    finally:
        console.close()
    if result.cancelled:
        print("cancelled: the runs already imported stay in the store; run the study again to resume",
              file=sys.stderr)
        return EXIT_CANCELLED
    done = len(result.run_ids) - len(result.failed)
    print(f"study {study.name!r}: {done} of {len(cells)} finished ({len(result.skipped)} from before), "
          f"{len(result.failed)} failed, {result.seconds:.1f} s. `python -m lab study show {study.name}` "
          f"lists the cells.")
    return EXIT_OK if not result.failed else EXIT_FAILED


def _axis_values(option: str, items: list[str]) -> dict:
    """``{axis: [values]}`` of ``AXIS=VALUE`` texts (the value read as YAML; a YAML list is several values)."""
    import yaml

    out: dict[str, list] = {}
    for item in items:
        axis, sep, text = item.partition("=")
        if not sep or not axis.strip() or not text.strip():
            raise ValueError(f"{option} takes AXIS=VALUE (e.g. {option} seeds=3 or {option} 'lr=[0.01, 0.1]'). "
                             f"Got {item!r} instead.")
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ValueError(f"{option} {item!r}: the value is not valid YAML ({' '.join(str(exc).split())}); "
                             f"quote it, e.g. {option} '{axis}=[0.1, 0.2]'") from None
        out.setdefault(axis.strip(), []).extend(value if isinstance(value, list) else [value])
    return out


def _cmd_study_extend(args) -> int:
    from lab.study import Study

    if not args.add and not args.remove:
        raise ValueError("give values to add or remove, e.g. `study extend SPEC --add seeds=3 --add epochs=5`")
    study = Study.from_file(args.spec)             # ValueError: exit 2, one line
    grown = study.extend(**_axis_values("--add", args.add)) if args.add else study
    if args.remove:
        grown = grown.without(**_axis_values("--remove", args.remove))
    old = {c.key for c in study.cells()}
    new = [c for c in grown.cells() if c.key not in old]
    gone = len(old - {c.key for c in grown.cells()})
    grown.save(args.spec)
    print(f"study {grown.name!r}: {len(grown.cells())} cells ({len(study.cells())} before; {len(new)} new"
          + (f", {gone} removed" if gone else "") + f"), written to {args.spec}. "
          f"`python -m lab study run {args.spec}` runs the cells not stored yet.")
    return EXIT_OK


def _cmd_study_show(args) -> int:
    import pandas as pd

    from lab.study import figures, find_study, summary_phrase, summary_text

    store = store_of(args)
    study = find_study(args.name, store=store)
    status = study.status(store=store)
    with pd.option_context("display.width", 160, "display.max_columns", 20, "display.max_rows", 200,
                           "display.float_format", "{:.3f}".format):
        print(f"study {study.name!r}: {len(status)} cells, "
              + ", ".join(f"{n} {s}" for s, n in status["status"].value_counts().items())
              + " (best_layer and g: each run's verdict at its last evaluation)")
        print(status.drop(columns=["g_std"]).to_string(index=False))
        figs = figures(study, store=store, summary=args.summary)
        print(summary_text(figs))
        if not figs["generalization"].empty:
            print("\ng per condition (max over layers of unseen NMI, mean over seeds) and seen accuracy:")
            print(figs["generalization"].to_string(index=False))
            r = figs["ranks"]
            if r["n"] >= 3:
                print(f"seen accuracy vs g over {r['n']} conditions: Spearman {r['spearman']:.3f} "
                      f"(95% bootstrap {r['spearman_ci'][0]:.3f} to {r['spearman_ci'][1]:.3f}), Kendall "
                      f"{r['kendall']:.3f} ({r['kendall_ci'][0]:.3f} to {r['kendall_ci'][1]:.3f})")
            else:
                print(f"seen accuracy vs g: {r['n']} condition(s), too few for a rank correlation")
        if not figs["layers"].empty:
            print("\nunseen NMI per layer (mean over seeds) against relative depth; * = best layer:")
            table = figs["layers"].assign(layer=lambda d: d["layer"] + d["best"].map({True: " *", False: ""}))
            print(table.drop(columns=["best", "layer_index"]).to_string(index=False))
        law = figs["law"]
        if len(law):
            print("\nlaw of equi-separation per condition (log10 NC1 against depth, He & Su 2023) at "
                  f"{summary_phrase(figs)}, mean and std over the condition's seeds; a ratio below 1: each deeper "
                  "layer separates better:")
            print(law.drop(columns=["slope", "reason"]).to_string(index=False))
            for row in law[law["reason"].notna()].itertuples(index=False):
                print(f"  {row.group}, {row.split}: {row.reason}")
        grid = figs["grid"]
        if len(grid) and figs["axes"]:
            print("\nper condition, mean over repeats (Wang & Yang): utilization and contribution per layer, "
                  "generalization gap and resilience per run:")
            print(grid.to_string(index=False))
        transfer = figs["transfer"]
        if transfer["scores"]:
            print("\ntransferability scores at epoch 0 (seen held-out images) against the unseen NMI each layer "
                  f"reaches at {summary_phrase(figs)}: Spearman over layers, 95% bootstrap over points "
                  "(from 5 points):")
            print(transfer["correlations"].to_string(index=False))
        elif not figs["generalization"].empty:
            print("\nno transferability scores measured (add logme and sfda to the study's metrics)")
    return EXIT_OK


def _cmd_study_export(args) -> int:
    from lab.cli.export import export_study

    return export_study(args.name, args.output, store_of(args), execute=args.execute, summary=args.summary)
