"""The code cells of the run notebook (:mod:`lab.export.run_notebook`), as templates.

Each is filled by :func:`lab.export._cells.fill`: a ``{{SLOT}}`` is replaced by a Python literal and
nothing else, so what a user typed reaches the code only as data. The cells only call the library
(no ``def`` or ``class``).
"""

SETUP = r'''
import pandas as pd
import holoviews as hv
from IPython.display import display

import lab
from lab.export import tables   # the tables below, with every number from lab.analysis
from app import plots    # the app's plot builders (installed with layerscope; no server needed)

hv.extension("bokeh")
pd.set_option("display.precision", 4)
pd.set_option("display.max_columns", 40)
pd.set_option("display.width", 200)
pd.set_option("display.max_colwidth", None)   # show names in full
'''

LOAD = r'''
# The store folder and the exported run ids (plain data: point them elsewhere if the runs moved).
STORE_ROOT = {{STORE_ROOT}}
RUN_IDS = {{RUN_IDS}}

store = lab.RunStore(STORE_ROOT)
runs = {run_id: store.load(run_id) for run_id in RUN_IDS}
LABELS = tables.run_labels(runs)   # each run's name, or "name (id)" where names repeat
AXIS = tables.runs_axis(runs)      # what the runs' epoch numbers count: "epoch", or "step" (optimizer steps)
METRIC_NAMES = list(dict.fromkeys(store.compare(RUN_IDS)["metric"]))

for run_id, run in runs.items():
    if run.status != "finished":
        print(f"note: run {LABELS[run_id]!r} is {run.status}: only the {tables.run_axis(run)}s it completed are shown")

# Status, g and its best layer, seen accuracy (RunRecord.summary). The output's metadata carries the
# exact values for programs that read the executed notebook (lab.export.notebook_summary).
status = tables.status_table(runs, LABELS)
display(status.rename(columns={"epoch": AXIS}),
        metadata={"layerscope_summary": {run_id: run.summary() for run_id, run in runs.items()}})
'''

TABLE = r'''
# Mean over seeds of every metric at each layer, at each run's last complete evaluation.
TABLE_SPLIT = "unseen"
table = tables.layer_table(runs, split=TABLE_SPLIT, labels=LABELS)
table.rename(columns={"epoch": AXIS})
'''

CURVES = r'''
# Pick what to draw: any of METRIC_NAMES; SPLIT "unseen" or "seen"; EPOCH None = each run's last evaluation.
CURVE_METRICS = {{CURVE_METRICS}}
SPLIT = "unseen"
EPOCH = None

curves = [plots.layer_curves(runs, metric, split=SPLIT, epoch=EPOCH, labels=LABELS)
          for metric in CURVE_METRICS if metric in METRIC_NAMES]
if not curves:
    print("no metrics stored yet")
hv.Layout(curves).opts(shared_axes=False).cols(2) if curves else None
'''

HEATMAP = r'''
HEATMAP_METRIC = {{G_METRIC}} if {{G_METRIC}} in METRIC_NAMES else (METRIC_NAMES or [None])[0]
HEATMAP_SPLIT = "unseen"

heatmaps = [plots.layer_epoch_heatmap(run, HEATMAP_METRIC, HEATMAP_SPLIT, label=LABELS[run_id])
            for run_id, run in runs.items() if len(run.metrics)]
if not heatmaps:
    print("no metrics stored yet")
hv.Layout(heatmaps).opts(shared_axes=False).cols(2) if heatmaps else None
'''

GENERALIZATION = r'''
# Seen accuracy (held-out images of the seen classes) vs g = max over layers of the mean unseen NMI,
# at each evaluation: does better accuracy on the training classes mean better generalization?
generalization = tables.generalization_table(runs, LABELS)
display(generalization.drop(columns="run_id").rename(columns={"epoch": AXIS}))
plots.accuracy_vs_g(generalization, by="run", x="seen_accuracy", y="g", axis=AXIS)
'''

