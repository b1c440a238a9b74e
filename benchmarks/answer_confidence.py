"""How sure the answer is, on stored runs (issue 26): a run's per-layer interval and best-layer share,
its layers' CKA to their epoch-0 features, and a study's transferability-vs-g table.

It reads what the engine stored, through the same functions the app and notebooks use
(``lab.export.tables``, ``lab.analysis``, ``lab.study.figures``); it computes nothing of its own.
Make the runs first, e.g. the app's default preset and the shipped which-layer study:

    .venv/bin/python benchmarks/preset.py --seeds 0 --runs-dir DIR      # the default preset, as the app runs it
    LAB_RUNS_DIR=DIR .venv/bin/python -m lab study run studies/which_layer.yaml
    .venv/bin/python benchmarks/answer_confidence.py --runs-dir DIR --run RUN_ID --study studies/which_layer.yaml [--save]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._results import add_save_option, recording  # noqa: E402
from lab import analysis  # noqa: E402
from lab.export import tables  # noqa: E402
from lab.store import RunStore  # noqa: E402

pd.set_option("display.width", 160)


def show_run(store: RunStore, run_id: str) -> None:
    record = store.load(run_id)
    print(f"run {run_id}: {record.config.describe()}")
    summary = record.summary()
    print(f"verdict at epoch {summary.get('epoch')}: best layer {summary.get('best_layer')}, g = {summary.get('g'):.3f}"
          f" ({analysis.confidence_text(summary.get('g_low'), summary.get('g_high'), summary.get('best_share'))})")
    wide = tables.layer_table({run_id: record}, metrics=["nmi", "nmi_low", "nmi_high", "nmi_best_share"])
    print("\nunseen NMI per layer at the last epoch, its 95 % bootstrap interval and best-layer share:")
    print(wide.drop(columns=["run"]).round(3).to_string(index=False))
    cka = tables.epoch_table(record, "cka_initial")
    if len(cka):
        grid = cka.pivot_table(index=["layer_index", "layer"], columns="epoch", values="mean").droplevel(0)
        print("\nlinear CKA of each layer's unseen-image features to its own epoch-0 features (1 = unchanged):")
        print(grid.round(3).to_string())


def show_study(store: RunStore, spec: str) -> None:
    from lab.study import Study, figures

    study = Study.from_file(spec)
    figs = figures(study, store=store)
    transfer = figs.get("transfer") or {}
    print(f"\nstudy {study.name}: {len(study.cells())} cells")
    if not transfer.get("scores"):
        print("no transferability scores measured by its runs")
        return
    print("Spearman rho of each score at epoch 0 (seen held-out images) with the unseen NMI the layer reaches "
          "after fine-tuning, 95 % bootstrap interval over the points:")
    print(transfer["correlations"].round(3).to_string(index=False))
    print("\npoints (condition, layer):")
    print(transfer["points"].round(3).to_string(index=False))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs-dir", required=True, help="the run store holding the run and the study's runs")
    parser.add_argument("--run", help="a run id: its intervals and CKA to epoch 0")
    parser.add_argument("--study", help="a study spec file: its transferability-vs-g table")
    add_save_option(parser)
    args = parser.parse_args(argv)
    with recording(__file__, parser, args, argv=argv, ignore=("runs_dir", "run", "study"), device="cpu"):
        store = RunStore(args.runs_dir)
        if args.run:
            show_run(store, args.run)
        if args.study:
            show_study(store, args.study)


if __name__ == "__main__":
    main()
