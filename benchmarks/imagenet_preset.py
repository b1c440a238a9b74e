"""The ImageNet-pretrained preset at a few input sizes: what the input size buys, and what it costs.

Issue 33 (part 3): ``app.choose.presets.IMAGENET_PRESET`` fine-tunes Google's EfficientNet-Lite0 (ImageNet-1k,
offline from an installed package) on the 15 seen glyph styles and measures the 5 withheld ones at every
tapped block. The glyphs are 64 px; ImageNet models were trained on 224 px photos, so a larger input
may fit their filters better, at a cost in time that grows with the pixels. This script runs the
preset at each ``--sizes`` value (``img_size``: the glyphs resized, the backbone built for it), one
seed, each in a fresh process (``lab.run`` into a temporary run store, as a user who presses Start),
and prints per size: the seen held-out accuracy by epoch, the run's summary (``RunRecord.summary()``:
the best layer by g, g with its bootstrap interval, the share of resamples in which that layer is
best) and the wall time. The preset's ``img_size`` is chosen from this table.

Run (about 25 minutes on 2 shared cores with the defaults)::

    .venv/bin/python benchmarks/imagenet_preset.py [--sizes 64 128] [--seed 0] [--epochs N] [--save]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks._results import add_save_option, recording  # noqa: E402


def preset_config(seed: int, img_size: int, epochs: int | None = None):
    """The ImageNet preset's RunConfig for one seed and input size, as the app's Start builds it."""
    import lab
    from app.choose._fields import FORM_DEFAULTS
    from app.choose.presets import IMAGENET_PRESET, PRESETS

    fields = dict(PRESETS[IMAGENET_PRESET]["config"])
    split = lab.data.Split.paper_default(fields["dataset"])
    fields.update({k: FORM_DEFAULTS[k].value for k in ("unseen_per_class", "seen_per_class") if k not in fields})
    fields.update(seen=tuple(split.seen), unseen=tuple(split.unseen), seeds=(seed,), img_size=img_size)
    if epochs:
        fields["epochs"] = epochs
    fields.pop("n_unseen", None)
    return lab.RunConfig(**fields)


def _one_run(seed: int, img_size: int, epochs: int | None, runs_dir: str) -> dict:
    """One run in this process: accuracy by epoch, the stored run's summary, the wall time."""
    import time

    import lab
    from lab.events import EpochFinished, RunFailed, RunFinished
    from lab.store import RunStore

    t0 = time.perf_counter()
    cfg = preset_config(seed, img_size, epochs)
    store = RunStore(runs_dir)
    curve, end, run_id = [], None, None
    for event in lab.run(cfg, store=store):
        run_id = run_id or getattr(event, "run_id", None)
        if isinstance(event, EpochFinished):
            curve.append({"epoch": event.epoch, "heldout_accuracy": event.heldout_accuracy,
                          "seconds": round(time.perf_counter() - t0, 1)})
        elif isinstance(event, (RunFinished, RunFailed)):
            end = event
    wall = time.perf_counter() - t0
    if not isinstance(end, RunFinished):
        raise SystemExit(f"img_size {img_size}: the run did not finish: {end}")
    summary = store.load(run_id).summary()
    return {"img_size": img_size, "seed": seed, "epochs": curve, "wall": wall, "run_id": run_id,
            "n_epochs": cfg.n_epochs, "summary": {k: summary.get(k) for k in
                                                  ("best_layer", "g", "g_low", "g_high", "best_share",
                                                   "best_is_final", "final_layer", "heldout_accuracy", "epoch")}}


def _fmt(value, spec: str = ".3f") -> str:
    return "n/a" if value is None else format(value, spec)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[64, 128], help="input sizes (img_size) to run")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epochs", type=int, default=None, help="default: the preset's")
    p.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)    # the child process: one size
    p.add_argument("--runs-dir", default=None, help=argparse.SUPPRESS)
    add_save_option(p)
    args = p.parse_args(argv)
    if args.one is not None:
        print(json.dumps(_one_run(args.seed, args.one, args.epochs, args.runs_dir)))
        return 0
    with recording(__file__, p, args, argv=argv, device="cpu"):
        return _measure(args)


def _measure(args: argparse.Namespace) -> int:
    from app.choose.presets import IMAGENET_PRESET

    cfg = preset_config(args.seed, args.sizes[0], args.epochs)
    print(f"{IMAGENET_PRESET}: {cfg.backbone}, {cfg.strategy} fine-tuning, {cfg.n_epochs} epochs, "
          f"lr {cfg.learning_rate:g}, seed {args.seed}, unseen {', '.join(cfg.unseen)}; {cfg.unseen_per_class} "
          f"unseen / {cfg.seen_per_class} seen held-out images per class evaluated; metrics "
          f"{', '.join(cfg.metrics)}; projection {cfg.projection}")
    rows = []
    with tempfile.TemporaryDirectory() as runs_dir:
        for size in args.sizes:
            cmd = [sys.executable, __file__, "--one", str(size), "--seed", str(args.seed), "--runs-dir", runs_dir]
            if args.epochs:
                cmd += ["--epochs", str(args.epochs)]
            out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True,
                                 env={**os.environ, "PYTHONPATH": str(REPO)})
            if out.returncode:
                print(out.stderr[-3000:])
                return out.returncode
            res = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append(res)
            s = res["summary"]
            curve = ", ".join(f"{e['heldout_accuracy']:.3f}" for e in res["epochs"] if e["epoch"] > 0)
            print(f"{size} px: seen held-out accuracy by epoch {curve}; best layer {s['best_layer']} "
                  f"(final layer {s['final_layer']}), g {_fmt(s['g'])} [{_fmt(s['g_low'])}, {_fmt(s['g_high'])}], "
                  f"best in {_fmt(s['best_share'], '.0%')} of resamples; wall {res['wall']:.0f} s for "
                  f"{res['n_epochs']} epochs; run {res['run_id']}", flush=True)
    print("\n| img_size | seen held-out accuracy | best layer | g [95 % interval] | best share | wall |")
    print("|---|---|---|---|---|---|")
    for res in rows:
        s = res["summary"]
        print(f"| {res['img_size']} | {res['epochs'][-1]['heldout_accuracy']:.3f} | {s['best_layer']} | "
              f"{_fmt(s['g'])} [{_fmt(s['g_low'])}, {_fmt(s['g_high'])}] | {_fmt(s['best_share'], '.0%')} | "
              f"{res['wall']:.0f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