SEPARATION_LAW = r'''
# The law of equi-separation (He & Su 2023; docs/METRICS.md): log10 NC1 fitted against depth. The table: each
# run's last evaluation per split, mean and std over seeds (the run summary's). The plots: LAW_RUN's first seed at
# LAW_EPOCH (its points and fitted line), and r at every evaluation, mean over seeds (near -1: NC1 falls by the same
# factor at every layer). A ratio below 1: each deeper layer separates the classes better.
LAW_RUN = {{LAW_RUN}}   # the first exported run that measured NC1 (None: none did)
LAW_EPOCH = None        # None: the last evaluation

law_table = tables.separation_law_table(runs, LABELS)
# the output's metadata carries each run summary's law exactly, for programs that read the executed notebook
display(law_table.rename(columns={"epoch": AXIS}),
        metadata={"layerscope_law": {key: run.summary()["separation_law"] for key, run in runs.items()}})
law_figure = None
if LAW_RUN is None:
    print("no exported run measured NC1 (nc1 among its metrics): no law of equi-separation")
else:
    law = lab.analysis.separation_law(runs[LAW_RUN])              # every seed, evaluation and split
    law_axis = tables.run_axis(runs[LAW_RUN])                      # "epoch", or "step"
    law_seed = int(law["seed"].min())
    law_epoch = int(law["epoch"].max()) if LAW_EPOCH is None else LAW_EPOCH
    law_points = lab.analysis.separation_law_points(runs[LAW_RUN], seed=law_seed, epoch=law_epoch)
    law_layers = list(dict.fromkeys(law_points.sort_values("index")["layer"]))
    law_at = law[(law["seed"] == law_seed) & (law["epoch"] == law_epoch)]
    terminal = list(lab.analysis.terminal_phase(runs[LAW_RUN].metrics).values())
    print(f"{LABELS[LAW_RUN]}: seed {law_seed}, {law_axis} {law_epoch}")
    display(law_at.rename(columns={"epoch": law_axis}))
    law_title = plots.plot_title(f"{LABELS[LAW_RUN]}: log10 NC1 against depth")
    law_figure = (plots.law_depth(law_points, law_at, layers=law_layers, title=law_title)
                  + plots.law_r_curve(lab.analysis.separation_law_across_seeds(runs[LAW_RUN]), terminal=terminal,
                                      epoch=law_epoch, title=f"r against {law_axis}", axis=law_axis)
                  ).opts(shared_axes=False)
law_figure
'''

PROJECTION = r'''
# The 2-D layout of the unseen images at one layer. Change LAYER (any of tables.run_layers(run)) and re-run.
LAYER = {{LAYER}}
SEED = None       # None: the first stored seed
EPOCH_2D = None   # None: the last evaluation with a stored layout of LAYER
METHOD = None     # "umap", "pca" or None (UMAP when stored, else PCA)

hv.Layout([plots.projection_plot(run, LAYER, seed=SEED, epoch=EPOCH_2D, method=METHOD, label=LABELS[run_id])
           for run_id, run in runs.items()]).opts(shared_axes=False).cols(2)
'''

EXPLORER = r'''
# The embedding explorer of one run, opened at its best layer (needs a live kernel, e.g. JupyterLab).
# Hover a point to see its image; a lasso or box selection sets `explorer.selection` (image indices) and is
# highlighted at every layer and evaluation; tick "side by side" to see two layers at once.
# `explorer.selected_frame()` lists the selected images (index, class, layer, epoch, x, y).
import app
from app import EmbeddingView

app.extension()
EXPLORE_RUN = {{EXPLORE_RUN}}   # any of RUN_IDS with a stored layout (None: none has one)

explorer = EmbeddingView(store=store, run_id=EXPLORE_RUN) if EXPLORE_RUN is not None else None
explorer if explorer is not None else print("no exported run stored a 2-D layout (its projection was 'none')")
'''

