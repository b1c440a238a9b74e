"""Studies: grids of runs (a base RunConfig and axes over its fields) run on Dask distributed.

- :mod:`.spec` — :class:`Study` (the grid, every cell validated, every name resolved up front) and
  :func:`load_study`;
- :mod:`.runner` — running the unfinished cells on a Dask cluster (:func:`local_cluster` by default);
- :mod:`.order` — the order the cells run in ("grid", or "shuffled": every axis value early);
- :mod:`.grow` — adding and removing axis values (:meth:`Study.extend`, :meth:`Study.without`);
- :mod:`.estimates` — which cells are stored and how long the others take (:func:`estimate_line`);
- :mod:`.control` — :class:`StudyController`: growing or shrinking a study while it runs;
- :mod:`.records` — the study's runs in the run store and their status;
- :mod:`.figures` — the papers' figures of a study (every number from :mod:`lab.analysis`);
- :mod:`.saved` — study specs kept in the run store, found again by name.

Importing this package does not import Dask; running a study does.

>>> study = lab.Study.from_file("studies/which_layer.yaml")     # doctest: +SKIP
>>> study.run()                                                # doctest: +SKIP
>>> lab.study.figures(study)["generalization"]                 # doctest: +SKIP
"""
from __future__ import annotations

from lab.lazy import lazy_exports
from lab.study._keys import REPEAT_AXES, group_label, short_value
from lab.study.control import StudyController
from lab.study.estimates import DEFAULT_SECONDS, estimate, estimate_line
from lab.study.figures import figures, summary_phrase, summary_text
from lab.study.order import ORDERS, run_order
from lab.study.records import StudyResult, study_status
from lab.study.saved import find_study, save_spec
from lab.study.spec import Cell, Study, load_study

__all__ = ["Study", "Cell", "StudyResult", "load_study", "study_status", "figures", "summary_text", "summary_phrase",
           "group_label", "short_value", "REPEAT_AXES", "find_study", "save_spec", "estimate", "estimate_line",
           "DEFAULT_SECONDS", "ORDERS", "run_order", "StudyController", "local_cluster", "run_study", "gpu_count"]
# the runner imports Dask: only when asked for
__getattr__, __dir__ = lazy_exports(__name__, {name: f".runner:{name}" for name in (
    "local_cluster", "run_study", "machine_cores", "gpu_count")})
