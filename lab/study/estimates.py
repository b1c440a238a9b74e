"""How long a study's cells would take: from the timings of comparable stored runs, else measured defaults.

Every run records where its time went (``meta["timings"]``, :mod:`lab.runs.timings`): the run's total and
one row per (seed, epoch) evaluated. A run's time is split into three parts, and a new cell's time is
built from them::

    seconds = fixed + seeds * (epoch_0 + epochs * per_epoch)

``fixed`` is the run's total less its epochs (loading the data and the model, the run's bookkeeping),
``epoch_0`` the evaluation before any training, ``per_epoch`` one trained epoch with its evaluation.
Comparable runs are the store's finished runs on the same backbone, dataset and image size (any
study's, or none); the median of each part over them is used. A cell without a comparable run gets
the measured default of its backbone's source (:data:`DEFAULT_SECONDS`). Sample sizes, strategy and
device are not matched: the estimate is the order of magnitude a user plans with, not a promise.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Mapping

import pandas as pd

from lab.status import RunStatus
from lab.store.lookup import run_stamp
from lab.study._keys import short_value

__all__ = ["estimate", "estimate_line", "DEFAULT_SECONDS", "RunTiming"]


@dataclass(frozen=True)
class RunTiming:
    """A run's seconds in three parts (see the module's docstring); ``per_epoch`` is None for a run that
    trained no epoch."""

    fixed: float
    epoch_0: float
    per_epoch: float | None

    def seconds(self, seeds: int, epochs: int) -> float:
        """The seconds of a run of ``seeds`` seeds of ``epochs`` epochs each."""
        return self.fixed + seeds * (self.epoch_0 + epochs * (self.per_epoch or 0.0))

    @classmethod
    def of(cls, timings: Mapping) -> "RunTiming | None":
        """The parts of a run's ``meta["timings"]`` (None when it holds no total or no epoch)."""
        total = (timings.get("run") or {}).get("total") if isinstance(timings, Mapping) else None
        epochs = [row for row in (timings.get("epochs") or []) if isinstance(row, Mapping)] if total else []
        if not epochs:
            return None
        zero = [float(row["total"]) for row in epochs if row.get("epoch") == 0]
        trained = [float(row["total"]) for row in epochs if (row.get("epoch") or 0) > 0]
        if not zero:
            return None
        fixed = max(0.0, float(total) - sum(float(row["total"]) for row in epochs))
        return cls(fixed, statistics.fmean(zero), statistics.fmean(trained) if trained else None)


DEFAULT_SECONDS = {
    "mlp": RunTiming(fixed=0.1, epoch_0=0.1, per_epoch=0.1),         # mlp:depth=2,width=16, digits at 16 px
    "zoo": RunTiming(fixed=1.2, epoch_0=1.6, per_epoch=34.0),        # glyph_resnet18, glyphs at its own size
    "timm": RunTiming(fixed=0.5, epoch_0=0.4, per_epoch=3.3),        # resnet18, digits at 32 px
    "imagenet": RunTiming(fixed=0.4, epoch_0=0.9, per_epoch=6.5),    # imagenet_efficientnet_lite0, 32 px
    "hf": RunTiming(fixed=3.0, epoch_0=1.0, per_epoch=10.1),         # hf:cvt, digits at 32 px
}
"""Measured seconds of one tiny run per backbone source (:data:`lab.backbones.SOURCES`), for a cell with no
comparable stored run. Measured by ``benchmarks/study_defaults.py`` (its output with the machine, date and
commit: ``benchmarks/results/study_defaults.txt``): one run of :data:`tests.fixtures.configs.TINY` (1 seed,
2 epochs of full fine-tuning, 10 unseen and 6 seen evaluation images per class, all of the seen training
images) with the backbone in each line's comment, on one torch thread of a 2-core machine shared with other
work, split by :meth:`RunTiming.of` and rounded up. A zoo model trains on every glyph image of 15 styles at
its own size, hence its long epoch; a source without a line here is estimated as a timm model."""


def _family(backbone: str) -> str:
    from lab.backbones import source_for

    try:
        name = source_for(str(backbone))[0].name
    except ValueError:
        name = "timm"
    return name if name in DEFAULT_SECONDS else "timm"


def _size(config) -> str:
    return f"{config.img_size} px" if config.img_size else "its default size"


# lab.store.lookup.run_stamp of a run -> (dataset, backbone, img_size) and timing, or None: the
# composer estimates at every change it shows, and loading every run of a store took seconds each time
_SEEN: dict[tuple, tuple | None] = {}