CKA = r'''
# Linear CKA (unbiased, lab.metrics.cka) of the unseen images' stored features of each run in CKA_RUNS:
# the table and heatmap compare every layer with every other at the run's last stored evaluation (first seed; NaN:
# not defined, a layer with constant features); when the run trained, the curves give each layer's CKA to its own
# features before training, at each evaluation (1 = unchanged up to rotation and scale).
from app import similarity_plots

CKA_RUNS = {{CKA_RUNS}}   # the exported runs that stored embeddings (a run with projection 'none' stores none)

cka_tables = {run_id: tables.cka_matrix(runs[run_id]) for run_id in CKA_RUNS}
cka_figures = []
for run_id, cka_table in cka_tables.items():
    display(cka_table, metadata={"layerscope_cka_run": run_id})
    if len(tables.epoch_table(runs[run_id], "cka_initial")):
        cka_figures.append(similarity_plots.cka_to_initial(runs[run_id], label=LABELS[run_id]))
    cka_figures.append(similarity_plots.run_heatmap(cka_table, runs[run_id], title=LABELS[run_id]))
if not CKA_RUNS:
    print("no exported run stored embeddings: no CKA to compute")
hv.Layout(cka_figures).opts(shared_axes=False).cols(2) if cka_figures else None
'''

IMAGES = r'''
# The answer per image (lab.analysis.image_table) at the last evaluation of IMAGES_RUN: the layer from which each
# unseen image's kNN vote stays right, and the images the final layer forgets (right at the best layer). Then the
# measures per layer on SELECTION (image positions, as the explorer's; None: the forgotten images) over all images,
# and whether the measures agree on the best layer.
IMAGES_RUN = {{IMAGES_RUN}}   # the first exported run with a per-image record (None: none has one)
SELECTION = {{SELECTION}}

if IMAGES_RUN is None:
    print("no per-image record:", lab.analysis.image_record_problem(runs[RUN_IDS[0]]))
else:
    images = lab.analysis.image_table(runs[IMAGES_RUN])
    images_axis = lab.export.tables.run_axis(runs[IMAGES_RUN])    # "epoch", or "step"
    forgotten = images.index[images["forgotten"].fillna(False)].tolist()
    print(f"{images_axis} {images.attrs['epoch']}: {len(forgotten)} of {len(images)} images forgotten by the "
          "final layer")
    display(lab.analysis.arrival_counts(images).to_frame().T)   # images right from that layer to the final one
    report = lab.analysis.selection_report(runs[IMAGES_RUN], forgotten if SELECTION is None else SELECTION)
    display(report.rename(columns={"epoch": images_axis}),
            lab.analysis.measure_agreement(runs[IMAGES_RUN]).rename(columns={"epoch": images_axis}))
    for note in report.attrs["notes"]:
        print("note:", note)
'''

RERUN = r'''
# The exact configuration of each exported run: plain Python literals, edit them to try variations.
CONFIGS = {{CONFIGS}}
RERUN = {{RERUN}}   # True: train and evaluate every configuration again, from scratch

configs = {run_id: lab.RunConfig.from_dict(config) for run_id, config in CONFIGS.items()}
for run_id, cfg in configs.items():
    print(f"{run_id}: {cfg.describe()}")

if RERUN:
    rerun_store = lab.RunStore(STORE_ROOT)
    for run_id, cfg in configs.items():
        new_id = None
        for event in lab.run(cfg, store=rerun_store):
            if event.kind == "run_started":
                new_id = event.run_id
            elif event.kind == "epoch_finished":
                print(f"  seed {event.seed} epoch {event.epoch}: seen accuracy {event.heldout_accuracy}")
            elif event.kind in ("run_finished", "run_failed", "run_cancelled"):
                print(f"{run_id} re-run as {new_id}: {event.kind} {getattr(event, 'message', '')}")
        if new_id is not None:
            old, new = runs[run_id].metrics, rerun_store.load(new_id).metrics
            keys = ["seed", "epoch", "layer", "split", "metric"]
            both = old.merge(new, on=keys, suffixes=("_stored", "_rerun"))
            print(f"  {len(both)} metric values in common, largest difference "
                  f"{(both['value_stored'] - both['value_rerun']).abs().max():.3g}")
'''
