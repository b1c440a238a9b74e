"""The second part of the neural-collapse lesson notebook (07): collapse across layers, the law of equi-separation."""
from __future__ import annotations

from _nb_cells import code, md

__all__ = ["law_part"]


def law_part():
    return [
        md('''
# Part 2: across layers, the law of equi-separation

Part 1 watched the last layer. He & Su, "A law of data separation in deep learning" (PNAS 2023,
arXiv 2210.17020), looked at every layer and found a regularity. They measure how well a layer separates
the classes by its *separation fuzziness* D = Tr(SS_w SS_b⁺), the within-class scatter against the
between-class one: our NC1 times K when the classes are balanced, as the run's samples are
(`docs/METRICS.md`, "Collapse across layers"). In a trained network **log D falls linearly with depth**:
each layer multiplies it by the same ratio, as if every layer did an equal share of the separating. The law
is absent at initialization and emerges as training goes on.

`lab.analysis.separation_law` fits log10 NC1 against the layer index, per seed, epoch and split, over the
run's distinct layers (a tap that is the same tensor as a deeper one, here the last hidden layer and
`pre_logits`, counts once). It reports the **ratio per layer** (10^slope: below 1, each deeper layer
separates the classes better) and **Pearson r** of the fit (near −1 or +1 where the law holds).

The run is the app's preset **"Neural collapse across layers: the law of equi-separation (lesson)"**
(`lab.lessons.SEPARATION_LAW_LESSON`): an 8-layer MLP of width 256 learns 7 digit classes for 8 epochs, and
NC1 is measured at every layer on the training sample, held-out images of the same classes and the 3
unseen digits.

**FAST vs full.** The full setting is the preset: 8 epochs, 28 s of wall time on a 2-core CPU in one
measured run (`benchmarks/results/separation_law_lesson.txt`). There, seed 0's training sample went from
r = +0.85 at epoch 0 (no law) to r = −0.995 with a ratio of 0.64 per layer at epoch 8; the held-out images
to −0.999 and 0.71; and the unseen classes to r = +0.96 with a ratio of 1.36: each deeper layer separated
them *worse*, by a constant factor. Over seeds 0, 1 and 2
(`benchmarks/results/separation_law_lesson_seeds-0-1-2.txt`, mean ± std at epoch 8): ratio 0.644 ± 0.006 and
r −0.997 ± 0.003 on the training sample, 1.30 ± 0.06 and +0.976 ± 0.015 on the unseen classes (above 1 in all
three seeds). FAST mode (`LAB_FAST=1`) trains for 2 epochs on fewer images.
'''),
        code('''
from IPython.display import display
from lab.lessons import SEPARATION_LAW_LESSON

law_cfg = SEPARATION_LAW_LESSON
if FAST:   # the same network and classes, 2 epochs, fewer images, no 2-D layouts
    law_cfg = law_cfg.replace(epochs=2, seen_per_class=20, unseen_per_class=30, train_sample_per_class=30,
                              projection="none", save_weights=False)
print(law_cfg.describe())
law_record = lab.RunStore().load(run_with_progress(law_cfg))
law = lab.analysis.separation_law(law_record)       # one row per seed, epoch and split
law_last = int(law["epoch"].max())
law[law["epoch"].isin([0, law_last])]
'''),
        md('''
## The law, drawn

Left: log10 NC1 at every distinct layer at the last epoch (circles: training sample, squares: held-out seen
images, triangles: unseen classes) with each split's least-squares line; the legend gives the ratio per layer
and r. Right: r at every epoch, the law emerging. These are the two panels of the app's **Neural collapse**
card, whose epoch player moves both.
'''),
        code('''
law_points = lab.analysis.separation_law_points(law_record, epoch=law_last)
law_layers = list(dict.fromkeys(law_points.sort_values("index")["layer"]))
print("distinct layers, input to output:", law_layers)
(plots.law_depth(law_points, law[law["epoch"] == law_last], layers=law_layers,
                 title=f"log10 NC1 against depth, epoch {law_last}")
 + plots.law_r_curve(lab.analysis.separation_law_across_seeds(law_record), epoch=law_last,
                     terminal=list(lab.analysis.terminal_phase(law_record.metrics).values()),
                     title="r against epoch"))
'''),
        md('''
## In the run summary

The run's summary (`record.summary()`, the one the engine, `meta.json`, `python -m lab runs show` and
exported notebooks share) holds each split's law at its last evaluation, mean and spread over the run's seeds.
`lab.export.tables.separation_law_table` lays it out, one row per run and split.
'''),
        code('''
tables.separation_law_table({"lesson": law_record})
'''),
        md('''
**Checks.** What the lesson promises (`lab.lessons`), on this run: the training sample's r lies above −0.5 at
epoch 0 (no law) and at most −0.98 at the last epoch (the law holds), over the 8 distinct layers; the summary
reports the same fit. The unseen classes' ratio is printed, whatever it is: whether it exceeds 1 is what this
run measured, not a promise.
'''),
        code('''
from lab.lessons import LAW_ABSENT_R, LAW_HOLDS_R

train = law[law["split"] == "train"].set_index("epoch")
summary_law = law_record.summary()["separation_law"]
assert train.loc[0, "r"] > LAW_ABSENT_R, train.loc[0]
assert train.loc[law_last, "r"] <= LAW_HOLDS_R, train.loc[law_last]
assert train.loc[law_last, "n_layers"] == 8 and summary_law["train"]["n_layers"] == 8
assert abs(summary_law["train"]["r"] - train.loc[law_last, "r"]) < 1e-12     # one fit, reported twice
unseen = summary_law["unseen"]
print(f"training sample: r {train.loc[0, 'r']:+.3f} at epoch 0, {train.loc[law_last, 'r']:+.3f} at epoch {law_last} "
      f"(ratio {train.loc[law_last, 'ratio']:.2f} per layer); unseen classes at epoch {law_last}: "
      f"ratio {unseen['ratio']:.2f} per layer, r {unseen['r']:+.3f}")
''', "claim"),
        md('''
## Exercises

Each exercise is one code cell: change the config, run the cell, and the table compares the law at the last
epoch across the runs so far (`exercises`, with the lesson first). They are runs of the lesson's size (its 8
epochs took 28 s on a 2-core CPU; exercise 4 trains 20). In FAST mode only exercise 3 trains (2 epochs, few images); the others print their config: set
`FAST = False` at the top, or run them yourself.
'''),
        code('''
exercises = {"lesson": law_record}
'''),
        md('''
1. **Depth.** Fewer or more layers of the same width. Does the ratio per layer stay the same, or does the
   separation the whole network achieves (the ratio to the power of the number of layers) stay the same?
'''),
        code('''
depth_cfg = law_cfg.replace(backbone="mlp:depth=4,width=256")        # try depth=12
print(depth_cfg.describe())
if not FAST:
    exercises["depth 4"] = lab.RunStore().load(run_with_progress(depth_cfg))
    display(tables.separation_law_table(exercises))
'''),
        md('''
2. **Width.** Narrow layers. Does the law still hold on the training sample? On the unseen classes?
'''),
        code('''
width_cfg = law_cfg.replace(backbone="mlp:depth=8,width=32")         # try width=1024
print(width_cfg.describe())
if not FAST:
    exercises["width 32"] = lab.RunStore().load(run_with_progress(width_cfg))
    display(tables.separation_law_table(exercises))
'''),
        md('''
3. **BatchNorm off.** `bn=0` builds the same MLP without BatchNorm, which trains differently. Does the law
   emerge within the same epochs? Look at r against epoch (`lab.analysis.separation_law_across_seeds(record)`).
'''),
        code('''
bn_cfg = law_cfg.replace(backbone="mlp:depth=8,width=256,bn=0")
print(bn_cfg.describe())
exercises["no BatchNorm"] = lab.RunStore().load(run_with_progress(bn_cfg))     # trains in FAST mode too
display(tables.separation_law_table(exercises))
'''),
        md('''
4. **Label noise.** 30 % of the training labels are wrong (and so are the training sample's, which the law is
   read on). Give it more epochs to fit them. Does the training sample still follow the law? The held-out
   images, whose labels are true?
'''),
        code('''
noise_cfg = law_cfg.replace(label_noise=0.3, epochs=20)
print(noise_cfg.describe())
if not FAST:
    exercises["label noise 0.3"] = lab.RunStore().load(run_with_progress(noise_cfg))
    display(tables.separation_law_table(exercises))
'''),
        md('''
5. **Fewer training images.** `heldout_fraction=0.8` trains on a fifth of each seen class's images (the rest
   is held out). Does the law on the held-out images follow the training sample's?
'''),
        code('''
few_cfg = law_cfg.replace(heldout_fraction=0.8)
print(few_cfg.describe())
if not FAST:
    exercises["20 % of the training images"] = lab.RunStore().load(run_with_progress(few_cfg))
    display(tables.separation_law_table(exercises))
'''),
    ]
