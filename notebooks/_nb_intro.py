"""The introductory notebooks: 01 quickstart and 02 neural collapse across layers."""
from __future__ import annotations

from _nb_cells import FAST_SWITCH, PLOTS, RUN_HELPER, code, md

__all__ = ["quickstart", "neural_collapse"]


# ----------------------------------------------------------------------------------------------
# 01 quickstart
# ----------------------------------------------------------------------------------------------

def quickstart():
    return [
        md('''
# layerscope in ten cells

Which layer of a vision backbone separates classes it was never trained on, and how
collapsed are its features? This notebook walks the library once: load the embedded
glyph dataset, split its classes into *seen* and *unseen*, load a backbone, extract
every layer's features of the unseen images, tabulate the per-layer metrics, draw a
UMAP, stream a short fine-tuning run, and open the app's component inline and as an
ipywidget.

Everything runs offline on a CPU. With `FAST` on (environment variable `LAB_FAST=1`) the
samples are tiny and the run uses a small MLP; in the full setting the same cells run
ResNet-18 on all 313 images per unseen style and fine-tune it for 3 epochs, which takes
a few minutes on a laptop CPU.
'''),
        code(FAST_SWITCH),
        md('''
**1. Data.** The glyph dataset ships with the package: 313 CJK characters rendered in
20 visibly distinct typefaces (brush, kai, ming, hei, rounded, handwriting, bitmap ...), 64 × 64 px. The classes are the *styles* (typefaces), so a model must
learn style, not character identity.
'''),
        code('''
ds = lab.data.load("glyphs")
print(f"{len(ds)} images, {len(ds.classes)} classes, {ds.image_size} px, {ds.in_chans} channel(s)")
ds.classes
'''),
        md('''
**2. Split.** The seed papers hold out 5 styles: the model is fine-tuned on the other 15
(*seen*) and we measure how well each layer separates the 5 *unseen* ones.
'''),
        code('''
split = lab.data.Split.paper_default(ds)
print("seen:  ", split.seen)
print("unseen:", split.unseen)
'''),
        md('''
**3. Backbone.** `glyph_resnet18` is a ResNet-18 of the offline zoo (`lab/zoo`),
pretrained on fonts that are *not* among the 20 styles here (its card says how); the
papers start from ImageNet weights in the same way. Any timm model name works too
(`"resnet18"`: random init offline; `pretrained=True` when the weights are cached), as do
Hugging Face models (`"hf:cvt"`, `"hf:ORG/NAME"` from the local cache). `bb.layers` lists
the taps from input to output; the last one, `pre_logits`, is the pooled penultimate
feature, and `bb.normalization` is the input scaling the model was trained with.
'''),
        code('''
bb = lab.backbones.load("zoo:glyph_resnet18", device="auto")
print(bb.device, bb.layers)
print(bb.normalization)
'''),
        md('''
**4. Features of every layer.** One forward pass per batch, hooks on every tap, feature
maps average-pooled to one vector per image and layer.
'''),
        code('''
unseen = ds.subset(split.unseen)
if FAST:
    unseen = unseen.sample_per_class(20)
feats = lab.features.extract(bb, unseen, layers=bb.layers)
{layer: tuple(X.shape) for layer, X in feats.items()}
'''),
        md('''
**5. Metrics per layer.** NMI (k-means clustering vs the true styles), kNN accuracy and
the linear probe measure separability of the unseen styles; NC1, CDNV and the numerical
rank measure collapse (see `METRICS.md` for the exact definitions).
'''),
        code('''
metrics = ("nmi", "knn_accuracy", "nc1") if FAST else lab.metrics.DEFAULT_SEPARABILITY + lab.metrics.DEFAULT_COLLAPSE
report = lab.metrics.layer_report(feats, feats.labels, metrics=metrics)
assert list(report.index) == bb.layers and report["nmi"].between(0, 1).all()
best_layer = report["nmi"].idxmax()
print(f"best layer by unseen NMI: {best_layer} (g = {report['nmi'].max():.3f})")
report
''', "claim"),
        md('''
**6. A UMAP of the best layer**, coloured by style. (In FAST mode a PCA layout, to skip
UMAP's ~15 s of one-time compilation.)
'''),
        code('''
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
        md('''
**7. A fine-tuning run, streamed.** `lab.run(config)` is a generator of events (run
started, layer metrics, projections, epoch finished, ...), the same stream the app and the
command line consume; the run is stored (in `$LAB_RUNS_DIR` or `./runs`) and can be
reloaded, compared and exported to a notebook.
'''),
        code(RUN_HELPER),
        code('''
from app.choose import DEFAULT_PRESET, PRESETS  # noqa: E402

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
        md('''
**8. The app, inline.** The same component that `panel serve app` shows: settings on the
left, live plots of a run, and the stored runs (including the one just made) under
*Compare & export*. Press **▶ Run**: the run goes on in a background thread of this kernel
and every layer's curves, the heatmap and the embedding layout fill in as they are measured
(the kernel stays free for other cells). `app.extension()` above loaded everything it needs
from the installed packages, so it works without a network.
'''),
        code('''
from app import LayerScope

scope = LayerScope()
if FAST:
    scope.config.apply_preset("Tiny demo (fast)")
    scope.config.projection = "pca"
scope
'''),
        md('''
**9. The live view of one run, as an ipywidget.** Where Panel's own notebook comms do not
reach (VS Code, Colab, Voilà), wrap any component in `pn.ipywidget(...)`, or call
`app.extension(comms="ipywidgets")` once to make every Panel output an ipywidget. Here the
live view of the run configured in step 7: press **▶ Run** to stream it again.
'''),
        code('''
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
        md('''
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
        md('''
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
        code(FAST_SWITCH),
        code(RUN_HELPER),
        md('''
## The run

Digits (scikit-learn's 8×8 digits, 32 px), 8 classes seen, 2 unseen; the MLP trains
from scratch (`strategy="full"`) with AdamW at 1e-3, without augmentation, so that it can
fit its training set exactly.
'''),
        code('''
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
        md('''
## NC1 at every layer, every epoch

Each row of the heatmap is a layer (input at the bottom), each column an epoch (0 is the
untrained network). Read it along a column: NC1 falls from the input towards the output.
Read it along a row: training lowers it, first in the deep layers.
'''),
        code(PLOTS),
        code('''
layers = tables.run_layers(run)                         # input -> output
nc1 = tables.epoch_table(run, "nc1", split="seen")     # mean ± std over seeds per (epoch, layer)
plots.layer_epoch_heatmap(run, "nc1", "seen", cmap="viridis_r", width=640, height=360)
'''),
        md('''
The same numbers as curves, one per epoch: the Figure 2 view. Early epochs are light,
late ones dark.
'''),
        code('''
plots.epoch_curves(run, "nc1", split="seen")
'''),
        md('''
**The claim, checked.** At the final epoch the last layer is more collapsed than the
first: its mean NC1 (over seeds) is lower. (Before training it is the other way round
for a random MLP: the collapse is learned.)
'''),
        code('''
final = nc1[nc1["epoch"] == nc1["epoch"].max()].set_index("layer")["mean"]
first, last = layers[0], layers[-1]
start = nc1[nc1["epoch"] == 0].set_index("layer")["mean"]
print(f"final epoch NC1: {first} {final[first]:.3f}  ->  {last} {final[last]:.3f}")
print(f"untrained NC1:   {first} {start[first]:.3f}  ->  {last} {start[last]:.3f}")
assert final[last] < final[first], "expected the last layer to be more collapsed than the first"
assert final[last] < start[last], "expected training to collapse the last layer"
''', "claim"),
        md('''
How close is the network to fitting its training set, and how do the other collapse
measures follow?
'''),
        code('''
train = run.training[["epoch", "train_loss", "train_accuracy", "heldout_accuracy"]]
table = tables.layer_table([run], split="seen")   # mean over seeds per layer, last epoch
display(train.tail(5))
table
'''),
        md('''
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
