"""The neural-collapse lesson notebook: 07, the terminal phase of training and the four properties, in one minute;
then, across layers, the law of equi-separation (its second part: ``_nb_law.py``)."""
from __future__ import annotations

from _nb_cells import FAST_SWITCH, PLOTS, RUN_HELPER, code, md
from _nb_law import law_part

__all__ = ["collapse_lesson"]


# ----------------------------------------------------------------------------------------------
# 07 neural collapse, taught
# ----------------------------------------------------------------------------------------------

def collapse_lesson():
    return [
        md('''
# Neural collapse, taught: the terminal phase in one minute

Papyan, Han & Donoho (2020) trained classifiers *past* the point where they get every training image
right, the **terminal phase of training**, and saw the last layer's features and the classifier settle
into one simple geometry. They named it **neural collapse** and described it by four properties:

- **NC1, within-class variability collapses.** The features of a class draw together around their class
  mean: NC1 = tr(Σ_W Σ_B⁺)/K, the within-class covariance against the between-class one, falls toward 0.
- **NC2, the class means form a simplex ETF.** The centred class means get equal lengths (equinorm) and
  equal, maximal angles between each other (equiangularity): every cosine is −1/(K−1). For K = 3 classes
  that is an equilateral triangle. The classifier's weight rows do the same.
- **NC3, self-duality.** The classifier's rows point the same way as the centred class means.
- **NC4, decisions by the nearest class centre.** The network's answer is the class whose mean is nearest
  to the image's features: NC4 measures how often the two disagree, and it falls to 0.

This notebook runs the app's lesson preset, **"Neural collapse: the terminal phase (lesson)"**
(`lab.lessons.NC_LESSON`): a 3-layer MLP learns K = 3 digit classes and keeps training well after it
classifies its whole training sample right. Each evaluation measures the collapse family at every layer
on three sets of images (`docs/METRICS.md`, "Neural collapse on the training set"):

- **train**: a fixed sample of the seen classes' training images (20 per class), the images the network
  learns from;
- **seen**: held-out images of the same classes, never trained on;
- **unseen**: the 7 other digits, which the network never learns.

and the classifier-side measures (NC2 of the rows, NC3, NC4, the head's accuracy) at the head input,
`pre_logits`. Everything below describes this one run of one seed.

**FAST vs full.** The full setting is the preset: 15 epochs, about 20 s on a 2-core CPU
(`benchmarks/nc_lesson.py`). FAST mode (`LAB_FAST=1`) stops after 4 epochs: the terminal phase starts,
but it is shorter.

Part 2 goes across layers: the law of equi-separation (He & Su 2023), NC1 falling by the same factor at
every layer, with its own lesson run and exercises.
'''),
        code(FAST_SWITCH),
        code(RUN_HELPER),
        md('''
## The run

The config is the preset's, the one the app's **▶ Run** starts after choosing the lesson preset.
'''),
        code('''
from lab.lessons import NC_LESSON

cfg = NC_LESSON
if FAST:
    cfg = cfg.replace(epochs=4, save_weights=False)     # the same run, a shorter terminal phase
print(cfg.describe())
run_id = run_with_progress(cfg)
record = lab.RunStore().load(run_id)
metrics = record.metrics
print("seen classes:", record.meta["split"]["seen"], " unseen:", record.meta["split"]["unseen"])
'''),
        md('''
## The terminal phase

`lab.analysis.terminal_phase` gives, per seed, the first epoch at which the head classifies every image of
the training sample right (`head_accuracy` = 1.0 on split "train"). The run summary holds the same number,
and every plot below marks it with a vertical line. From that epoch on the training error is 0, yet
training goes on.
'''),
        code('''
terminal = lab.analysis.terminal_phase(metrics)
head = metrics[(metrics["layer"] == "pre_logits") & (metrics["metric"] == "head_accuracy")]
accuracy = head.pivot_table(index="epoch", columns="split", values="value")
print("first epoch at 100 % training-sample accuracy, per seed:", terminal)
accuracy.rename(columns={"train": "train sample", "seen": "held-out (seen)"})
'''),
        code(PLOTS),
        code('''
frame = lab.analysis.aggregate_seeds(metrics, by=("metric", "split", "epoch", "layer"))
layers = list(lab.analysis.layer_order(record.meta.get("layers"), metrics))
marks = [terminal.get(seed) for seed in sorted(terminal)]
classifier = frozenset(lab.catalogue.metric_names(family="classifier_collapse"))
print("layers, input to output:", layers)
'''),
        md('''
## NC1: the classes draw together

NC1 at every layer (colour) on the three sets of images (solid: training sample, dashed: held-out seen
images, dotted: unseen classes), on a log axis. The dash-dotted red line is the terminal phase.
'''),
        code('''
plots.collapse_curves(frame, metrics=("nc1",), layers=layers, head="pre_logits", terminal=marks, log=True,
                      title="NC1 = tr(Σ_W Σ_B⁺)/K against epoch", width=640, height=320)
'''),
        md('''
## NC2: the means and the classifier rows form a simplex

Equiangularity is the mean |cos + 1/(K−1)| over pairs of centred class means (coloured, one line per layer)
and over pairs of classifier rows (black, at the head input): 0 for a simplex ETF. Equinorm is the
coefficient of variation of their lengths: 0 when all are equally long.
'''),
        code('''
(plots.collapse_curves(frame, metrics=("nc2_equiangularity", "nc2_classifier_equiangularity"), layers=layers,
                       head="pre_logits", classifier=classifier, terminal=marks,
                       title="Equiangularity: means (colour), classifier rows (black)")
 + plots.collapse_curves(frame, metrics=("nc2_equinorm", "nc2_classifier_equinorm"), layers=layers,
                         head="pre_logits", classifier=classifier, terminal=marks,
                         title="Equinorm: means (colour), classifier rows (black)"))
'''),
        md('''
**The simplex, seen.** Each evaluation also stores the Gram matrix of the centred class means of every
layer (`record.class_means`). `lab.analysis.simplex` turns one into the means' cosines, the simplex ETF's
(1 on the diagonal, −1/(K−1) = −0.5 off it for K = 3), the mean deviation between the two, and the means'
coordinates in their own plane. Below: the training sample's class means at the head input, before
training (epoch 0) and at the last epoch, beside the equilateral triangle (dashed) of their mean radius.
'''),
        code('''
means = record.class_means
at_head = means[(means["layer"] == "pre_logits") & (means["split"] == "train")].sort_values("epoch")
first, last = at_head.iloc[0], at_head.iloc[-1]
before, after = lab.analysis.simplex(first["gram"]), lab.analysis.simplex(last["gram"])
print(f"mean |cos - ideal| off the diagonal: epoch {first['epoch']} {before['deviation']:.3f}, "
      f"epoch {last['epoch']} {after['deviation']:.3f} (0 for a simplex ETF)")
(plots.simplex_plane(before["coords"], list(first["classes"]), title=f"class means, epoch {first['epoch']}")
 + plots.simplex_plane(after["coords"], list(last["classes"]), title=f"class means, epoch {last['epoch']}")
 + plots.cosine_heatmap(after["cosines"], list(last["classes"]), title=f"cosines, epoch {last['epoch']}")
 + plots.cosine_heatmap(after["ideal"], list(last["classes"]), title="simplex ETF: -1/(K-1) = -0.5")).cols(2)
'''),
        md('''
## NC3 and NC4: the classifier agrees with the class means

NC3 (self-duality) is ‖W/‖W‖ − Mᵀ/‖M‖‖²: the classifier's rows W against the centred class means M,
each scaled to unit norm, 0 when they coincide. NC4 is the share of images whose head answer differs from
the nearest class centre's.
'''),
        code('''
(plots.collapse_curves(frame, metrics=("nc3_self_duality",), layers=layers, head="pre_logits",
                       classifier=classifier, terminal=marks, log=True, title="NC3 self-duality")
 + plots.collapse_curves(frame, metrics=("nc4_ncc_disagreement",), layers=layers, head="pre_logits",
                         classifier=classifier, terminal=marks, title="NC4: head ≠ nearest class centre"))
'''),
        md('''
**Checks.** What the lesson promises, on this run: the training sample is classified right before the last
epoch; the training sample's NC1 at the head input ends at least 10 times lower than at epoch 0; NC4 on the
training sample ends at 0; and the simplex plots' deviation is the run's `nc2_equiangularity` of the same
means (one number, computed once).
'''),
        code('''
import numpy as np

at = metrics[(metrics["layer"] == "pre_logits") & (metrics["split"] == "train")]
nc1 = at[at["metric"] == "nc1"].groupby("epoch")["value"].mean()
nc4 = at[at["metric"] == "nc4_ncc_disagreement"].groupby("epoch")["value"].mean()
angles = at[at["metric"] == "nc2_equiangularity"].groupby("epoch")["value"].mean()
epoch = int(last["epoch"])
assert all(e is not None and e < epoch for e in terminal.values()), terminal
assert nc1.iloc[0] / nc1.iloc[-1] >= 10, nc1
assert nc4.iloc[-1] == 0, nc4
assert np.isclose(after["deviation"], angles[epoch], rtol=1e-4), (after["deviation"], angles[epoch])
print(f"terminal phase from epoch {terminal}; NC1 at pre_logits fell {nc1.iloc[0] / nc1.iloc[-1]:.0f}x "
      f"({nc1.iloc[0]:.3g} -> {nc1.iloc[-1]:.3g}); NC4 at the end {nc4.iloc[-1]:g}")
''', "claim"),
        md('''
## Train, held-out, unseen

Papyan et al. measured collapse on the training set. Hui, Belkin & Nakkiran (2022) asked whether it
carries over to new images: collapse on the training set need not hold on held-out images of the same
classes, and it says nothing by itself about classes never trained on. The run measured NC1 on all three;
here it is at the last epoch, per layer. How far the held-out and unseen numbers follow the training
sample's is what this run shows, for this network and these classes.
'''),
        code('''
last_epoch = metrics[metrics["metric"] == "nc1"]["epoch"].max()
table = (metrics[(metrics["metric"] == "nc1") & (metrics["epoch"] == last_epoch)]
         .pivot_table(index="layer", columns="split", values="value").reindex(layers)[["train", "seen", "unseen"]])
print(f"NC1 at epoch {last_epoch} (lower: tighter classes)")
table.rename(columns={"train": "train sample", "seen": "held-out (seen)", "unseen": "unseen classes"})
'''),
        md('''
## The app's card

The app draws all of this in its **Neural collapse** card (under the live view's curves, and under the
runs table for a stored run). The card is a component of its own: it shows any stored run in a notebook.
Choose the layers drawn, the layer and images of the simplex, and step through the epochs with the player.
'''),
        code('''
view = app.CollapseView(collapsed=False)
view.show_record(record)
view
'''),
        md('''
## Share the lesson as one file

A student without Python or layerscope can still open the lesson: `lab.export.to_html` writes the run into one
self-contained HTML file that opens in any browser, offline, with no server. It shows the same figures as the
card above, from the same `lab.analysis` tables, and its sliders step through the epochs and layers
([Share a run as one HTML file](../docs/guide/html.md)). From a shell, `python -m lab export RUN_ID -o lesson.html`
does the same. To make your own lesson, change `cfg` (the exercises below are a start), run it, and export it.
'''),
        code('''
page = lab.export.to_html([run_id], "nc_lesson.html")
print(f"{page.resolve()}: {page.stat().st_size / 1e6:.2f} MB, open it in any browser")
'''),
        md('''
## Exercises

1. **More depth.** Run `cfg.replace(backbone="mlp:depth=6,width=64")`. Does the terminal phase start at
   the same epoch? Does NC1 fall at the deeper layers first or at the shallower ones?
2. **Label noise.** Run `cfg.replace(label_noise=0.3, epochs=40)`: 30 % of the training labels are wrong,
   and the training sample carries the wrong labels too. How many epochs does the network need to get its
   whole training sample "right"? What happens to NC1 on the held-out images, whose labels are true?
3. **Held-out vs train.** Compare the `train sample` and `held-out (seen)` columns above over the epochs
   (`metrics.pivot_table(index="epoch", columns="split", values="value")` on `nc1` at `pre_logits`).
   From which epoch do they part?
4. **More classes.** Run `cfg.replace(n_unseen=5)` (K = 5 seen classes): the simplex ETF's cosine is
   −1/4 and the card shows the cosine matrices without the plane.
'''),
        *law_part(),
    ]
