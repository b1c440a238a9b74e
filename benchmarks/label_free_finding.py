"""Which layer without labels? The label-free measures' best layer against NMI's, on the offline models.

Every run measures, by default, three label-free measures of layer quality on the unseen images without
reading their labels: RankMe (higher reads as better), alpha-ReQ (closest to 1) and TwoNN ID (lower)
(docs/METRICS.md). This script asks whether they name the layer that the unseen labels name (NMI's best
layer), over these runs, all in one run store in a temporary folder:

(a) the offline models evaluated as loaded (strategy "none", epoch 0: one evaluation each): the zoo's
    glyph ResNet-18 and glyph ViT-tiny, the ImageNet preset's backbone (EfficientNet-Lite0 at 128 px, as
    ``app.choose.presets.IMAGENET_PRESET`` runs it) and timm's resnet18 and vit_tiny_patch16_224 with
    random init; the glyphs with the paper's split (15 seen / 5 unseen styles), at split seeds 0, 1 and 2
    (``split_seed``: which images of each class are drawn; ``seeds`` the same number: for the random-init
    models, a different initialisation too); RunConfig's evaluation sample (300 unseen / 100 seen held-out
    images per class);
(b) the app's default preset (``app.choose.presets.DEFAULT_PRESET``: the glyph ResNet-18 fine-tuned, 4
    epochs, the app's form sample of 60 unseen / 30 seen held-out images per class), one seed.

Every run uses the default metrics and no 2-D projection (it changes no measure). For each run it prints
``lab.analysis.measure_agreement`` (the best layer by NMI and by each other measure, Spearman's rho of
each measure's layer order with NMI's), then ``lab.analysis.study_agreement`` over all runs and over each
group of runs, and what agrees and what does not, in sentences made from these numbers.

Run (about 10-15 minutes on 2 shared cores; the fine-tuned preset is most of it)::

    .venv/bin/python benchmarks/label_free_finding.py [--split-seeds 0 1 2] [--preset-epochs N] [--save]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._results import add_save_option, recording  # noqa: E402

LABEL_FREE = ("rankme", "alpha_req", "twonn_id", "lidar")

MODELS = (  # (short name in the tables, RunConfig fields)
    ("glyph ResNet-18", {"backbone": "glyph_resnet18"}),
    ("glyph ViT-tiny", {"backbone": "glyph_vit_tiny"}),
    ("ImageNet EfficientNet-Lite0", None),           # the ImageNet preset's backbone and img_size
    ("resnet18 random init", {"backbone": "resnet18"}),
    ("vit_tiny random init", {"backbone": "vit_tiny_patch16_224"}),
)


def _paper_split() -> dict:
    import lab

    split = lab.data.Split.paper_default("glyphs")
    return {"seen": tuple(split.seen), "unseen": tuple(split.unseen)}


def as_loaded_config(model: str, fields: dict | None, split_seed: int):
    """RunConfig of one evaluation-only run (strategy "none", epoch 0)."""
    import lab
    from app.choose.presets import IMAGENET_PRESET, PRESETS

    if fields is None:
        preset = PRESETS[IMAGENET_PRESET]["config"]
        fields = {"backbone": preset["backbone"], "img_size": preset["img_size"]}
    return lab.RunConfig(name=f"{model}, split seed {split_seed}", dataset="glyphs", **_paper_split(), **fields,
                         strategy="none", epochs=0, split_seed=split_seed, seeds=(split_seed,), projection="none")


def preset_config(seed: int, epochs: int | None):
    """The app's default preset as its Start builds it (the form's sample caps), projection off."""
    import lab
    from app.choose._fields import FORM_DEFAULTS
    from app.choose.presets import DEFAULT_PRESET, PRESETS

    fields = dict(PRESETS[DEFAULT_PRESET]["config"])
    fields.pop("n_unseen", None)
    fields.update({k: FORM_DEFAULTS[k].value for k in ("unseen_per_class", "seen_per_class") if k not in fields})
    fields.update(_paper_split(), seeds=(seed,), projection="none", name=f"default preset, seed {seed}")
    if epochs:
        fields["epochs"] = epochs
    return lab.RunConfig(**fields)


def run_one(cfg, store) -> tuple[str, float]:
    """Run ``cfg`` into ``store`` to its end; (run id, wall seconds). Stops the script if the run fails."""
    import lab
    from lab.events import RunCancelled, RunFailed, RunFinished

    t0, run_id, end = time.perf_counter(), None, None
    for event in lab.run(cfg, store=store):
        run_id = run_id or getattr(event, "run_id", None)
        if isinstance(event, (RunFinished, RunFailed, RunCancelled)):
            end = event
    if not isinstance(end, RunFinished):
        raise SystemExit(f"{cfg.name}: the run did not finish: {end}")
    return run_id, time.perf_counter() - t0


def _table(frame, columns) -> str:
    return frame[columns].to_string(float_format=lambda v: f"{v:.3f}", na_rep="-")


def print_run(title: str, run_id: str, seconds: float, store):
    """Print one run's measure_agreement table; return it."""
    from lab.analysis import measure_agreement

    table = measure_agreement(run_id, store=store)
    print(f"\n{title} ({seconds:.0f} s; run {run_id}), epoch {table.attrs.get('epoch')}, "
          f"{len(table.attrs.get('layers') or [])} layers")
    print(_table(table, ["label", "split", "best_layer", "value", "best_share", "spearman", "n_layers"]))
    for note in table.attrs.get("notes", []):
        print(f"  note: {note}")
    return table


