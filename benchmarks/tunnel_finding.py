"""The tunnel study's finding: per condition, the unseen best layer's relative depth and the tunnel share.

Reads the finished runs of ``studies/tunnel.yaml`` from the store (``$LAB_RUNS_DIR`` or ``--runs``; run the
study first: ``python -m lab study run studies/tunnel.yaml``), applies :func:`lab.analysis.tunnel` to each run
at its last epoch, and prints, per condition (backbone, image size, training images per class), the mean and
standard deviation over its seeds of: the unseen best layer's relative depth, the tunnel share, the number of
distinct layers, and the seen held-out NCC accuracy of the best probe layer.

Run: ``.venv/bin/python benchmarks/tunnel_finding.py [--runs DIR] [--save]``.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._results import add_save_option, recording  # noqa: E402


def table(runs: str | None):
    import pandas as pd

    from lab.analysis import tunnel
    from lab.store import RunStore
    from lab.study import Study
    from lab.study.records import record_key

    study = Study.from_file(ROOT / "studies" / "tunnel.yaml")
    store = RunStore(runs) if runs else RunStore()
    cells = {c.key: c for c in study.cells()}
    rows = []
    for rec in study.records(store=store):
        cell = cells[record_key(rec, study.axes)]
        found = tunnel(rec)
        probe = rec.metrics
        seen = probe[(probe["metric"] == "ncc_accuracy") & (probe["split"] == "seen") & (probe["epoch"] == found.epoch)]
        rows.append({"backbone": rec.config.backbone, "img_size": rec.config.img_size,
                     "train_per_class": rec.config.train_per_class, "seed": rec.config.seeds[0],
                     "layers": found.n_layers, "best": found.best_layer, "relative_depth": found.relative_depth,
                     "share": found.share, "seen_ncc": float(seen["value"].max()) if len(seen) else float("nan")})
    frame = pd.DataFrame(rows)
    keys = ["backbone", "img_size", "train_per_class"]
    summary = frame.groupby(keys, sort=False).agg(
        n=("seed", "size"), layers=("layers", "first"),
        depth_mean=("relative_depth", "mean"), depth_std=("relative_depth", "std"),
        share_mean=("share", "mean"), share_std=("share", "std"),
        seen_ncc_mean=("seen_ncc", "mean")).reset_index()
    return frame, summary


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", default=None, help="the run store (default: $LAB_RUNS_DIR or ./runs)")
    add_save_option(parser)
    args = parser.parse_args(argv)
    import pandas as pd

    with recording(__file__, parser, args, argv=argv, ignore=("runs",)), pd.option_context(
            "display.width", 160, "display.max_columns", 20, "display.float_format", "{:.3f}".format):
        frame, summary = table(args.runs)
        print(f"{len(frame)} finished runs of studies/tunnel.yaml")
        print(summary.to_string(index=False))
        print()
        print("best layer per run:")
        print(frame[["backbone", "img_size", "train_per_class", "seed", "best", "relative_depth", "share"]]
              .to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
