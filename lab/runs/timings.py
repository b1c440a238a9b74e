"""Where a run's time goes: one clock for the engine's stages, per epoch and per run.

Every timed block of the engine (:meth:`Timings.timed`) adds its *own* seconds to one key of
:data:`TIMED`; a block nested in another (the stages of an evaluation inside ``evaluate``) is
taken out of its parent, so the keys never count a second twice. The user-facing breakdown
folds them into :data:`STAGES`: ``bootstrap`` counts as ``metrics``; ``lidar`` is LiDAR's extra forward
passes over augmented views of the unseen images and their metric (0 unless ``RunConfig.lidar_views``); ``other`` is the wall
time no stage accounts for (loading, the evaluation's own bookkeeping, the consumer of the
events, waiting for the disk outside ``store``). The table written to ``meta.json`` as
``"timings"``, the training rows' ``*_seconds`` columns and the run summary all come from here.
"""
from __future__ import annotations

import contextlib
import time
from typing import Iterator, Mapping

__all__ = ["Timings", "STAGES", "TIMED", "TRAINING_ROW_KEYS", "describe"]

TIMED = ("load", "train", "extract", "lidar", "metrics", "bootstrap", "projection", "store", "evaluate")
"""The engine's timed keys, the one list of their names (``evaluate`` holds the stages of an evaluation: see
:class:`Timings`)."""
_FOLDED = {"bootstrap": "metrics", "load": None, "evaluate": None}
# the stage a key's seconds count under where it is not its own (None: "other")
_STAGE_OF = {key: _FOLDED.get(key, key) for key in TIMED if _FOLDED.get(key, key) is not None}
STAGES = (*dict.fromkeys(_STAGE_OF.values()), "other")
"""The stages of the breakdown, in the order they are shown: train, extract, lidar, metrics, projection,
store, other."""
TRAINING_ROW_KEYS = ("train", "evaluate", "extract", "metrics", "projection")
"""The keys of :data:`TIMED` whose inclusive seconds an epoch's training row holds, as ``<key>_seconds``
(written by :func:`lab.runs.results.write_training_row`, read back by
:func:`lab.runs.results.read_training_row`)."""


class Timings:
    """Seconds per key, inclusive and own, and the per-epoch table of :data:`STAGES`.

    Attributes
    ----------
    seconds : dict
        Inclusive seconds per :data:`TIMED` key (a block's whole duration, nested blocks included).
    own : dict
        Seconds per key without the blocks nested in it; the keys of ``own`` add up to the timed time.
    epochs : list of dict
        One row per closed epoch: seed, epoch, each of :data:`STAGES` and ``total`` (its wall time).
    """

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.seconds: dict[str, float] = dict.fromkeys(TIMED, 0.0)
        self.own: dict[str, float] = dict.fromkeys(TIMED, 0.0)
        self.epochs: list[dict] = []
        self._open: list[list] = []                  # [key, start, seconds of nested blocks]
        self._epoch: tuple[float, dict] | None = None

    @contextlib.contextmanager
    def timed(self, key: str) -> Iterator[None]:
        """Add the seconds spent in the block to ``key`` (and take them out of an enclosing block)."""
        if key not in self.seconds:
            raise ValueError(f"timing key must be one of {', '.join(TIMED)}. Got {key!r} instead.")
        frame = [key, time.perf_counter(), 0.0]
        self._open.append(frame)
        try:
            yield
        finally:
            self._open.remove(frame)
            spent = time.perf_counter() - frame[1]
            self.seconds[key] += spent
            self.own[key] += spent - frame[2]
            if self._open:
                self._open[-1][2] += spent

    def add(self, key: str, seconds: float) -> None:
        """Count ``seconds`` measured elsewhere (e.g. loading before the first seed) under ``key``."""
        self.seconds[key] += seconds
        self.own[key] += seconds

    def since(self, before: Mapping[str, float]) -> dict[str, float]:
        """Inclusive seconds per key since the snapshot ``before`` (a copy of :attr:`seconds`)."""
        return {key: self.seconds[key] - before.get(key, 0.0) for key in TIMED}

    # -- epochs ----------------------------------------------------------------------------------
    def begin_epoch(self) -> None:
        """Start the wall clock of an epoch."""
        self._epoch = (time.perf_counter(), dict(self.own))

    def end_epoch(self, seed: int, epoch: int) -> dict:
        """Close the epoch begun last: its row (seconds per stage and ``total``), also kept in :attr:`epochs`."""
        start, before = self._epoch if self._epoch is not None else (self.t0, dict.fromkeys(TIMED, 0.0))
        self._epoch = None
        row = {"seed": int(seed), "epoch": int(epoch),
               **_stages({k: self.own[k] - before.get(k, 0.0) for k in TIMED}, time.perf_counter() - start)}
        self.epochs.append(row)
        return row

    # -- the run -------------------------------------------------------------------------------------
    def run_row(self) -> dict:
        """Seconds per stage over the whole run so far, and ``total`` (its wall time)."""
        return _stages(self.own, time.perf_counter() - self.t0)

    def table(self) -> dict:
        """``meta.json``'s ``"timings"``: the stages, the run's row, one row per epoch and the timed keys."""
        return {"stages": list(STAGES), "run": self.run_row(), "epochs": [dict(r) for r in self.epochs],
                "detail": {k: round(v, 4) for k, v in self.own.items()}}


def _stages(own: Mapping[str, float], total: float) -> dict:
    out = dict.fromkeys(STAGES, 0.0)
    for key, seconds in own.items():
        stage = _STAGE_OF.get(key)
        if stage is not None:
            out[stage] += seconds
    out["other"] = max(0.0, total - sum(out[s] for s in STAGES if s != "other"))
    out["total"] = total
    return {k: round(v, 4) for k, v in out.items()}


def describe(row: Mapping[str, float]) -> str:
    """One line of a timings row: ``12.3 s: train 61%, extract 20%, metrics 9%, ...`` (stages over 0.5 %)."""
    total = float(row.get("total") or 0.0)
    if total <= 0:
        return "no time recorded"
    shares = [f"{stage} {100 * float(row.get(stage) or 0.0) / total:.0f}%" for stage in STAGES
              if float(row.get(stage) or 0.0) / total >= 0.005]
    return f"{total:.1f} s: " + ", ".join(shares)