def _run_timing(store, run_id: str) -> tuple | None:
    """((dataset, backbone, img_size), RunTiming) of a finished run with timings, else None."""
    key = run_stamp(store.path(run_id))
    if key is None:
        return None
    if key not in _SEEN:
        try:
            rec = store.load(run_id)
        except Exception:                          # noqa: BLE001 - damaged folders are listed elsewhere
            return None                            # not remembered: a run being written is read again
        if rec.status != RunStatus.FINISHED:
            return None                            # not remembered: a live run's meta changes when it ends
        timing = RunTiming.of(rec.meta.get("timings") or {})
        config = rec.config_dict or {}
        _SEEN[key] = (None if timing is None else
                      ((config.get("dataset"), config.get("backbone"), config.get("img_size")), timing))
    return _SEEN[key]


def _comparable(store) -> dict[tuple, list[RunTiming]]:
    """The timings of the finished runs of ``store``, by (dataset, backbone, img_size) of their config."""
    import warnings

    from lab.store.lookup import open_store

    store = open_store(store)
    out: dict[tuple, list[RunTiming]] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ids = store.ids() if store.root.is_dir() else []
    for run_id in ids:
        found = _run_timing(store, run_id)
        if found is not None:
            out.setdefault(found[0], []).append(found[1])
    return out


def _median(timings: list[RunTiming]) -> RunTiming:
    per_epoch = [t.per_epoch for t in timings if t.per_epoch is not None]
    return RunTiming(statistics.median(t.fixed for t in timings), statistics.median(t.epoch_0 for t in timings),
                     statistics.median(per_epoch) if per_epoch else None)


def estimate(study, *, store=None) -> pd.DataFrame:
    """One row per cell of ``study``, in run order: whether it is stored and how long a new run of it takes.

    Parameters
    ----------
    study : lab.Study
    store : RunStore, path or None
        The run store (None: the default store).

    Returns
    -------
    pandas.DataFrame
        Columns ``index`` (the cell's grid position, :attr:`Cell.index`), one column per axis (its value
        as text), ``family`` (the backbone's source in :data:`lab.backbones.SOURCES`), ``stored`` (a finished
        run of the cell is in the store: it will not run again), ``seconds`` (0 for a stored cell), ``basis``
        ("stored", "runs": comparable stored runs, or "default": :data:`DEFAULT_SECONDS`) and ``source``
        (where the seconds come from, in words).
    """
    from lab.study.records import runs_by_cell

    by_cell = runs_by_cell(study.name, store=store, axes=study.axes)
    timings = _comparable(store)
    rows = []
    for cell in study.run_order():
        config = cell.config
        rec = by_cell.get(cell.key)
        row = {"index": cell.index, **{axis: short_value(value) for axis, value in cell.values.items()},
               "family": _family(config.backbone)}
        epochs, seeds = config.n_epochs, len(config.seeds)
        found = [t for t in timings.get((config.dataset, config.backbone, config.img_size), [])
                 if t.per_epoch is not None or not epochs]
        if rec is not None and rec.status == RunStatus.FINISHED:
            row.update(stored=True, seconds=0.0, basis="stored", source="already stored")
        elif found:
            row.update(stored=False, seconds=_median(found).seconds(seeds, epochs), basis="runs",
                       source=f"median of {len(found)} stored run{'s' if len(found) > 1 else ''} of "
                              f"{config.backbone} on {config.dataset} at {_size(config)}, scaled by epochs and seeds")
        else:
            row.update(stored=False, seconds=DEFAULT_SECONDS[row["family"]].seconds(seeds, epochs), basis="default",
                       source=f"measured default for the {row['family']} family, scaled by epochs and seeds")
        rows.append(row)
    columns = ["index", *study.axes, "family", "stored", "seconds", "basis", "source"]
    return pd.DataFrame(rows, columns=columns)


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"about {max(1, round(seconds))} s"
    minutes = round(seconds / 60)
    if minutes < 120:
        return f"about {minutes} min"
    return f"about {minutes // 60} h {minutes % 60:02d} min"


def estimate_line(table: pd.DataFrame) -> str:
    """The one-line summary of an :func:`estimate` table, as the app shows it.

    "12 cells · 4 already stored · about 9 min (5 from stored runs' timings, 3 from measured defaults
    for the mlp family)"; "· nothing left to run" when every cell is stored.
    """
    n = len(table)
    stored = table["stored"].astype(bool) if n else pd.Series([], dtype=bool)
    head = f"{n} cell{'s' if n != 1 else ''} · {int(stored.sum())} already stored"
    todo = table[~stored] if n else table
    if todo.empty:
        return head + " · nothing left to run"
    parts = []
    runs = int((todo["basis"] == "runs").sum())
    if runs:
        parts.append(f"{runs} from stored runs' timings")
    defaults = todo[todo["basis"] == "default"]
    if len(defaults):
        families = sorted(set(defaults["family"]))
        parts.append(f"{len(defaults)} from measured defaults for the {', '.join(families)} "
                     f"famil{'ies' if len(families) > 1 else 'y'}")
    return f"{head} · {_duration(float(todo['seconds'].sum()))} ({', '.join(parts)})"
