"""Neural collapse on the training set in the app's default preset: train vs held-out vs unseen NC1, once.

The default preset (``app.choose.presets.DEFAULT_PRESET``: the zoo's glyph ResNet-18 fine-tuned on the 15 seen glyph
styles, the 5 others unseen) measures the collapse family on three splits (docs/METRICS.md, "Neural collapse on the
training set"): the training sample ("train"), held-out images of the seen styles ("seen") and the unseen styles.
This runs it once (seed 0, as the app's Start does, about 3 minutes on a 2-core CPU) and prints, at its best layer
(highest unseen NMI at the last epoch, the run summary's ``best_layer`` from :mod:`lab.analysis`) and at the head
input ("pre_logits"), NC1 on each split at epoch 0 and at the end, with the terminal-phase epoch. Collapse on the
training set need not carry over to new images (Hui, Belkin & Nakkiran 2022): the three numbers say how far it does
in this run.

Run::

    .venv/bin/python benchmarks/nc_default_preset.py [--runs-dir DIR] [--save]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks._results import add_save_option, recording  # noqa: E402
from benchmarks.preset import preset_config  # noqa: E402

SPLITS = ("train", "seen", "unseen")


def _nc1(metrics, layer: str, split: str):
    rows = metrics[(metrics["metric"] == "nc1") & (metrics["split"] == split) & (metrics["layer"] == layer)]
    return rows.groupby("epoch")["value"].mean()


def _measure(runs_dir: str) -> int:
    import lab
    from app.choose.presets import DEFAULT_PRESET
    from lab.events import RunFailed, RunFinished
    from lab.store import RunStore

    cfg = preset_config(0)
    print(f"{DEFAULT_PRESET}: {cfg.backbone}, {cfg.strategy} fine-tuning, {cfg.n_epochs} epochs, "
          f"train sample {cfg.train_sample_per_class} / held-out seen {cfg.seen_per_class} / unseen "
          f"{cfg.unseen_per_class} images per class; unseen {', '.join(cfg.unseen)}")
    t0 = time.perf_counter()
    end, run_id = None, None
    for event in lab.run(cfg, store=RunStore(runs_dir)):
        run_id = run_id or getattr(event, "run_id", None)
        if isinstance(event, (RunFinished, RunFailed)):
            end = event
    wall = time.perf_counter() - t0
    if not isinstance(end, RunFinished):
        print(f"the run did not finish: {end}")
        return 1
    record = RunStore(runs_dir).load(run_id)
    summary = record.summary()
    best = summary.get("best_layer")
    m = record.metrics
    print(f"wall {wall:.0f} s; best layer (highest unseen NMI at the last epoch): {best}, g {summary.get('g'):.3f}; "
          f"terminal phase (first epoch at 100 % train-sample accuracy): {lab.analysis.terminal_phase(m)}")
    print(f"\n{'layer':<12} {'split':<8} {'NC1 epoch 0':>12} {'NC1 last':>10} {'fall':>7}")
    for layer in dict.fromkeys([best, "pre_logits"]):
        for split in SPLITS:
            curve = _nc1(m, layer, split)
            if curve.empty:
                print(f"{layer:<12} {split:<8} {'not measured':>12}")
                continue
            first, last = float(curve.iloc[0]), float(curve.iloc[-1])
            print(f"{layer:<12} {split:<8} {first:>12.4g} {last:>10.4g} {first / last:>6.1f}x")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs-dir", default=None,
                   help="keep the run in this run store (default: a temporary folder, removed at the end)")
    add_save_option(p)
    args = p.parse_args(argv)
    with recording(__file__, p, args, argv=argv, device="cpu", ignore=("runs_dir",)):
        with tempfile.TemporaryDirectory() as tmp:
            return _measure(str(Path(args.runs_dir).resolve()) if args.runs_dir else tmp)


if __name__ == "__main__":
    sys.exit(main())
