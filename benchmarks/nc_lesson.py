"""The neural-collapse lesson (``lab.lessons.NC_LESSON``), headless: does it teach what it promises within a minute?

The lesson is the app's preset "Neural collapse: the terminal phase (lesson)" and notebook 07's run: a small MLP on
three digit classes trained past 100 % accuracy on its training sample (Papyan, Han & Donoho 2020). Its goals, on a
2-core CPU:

- the whole run, in a fresh process (imports, data, model, every evaluation), in at most 60 s of wall time;
- the training sample's NC1 at the head input ("pre_logits", split "train") at least 10 times lower at the last
  epoch than at epoch 0;
- NC4 (``nc4_ncc_disagreement`` on "train": the head's answer against the nearest class centre) at 0 at the end.

It also prints the terminal-phase epoch (``lab.analysis.terminal_phase``, as the run summary has it) and NC3
(self-duality) at the end, and NC1 on the held-out seen and the unseen images beside the training sample's.

Run (about 25 s on 2 cores)::

    .venv/bin/python benchmarks/nc_lesson.py [--runs-dir DIR] [--save]
"""
from __future__ import annotations

import time

_T0 = time.perf_counter()          # the process's wall time counts from here: imports are part of the run

import argparse  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks._results import add_save_option, recording  # noqa: E402


def _series(metrics, metric: str, split: str, layer: str = "pre_logits"):
    """One metric against epoch (mean over seeds) at one layer and split."""
    rows = metrics[(metrics["metric"] == metric) & (metrics["split"] == split) & (metrics["layer"] == layer)]
    return rows.groupby("epoch")["value"].mean()


def _measure(runs_dir: str) -> int:
    import lab
    from lab.events import RunFailed, RunFinished
    from lab.lessons import NC_LESSON, NC_LESSON_FALL, NC_LESSON_SECONDS
    from lab.store import RunStore

    cfg = NC_LESSON
    print(f"{cfg.name}: {cfg.backbone} on {cfg.dataset}, {cfg.strategy} fine-tuning, {cfg.n_epochs} epochs, "
          f"lr {cfg.learning_rate:g}, {len(cfg.metrics)} metrics, train sample {cfg.train_sample_per_class} "
          f"images per seen class, {cfg.seen_per_class} held-out seen / {cfg.unseen_per_class} unseen per class, "
          f"projection {cfg.projection}")
    t_run = time.perf_counter()
    end, run_id = None, None
    for event in lab.run(cfg, store=RunStore(runs_dir)):
        run_id = run_id or getattr(event, "run_id", None)
        if isinstance(event, (RunFinished, RunFailed)):
            end = event
    now = time.perf_counter()
    run_wall, process_wall = now - t_run, now - _T0
    if not isinstance(end, RunFinished):
        print(f"the run did not finish: {end}")
        return 1
    record = RunStore(runs_dir).load(run_id)
    m = record.metrics
    nc1 = _series(m, "nc1", "train")
    first, last = float(nc1.iloc[0]), float(nc1.iloc[-1])
    fall = first / last if last > 0 else float("inf")
    nc3 = float(_series(m, "nc3_self_duality", "train").iloc[-1])
    nc4 = float(_series(m, "nc4_ncc_disagreement", "train").iloc[-1])
    terminal = lab.analysis.terminal_phase(m)
    stored = (record.meta.get("summary") or {}).get("terminal_phase")
    seen, unseen = _series(m, "nc1", "seen"), _series(m, "nc1", "unseen")
    split = record.meta.get("split") or {}
    print(f"classes: seen {', '.join(map(str, split.get('seen', [])))}; "
          f"unseen {', '.join(map(str, split.get('unseen', [])))}")
    print(f"wall: {process_wall:.1f} s for the process (imports included), {run_wall:.1f} s for lab.run")
    print(f"train-sample accuracy of the head by epoch: "
          + ", ".join(f"{v:.3f}" for v in _series(m, "head_accuracy", "train").values))
    print(f"terminal phase (first epoch at 100 % train-sample accuracy): {terminal} (run summary: {stored})")
    print(f"NC1 at pre_logits, train sample: epoch 0 {first:.4g}, epoch {int(nc1.index[-1])} {last:.4g}: "
          f"fell {fall:.1f}x")
    print(f"NC1 at pre_logits, last epoch: train {last:.4g}, held-out seen {float(seen.iloc[-1]):.4g}, "
          f"unseen {float(unseen.iloc[-1]):.4g}")
    print(f"NC3 self-duality at the end: {nc3:.4g}; NC4 disagreement at the end: {nc4:.4g}")
    goals = [
        (f"wall <= {NC_LESSON_SECONDS:.0f} s", process_wall <= NC_LESSON_SECONDS),
        (f"NC1 falls >= {NC_LESSON_FALL:.0f}x", fall >= NC_LESSON_FALL),
        ("NC4 = 0 at the end", nc4 == 0.0),
    ]
    for text, ok in goals:
        print(f"{'PASS' if ok else 'FAIL'}: {text}")
    print("PASS" if all(ok for _, ok in goals) else "FAIL")
    return 0 if all(ok for _, ok in goals) else 1


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
