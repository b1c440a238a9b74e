"""The studies notebook: 05, many runs at once on Dask and the papers' figures."""
from __future__ import annotations

from _nb_cells import FAST_SWITCH, code, md

__all__ = ["studies"]


# ----------------------------------------------------------------------------------------------
# 05 studies
# ----------------------------------------------------------------------------------------------

def studies():
    return [
        md('''
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
        code(FAST_SWITCH),
        code('''
import holoviews as hv
import pandas as pd

import app
from app import study_plots                   # the HoloViews figures of the app's Studies tab
from app.studies import shipped_specs         # the YAML specs in studies/, by file name
from lab.study import figures, summary_text   # the papers' figures' data, every number from lab.analysis

app.extension()  # Panel, Bokeh and HoloViews JavaScript and CSS from the installed packages: works offline
SPECS = shipped_specs()
sorted(SPECS)
'''),
        md('''
## 1. Width × label noise

The spec, as shipped: base fields shared by every run, and three axes. `seeds` is a
*repeat* axis: runs that differ only in their seed are pooled as repeats of one
condition, so the figures have one curve or point per (width, noise) condition.
'''),
        code('''
spec = lab.Study.from_file(SPECS["utilization_vs_noise.yaml"])
print(spec, "-", spec.description)
print("base:", spec.base)
study = spec
if FAST:
    # the first two values of every axis, 1 epoch, fewer images; its own name keeps FAST runs apart in the store
    study = lab.Study(spec.name + "-fast",
                      base={**spec.base, "epochs": 1, "unseen_per_class": 20, "seen_per_class": 15},
                      axes={axis: values[:2] for axis, values in spec.axes.items()}, description=spec.description)
print(study)
pd.DataFrame([cell.values for cell in study.cells()])   # one row per run, in the order they are submitted
'''),
        md('''
**Run it on a local Dask cluster.** `workers=2` starts two worker processes, each running
one cell at a time with one torch thread; the link printed first is Dask's dashboard
(task stream, worker memory) while the study runs. Then `study.status()` lists every cell
with its run: its status, best layer, g and seen accuracy.
'''),
        code('''
result = study.run(workers=2, on_dashboard=print)
print(f"{len(result.run_ids) - len(result.failed)} of {len(study.cells())} runs finished "
      f"({len(result.skipped)} from an earlier execution), {len(result.failed)} failed, {result.seconds:.0f} s")
study.status()
'''),
        code('''
figs = figures(study)   # reads the study's finished runs back from the store
print("condition axes:", figs["axes"])
'''),
        md('''
### g per layer against relative depth (Dyballa et al.)

For every layer, the features of the images of the **unseen** classes (never trained on)
are clustered by k-means and compared with the true classes by NMI (0: no agreement,
1: perfect). The x axis is the layer's *relative depth*: 0 for the first measured layer
(nearest the input), 1 for the last, so networks of different depth share one axis. Each curve is one
condition (mean over its repeats, n in the legend), the band is the 95 % interval of that
mean over the repeats (Student t: wide with 2 repeats, on purpose), and the star marks the condition's **best layer**: its NMI there is the condition's
**generalization index g**. Dyballa et al. compare where along the depth that star sits
across architectures (`studies/which_layer.yaml` is their protocol at CPU scale); here
the conditions are widths and noise ratios.
'''),
        code('''
study_plots.layer_depth_curves(figs)
'''),
        md('''
Every run above is read at its **last** epoch. `figures(study, summary="best")` reads each run at
its epoch of highest unseen g instead (ties to the earlier epoch), and `summary=3` at epoch 3
(runs without it are left out, and `summary_text` says so); the Studies tab's **Summary** picker
does the same. "Best" chooses the epoch on the unseen classes themselves: it says how high a
run got, not where it ended.
'''),
        code('''
best = figures(study, summary="best")
print(summary_text(best))
study_plots.layer_depth_curves(best)
'''),
        md('''
### Seen accuracy against g (Gerritz et al.)

One point per condition: the x axis is the accuracy on held-out images of the **seen**
classes (what training optimised), the y axis is g (how well the best layer separates the
unseen classes); error bars are the 95 % intervals of each mean over repeats.

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
        code('''
print(study_plots.rank_text(figs["ranks"]))
display(figs["generalization"])
study_plots.accuracy_vs_g(figs)
'''),
        md('''
**Checked.** Every cell finished; there is one point per condition, each pooling all its
repeats; each condition's g is the top of its curve above, and the star sits at g's layer.
'''),
        code('''
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
        md('''
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
        code('''
AXES = figs["axes"]                                                 # the heatmaps' two axes
grid = figs["grid"]
LAYERS = [layer for layer in dict.fromkeys(curves["layer"]) if layer in set(grid["layer"])]   # input -> output
hv.Layout([study_plots.grid_heatmap(figs, "utilization", layer) for layer in LAYERS]).opts(
    hv.opts.HeatMap(responsive=False, width=320, height=260)).cols(3)
'''),
        code('''
hv.Layout([study_plots.grid_heatmap(figs, "contribution", layer) for layer in LAYERS]).opts(
    hv.opts.HeatMap(responsive=False, width=320, height=260)).cols(3)
'''),
        code('''
(study_plots.grid_heatmap(figs, "generalization_gap", "") + study_plots.grid_heatmap(figs, "resilience", "")).opts(
    hv.opts.HeatMap(responsive=False, width=380, height=300))
'''),
        md('''
The same numbers as a table: the generalization gap, conditions as rows and columns.
'''),
        code('''
gap = grid[grid["quantity"] == "generalization_gap"]
gap.pivot(index=AXES[0], columns=AXES[1], values="mean")
'''),
        md('''
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
        code('''
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
        code('''
collapse_figs = figures(collapse)
study_plots.collapse_curves(collapse_figs)
'''),
        code('''
nc1 = collapse_figs["nc1"]
table = nc1.pivot(index="layer", columns="group", values="mean").reindex(list(dict.fromkeys(nc1["layer"])))
assert (collapse.status()["status"] == "finished").all()
assert table.shape[1] == len(collapse.axes["strategy"]), "one column per strategy"
assert table.notna().all().all() and (table > 0).all().all(), "NC1 is a ratio of spreads: positive"
table   # mean NC1 over seeds, layers input -> output, one column per strategy
''', "claim"),
        md('''
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
