"""The law of equi-separation (He & Su 2023) in a real run: does log10 NC1 fall linearly with depth?

Each setup is one flag, so its saved results are ``benchmarks/results/separation_law_<setup>[_seeds-...].txt``.
``--lesson``: the app's preset "Neural collapse across layers (MLP on digits)" (``mlp:depth=8,width=256`` on
digits, 7 seen / 3 unseen classes, 8 epochs) with a training sample of 100 images per seen class
(``train_sample_per_class=100``), as issue 49 measured it. It prints :func:`lab.analysis.separation_law` for
every split at epoch 0 and at the last epoch: the slope of log10 NC1 against the layer index, the ratio per layer
(10**slope: below 1, each deeper layer separates the classes better), Pearson r and the layers fitted (taps that
are the same tensor, the last hidden layer and ``pre_logits``, counted once), plus r at every epoch.

Run (about 45 s on one busy core)::

    .venv/bin/python benchmarks/separation_law.py --lesson [--seeds 0 1 2] [--runs-dir DIR] [--save]
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

PRESET = "Neural collapse across layers (MLP on digits)"
TRAIN_SAMPLE_PER_CLASS = 100
LAW_ABSENT_R, LAW_HOLDS_R = -0.5, -0.98
"""Issue 49's goals for the lesson on the training sample: r above -0.5 at epoch 0, at most -0.98 at the end."""


def lesson_config(seeds: tuple[int, ...] = (0,)):
    """The preset's RunConfig (every field it sets; the others RunConfig's), with the larger training sample."""
    import lab
    from app.choose.presets import PRESETS

    if PRESET not in PRESETS:
        raise SystemExit(f"the app has no preset {PRESET!r} any more (it has {', '.join(PRESETS)}); point "
                         "benchmarks/separation_law.py's PRESET at the one that replaced it")
    fields = dict(PRESETS[PRESET]["config"])
    fields.update(train_sample_per_class=TRAIN_SAMPLE_PER_CLASS, seeds=tuple(seeds))
    return lab.RunConfig(**fields)


def _fmt(value: float, spec: str) -> str:
    return "n/a" if value != value else format(value, spec)


def _print_table(law, epochs) -> None:
    print(f"{'seed':>4} {'epoch':>5} {'split':<7} {'slope':>8} {'ratio':>7} {'r':>7} {'layers':>6}  reason")
    for row in law[law["epoch"].isin(epochs)].itertuples():
        print(f"{row.seed:>4} {row.epoch:>5} {row.split:<7} {_fmt(row.slope, '+.4f'):>8} {_fmt(row.ratio, '.3f'):>7} "
              f"{_fmt(row.r, '+.3f'):>7} {row.n_layers:>6}  {row.reason or ''}")


SETUPS = {"lesson": (PRESET + f", train_sample_per_class={TRAIN_SAMPLE_PER_CLASS}", lesson_config)}
"""Setup flag -> (its title, the function making its RunConfig from the seeds)."""


def _measure(runs_dir: str, setup: str, seeds: tuple[int, ...]) -> int:
    import lab
    from lab.events import RunFailed, RunFinished
    from lab.store import RunStore

    title, make_config = SETUPS[setup]
    cfg = make_config(seeds)
    print(f"{title}: {cfg.backbone} on {cfg.dataset}, "
          f"{cfg.strategy} fine-tuning, {cfg.n_epochs} epochs, lr {cfg.learning_rate:g}, seeds {list(cfg.seeds)}; "
          f"{cfg.seen_per_class} held-out seen / {cfg.unseen_per_class} unseen images per class; "
          f"{len(cfg.metrics)} metrics; projection {cfg.projection}")
    t_run = time.perf_counter()
    end, run_id = None, None
    for event in lab.run(cfg, store=RunStore(runs_dir)):
        run_id = run_id or getattr(event, "run_id", None)
        if isinstance(event, (RunFailed, RunFinished)):
            end = event
    now = time.perf_counter()
    if not isinstance(end, RunFinished):
        print(f"the run did not finish: {end}")
        return 1
    record = RunStore(runs_dir).load(run_id)
    split = record.meta.get("split") or {}
    layers = [item["name"] if isinstance(item, dict) else str(item) for item in record.meta.get("layers") or []]
    print(f"classes: seen {', '.join(map(str, split.get('seen', [])))}; "
          f"unseen {', '.join(map(str, split.get('unseen', [])))}")
    print(f"taps, input -> output: {', '.join(layers)}")
    print(f"identical taps (meta layer_aliases, counted once as the deeper): {record.meta.get('layer_aliases')}")
    print(f"wall: {now - _T0:.1f} s for the process (imports included), {now - t_run:.1f} s for lab.run")
    law = lab.analysis.separation_law(record)
    last = int(law["epoch"].max())
    print(f"\nlab.analysis.separation_law at epochs 0 and {last}:")
    _print_table(law, [0, last])
    print("\nr by epoch (seed mean; the law holds where r is near -1 or +1):")
    across = lab.analysis.separation_law_across_seeds(record)
    curve = across.pivot(index="split", columns="epoch", values="r")
    curve = curve.reindex([s for s in ("train", "seen", "unseen") if s in curve.index])
    print(f"{'split':<7} " + " ".join(f"{int(e):>6}" for e in curve.columns))
    for name, values in curve.iterrows():
        print(f"{name:<7} " + " ".join(f"{_fmt(v, '+.3f'):>6}" for v in values))
    goals = []
    if setup == "lesson":
        train = across[across["split"] == "train"].set_index("epoch")["r"]
        goals = [(f"train r at epoch 0 above {LAW_ABSENT_R} (no law at initialization)",
                  bool(train.get(0, float("nan")) > LAW_ABSENT_R)),
                 (f"train r at epoch {last} at most {LAW_HOLDS_R} (the law holds)",
                  bool(train.get(last, float("nan")) <= LAW_HOLDS_R))]
    if len(cfg.seeds) > 1:
        print(f"\nover {len(cfg.seeds)} seeds at epoch {last} (mean, std ddof=1):")
        for row in across[across["epoch"] == last].itertuples():
            print(f"{row.split:<7} ratio {row.ratio:.3f} ± {_fmt(row.ratio_std, '.3f')}, "
                  f"r {row.r:+.3f} ± {_fmt(row.r_std, '.3f')} ({row.n_seeds} seeds)")
    if goals:
        print()
    for text, ok in goals:
        print(f"{'PASS' if ok else 'FAIL'}: {text}")
    return 0 if all(ok for _, ok in goals) else 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    which = p.add_mutually_exclusive_group(required=True)
    for name, (title, _) in SETUPS.items():
        which.add_argument(f"--{name}", action="store_true", help=f"measure the setup: {title}")
    p.add_argument("--seeds", type=int, nargs="+", default=[0], help="training seeds (default: 0)")
    p.add_argument("--runs-dir", default=None,
                   help="keep the run in this run store (default: a temporary folder, removed at the end)")
    add_save_option(p)
    args = p.parse_args(argv)
    with recording(__file__, p, args, argv=argv, device="cpu", ignore=("runs_dir",)):
        with tempfile.TemporaryDirectory() as tmp:
            setup = next(name for name in SETUPS if getattr(args, name))
            return _measure(str(Path(args.runs_dir).resolve()) if args.runs_dir else tmp, setup, tuple(args.seeds))


if __name__ == "__main__":
    sys.exit(main())
