"""Small, CPU-sized versions of the seed papers' claims, measured through lab's public API (issue 5).

Every number comes from runs of the engine (``lab.RunConfig`` + ``lab.run``), read back from a
``lab.RunStore``; where a claim needs a quantity the engine does not store (NC1 on the
*training* images, NC1 of the SCL head's input), the stored weights are reloaded with
``lab.backbones.load(checkpoint=lab.backbones.resolve_checkpoint("run:ID", store=store))`` and measured with
``lab.features`` + ``lab.metrics``.
Each claim ends in one verdict computed from the measured numbers by the rule printed under
the table: "reproduced", "mixed", "not reproduced", or, with ``--fast``, "inconclusive (fast
mode)" where the fast settings are too small to judge ("not measured" only when a run failed).

1. Li, Liu et al., "Principled and efficient transfer learning of deep models via neural
   collapse", Fig. 2: an equal-width MLP trained on digits into the terminal phase; NC1
   falls from shallow to deep layers.
2. Same paper, Table 3 (qualitative): a small CNN pre-trained on 10 glyph styles, then
   fine-tuned on the 10 other styles by linear probe, Layer FT, SCL FT and full FT:
   linear probe < Layer FT ≈ SCL FT ≈ full FT, with the trained-parameter fractions, and
   lower penultimate NC1 where held-out accuracy is higher.
3. Dyballa et al. 2024 / Gerritz et al. 2024: glyphs, 15 seen / 5 unseen styles (the
   papers' split), several seeds, the zoo's glyph-pretrained CNN and ViT, a Hugging Face CvT and
   a from-scratch CNN (fast mode: two small from-scratch models): g (max over layers of
   unseen NMI) and its layer, best layer vs last layer, and whether seen-class accuracy
   ranks the backbones the way g does.
4. Wang & Yang 2022: MLP on digits at label noise 0, 0.2, 0.5: utilization of the last
   layer vs noise, and held-out accuracy after re-initialising the last layer(s)
   (``contribution=True``).

Nothing is downloaded: models start from random init or from the offline glyph zoo
(``lab/zoo``, pretrained on fonts disjoint from the targets), on images of 32-64 px, so the
absolute numbers are far from the papers'; the claims checked are the qualitative ones.

The experiments live in ``benchmarks/claims/`` (one module per paper); this script runs them
and prints the report.

Run (the full mode takes ~15 min on 2 shared cores with one thread, ``--fast`` ~1-2 min)::

    .venv/bin/python benchmarks/paper_claims.py [--fast] [--only CLAIM ...] [--runs-dir DIR] [--json OUT] [--threads 1] [--save]

Progress goes to stderr, the report to stdout (``--save``: both, with a header, to
``benchmarks/results/paper_claims[_fast].txt``). Runs are written to a temporary store that
is deleted at the end unless ``--runs-dir`` is given.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import textwrap
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._results import add_save_option, recording  # noqa: E402
from benchmarks.claims import (  # noqa: E402 - torch-free; lab.runs (torch) is imported where used
    FAST_VERDICT, NOT_MEASURED, VERDICTS, Row, RunFailed, Settings, dyballa, fig2, log, table3, wang_yang,
)

__all__ = ["main", "Settings", "Row", "VERDICTS", "FAST_VERDICT", "run_claims"]


# ---------------------------------------------------------------------------------------------- report


def _table(rows: list[Row]) -> str:
    """A plain-text table: #, source, claim, paper reports, measured, verdict (wrapped cells)."""
    cols = [("#", 2), ("source", 18), ("claim", 34), ("paper reports", 34), ("measured here", 50), ("verdict", 14)]
    sep = "+" + "+".join("-" * (w + 2) for _, w in cols) + "+"
    out = [sep, "|" + "|".join(f" {name:<{w}} " for name, w in cols) + "|", sep.replace("-", "=")]
    for i, row in enumerate(rows, 1):
        cells = [str(i), row.source, row.claim, row.paper, row.measured, row.verdict]
        wrapped = [textwrap.wrap(text, w, break_long_words=True) or [""] for text, (_, w) in zip(cells, cols)]
        for j in range(max(map(len, wrapped))):
            out.append("|" + "|".join(f" {(lines[j] if j < len(lines) else ''):<{w}} "
                                      for lines, (_, w) in zip(wrapped, cols)) + "|")
        out.append(sep)
    return "\n".join(out)


EXPERIMENTS = ("fig2", "table3", "dyballa", "wang_yang")


