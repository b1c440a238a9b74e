"""The per-image notebook: 06, which unseen images each layer gets right, and a selection's measures."""
from __future__ import annotations

from _nb_cells import FAST_SWITCH, RUN_HELPER, code, md

__all__ = ["which_images"]


# ----------------------------------------------------------------------------------------------
# 06 which images
# ----------------------------------------------------------------------------------------------

def which_images():
    return [
        md('''
# Which images does each layer get right?

Notebook 03 gives one number per layer (how well that layer separates the *unseen* styles).
This notebook looks at the images behind that number, using the app's default run: the zoo's
glyph-pretrained ResNet-18, fine-tuned on 15 calligraphy styles and evaluated on the 5 styles
it never saw. For each evaluation the run stores a **per-image record**: for every unseen image
and every layer, whether its leave-one-out 1-nearest-neighbour vote is right (the vote that kNN
accuracy counts), its margin to the nearest class centre, and its k-means cluster
(`docs/METRICS.md`, "The answer per image").

From that record:

1. each image's **arrival layer**: the first layer from which it is right at every later layer;
2. the images the final layer **forgets**: right at the best layer, wrong at the final one;
3. the measures on a **selection** of images (any list of image positions), next to all images;
4. whether the **measures agree** on the best layer.

Everything here describes one run, one seed and one evaluation. It says which images this run
got right where. It does not say why, or whether another seed would give the same images.

**FAST vs full.** The full setting runs the app's default preset as the app does: 4 epochs,
every unseen image up to 300 per style, a UMAP layout (about 2 1/2 minutes on a 2-core CPU).
FAST mode (`LAB_FAST=1`) uses the same network, fine-tuned for one epoch on a tenth of the seen
images, with 20 unseen images per style, 3 measures and a PCA layout: the same cells on toy
numbers.
'''),
        code(FAST_SWITCH),
        code(RUN_HELPER),
        md('''
## The run

The preset's settings come from the app (`app.choose.PRESETS`), so this is the run that the
app's **▶ Run** starts with its default settings. The per-image record is stored for every
evaluation of a run that measures kNN accuracy.
'''),
        code('''
from app.choose import DEFAULT_PRESET, PRESETS

preset = dict(PRESETS[DEFAULT_PRESET]["config"])     # the app's default run
split = lab.data.Split.paper_default("glyphs")        # 15 seen styles, 5 unseen
cfg = lab.RunConfig(name="which images", **dict(preset, seen=split.seen, unseen=split.unseen))
if FAST:
    # one epoch on a tenth of the seen images (heldout_fraction=0.9), 20 unseen images per style
    cfg = cfg.replace(epochs=1, heldout_fraction=0.9, unseen_per_class=20, seen_per_class=10, augment=False,
                      metrics=["nmi", "knn_accuracy", "ncc_accuracy"], projection="pca", save_weights=False)
print(cfg.describe())
run_id = run_with_progress(cfg)
store = lab.RunStore()
print(lab.analysis.image_record_problem(run_id) or "the run stored its per-image record")
'''),
        md('''
## The answer per image

`lab.analysis.image_table(run_id)` gives one row per unseen image of the run's last evaluation: its
style (`class`), its arrival layer, whether it is forgotten, how many layers have it right
(`n_right`), then one column per layer from input to output: `True` where that layer's kNN vote
for the image is right. The index (`image`) is the image's position among the unseen images,
the same position that the stored layouts and the app's embedding explorer use. Like every
function on stored runs, it takes the run first (its id, or the record `store.load(run_id)`) and
reads the default store (`$LAB_RUNS_DIR` or `./runs`) unless given another as `store=`.
'''),
        code('''
table = lab.analysis.image_table(run_id)
layers = table.attrs["layers"]                                   # input -> output
best, final = table.attrs["best_layer"], table.attrs["final_layer"]
print(f"{len(table)} unseen images, epoch {table.attrs['epoch']}, seed {table.attrs['seed']}")
print(f"best layer (highest NMI at this evaluation): {best}; final layer: {final}")
table
'''),
        md('''
## How many unseen images arrive at each layer

An image *arrives* at a layer when that layer and every later one get it right. Images the
final layer gets wrong never arrive (`never`). Each image is counted once, so the bars add up
to the number of unseen images.
'''),
        code('''
import hvplot.pandas  # noqa: F401

import app

app.extension()  # Panel, Bokeh and HoloViews JavaScript and CSS from the installed packages: works offline

arrivals = lab.analysis.arrival_counts(table)
arrivals.hvplot.bar(width=640, height=320, rot=30, xlabel="arrival layer", ylabel="unseen images",
                    title=f"Unseen images by arrival layer (epoch {table.attrs['epoch']})")
'''),
        md('''
**Checks.** The bars count every image once. Each layer's share of right votes is that layer's
kNN accuracy as the run measured it. Every forgotten image is right at the best layer and wrong
at the final one.
'''),
        code('''
import numpy as np

right = table[layers].astype(float)                              # 1 right, 0 wrong, NaN without a vote
metrics = store.load(run_id).metrics
knn = metrics[(metrics["metric"] == "knn_accuracy") & (metrics["split"] == "unseen")
              & (metrics["epoch"] == table.attrs["epoch"]) & (metrics["seed"] == table.attrs["seed"])]
knn = knn.set_index("layer")["value"].reindex(layers)
assert arrivals.sum() == len(table)
assert np.allclose(right.mean(), knn, equal_nan=True), "share right per layer should be the run's kNN accuracy"
forgotten = table[table.forgotten]
assert forgotten[best].all() and not forgotten[final].any()
print(f"kNN accuracy = share right: {right.mean().round(3).to_dict()}")
''', "claim"),
        md('''
## The images the final layer forgets

These images have a right vote at the best layer and a wrong one at the final layer. Which
images these are depends on the run: another seed or more epochs can forget others, or none.
'''),
        code('''
print(f"{len(forgotten)} of {len(table)} unseen images are right at {best} and wrong at {final}")
forgotten[["class", "arrival_layer", "n_right", best, final]]
'''),
        md('''
The app's embedding explorer shows them. The left plot is the best layer's 2-D layout of the
unseen images, the right plot the final layer's. The forgotten images are selected (thumbnails
below the plots), so both layouts show where they lie. Draw a lasso on a plot to select other
images. `view.selection` then holds their positions, which you can pass to the selection report
below.
'''),
        code('''
view = app.EmbeddingView(store=store, run_id=run_id, layer=best)
view.param.update(side_by_side=True, layer_b=final)
view.selection = forgotten.index.tolist()
view
'''),
        md('''
## A selection's report

`lab.analysis.selection_report(run_id, indices)` measures any set of unseen images,
layer by layer: the share with a right vote (`share_right`), their mean margin, the NMI of their
styles against their k-means clusters, and the CDNV of their styles. The same measures on all
unseen images are in the `all_*` columns. Here the selection is one style: the one that the
final layer gets right least often. A measure that cannot be computed for a selection is left
empty (NaN), and `report.attrs["notes"]` says why. For example, NMI and CDNV need at least two
styles.
'''),
        code('''
by_style = table.groupby("class")[final].mean()                   # share right at the final layer, per style
style = by_style.idxmin()
chosen = table.index[table["class"] == style].tolist()
report = lab.analysis.selection_report(run_id, chosen)
print(f"selection: the {len(chosen)} images of {style!r} (share right at {final}: {by_style[style]:.2f})")
for note in report.attrs["notes"]:
    print("note:", note)
report
'''),
        code('''
shares = report[["share_right", "all_share_right"]].rename(
    columns={"share_right": f"{style} ({len(chosen)} images)", "all_share_right": f"all {len(table)} images"})
shares.hvplot.line(width=640, height=320, rot=30, ylim=(0, 1.05), xlabel="layer", ylabel="share right",
                   group_label="images", title="Share of right kNN votes per layer: the selection and all unseen images")
'''),
        md('''
## Do the measures agree on the best layer?

`lab.analysis.measure_agreement` gives, for each separability measure the run computed, the layer
where it is highest and its value there. `best_share` is the fraction of bootstrap resamples of
the unseen images in which that layer comes out best (NMI and kNN accuracy only). The `spearman`
column is Spearman's rank correlation between that measure's values and NMI's across the layers.
It compares how the two measures rank the layers, not their values: 1 means both put the layers
in the same order, 0 means the orders are unrelated. With about ten layers and one run it has no
interval; it describes this run only.
'''),
        code('''
agreement = lab.analysis.measure_agreement(run_id)
for note in agreement.attrs["notes"]:
    print("note:", note)
agreement[["label", "epoch", "best_layer", "value", "best_share", "spearman", "n_layers"]]
'''),
        md('''
## Exercises

1. **Another selection.** Select the images that are wrong at the first layer
   (`table.index[~table[layers[0]].fillna(False)]`) and pass them to `selection_report`.
   Layer by layer, what share of them has a right vote?
2. **Another seed.** Run the same config with `seeds=[1]`. Is the set of forgotten images the
   same? (Compare the two `forgotten.index` lists.)
3. **Earlier in training.** `image_table(run_id, epoch=0)` reads the evaluation before
   fine-tuning. How do the arrival counts differ from those of the last epoch?
4. **Your own selection.** Draw a lasso around a group of points in the explorer above, then run
   `lab.analysis.selection_report(run_id, view.selection)`. Which styles does the group
   hold, and at which layers are its votes right?
'''),
    ]