def print_summary(title: str, run_ids, store):
    from lab.analysis import study_agreement

    summary = study_agreement(run_ids, store=store)
    print(f"\n{title}")
    print(_table(summary, ["label", "n_runs", "same_best_layer", "share_same", "median_spearman", "n_spearman"]))
    for note in summary.attrs.get("notes", []):
        print(f"  note: {note}")
    return summary


def sentences(tables: dict, groups: dict, overall) -> list[str]:
    """What agrees and what does not, read off the tables (no claim beyond these runs)."""
    import numpy as np

    out = []
    for measure, row in overall.iterrows():
        if measure not in LABEL_FREE:
            continue
        out.append(f"{row['label']} names NMI's best layer in {row['same_best_layer']} of {row['n_runs']} runs; its "
                   f"layer order correlates with NMI's at a median Spearman of {row['median_spearman']:.2f} over "
                   f"{row['n_spearman']} runs.")
    for group, run_ids in groups.items():
        parts = []
        for measure in LABEL_FREE:
            same, rhos, picks = 0, [], []
            for run_id in run_ids:
                t = tables[run_id]
                if measure not in t.index or "nmi" not in t.index:
                    continue
                same += t.loc[measure, "best_layer"] == t.loc["nmi", "best_layer"]
                rhos.append(t.loc[measure, "spearman"])
                picks.append(str(t.loc[measure, "best_layer"]))
            if not picks:
                continue
            rho = np.nanmedian(rhos) if np.isfinite(rhos).any() else float("nan")
            label = tables[run_ids[0]].loc[measure, "label"]
            parts.append(f"{label} {same}/{len(picks)} (picks {', '.join(sorted(set(picks)))}; median rho {rho:.2f})")
        nmi = sorted({str(tables[r].loc["nmi", "best_layer"]) for r in run_ids if "nmi" in tables[r].index})
        out.append(f"{group}: NMI's best layer {', '.join(nmi)}; label-free measures naming it: " + "; ".join(parts)
                   + ".")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--split-seeds", type=int, nargs="+", default=[0, 1, 2],
                   help="split seeds of the evaluation-only runs")
    p.add_argument("--preset-seed", type=int, default=0, help="the seed of the default preset's run")
    p.add_argument("--preset-epochs", type=int, default=None, help="default: the preset's (4)")
    p.add_argument("--no-preset", action="store_true", help="leave the fine-tuned preset out")
    p.add_argument("--threads", type=int, default=2)
    add_save_option(p)
    args = p.parse_args(argv)
    with recording(__file__, p, args, argv=argv, device="cpu"):
        return _measure(args)


def _measure(args: argparse.Namespace) -> int:
    import torch

    from lab.store import RunStore

    torch.set_num_threads(args.threads)
    tables, groups = {}, {}
    with tempfile.TemporaryDirectory() as runs_dir:
        store = RunStore(runs_dir)
        print("(a) the offline models as loaded (strategy none, epoch 0), glyphs, paper split 15/5, "
              f"split seeds {args.split_seeds}; 300 unseen / 100 seen held-out images per class")
        for model, fields in MODELS:
            for s in args.split_seeds:
                cfg = as_loaded_config(model, fields, s)
                run_id, seconds = run_one(cfg, store)
                tables[run_id] = print_run(f"{model}, split seed {s} ({cfg.backbone}"
                                           f"{f', {cfg.img_size} px' if cfg.img_size else ''})", run_id, seconds,
                                           store)
                groups.setdefault(model + " (as loaded)", []).append(run_id)
                sys.stdout.flush()
        if not args.no_preset:
            from app.choose.presets import DEFAULT_PRESET

            cfg = preset_config(args.preset_seed, args.preset_epochs)
            print(f"\n(b) {DEFAULT_PRESET}: {cfg.backbone}, {cfg.strategy} fine-tuning, {cfg.n_epochs} epochs, lr "
                  f"{cfg.learning_rate:g}, seed {args.preset_seed}; {cfg.unseen_per_class} unseen / "
                  f"{cfg.seen_per_class} seen held-out images per class; projection off")
            run_id, seconds = run_one(cfg, store)
            tables[run_id] = print_run(f"default preset, seed {args.preset_seed}, epoch {cfg.n_epochs}", run_id,
                                       seconds, store)
            groups[f"default preset (fine-tuned {cfg.n_epochs} epochs)"] = [run_id]
        overall = print_summary(f"study_agreement over all {len(tables)} runs", list(tables), store)
        for group, run_ids in groups.items():
            if len(run_ids) > 1:
                print_summary(f"study_agreement, {group}", run_ids, store)
        print("\nWhat agrees and what does not (these runs only):")
        for line in sentences(tables, groups, overall):
            print(f"- {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
