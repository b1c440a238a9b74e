"""Build the shipped notebooks from this one script, so that they stay consistent.

Run from the repository root after editing a notebook's text or code here::

    .venv/bin/python notebooks/_build.py            # writes notebooks/0*.ipynb (no outputs)
    .venv/bin/python notebooks/_build.py --check    # exit 1 if a committed notebook differs

The notebooks import ``lab`` and draw with ``app.plots``, the app's own plot module (the
quickstart also shows the ``app`` component); they never define the library: no code cell
holds a ``def`` or ``class`` (tests/test_export.py checks). Each has a ``FAST`` switch read
from the ``LAB_FAST`` environment variable that shrinks it to about a minute on a 2-core CPU
(the notebook tests run them that way); the text says what the full setting shows.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat
from nbformat import v4

HERE = Path(__file__).resolve().parent

_FAST = '''
import os

import lab

# FAST = True shrinks every run so the notebook finishes in about a minute on a 2-core CPU
# (the notebook tests set LAB_FAST=1). Leave it off to see the full setting described in the text.
FAST = os.environ.get("LAB_FAST", "0") == "1"
print("FAST mode" if FAST else "full setting")
'''

# A progress bar over lab.run's event stream (the library's, so every notebook shows the same).
_RUN_HELPER = '''
# run_with_progress(cfg) streams lab.run(cfg) with a progress bar and returns the stored run id
from lab.progress import run_with_progress
'''

# The plotting module the app draws with, and the tables it draws from (numbers from lab.analysis).
_PLOTS = '''
import holoviews as hv

import app
from app import plots
from lab import tables

app.extension()  # Panel, Bokeh and HoloViews JavaScript and CSS from the installed packages: works offline
'''


def _md(text: str):
    return v4.new_markdown_cell(text.strip("\n"))


def _code(text: str, *tags: str):
    cell = v4.new_code_cell(text.strip("\n"))
    if tags:
        cell.metadata["tags"] = list(tags)
    return cell


# ----------------------------------------------------------------------------------------------
# 01 quickstart
# ----------------------------------------------------------------------------------------------

def quickstart():
    return [
        _md('''
# layerscope in ten cells

Which layer of a vision backbone separates classes it was never trained on, and how
collapsed are its features? This notebook walks the library once: load the embedded
glyph dataset, split its classes into *seen* and *unseen*, load a backbone, extract
every layer's features of the unseen images, tabulate the per-layer metrics, draw a
UMAP, stream a short fine-tuning run, and open the app's component inline and as an
ipywidget.

Everything runs offline on a CPU. With `FAST` on (environment variable `LAB_FAST=1`) the
samples are tiny and the run uses a small MLP; in the full setting the same cells run
ResNet-18 on all 320 images per unseen style and fine-tune it for 3 epochs, which takes
a few minutes on a laptop CPU.
'''),
        _code(_FAST),
        _md('''
**1. Data.** The glyph dataset ships with the package: 320 CJK characters rendered in
20 typefaces, 64 × 64 px. The classes are the *styles* (typefaces), so a model must
learn style, not character identity.
'''),
        _code('''
ds = lab.data.load("glyphs")
print(f"{len(ds)} images, {len(ds.classes)} classes, {ds.image_size} px, {ds.in_chans} channel(s)")
ds.classes
'''),
        _md('''
**2. Split.** The seed papers hold out 5 styles: the model is fine-tuned on the other 15
(*seen*) and we measure how well each layer separates the 5 *unseen* ones.
'''),
        _code('''
split = lab.data.Split.paper_default(ds)
print("seen:  ", split.seen)
print("unseen:", split.unseen)
'''),
        _md('''
**3. Backbone.** `glyph_resnet18` is a ResNet-18 of the offline zoo (`lab/zoo`),
pretrained on fonts that are *not* among the 20 styles here (its card says how); the
papers start from ImageNet weights in the same way. Any timm model name works too
(`"resnet18"`: random init offline; `pretrained=True` when the weights are cached), as do
Hugging Face models (`"hf:cvt"`, `"hf:ORG/NAME"` from the local cache). `bb.layers` lists
the taps from input to output; the last one, `pre_logits`, is the pooled penultimate
feature, and `bb.normalization` is the input scaling the model was trained with.
'''),
        _code('''
bb = lab.backbones.load("zoo:glyph_resnet18", device="auto")
print(bb.device, bb.layers)
print(bb.normalization)
'''),
        _md('''
**4. Features of every layer.** One forward pass per batch, hooks on every tap, feature
maps average-pooled to one vector per image and layer.
'''),
        _code('''
unseen = ds.subset(split.unseen).sample_per_class(20 if FAST else 320)
feats = lab.features.extract(bb, unseen, layers=bb.layers)
{layer: tuple(X.shape) for layer, X in feats.items()}
'''),
        _md('''
**5. Metrics per layer.** NMI (k-means clustering vs the true styles), kNN accuracy and
the linear probe measure separability of the unseen styles; NC1, CDNV and the numerical
rank measure collapse (see `METRICS.md` for the exact definitions).
'''),
        _code('''
metrics = ("nmi", "knn_accuracy", "nc1") if FAST else lab.metrics.DEFAULT_SEPARABILITY + lab.metrics.DEFAULT_COLLAPSE
report = lab.metrics.layer_report(feats, feats.labels, metrics=metrics)
assert list(report.index) == bb.layers and report["nmi"].between(0, 1).all()
best_layer = report["nmi"].idxmax()
print(f"best layer by unseen NMI: {best_layer} (g = {report['nmi'].max():.3f})")
report
''', "claim"),
        _md('''
**6. A UMAP of the best layer**, coloured by style. (In FAST mode a PCA layout, to skip
UMAP's ~15 s of one-time compilation.)
'''),
        _code('''
import app  # the repository's Panel app (importable after `pip install -e .`)

app.extension()  # Panel, Bokeh and HoloViews JavaScript and CSS from the installed packages: works offline
import hvplot.pandas  # noqa: F401,E402
import pandas as pd  # noqa: E402

X = feats[best_layer]
coords = lab.projection.pca_layout(X) if FAST else lab.projection.umap_layout(X)
points = pd.DataFrame({"x": coords[:, 0], "y": coords[:, 1],
                       "style": [unseen.classes[i] for i in feats.labels.tolist()]})
points.hvplot.scatter("x", "y", c="style", cmap="Category10", width=520, height=400,
                      title=f"unseen styles at {best_layer}", xaxis=None, yaxis=None)
'''),
        _md('''
**7. A fine-tuning run, streamed.** `lab.run(config)` is a generator of events (run
started, layer metrics, projections, epoch finished, ...), the same stream the app and the
command line consume; the run is stored (in `$LAB_RUNS_DIR` or `./runs`) and can be
reloaded, compared and exported to a notebook.
'''),
        _code(_RUN_HELPER),
        _code('''
from app.presets import DEFAULT_PRESET, PRESETS  # noqa: E402

preset = dict(PRESETS[DEFAULT_PRESET]["config"])   # the app's default run: the zoo ResNet-18, fine-tuned
cfg = lab.RunConfig(name="quickstart", **dict(preset, seen=split.seen, unseen=split.unseen))
if FAST:
    # a small MLP trained on a quarter of the seen images (heldout_fraction=0.75)
    cfg = cfg.replace(backbone="mlp:depth=3,width=64", epochs=1, heldout_fraction=0.75, unseen_per_class=20,
                      seen_per_class=10, metrics=["nmi", "knn_accuracy", "nc1"], projection="pca",
                      save_weights=False)
print(cfg.describe())
run_id = run_with_progress(cfg)
record = lab.RunStore().load(run_id)
assert record.status == "finished"
record.summary()
''', "claim"),
        _md('''
**8. The app, inline.** The same component that `panel serve app` shows: settings on the
left, live plots of a run, and the stored runs (including the one just made) under
*Compare & export*. Press **▶ Run**: the run goes on in a background thread of this kernel
and every layer's curves, the heatmap and the embedding layout fill in as they are measured
(the kernel stays free for other cells). `app.extension()` above loaded everything it needs
from the installed packages, so it works without a network.
'''),
        _code('''
from app import LayerScope

scope = LayerScope()
if FAST:
    scope.config.apply_preset("Tiny demo (fast)")
    scope.config.projection = "pca"
scope
'''),
        _md('''
**9. The live view of one run, as an ipywidget.** Where Panel's own notebook comms do not
reach (VS Code, Colab, Voilà), wrap any component in `pn.ipywidget(...)`, or call
`app.extension(comms="ipywidgets")` once to make every Panel output an ipywidget. Here the
live view of the run configured in step 7: press **▶ Run** to stream it again.
'''),
        _code('''
import panel as pn

from app import LiveView, RunControl

view = LiveView()
control = RunControl(view, cfg.replace)   # make_config: any callable returning a RunConfig
pn.ipywidget(pn.Column(control, view, sizing_mode="stretch_width"))
'''),
    ]


# ----------------------------------------------------------------------------------------------
# 02 neural collapse across layers
# ----------------------------------------------------------------------------------------------

def neural_collapse():
    return [
        _md('''
# Neural collapse, layer by layer

Train a plain MLP on handwritten digits long enough that it fits its training set
perfectly and keeps training (the *terminal phase*). Papyan, Han and Donoho (2020) found
that the last layer's features then **collapse**: all images of a class move to their
class mean. Li, Liu et al. ("Principled and efficient transfer learning of deep models via
neural collapse", Figure 2) showed that collapse also happens in the intermediate layers,
**progressively**: deeper layers collapse first and most, and the collapse creeps towards
the input as training continues.

This notebook reproduces that picture with `lab`: one run of `lab.run`, NC1 measured at
every layer after every epoch.

**FAST vs full.** In FAST mode (`LAB_FAST=1`) the MLP is small and trains for a few
epochs: enough for the deep layers to collapse more than the shallow ones. The full
setting (8 layers of width 256, 60 epochs, about 10 minutes on a CPU) reaches the terminal
phase and shows the collapse front moving towards the input, epoch by epoch.
'''),
        _md('''
## The quantities, in plain words

Take the features of one layer for the held-out images of the training classes.

- **Within-class spread** Σ_W: how far images lie from their own class mean.
- **Between-class spread** Σ_B: how far the class means lie from each other.
- **NC1** = tr(Σ_W Σ_B⁺) / K, with K classes: the within-class spread measured in units
  of the between-class spread. Large: classes overlap; near 0: every class has collapsed
  to a point, far from the others. We plot log₁₀ NC1 because it spans decades.
- **CDNV** (class-distance normalised variance): the same idea per pair of classes,
  variance over squared distance of the two means.
- **NCC accuracy**: classify each image by its nearest class mean; it reaches 1 as the
  classes collapse.

Exact definitions: `METRICS.md` in the repository.
'''),
        _code(_FAST),
        _code(_RUN_HELPER),
        _md('''
## The run

Digits (scikit-learn's 8×8 digits, 32 px), 8 classes seen, 2 unseen; the MLP trains
from scratch (`strategy="full"`) with AdamW at 1e-3, without augmentation, so that it can
fit its training set exactly.
'''),
        _code('''
cfg = lab.RunConfig(
    name="neural collapse across layers", dataset="digits", n_unseen=2,
    backbone="mlp:depth=8,width=256", strategy="full", epochs=60, lr=1e-3, augment=False, batch_size=64,
    metrics=["nc1", "cdnv", "ncc_accuracy", "nmi"], seen_per_class=None, unseen_per_class=None,
    projection="none", save_weights=False, seeds=[0],
)
if FAST:
    cfg = cfg.replace(backbone="mlp:depth=4,width=64", epochs=3, seen_per_class=30, unseen_per_class=30)
print(cfg.describe())
run_id = run_with_progress(cfg)
run = lab.RunStore().load(run_id)
'''),
        _md('''
## NC1 at every layer, every epoch

Each row of the heatmap is a layer (input at the bottom), each column an epoch (0 is the
untrained network). Read it along a column: NC1 falls from the input towards the output.
Read it along a row: training lowers it, first in the deep layers.
'''),
        _code(_PLOTS),
        _code('''
layers = tables.run_layers(run)                         # input -> output
nc1 = tables.epoch_table(run, "nc1", split="seen")     # mean ± std over seeds per (epoch, layer)
plots.layer_epoch_heatmap(run, "nc1", "seen", cmap="viridis_r", width=640, height=360)
'''),
        _md('''
The same numbers as curves, one per epoch: the Figure 2 view. Early epochs are light,
late ones dark.
'''),
        _code('''
plots.epoch_curves(run, "nc1", split="seen")
'''),
        _md('''
**The claim, checked.** At the final epoch the last layer is more collapsed than the
first: its mean NC1 (over seeds) is lower. (Before training it is the other way round
for a random MLP: the collapse is learned.)
'''),
        _code('''
final = nc1[nc1["epoch"] == nc1["epoch"].max()].set_index("layer")["mean"]
first, last = layers[0], layers[-1]
start = nc1[nc1["epoch"] == 0].set_index("layer")["mean"]
print(f"final epoch NC1: {first} {final[first]:.3f}  ->  {last} {final[last]:.3f}")
print(f"untrained NC1:   {first} {start[first]:.3f}  ->  {last} {start[last]:.3f}")
assert final[last] < final[first], "expected the last layer to be more collapsed than the first"
assert final[last] < start[last], "expected training to collapse the last layer"
''', "claim"),
        _md('''
How close is the network to fitting its training set, and how do the other collapse
measures follow?
'''),
        _code('''
train = run.training[["epoch", "train_loss", "train_accuracy", "heldout_accuracy"]]
table = tables.layer_table([run], split="seen")   # mean over seeds per layer, last epoch
display(train.tail(5))
table
'''),
        _md('''
## Exercises

1. **Depth.** Change the backbone to `"mlp:depth=12,width=256"`. Does the collapse front
   reach the first layers within the same number of epochs?
2. **Unseen classes.** Plot NC1 on `split == "unseen"`, the two digits the network never
   saw. Do the deep layers collapse *those* classes too? What does that say about transfer?
3. **Label noise.** Set `label_noise=0.3` in the config. The network can still fit the
   training set (by memorising), but does its held-out NC1 still fall?
4. **Linear probe.** Use `strategy="linear"`: only the classifier trains. Which layers
   change now?
'''),
    ]


# ----------------------------------------------------------------------------------------------
# 03 which layer generalizes
# ----------------------------------------------------------------------------------------------

def which_layer():
    return [
        _md('''
# Which layer generalizes?

Dyballa, Gerritz and Zucker (2024, arXiv 2405.01524) and Gerritz, Dyballa and Zucker
(2024, arXiv 2402.14095) fine-tune a backbone on *seen* classes and measure, at every
intermediate layer, how well the features separate *unseen* classes. Their findings: the
best layer is often not the last one, and accuracy on the seen classes does not predict
how well a network generalizes to the unseen ones.

Here is their protocol on the glyph dataset: 15 seen and 5 unseen calligraphy styles;
fine-tune; per layer NMI (k-means vs the true styles), 1-NN accuracy and a linear probe,
each for 3 seeds; the **generalization index g** = the highest mean NMI over layers, and
the layer where it is reached; then seen accuracy vs g across backbones.

**FAST vs full.** The full setting compares the offline zoo's glyph-pretrained ResNet-18
and ViT-tiny (pretrained on fonts disjoint from these 20 styles, as the papers start from
ImageNet weights) with a ResNet-18 from random init, each fine-tuned as the app's default
preset does with 3 seeds (about half an hour on a CPU, minutes on a GPU). FAST mode
(`LAB_FAST=1`) swaps in two small MLPs of different depth, trained for one epoch on a
quarter of the seen images, two seeds and 20 unseen images per style: the same cells, the
same tables, toy numbers.
'''),
        _code(_FAST),
        _code(_RUN_HELPER),
        _code('''
from app.presets import DEFAULT_PRESET, PRESETS

recipe = {key: PRESETS[DEFAULT_PRESET]["config"][key] for key in ("epochs", "lr")}   # the app's default recipe
split = lab.data.Split.paper_default("glyphs")
base = lab.RunConfig(dataset="glyphs", unseen=split.unseen, seen=split.seen, strategy="full", **recipe,
                     seeds=[0, 1, 2], metrics=["nmi", "knn_accuracy", "linear_probe_accuracy"],
                     unseen_per_class=None, seen_per_class=100, projection="none", save_weights=False)
BACKBONES = ["zoo:glyph_resnet18", "zoo:glyph_vit_tiny", "resnet18"]      # two glyph-pretrained, one from scratch
if FAST:
    base = base.replace(epochs=1, seeds=[0, 1], heldout_fraction=0.75, unseen_per_class=20, seen_per_class=10,
                        augment=False, metrics=["nmi", "knn_accuracy"])
    BACKBONES = ["mlp:depth=2,width=64", "mlp:depth=4,width=64"]
print("unseen styles:", split.unseen)
configs = [base.replace(name=f"which layer: {name}", backbone=name) for name in BACKBONES]
run_ids = {cfg.backbone: run_with_progress(cfg) for cfg in configs}
store = lab.RunStore()
runs = {name: store.load(run_id) for name, run_id in run_ids.items()}
'''),
        _md('''
## Separability of the unseen styles, layer by layer

Mean ± std over seeds at the last epoch. The x axis runs from input to output; the
layers differ between backbones, so each gets its own row, one panel per metric.
'''),
        _code(_PLOTS),
        _code('''
panels = [plots.layer_curves({name: run}, metric, width=420, height=300)
          for name, run in runs.items() for metric in base.metrics]
hv.Layout(panels).opts(shared_axes=False).cols(len(base.metrics))   # each backbone has its own layers
'''),
        _md('''
## g, its layer, and seen accuracy

g is the maximum over layers of the mean (over seeds) unseen NMI; seen accuracy is the
accuracy on held-out images of the 15 seen styles. The store's run summary computes both;
the cell checks g against the curves above.
'''),
        _code('''
import pandas as pd

rows = []
for name, run in runs.items():
    summary = run.summary()
    nmi = tables.curve_table([run], "nmi").set_index("layer")["mean"]   # the curves above, last epoch
    assert abs(summary["g"] - nmi.max()) < 1e-9 and abs(nmi[summary["best_layer"]] - nmi.max()) < 1e-9
    layers = tables.run_layers(run)
    rows.append({"backbone": name, "seen_accuracy": summary["heldout_accuracy"], "g": summary["g"],
                 "g_std": summary["g_std"], "best_layer": summary["best_layer"],
                 "depth_of_best": f"{layers.index(summary['best_layer']) + 1}/{len(layers)}",
                 "last_layer_nmi": nmi[layers[-1]]})
comparison = pd.DataFrame(rows)
assert len(comparison) == len(BACKBONES) and comparison["g"].between(0, 1).all()
comparison
''', "claim"),
        _code('''
corr = lab.analysis.accuracy_vs_g(comparison, accuracy="seen_accuracy", n_boot=200)
print(f"Spearman's rho of seen accuracy and g over {corr['n']} backbones: {corr['spearman']:.2f} "
      "(NaN below 3 backbones: too few for a statistic)")
plots.accuracy_vs_g(comparison, by="backbone", x="seen_accuracy", y="g", width=520, height=380)
'''),
        _md('''
**Reading it.** If seen accuracy predicted generalization, the points would line up along
an increasing line. In the papers they do not: networks with similar seen accuracy differ
widely in g, and the best layer is frequently an intermediate one (compare `g` with
`last_layer_nmi`). With three backbones this is an anecdote, not a statistic: add
backbones (any timm name), seeds or datasets (`"cifar100:PATH"`) to test it.

To explore the runs interactively, open them in the app (`panel serve app`), or export
them: `lab.export.to_notebook(list(run_ids.values()), "which_layer_runs.ipynb")`.
'''),
    ]


# ----------------------------------------------------------------------------------------------
# 04 layer utilization
# ----------------------------------------------------------------------------------------------

def utilization():
    return [
        _md('''
# Where does memorization live? Layer utilization under label noise

Wang and Yang ("With greater distance comes worse performance") measure, for every
layer, how far its weights travel from their initial values during training: the
**utilization** ‖W − W⁰‖ (absolute, and relative to ‖W⁰‖). Training on noisy labels
forces a network to memorise; they find that memorisation shows up as larger distances,
concentrated in particular layers, and that the further a layer moves, the worse the
network generalizes. Their second tool is the **contribution** of a layer: re-initialise
just that layer to its initial weights and see what changes.

Here: the same MLP trained on digits with clean labels and with a fraction of the training
labels replaced by wrong ones, by plain SGD at a constant learning rate as in the paper
(Adam's normalised steps would move every weight at the same pace whatever the loss, and a
rate that decays to zero stills the late epochs in which the noisy networks memorise);
per-layer utilization after
training, and the effect of re-initialising each layer on held-out accuracy.

**FAST vs full.** The full setting trains 8 layers of width 256 for 30 epochs at noise
levels 0, 0.4 and 0.8 (several minutes on a CPU); the longer the noisy networks train,
the further their last layers travel while they memorise. FAST mode (`LAB_FAST=1`) uses
4 layers of width 64, 4 epochs and two noise levels: already enough to see the direction
of the effect.
'''),
        _code(_FAST),
        _code(_RUN_HELPER),
        _code('''
base = lab.RunConfig(
    dataset="digits", n_unseen=2, backbone="mlp:depth=8,width=256", strategy="full", epochs=30,
    optimizer="sgd", lr=0.05, lr_schedule="constant", batch_size=32, augment=False, contribution=True,
    metrics=["nmi", "nc1"],
    seen_per_class=None, unseen_per_class=None, projection="none", save_weights=False, seeds=[0],
)
NOISE = [0.0, 0.4, 0.8]
if FAST:
    base = base.replace(backbone="mlp:depth=4,width=64", epochs=4, seen_per_class=30, unseen_per_class=30)
    NOISE = [0.0, 0.8]
store = lab.RunStore()
runs = {}
for noise in NOISE:
    cfg = base.replace(name=f"utilization, label noise {noise:g}", label_noise=noise)
    runs[noise] = store.load(run_with_progress(cfg))
'''),
        _md('''
## Distance from initialisation, per layer

Relative utilization ‖W − W⁰‖ / ‖W⁰‖ of every layer at the last epoch, one curve per
noise level.
'''),
        _code('''
import hvplot.pandas  # noqa: F401
import pandas as pd

from lab import tables

# per noise level: each layer's distance at the last epoch (mean over seeds), input -> output
util = pd.concat([tables.utilization_table(run).assign(noise=noise) for noise, run in runs.items()],
                 ignore_index=True)
util.hvplot.line("layer", "relative", by="noise", width=600, height=340, rot=30,
                 title="relative distance from initialisation at the last epoch")
'''),
        _md('''
**The claim, checked.** Memorising wrong labels is the job of the deep layers: in the
noisiest run a larger share of all the weight change sits in the last layer than in the
clean run, and that run generalizes worse to held-out images of the same classes.
'''),
        _code('''
total = util.groupby("noise")["absolute"].sum()
last_share = util.groupby("noise")["absolute"].last() / total      # the last layer's share of the distance
accuracy = {noise: run.summary()["heldout_accuracy"] for noise, run in runs.items()}
print("total distance from init: ", total.round(3).to_dict())
print("share of the last layer:  ", last_share.round(3).to_dict())
print("held-out accuracy:        ", {k: round(v, 3) for k, v in accuracy.items()})
clean, noisy = min(NOISE), max(NOISE)
assert last_share[noisy] > last_share[clean], "expected label noise to shift weight change to the last layer"
assert accuracy[noisy] < accuracy[clean], "expected label noise to cost held-out accuracy"
''', "claim"),
        _md('''
## Re-initialising one layer at a time

For every layer, its weights are put back to their initial values (the rest of the
trained network untouched) and the held-out accuracy is measured again. A layer whose
reset costs a lot of accuracy is one the network relies on.
'''),
        _code('''
contribution = pd.concat([tables.contribution_table(run, "heldout_accuracy_delta").assign(noise=noise)
                          for noise, run in runs.items()], ignore_index=True)   # mean over seeds per layer
contribution = contribution.rename(columns={"mean": "accuracy_change"})
assert len(contribution), "contribution=True should store one row per layer"
contribution.hvplot.bar(x="layer", y="accuracy_change", by="noise", width=640, height=340, rot=30,
                        title="held-out accuracy change when one layer is reset to its initial weights")
'''),
        _md('''
**Reading it.** Wang and Yang's argument: the layers that travelled furthest carry the
memorised (noisy) part of the mapping; resetting the last layers of a noisy network can
even *help* held-out accuracy, because it erases memorisation while the earlier layers
keep the features. Try it in the full setting, and look at `run.contribution` for the
unseen-class NMI (`unseen_nmi_delta`): does a reset change what transfers?
'''),
    ]


# ----------------------------------------------------------------------------------------------
# 05 studies
# ----------------------------------------------------------------------------------------------

def studies():
    return [
        _md('''
# Studies: many runs at once, and the papers' figures

The seed papers' findings are about *many* runs: Dyballa et al. and Gerritz et al. compare
the best layer and g across architectures and seeds; Wang and Yang sweep hidden width ×
label noise with repeats; Li, Liu et al. compare fine-tuning strategies layer by layer. A
**study** is such a grid: a name, a base `RunConfig` and **axes** over its fields. Its runs
are the Cartesian product of the axes (the last axis varies fastest); every one is checked
before anything runs.

`study.run()` runs the grid on **Dask distributed**: a `LocalCluster` of worker processes
on this machine (or any cluster, given its scheduler address). Each cell is one `lab.run` on
a worker; the finished run travels back to this process and lands in the run store
(`$LAB_RUNS_DIR`, else `./runs`) as an ordinary run tagged with the study's name and its
axis values. Executing a study again skips the cells that already finished, so an
interrupted study resumes.

The figures come from `lab.study.figures(study)`, which reads the finished runs back from
the store (every number is computed by `lab.analysis`), and are drawn by `app.study_plots`:
the same figures as the app's **Studies** tab, `python -m lab study show NAME` (as tables)
and `python -m lab export --study NAME -o study.ipynb` (an exported study notebook).

This notebook runs two of the shipped specs in `studies/`:

1. `utilization_vs_noise.yaml`: 5-layer MLPs of 3 widths × 3 label-noise ratios × 2
   repeats on digits (18 runs, about 5 minutes on 2 cores): g per layer, seen accuracy
   against g, and the Wang & Yang heatmaps;
2. `collapse_strategies.yaml`: an 8-layer MLP under 4 fine-tuning strategies × 2 seeds
   (8 runs, about 3 minutes): NC1 per layer per strategy.

**FAST vs full.** In FAST mode (`LAB_FAST=1`) each study keeps the first two values of its
axes (or one seed) and trains for fewer epochs on fewer images: about two minutes for
both. The numbers are then a demonstration of the tools, not findings. Leave FAST off to
run the specs as shipped; each spec states its paper's full-scale protocol in a comment.
'''),
        _code(_FAST),
        _code('''
import holoviews as hv
import pandas as pd

import app
from app import study_plots                   # the HoloViews figures of the app's Studies tab
from app.studies_panel import shipped_specs   # the YAML specs in studies/, by file name
from lab.study import figures                 # the papers' figures' data, every number from lab.analysis

app.extension()  # Panel, Bokeh and HoloViews JavaScript and CSS from the installed packages: works offline
SPECS = shipped_specs()
sorted(SPECS)
'''),
        _md('''
## 1. Width × label noise

The spec, as shipped: base fields shared by every run, and three axes. `seeds` is a
*repeat* axis: runs that differ only in their seed are pooled as repeats of one
condition, so the figures have one curve or point per (width, noise) condition.
'''),
        _code('''
spec = lab.Study.from_file(SPECS["utilization_vs_noise.yaml"])
print(spec, "-", spec.description)
print("base:", spec.base)
study = spec
if FAST:
    # the first two values of every axis, 2 epochs, fewer images; its own name keeps FAST runs apart in the store
    study = lab.Study(spec.name + "-fast",
                      base={**spec.base, "epochs": 2, "unseen_per_class": 20, "seen_per_class": 15},
                      axes={axis: values[:2] for axis, values in spec.axes.items()}, description=spec.description)
print(study)
pd.DataFrame([cell.values for cell in study.cells()])   # one row per run, in the order they are submitted
'''),
        _md('''
**Run it on a local Dask cluster.** `workers=2` starts two worker processes, each running
one cell at a time with one torch thread; the link printed first is Dask's dashboard
(task stream, worker memory) while the study runs. Then `study.status()` lists every cell
with its run: its status, best layer, g and seen accuracy.
'''),
        _code('''
result = study.run(workers=2, on_dashboard=print)
print(f"{len(result.run_ids) - len(result.failed)} of {len(study.cells())} runs finished "
      f"({len(result.skipped)} from an earlier execution), {len(result.failed)} failed, {result.seconds:.0f} s")
study.status()
'''),
        _code('''
figs = figures(study)   # reads the study's finished runs back from the store
print("condition axes:", figs["axes"])
'''),
        _md('''
### g per layer against relative depth (Dyballa et al.)

For every layer, the features of the images of the **unseen** classes (never trained on)
are clustered by k-means and compared with the true classes by NMI (0: no agreement,
1: perfect). The x axis is the layer's *relative depth*: 0 for the first measured layer
(nearest the input), 1 for the last, so networks of different depth share one axis. Each curve is one
condition (mean over its repeats), the band is ± one standard deviation over repeats, and
the star marks the condition's **best layer**: its NMI there is the condition's
**generalization index g**. Dyballa et al. compare where along the depth that star sits
across architectures (`studies/which_layer.yaml` is their protocol at CPU scale); here
the conditions are widths and noise ratios.
'''),
        _code('''
study_plots.layer_depth_curves(figs)
'''),
        _md('''
### Seen accuracy against g (Gerritz et al.)

One point per condition: the x axis is the accuracy on held-out images of the **seen**
classes (what training optimised), the y axis is g (how well the best layer separates the
unseen classes); error bars are ± one standard deviation over repeats.

The **rank correlation** asks whether ordering the conditions by seen accuracy gives the
same order as ordering them by g. Spearman's ρ is the correlation of the two rank lists;
Kendall's τ is the share of pairs of conditions ordered the same way minus the share
ordered the opposite way. Both are +1 when the orders agree exactly, −1 when one reverses
the other, and near 0 when one order says nothing about the other. The 95 % interval is
a bootstrap: the conditions are resampled with replacement many times and the coefficient
recomputed. With a handful of conditions the interval is wide, and with fewer than three
there is no coefficient at all. Gerritz et al. report that across architectures seen
accuracy did not predict g.
'''),
        _code('''
print(study_plots.rank_text(figs["ranks"]))
display(figs["generalization"])
study_plots.accuracy_vs_g(figs)
'''),
        _md('''
**Checked.** Every cell finished; there is one point per condition, each pooling all its
repeats; each condition's g is the top of its curve above, and the star sits at g's layer.
'''),
        _code('''
status = study.status()
gen = figs["generalization"].set_index("group")
curves = figs["layers"]
stars = curves[curves["best"]].set_index("group")
repeats = len(study.axes.get("seeds", [None]))
assert (status["status"] == "finished").all(), status[["cell", "status"]]
assert len(gen) == len(study.cells()) // repeats and (gen["n_runs"] == repeats).all()
for group, row in gen.iterrows():
    top = curves.loc[curves["group"] == group, "mean"].max()
    assert abs(row["g"] - top) < 1e-12 and stars.loc[group, "layer"] == row["layer"], group
print(f"{len(gen)} conditions x {repeats} repeats; g ranges from {gen['g'].min():.3f} to {gen['g'].max():.3f}")
''', "claim"),
        _md('''
### Width × label-noise heatmaps (Wang & Yang, figures 1-3)

Each heatmap has one square per (width, noise) condition; its colour is the mean over the
condition's repeats, at the last epoch (hover for the standard deviation and the number
of repeats). The quantities:

- **utilization** of a layer: how far its weights moved from their initial values,
  ‖W − W⁰‖ / ‖W⁰‖;
- **contribution** of a layer: the change of seen held-out accuracy when that layer
  alone is reset to its initial weights (negative: the network relies on what the layer
  learned);
- **generalization gap**: accuracy on the training images (with their possibly noisy
  labels) minus accuracy on held-out images of the same classes;
- **resilience**: accuracy on the training images whose labels were corrupted, measured
  against their *true* labels (no such images without noise, so no square there).

Wang and Yang report that with more label noise the layers travel further from their
initial weights and the network generalizes worse. With the short training here, read
the heatmaps for what they measured, not as a test of that claim.
'''),
        _code('''
AXES = figs["axes"]                                                 # the heatmaps' two axes
grid = figs["grid"]
LAYERS = [layer for layer in dict.fromkeys(curves["layer"]) if layer in set(grid["layer"])]   # input -> output
hv.Layout([study_plots.grid_heatmap(figs, "utilization", layer) for layer in LAYERS]).opts(
    hv.opts.HeatMap(responsive=False, width=320, height=260)).cols(3)
'''),
        _code('''
hv.Layout([study_plots.grid_heatmap(figs, "contribution", layer) for layer in LAYERS]).opts(
    hv.opts.HeatMap(responsive=False, width=320, height=260)).cols(3)
'''),
        _code('''
(study_plots.grid_heatmap(figs, "generalization_gap", "") + study_plots.grid_heatmap(figs, "resilience", "")).opts(
    hv.opts.HeatMap(responsive=False, width=380, height=300))
'''),
        _md('''
The same numbers as a table: the generalization gap, conditions as rows and columns.
'''),
        _code('''
gap = grid[grid["quantity"] == "generalization_gap"]
gap.pivot(index=AXES[0], columns=AXES[1], values="mean")
'''),
        _md('''
## 2. NC1 per layer per fine-tuning strategy (Li, Liu et al., figure 10)

**NC1** measures neural collapse at one layer: the spread of the features around their
class means, in units of the spread between the class means (tr(Σ_W Σ_B⁺) / K over K
classes). Near 0, every class has collapsed to a point far from the others; large, the
classes overlap. It is measured here on held-out images of the **seen** classes, and drawn
on a log scale.

The axis `strategy` sets several fields at once: a **linear probe** trains only the head
on frozen features; **full** fine-tuning trains every weight; **Layer FT** trains one
block (`fc4`) and the head; **SCL FT** trains that block, a skip connection from it to the
penultimate features, and the head. Li, Liu et al. compare how collapsed each layer ends
up under each strategy.
'''),
        _code('''
spec = lab.Study.from_file(SPECS["collapse_strategies.yaml"])
print(spec, "-", spec.description)
collapse = spec
if FAST:
    # every strategy, one seed, one epoch, fewer images
    collapse = lab.Study(spec.name + "-fast",
                         base={**spec.base, "epochs": 1, "unseen_per_class": 20, "seen_per_class": 15},
                         axes={**spec.axes, "seeds": spec.axes["seeds"][:1]}, description=spec.description)
result = collapse.run(workers=2, on_dashboard=print)
print(f"{len(result.run_ids) - len(result.failed)} of {len(collapse.cells())} runs finished, {result.seconds:.0f} s")
collapse.status()
'''),
        _code('''
collapse_figs = figures(collapse)
study_plots.collapse_curves(collapse_figs)
'''),
        _code('''
nc1 = collapse_figs["nc1"]
table = nc1.pivot(index="layer", columns="group", values="mean").reindex(list(dict.fromkeys(nc1["layer"])))
assert (collapse.status()["status"] == "finished").all()
assert table.shape[1] == len(collapse.axes["strategy"]), "one column per strategy"
assert table.notna().all().all() and (table > 0).all().all(), "NC1 is a ratio of spreads: positive"
table   # mean NC1 over seeds, layers input -> output, one column per strategy
''', "claim"),
        _md('''
## Where next

- The same studies from a terminal: `python -m lab study run studies/utilization_vs_noise.yaml`
  (a progress bar per running run), then `python -m lab study show utilization-vs-noise`.
- Any study as a notebook of its figures and tables, reloaded from the store:
  `python -m lab export --study utilization-vs-noise -o study.ipynb`
  (or `lab.export.study_to_notebook(study, "study.ipynb")`).
- In the app (`panel serve app`), the **Studies** tab runs a shipped spec and fills these
  figures in as runs finish.
- Bigger than one machine: `study.run("tcp://SCHEDULER:8786")` sends the cells to an
  existing Dask cluster (for example one started by `dask-jobqueue` on SLURM); the runs
  still land in this machine's store.
- Your own grid: any `RunConfig` field can be an axis, e.g.
  `lab.Study("my-study", base={"dataset": "digits", "epochs": 3}, axes={"n_unseen": [2, 4], "seeds": [[0], [1]]})`.
'''),
    ]


NOTEBOOKS = {
    "01_quickstart.ipynb": quickstart,
    "02_neural_collapse_across_layers.ipynb": neural_collapse,
    "03_which_layer_generalizes.ipynb": which_layer,
    "04_layer_utilization.ipynb": utilization,
    "05_studies.ipynb": studies,
}


def build(name: str):
    nb = v4.new_notebook(cells=NOTEBOOKS[name]())
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    # stable cell ids, so that rebuilding leaves unchanged notebooks byte-identical
    stem = name.split("_")[0]
    for i, cell in enumerate(nb.cells):
        cell.id = f"nb{stem}-{i:02d}"
    nbformat.validate(nb)
    return nb


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a committed notebook is out of date")
    args = parser.parse_args(argv)
    stale = []
    for name in NOTEBOOKS:
        text = nbformat.writes(build(name)) + "\n"
        path = HERE / name
        if args.check:
            if not path.is_file() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
            print(f"wrote {path}")
    if stale:
        print(f"out of date (run notebooks/_build.py): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