def run_claims(settings: Settings, store, only: tuple[str, ...] = EXPERIMENTS) -> dict:
    """Run the experiments named in ``only`` (default all four); returns {"rows": [Row], "details": {...},
    "lines": [...], "errors": [...]}."""
    rows: list[Row] = []
    details: dict[str, Any] = {}
    lines: list[str] = []
    errors: list[str] = []
    experiments = (
        ("fig2", fig2, ["fig2_train", "fig2_heldout"]),
        ("table3", table3, ["t3_accuracy", "t3_nc1"]),
        ("dyballa", dyballa, ["dyballa_best_layer", "dyballa_accuracy_vs_g"]),
        ("wang_yang", wang_yang, ["wang_utilization", "wang_reinit"]),
    )
    for name, fn, keys in experiments:
        if name not in only:
            continue
        t = time.perf_counter()
        try:
            r, v, text = fn(settings, store)
        except RunFailed as exc:
            log(str(exc))
            errors.append(str(exc))
            rows.extend(Row(key=k, source=name, claim=k, paper="", measured=f"— ({exc})", verdict=NOT_MEASURED,
                            rule="a run failed: nothing was measured") for k in keys)
            continue
        v["seconds"] = time.perf_counter() - t
        rows.extend(r)
        details[name] = v
        lines.extend(text + [f"    ({v['seconds']:.0f} s)", ""])
    return {"rows": rows, "details": details, "lines": lines, "errors": errors}


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (np.floating, np.integer)):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def main(argv: list[str] | None = None) -> int:
    """Command line entry point; returns the exit code (1 when a run failed)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fast", action="store_true", help="a couple of minutes: fewer epochs, seeds, backbones")
    parser.add_argument("--runs-dir", default=None, help="keep the runs in this RunStore folder (default: a temporary one)")
    parser.add_argument("--json", dest="json_out", default=None, help="also write every number to this JSON file")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch/BLAS threads (default 1: on a shared 2-core machine more threads spin and slow down)")
    parser.add_argument("--only", nargs="+", choices=EXPERIMENTS, default=list(EXPERIMENTS), metavar="CLAIM",
                        help=f"run only these experiments ({', '.join(EXPERIMENTS)}; default: all)")
    add_save_option(parser)
    args = parser.parse_args(argv)
    if args.threads < 1:
        parser.error(f"--threads must be >= 1. Got {args.threads} instead.")
    with recording(__file__, parser, args, argv=argv, ignore=("runs_dir", "json_out"), device="cpu"):
        return _claims(args)


def _claims(args: argparse.Namespace) -> int:
    """Run the experiments, print the report, write the JSON; the exit code (1 when a run failed)."""
    import torch
    # Loaded before threadpool_limits is entered: threadpoolctl limits only the libraries already loaded.
    import sklearn.cluster  # noqa: F401
    from threadpoolctl import threadpool_limits

    import lab

    settings = Settings.fast_preset() if args.fast else Settings.full()
    torch.set_num_threads(args.threads)
    tmp = None
    if args.runs_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="paper-claims-")
        root = tmp.name
    else:
        root = args.runs_dir
    os.environ["LAB_RUNS_DIR"] = str(root)   # so that checkpoint="run:ID" resolves in this store
    store = lab.RunStore(root)
    t0 = time.perf_counter()
    log(f"paper claims, {'fast' if settings.fast else 'full'} mode, store {root}, {args.threads} thread(s)")
    try:
        with threadpool_limits(limits=args.threads):
            result = run_claims(settings, store, tuple(args.only))
    finally:
        seconds = time.perf_counter() - t0
        if tmp is not None:
            tmp.cleanup()

    rows = result["rows"]
    out = [f"layerscope — the seed papers' claims, small CPU versions ({'FAST' if settings.fast else 'full'} mode, "
           f"{seconds / 60:.1f} min, {args.threads} thread(s), lab {lab.__version__}, torch {torch.__version__})",
           "Models start from random init or the offline glyph zoo, on 32–64 px images (nothing is downloaded); "
           "only qualitative claims are checked.", ""]
    if settings.fast:
        out += ["FAST MODE: too few epochs, seeds and backbones to judge most claims — those rows say "
                f"'{FAST_VERDICT}'; run without --fast for verdicts.", ""]
    out += result["lines"]
    out += ["Summary", _table(rows), "", "Verdict rules (applied to the numbers above):"]
    out += [textwrap.fill(f"{i}. {row.rule}", 118, subsequent_indent="   ") for i, row in enumerate(rows, 1)]
    counts = {v: sum(r.verdict == v for r in rows) for v in VERDICTS if any(r.verdict == v for r in rows)}
    out += ["", "Verdicts: " + ", ".join(f"{n} {v}" for v, n in counts.items())]
    if result["errors"]:
        out += ["", "Failed runs:"] + [f"  {e}" for e in result["errors"]]
    print("\n".join(out), flush=True)

    if args.json_out:
        payload = {"mode": "fast" if settings.fast else "full", "seconds": seconds, "threads": args.threads,
                   "settings": asdict(settings), "rows": [asdict(r) for r in rows], "details": result["details"],
                   "errors": result["errors"], "runs_dir": args.runs_dir}
        Path(args.json_out).write_text(json.dumps(_jsonable(payload), indent=2, ensure_ascii=False))
        log(f"numbers written to {args.json_out}")
    log(f"done in {seconds:.0f}s")
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
