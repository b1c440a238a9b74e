"""The one place where runs are summarised: seed aggregation, the generalization index g,
its best layer, the layer order, and seen accuracy against g across runs.

Pure pandas/numpy over the run store's long tables, so that the engine's events, the
store's summary, the CLI, the app, exported and shipped notebooks, studies and the
benchmarks all show the same numbers (ARCHITECTURE.md: "every number a user sees about g,
best layers or seed spreads comes from lab.analysis").

Tables (as :class:`lab.store.RunRecord` returns them):

- ``metrics``: seed, epoch, layer, split, metric, value (long; one row per value)
- ``training``: seed, epoch, heldout_accuracy, ... (one row per completed seed epoch)

Definitions (METRICS.md):

- seed aggregation: mean over the finite values, standard deviation with ``ddof=1``
  (NaN with fewer than two values), and ``n``, the number of finite values;
- generalization index g at an epoch (Dyballa et al. 2024): the maximum over layers of the
  mean-over-seeds unseen NMI, with its arg-max layer and that layer's seed std. Only complete
  evaluations count: a seed's epoch enters once every layer of the run has a row for the
  metric (an interrupted epoch with 3 of 9 layers measured says nothing about the best layer).
  Exact ties go to the deeper layer, and a tap whose features are identical to a deeper tap's
  (``aliases``: e.g. ResNet's last block, whose pooled output *is* ``pre_logits``) is reported
  as that deeper tap;
- how sure that answer is (:func:`bootstrap`, in :mod:`lab.analysis.intervals`): per layer a
  percentile interval over resamples of the unseen images and ``best_share``, the fraction of
  resamples in which the layer is best. With several seeds, g's ``best_share`` pools the resamples
  of every seed (the mean of the seeds' shares) and ``g_low``/``g_high`` are the seeds' mean bounds;
- the answer per image and per selection (:mod:`lab.analysis.images`): each unseen image's kNN vote,
  margin and cluster per layer (the per-image record), its arrival layer and forgetting
  (:func:`image_table`), and the measures on any selection of images (:func:`selection_report`);
- neural collapse on the training set (:mod:`lab.analysis.neural_collapse`): the first epoch of the terminal
  phase (:func:`terminal_phase`) and the class means against a simplex ETF (:func:`simplex`);
- neural collapse across layers (:mod:`lab.analysis.separation_law`): the law of equi-separation (He & Su
  2023), log10 NC1 fitted against the layer index per seed, epoch and split (:func:`separation_law`), and its
  seed mean and spread (:func:`separation_law_across_seeds`; of its fitted table, :func:`law_across_seeds`), its
  reasons as codes with their words (:class:`LawReason`, :class:`LawCode`), and the points and line it fits
  (:func:`separation_law_points`); each split's last evaluation of it, as the run summary gives it
  (:func:`latest_separation_law`), and that per condition of a study (:func:`group_separation_law`);
- whether the measures agree on the best layer (:mod:`lab.analysis.agreement`, :func:`measure_agreement`),
  the label-free ones included, and how often they do over a study's runs (:func:`study_agreement`);
- seeds as replicates (:mod:`lab.analysis.replicates`): a condition's mean over its seeds with the 95 %
  Student-t interval of that mean and n (:func:`replicate_interval`, :func:`with_replicate_interval`), read
  at each run's summary epoch: the last, the best by the unseen g, or a given one (:mod:`lab.analysis.summary_epochs`,
  :func:`summary_epoch`, :func:`at_summary`);
- the tunnel (:mod:`lab.analysis.tunnel`, Masarczyk et al. 2023; Harun et al. 2024): the relative depth of the
  unseen classes' best layer and the share of the layers after it where unseen g and the numerical rank fall
  while the seen probe accuracy stays saturated (:func:`tunnel`), and per study condition over its seeds
  (:func:`group_tunnel`);
- rank correlations (:mod:`lab.analysis.ranks`): seen accuracy against g across runs
  (:func:`accuracy_vs_g`), and transferability scores measured before fine-tuning against the unseen
  NMI each layer reaches after it (:func:`transfer_vs_g`), with percentile bootstrap intervals.

Examples
--------
>>> import pandas as pd
>>> m = pd.DataFrame({"seed": [0, 0, 1, 1], "epoch": 0, "layer": ["a", "b", "a", "b"],
...                   "split": "unseen", "metric": "nmi", "value": [0.2, 0.5, 0.4, 0.7]})
>>> row = generalization(m, layers=["a", "b"]).iloc[0]
>>> row["layer"], round(float(row["g"]), 3), round(float(row["g_std"]), 4)
('b', 0.6, 0.1414)
"""
from __future__ import annotations

