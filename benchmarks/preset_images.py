"""The answer per image of the default preset's runs (issue 35): for each stored run, at its last evaluation,
how many unseen images arrive at each layer (right from that layer to the last), how many the final layer
forgets (right at the best layer, wrong at the last), the forgotten images' share right per layer, and the
best layer by each measure (``lab.analysis.measure_agreement``).

Run it on the runs ``benchmarks/preset.py --runs-dir DIR`` kept::

    .venv/bin/python benchmarks/preset.py --seeds 0 1 2 --runs-dir /tmp/preset-runs
    .venv/bin/python benchmarks/preset_images.py --runs-dir /tmp/preset-runs [--save]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._results import add_save_option, recording  # noqa: E402


def report(runs_dir: str) -> None:
    import lab
    from lab.store import RunStore

    store = RunStore(runs_dir)
    for run_id in sorted(store.ids()):
        table = lab.analysis.image_table(run_id, store=store)
        a = table.attrs
        print(f"run {run_id}, seed {a['seed']}, epoch {a['epoch']}: {len(table)} unseen images; "
              f"best layer {a['best_layer']}, final layer {a['final_layer']}")
        counts = lab.analysis.arrival_counts(table)
        print("  images arriving at each layer: " + ", ".join(f"{layer} {n}" for layer, n in counts.items()))
        print(f"  right at the best layer {int(table[a['best_layer']].sum())}, at the final layer "
              f"{int(table[a['final_layer']].sum())}; forgotten by the final layer: {int(table.forgotten.sum())}")
        forgotten = [int(i) for i in table.index[table.forgotten]]
        if forgotten:
            sel = lab.analysis.selection_report(run_id, forgotten, store=store)
            print("  the forgotten images' share right per layer: "
                  + ", ".join(f"{layer} {v:.2f}" for layer, v in sel["share_right"].items()))
            for note in sel.attrs.get("notes", []):
                print(f"  note: {note}")
        agree = lab.analysis.measure_agreement(run_id, store=store)
        print("  best layer by each measure (best share: bootstrap; spearman: layer order against NMI's):")
        for measure, row in agree.iterrows():
            share = "" if row["best_share"] != row["best_share"] else f", best in {100 * row['best_share']:.1f} %"
            print(f"    {measure:<13} {row['best_layer']:<10} {row['value']:.3f}{share}, "
                  f"spearman {row['spearman']:.3f}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs-dir", required=True, help="the run store benchmarks/preset.py --runs-dir wrote")
    add_save_option(parser)
    args = parser.parse_args(argv)
    with recording(__file__, parser, args, argv=argv, device="cpu"):
        report(args.runs_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
