"""The code cells of the study notebook (:mod:`lab.export.study_notebook`), as templates.

Each is filled by :func:`lab.export._cells.fill`: a ``{{SLOT}}`` is replaced by a Python literal and
nothing else, so what a user typed reaches the code only as data. The cells only call the library
(no ``def`` or ``class``).
"""

SETUP = r'''
import holoviews as hv
import pandas as pd
from IPython.display import display

import app
import lab
from app import study_plots          # the figures of the app's Studies tab (no server needed)
from lab.study import Study, figures, summary_text  # the figures' data: every number from lab.analysis

app.extension()  # Panel, Bokeh and HoloViews JavaScript and CSS from the installed packages: works offline
pd.set_option("display.precision", 4)
pd.set_option("display.max_columns", 40)
pd.set_option("display.width", 200)
pd.set_option("display.max_colwidth", None)
'''

LOAD = r'''
# The run store and the study's spec (plain data: point STORE_ROOT elsewhere if the runs moved).
STORE_ROOT = {{STORE_ROOT}}
SPEC = {{SPEC}}
EXPORTED_RUN_IDS = {{RUN_IDS}}   # per cell, the run this notebook was exported with (None: no run yet)
SUMMARY = {{SUMMARY}}   # each run read at: "last" (epoch), "best" (its epoch of highest unseen g), or an epoch

store = lab.RunStore(STORE_ROOT)
study = Study.from_dict(SPEC)
status = study.status(store=store)
changed = [cell for cell, old, new in zip(status["cell"], EXPORTED_RUN_IDS, status["run_id"]) if old != new]
if changed:
    print(f"note: the store holds other runs for cell(s) {changed} than at export (run or deleted since)")
figs = figures(study, store=store, summary=SUMMARY)   # reads the study's finished runs back from the store
print(f"{study}: " + ", ".join(f"{n} {s}" for s, n in status["status"].value_counts().items()))
print(summary_text(figs))
display(status, metadata=lab.export.table_metadata("status", status))
'''

LAYERS = r'''
layers = figs["layers"]   # per condition and layer: mean, std, n and the 95 % interval over seeds; best = g's layer
display(layers, metadata=lab.export.table_metadata("layers", layers))
study_plots.layer_depth_curves(figs)
'''

GENERALIZATION = r'''
generalization = figs["generalization"]   # per condition: g and seen accuracy, each with n and its interval over seeds
display(generalization, metadata=lab.export.table_metadata("generalization", generalization))
print(study_plots.generalization_text(figs))
print(study_plots.rank_text(figs["ranks"]))
study_plots.accuracy_vs_g(figs)
'''

GRID = r'''
grid = figs["grid"]   # per condition, quantity and layer: mean, std, n and the 95 % interval over repeats
LAYERS = [layer for layer in dict.fromkeys(figs["layers"]["layer"]) if layer in set(grid["layer"])]
display(grid, metadata=lab.export.table_metadata("grid", grid))
hv.Layout([study_plots.grid_heatmap(figs, quantity, layer) for quantity in ("utilization", "contribution")
           for layer in LAYERS]
          + [study_plots.grid_heatmap(figs, quantity, "") for quantity in ("generalization_gap", "resilience")]
          ).opts(hv.opts.HeatMap(responsive=False, width=320, height=260)).cols(3)
'''

NC1 = r'''
nc1 = figs["nc1"]   # per condition and layer: NC1 on the seen held-out images, mean over seeds with n and interval
nc1_table = nc1[["group", "layer", "mean", "seed_low", "seed_high", "n"]]
display(nc1_table, metadata=lab.export.table_metadata("nc1", nc1_table))
study_plots.collapse_curves(figs)
'''

LAW = r'''
law = figs["law"]   # per condition and split: the law of equi-separation at the summary epoch, over its seeds
display(law, metadata=lab.export.table_metadata("law", law))
'''

TRANSFER = r'''
transfer = figs["transfer"]   # per condition and layer: scores at epoch 0 (seen images) and unseen NMI at SUMMARY
print(study_plots.transfer_text(figs))   # or one line: the runs measured no score
if transfer["scores"]:
    display(transfer["points"], metadata=lab.export.table_metadata("transfer_points", transfer["points"]))
    display(transfer["correlations"], metadata=lab.export.table_metadata("transfer_vs_g", transfer["correlations"]))
study_plots.transfer_vs_g(figs)
'''

AGREEMENT = r'''
agreement = lab.analysis.study_agreement(study, store=store)   # per measure, over the study's finished runs
print(study_plots.agreement_text(figs))
display(agreement, metadata=lab.export.table_metadata("agreement", agreement.reset_index()))
'''

RUN = r'''
RUN_MISSING = False   # True: run the cells that have no finished run yet (a local Dask cluster), then re-read

if RUN_MISSING:
    result = study.run(store=store, on_dashboard=print)
    print(f"{len(result.run_ids) - len(result.failed)} of {len(study.cells())} runs finished, "
          f"{len(result.failed)} failed; execute the cells above again to redraw")
'''