from lab.analysis.agreement import AGREEMENT_COLUMNS, agreement_table, measure_agreement
from lab.analysis.neural_collapse import simplex, terminal_phase
from lab.analysis.images import (
    IMAGE_VALUES, SELECTION_COLUMNS, arrival_counts, has_image_record, image_answers, image_record_problem,
    image_table, record_table, selection_measures, selection_report,
)
from lab.analysis.intervals import (
    CONFIDENCE_SUFFIXES, LEVEL, N_RESAMPLES, bootstrap, confidence_text, confidence_values, resample_counts,
)
from lab.analysis.separation_law import (
    LATEST_LAW_KEYS, MIN_LAW_LAYERS, SEPARATION_LAW_COLUMNS, SEPARATION_LAW_POINT_COLUMNS, group_separation_law,
    latest_separation_law, separation_law, separation_law_across_seeds, separation_law_points,
    LawCode, LawReason, law_across_seeds,
)
from lab.analysis.replicates import REPLICATE_LEVEL, replicate_interval, with_replicate_interval
from lab.analysis.summary_epochs import SUMMARIES, at_summary, check_summary, summary_label, up_to_epoch
from lab.analysis.tunnel import (TUNNEL_PROBE, TUNNEL_QUANTITIES, TUNNEL_RANK, TUNNEL_TOLERANCE, Tunnel,
                                 group_tunnel, tunnel)
from lab.analysis.study_agreement import STUDY_AGREEMENT_COLUMNS, study_agreement
from lab.analysis.ranks import ALL_CONDITIONS, rank_correlation, transfer_correlations
from lab.analysis.summary import (
    accuracy_vs_g, aggregate_seeds, complete_evaluations, generalization, grid_summary, group_curves,
    group_generalization, heldout_accuracy, latest_generalization, layer_curve, layer_order, pool_runs,
    run_scalars, run_summary, summarize_run, RUN_FACTS, summary_epoch, transfer_vs_g,
)

__all__ = [
    "bootstrap", "confidence_values", "confidence_text", "resample_counts", "LEVEL", "N_RESAMPLES",
    "rank_correlation", "transfer_correlations", "CONFIDENCE_SUFFIXES", "transfer_vs_g", "ALL_CONDITIONS",
    "layer_order", "aggregate_seeds", "complete_evaluations", "generalization", "latest_generalization",
    "layer_curve", "run_summary", "summarize_run", "RUN_FACTS", "heldout_accuracy", "accuracy_vs_g",
    "pool_runs", "group_curves", "group_generalization", "run_scalars", "grid_summary",
    "image_table", "record_table", "image_answers", "arrival_counts", "selection_report", "selection_measures",
    "has_image_record",
    "image_record_problem",
    "IMAGE_VALUES", "SELECTION_COLUMNS", "measure_agreement", "agreement_table",
    "AGREEMENT_COLUMNS", "terminal_phase", "simplex", "study_agreement", "STUDY_AGREEMENT_COLUMNS",
    "separation_law", "separation_law_across_seeds", "separation_law_points", "SEPARATION_LAW_COLUMNS",
    "SEPARATION_LAW_POINT_COLUMNS", "MIN_LAW_LAYERS", "latest_separation_law", "group_separation_law",
    "LATEST_LAW_KEYS", "LawCode", "LawReason", "law_across_seeds",
    "tunnel", "Tunnel", "group_tunnel", "TUNNEL_TOLERANCE", "TUNNEL_PROBE", "TUNNEL_RANK", "TUNNEL_QUANTITIES",
    "replicate_interval", "with_replicate_interval", "REPLICATE_LEVEL",
    "SUMMARIES", "check_summary", "summary_label", "summary_epoch", "at_summary", "up_to_epoch",
]
