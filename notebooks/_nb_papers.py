"""The notebooks of single papers' findings: 03 which layer generalizes and 04 layer utilization."""
from __future__ import annotations

from _nb_cells import FAST_SWITCH, PLOTS, RUN_HELPER, code, md

__all__ = ["which_layer", "utilization"]


# ----------------------------------------------------------------------------------------------
# 03 which layer generalizes
# ----------------------------------------------------------------------------------------------

def which_layer():
    return [
        md('''
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
        code(FAST_SWITCH),
        code(RUN_HELPER),
        code('''
from app.choose import DEFAULT_PRESET, PRESETS

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
        md('''
## Separability of the unseen styles, layer by layer

Mean ± std over seeds at the last epoch. The x axis runs from input to output; the
layers differ between backbones, so each gets its own row, one panel per metric.
'''),
        code(PLOTS),
        code('''
panels = [plots.layer_curves({name: run}, metric, width=420, height=300)
          for name, run in runs.items() for metric in base.metrics]
hv.Layout(panels).opts(shared_axes=False).cols(len(base.metrics))   # each backbone has its own layers
'''),
        md('''
## g, its layer, and seen accuracy

g is the maximum over layers of the mean (over seeds) unseen NMI; seen accuracy is the
accuracy on held-out images of the 15 seen styles. The store's run summary computes both;
the cell checks g against the curves above.
'''),
        code('''
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
        code('''
corr = lab.analysis.accuracy_vs_g(comparison, accuracy="seen_accuracy", n_boot=200)
print(f"Spearman's rho of seen accuracy and g over {corr['n']} backbones: {corr['spearman']:.2f} "
      "(NaN below 3 backbones: too few for a statistic)")
plots.accuracy_vs_g(comparison, by="backbone", x="seen_accuracy", y="g", width=520, height=380)
'''),
        md('''
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
        md('''
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
        code(FAST_SWITCH),
        code(RUN_HELPER),
        code('''
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
        md('''
## Distance from initialisation, per layer

Relative utilization ‖W − W⁰‖ / ‖W⁰‖ of every layer at the last epoch, one curve per
noise level.
'''),
        code('''
import hvplot.pandas  # noqa: F401
import pandas as pd

from lab.export import tables

# per noise level: each layer's distance at the last epoch (mean over seeds), input -> output
util = pd.concat([tables.utilization_table(run).assign(noise=noise) for noise, run in runs.items()],
                 ignore_index=True)
util.hvplot.line("layer", "relative", by="noise", width=600, height=340, rot=30,
                 title="relative distance from initialisation at the last epoch")
'''),
        md('''
**The claim, checked.** Memorising wrong labels is the job of the deep layers: in the
noisiest run a larger share of all the weight change sits in the last layer than in the
clean run, and that run generalizes worse to held-out images of the same classes.
'''),
        code('''
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
        md('''
## Re-initialising one layer at a time

For every layer, its weights are put back to their initial values (the rest of the
trained network untouched) and the held-out accuracy is measured again. A layer whose
reset costs a lot of accuracy is one the network relies on.
'''),
        code('''
contribution = pd.concat([tables.contribution_table(run, "heldout_accuracy_delta").assign(noise=noise)
                          for noise, run in runs.items()], ignore_index=True)   # mean over seeds per layer
contribution = contribution.rename(columns={"mean": "accuracy_change"})
assert len(contribution), "contribution=True should store one row per layer"
contribution.hvplot.bar(x="layer", y="accuracy_change", by="noise", width=640, height=340, rot=30,
                        title="held-out accuracy change when one layer is reset to its initial weights")
'''),
        md('''
**Reading it.** Wang and Yang's argument: the layers that travelled furthest carry the
memorised (noisy) part of the mapping; resetting the last layers of a noisy network can
even *help* held-out accuracy, because it erases memorisation while the earlier layers
keep the features. Try it in the full setting, and look at `run.contribution` for the
unseen-class NMI (`unseen_nmi_delta`): does a reset change what transfers?
'''),
    ]
