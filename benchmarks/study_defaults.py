"""The measured defaults of a study's time estimate (:data:`lab.study.estimates.DEFAULT_SECONDS`).

A cell with no comparable stored run is estimated from the seconds of one tiny run of its backbone's source.
This script runs, in this process on one torch thread, one run per source of ``tests.fixtures.configs.TINY``
(2 epochs, 1 seed, 10 unseen and 6 seen images per class, projection PCA, 4 metrics) with that source's
backbone, and prints the three parts :meth:`lab.study.estimates.RunTiming.of` splits each run into (fixed,
epoch 0, one trained epoch), the numbers to copy into ``DEFAULT_SECONDS`` (rounded up).

A source whose model cannot be built here (no weights offline) prints why and is skipped.

Run: ``python benchmarks/study_defaults.py [--save]``; ``--save`` writes benchmarks/results/study_defaults.txt.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._results import add_save_option, recording  # noqa: E402

# one backbone per source of lab.backbones.SOURCES, at the size a small study uses it
CASES = {
    "mlp": {"backbone": "mlp:depth=2,width=16"},
    "zoo": {"dataset": "glyphs", "backbone": "glyph_resnet18", "img_size": None},
    "timm": {"backbone": "resnet18", "img_size": 32},
    "imagenet": {"backbone": "imagenet_efficientnet_lite0", "img_size": 32},
    "hf": {"backbone": "hf:cvt", "img_size": 32},
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_save_option(parser)
    args = parser.parse_args(argv)
    with recording(__file__, parser, args, argv=argv):
        import torch

        import lab
        from lab.store import RunStore
        from lab.study.estimates import RunTiming
        from tests.fixtures.configs import TINY

        torch.set_num_threads(1)
        print(f"{'source':<9} {'backbone':<28} {'fixed':>7} {'epoch 0':>8} {'per epoch':>10} {'total':>7}")
        with tempfile.TemporaryDirectory() as tmp:
            store = RunStore(tmp)
            # one run first so that imports and the digits cache are not counted in the first source
            for _ in lab.run(lab.RunConfig(**{**TINY, "epochs": 0, "strategy": "none"}), store=store):
                pass
            for source, changes in CASES.items():
                config = {**TINY, "seeds": (0,), **changes}
                try:
                    for event in lab.run(lab.RunConfig(**config), store=store):
                        last = event
                except Exception as exc:          # noqa: BLE001 - a source not available here is reported
                    print(f"{source:<9} {changes['backbone']:<28} skipped: {' '.join(str(exc).split())[:80]}")
                    continue
                if last.kind != "run_finished":
                    print(f"{source:<9} {changes['backbone']:<28} skipped: {getattr(last, 'message', last.kind)}")
                    continue
                meta = store.load(last.run_id).meta
                t = RunTiming.of(meta["timings"])
                print(f"{source:<9} {changes['backbone']:<28} {t.fixed:7.2f} {t.epoch_0:8.2f} {t.per_epoch:10.2f} "
                      f"{meta['timings']['run']['total']:7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
