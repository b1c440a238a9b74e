"""How far the offline zoo transfers to the glyph styles: source accuracy, a linear head through the engine,
a logistic regression on frozen features and the unseen styles' NMI, per zoo model.

Issue 27's goals: source (font) accuracy >= 0.90 for the CNN and clearly above 0.280 for the second
model; a linear head on frozen features through the engine (``strategy="linear"``, 3 epochs, the
paper's 15/5 split, seed 0) >= 0.85 seen held-out accuracy. For each model this prints

- the card's held-out source accuracies (font, and character where the recipe trained both);
- the engine's linear head: seen held-out accuracy after each epoch (``lab.run``, the same numbers the
  app shows), and the best layer's unseen-style NMI at the last epoch (``nmi`` only, no projection);
- a standardised logistic regression (scikit-learn, an independent reference) fit on the frozen
  ``pre_logits`` features of the seen training images and scored on the seen held-out images.

``--zoo DIR`` measures the cards and weights in DIR instead of the shipped ``lab/zoo`` (e.g. the
previous zoo, taken out of git: ``mkdir /tmp/zoo && git archive REV lab/zoo | tar -x -C /tmp/zoo``
then ``--zoo /tmp/zoo/lab/zoo``).

Run (about 1-2 min per model on 2 cores)::

    .venv/bin/python benchmarks/zoo_transfer.py [--zoo DIR] [--models NAME ...] [--threads 2] [--save]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._results import add_save_option, recording  # noqa: E402

GOAL_SOURCE, GOAL_LINEAR = 0.90, 0.85


def linear_head(name: str, runs_dir: str) -> dict:
    """The engine's linear head on the frozen zoo model: held-out accuracy per epoch and the best NMI."""
    import lab
    from lab.events import EpochFinished, LayerMetrics, RunFailed, RunFinished
    from lab.store import RunStore

    split = lab.data.Split.paper_default("glyphs")
    cfg = lab.RunConfig(dataset="glyphs", seen=tuple(split.seen), unseen=tuple(split.unseen),
                        backbone=f"zoo:{name}", strategy="linear", epochs=3, seeds=(0,), metrics=("nmi",),
                        projection="none")
    curve, nmi, end = [], {}, None
    for event in lab.run(cfg, store=RunStore(runs_dir)):
        if isinstance(event, EpochFinished) and event.epoch > 0:
            curve.append(event.heldout_accuracy)
        elif isinstance(event, LayerMetrics) and event.split == "unseen" and "nmi" in event.values:
            nmi[event.epoch, event.layer] = event.values["nmi"]
        elif isinstance(event, (RunFinished, RunFailed)):
            end = event
    if not isinstance(end, RunFinished):
        raise SystemExit(f"{name}: the linear-head run did not finish: {end}")
    last = max(e for e, _ in nmi)
    layer, best = max(((l, v) for (e, l), v in nmi.items() if e == last), key=lambda lv: lv[1])
    return {"curve": curve, "best_layer": layer, "best_nmi": best, "config": cfg}


def logistic_regression(name: str, cfg) -> float:
    """Standardised logistic regression on frozen ``pre_logits`` features, seen held-out accuracy."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from lab import backbones, features
    from lab.runs import prepare_data

    data = prepare_data(cfg)
    bb = backbones.load(f"zoo:{name}", device="cpu")
    x_tr, x_te = (features.extract(bb, part, ["pre_logits"])["pre_logits"].float().numpy()
                  for part in (data.train, data.heldout))
    clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=3000))
    clf.fit(x_tr, np.asarray(data.train.targets))
    return float(clf.score(x_te, np.asarray(data.heldout.targets)))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--zoo", default=None, help="a folder of zoo cards and weights (default: the shipped lab/zoo)")
    p.add_argument("--models", nargs="+", default=None, help="zoo names (default: every model in the zoo)")
    p.add_argument("--threads", type=int, default=2)
    add_save_option(p)
    args = p.parse_args(argv)
    if args.zoo:
        os.environ["LAB_ZOO_DIR"] = str(Path(args.zoo).resolve())
    with recording(__file__, p, args, argv=argv, device="cpu"):
        return _measure(args)


def _measure(args: argparse.Namespace) -> int:
    import torch

    import lab.zoo

    torch.set_num_threads(args.threads)
    print(f"zoo: {os.environ.get('LAB_ZOO_DIR', 'lab/zoo (shipped)')}")
    for name in args.models or lab.zoo.names():
        card = lab.zoo.card(name)
        t0 = time.perf_counter()
        accs = card.get("source_accuracies", {"font": card["source_accuracy"]})
        print(f"\n{name} ({card['architecture']}, {card['epochs']} source epochs)")
        print(f"  source accuracy (held-out, card): {', '.join(f'{k} {v:.3f}' for k, v in accs.items())}")
        with tempfile.TemporaryDirectory() as runs_dir:
            head = linear_head(name, runs_dir)
        print(f"  linear head through the engine (3 epochs, 15/5 split, seed 0): seen held-out accuracy by epoch "
              f"{', '.join(f'{a:.3f}' for a in head['curve'])} (goal >= {GOAL_LINEAR}: "
              f"{'MET' if head['curve'][-1] >= GOAL_LINEAR else 'NOT MET'}); unseen NMI best at "
              f"{head['best_layer']} = {head['best_nmi']:.3f}")
        print(f"  standardised logistic regression on frozen pre_logits: seen held-out accuracy "
              f"{logistic_regression(name, head['config']):.3f}")
        print(f"  ({time.perf_counter() - t0:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
