"""Follow a stored run as another process writes it: the run's events, read back from the store.

A run written by :func:`lab.run` in a terminal, by a study's worker or by :class:`lab.Monitor` in a
researcher's own training loop is on disk epoch by epoch (a completed epoch on disk is always whole: its
training row is written last). :class:`RunFollower` reads what has landed since its last look and turns it
into the events :func:`lab.run` streams for that epoch, so anything that consumes the engine's events (the
app's live view, :func:`lab.progress`) shows a followed run exactly as a run it started::

    follower = RunFollower(run_id, store=store)
    while not follower.ended:
        for event in follower.poll():
            view.push(event)
        time.sleep(1)

The values are the stored ones; g, its layer and the across-seed means come from the engine's own
:class:`~lab.runs.results.Results` on those rows. What the store does not keep is not replayed: per-batch
``Progress`` (the follower sends one ``Progress("evaluate")`` per completed epoch instead) and the
timings of an epoch (read from the training row's ``*_seconds``). A run that stopped without closing
(its process gone, or no heartbeat from another host for :data:`lab.store.STALE_AFTER` seconds) ends with
:class:`~lab.events.RunInterrupted`.
"""
from __future__ import annotations

import time
from typing import Iterator

from lab import events as ev
from lab.runs.results import Results, _finite, read_training_row
from lab.status import RunStatus

__all__ = ["RunFollower", "follow"]


def _confidence_names() -> set[str]:
    from lab.analysis.intervals import CONFIDENCE_SUFFIXES
    from lab.catalogue import metric_names

    return {f"{m}_{suffix}" for m in metric_names(per_image=True) for suffix in CONFIDENCE_SUFFIXES}


class RunFollower:
    """Turns a stored run, as it grows, into :mod:`lab.events` events, one :meth:`poll` at a time.

    Parameters
    ----------
    run : str or lab.store.RunRecord
        The run (its id, or a record of it; it is read again at every poll).
    store : None, lab.RunStore or path
        Where it is stored (None: the default store).

    Notes
    -----
    Each poll returns only what is new: ``RunStarted`` once the run has described itself (its layers and
    classes), then per completed (seed, epoch) its ``LayerMetrics``, ``LayerConfidence``, ``ClassMeans``,
    ``LayerUtilization``, ``ProjectionReady`` (PCA, and UMAP when it lands, perhaps a poll later),
    ``EpochFinished`` and the seed's ``Generalization``; ``Aggregate`` and the across-seed ``Generalization``
    once every seed has the epoch; at the end one of ``RunFinished``, ``RunFailed``, ``RunCancelled`` or
    ``RunInterrupted``. A run that ends with an epoch half written (failed, cancelled, interrupted) has
    that epoch's metric rows sent before its end, as the engine had sent them.
    """

    def __init__(self, run, *, store=None):
        from lab.store.lookup import load_run, open_store, run_id_of

        self.store = open_store(store)
        self.run_id = run_id_of(run)
        load_run(self.run_id, store=self.store)            # a clear KeyError now for a run that is not there
        self.ended = False
        self.status: str | None = None
        self._started = False
        self._done: set[tuple[int, int]] = set()
        self._across: set[int] = set()
        self._projections: set[tuple[int, int, str, str]] = set()
        self._results = None
        self._seeds: list[int] = []
        self._confidence = _confidence_names()

    def poll(self) -> list[ev.Event]:
        """The events of everything stored since the last poll (empty when nothing new, or after the end)."""
        if self.ended:
            return []
        record = self.store.load(self.run_id, damaged_ok=True)
        out: list[ev.Event] = []
        status = record.status
        # a word that is no status ("damaged") ends the follow too, except "unknown": meta.json not written yet
        terminal = status != "unknown" and not RunStatus.is_active(status)
        if not self._started:
            start = self._run_started(record)
            if start is None and not terminal:
                return out                       # not described yet: the loader is still at work
            if start is not None:
                out.append(start)
        training = record.training
        pairs = sorted({(int(s), int(e)) for s, e in zip(training["seed"], training["epoch"])} - self._done)
        metrics = record.metrics if pairs or terminal else None
        for seed, epoch in pairs:
            out += self._epoch(record, metrics, training, seed, epoch)
        for epoch in sorted({e for _, e in self._done} - self._across):
            if all((seed, epoch) in self._done for seed in self._seeds):
                self._across.add(epoch)
                if len(self._seeds) > 1:
                    out += self._results.across_seeds(epoch)
        out += self._new_projections(record, terminal)
        if terminal:
            out += self._unfinished(metrics)
            out.append(self._end(record, status))
            self.ended = True
        self.status = status
        return out

    # -- the parts of a poll --------------------------------------------------------------------------------
    def _run_started(self, record) -> ev.RunStarted | None:
        meta = record.meta
        layers, split = meta.get("layers"), meta.get("split") or {}
        if not layers:
            return None
        self._started = True
        self._seeds = [int(s) for s in (meta.get("seeds") or record.config_dict.get("seeds") or [0])]
        self._results = Results(self.run_id)
        self._results.layers = [layer["name"] if isinstance(layer, dict) else str(layer) for layer in layers]
        self._results.aliases = dict(meta.get("layer_aliases") or {})
        return ev.RunStarted(self.run_id, config=dict(record.config_dict), layers=list(layers),
                             classes=list(meta.get("classes") or []), seen=list(split.get("seen") or []),
                             unseen=list(split.get("unseen") or []), device=str(meta.get("device") or ""),
                             n_images=dict(meta.get("n_images") or {}), seeds=list(self._seeds),
                             trainable_fraction=_finite(meta.get("trainable_fraction")),
                             axis=str(meta.get("axis") or "epoch"))

    def _epoch(self, record, metrics, training, seed: int, epoch: int) -> list[ev.Event]:
        self._done.add((seed, epoch))
        rid = self.run_id
        self._results.aliases = dict(record.meta.get("layer_aliases") or {}) or self._results.aliases
        out: list[ev.Event] = [ev.Progress(rid, stage="evaluate", done=1, total=1, seed=seed, epoch=epoch)]
        rows = metrics[(metrics["seed"] == seed) & (metrics["epoch"] == epoch)]
        self._results.add_metrics(rows.to_dict("records"))
        out += self._metric_events(rows, seed, epoch)
        means = record.class_means
        if len(means):
            for row in means[(means["seed"] == seed) & (means["epoch"] == epoch)].itertuples(index=False):
                out.append(ev.ClassMeans(rid, seed=seed, epoch=epoch, layer=str(row.layer), split=str(row.split),
                                         classes=list(row.classes), gram=row.gram))
        util = record.utilization
        for row in util[(util["seed"] == seed) & (util["epoch"] == epoch)].itertuples(index=False):
            out.append(ev.LayerUtilization(rid, seed=seed, epoch=epoch, layer=str(row.layer),
                                           absolute=float(row.absolute), relative=float(row.relative)))
        train = training[(training["seed"] == seed) & (training["epoch"] == epoch)].iloc[-1].to_dict()
        out.append(read_training_row(rid, train))
        self._results.add_training(train)
        gen = self._results.seed_generalization(seed, epoch)
        if gen is not None:
            out.append(gen)
        return out

    def _metric_events(self, rows, seed: int, epoch: int) -> list[ev.Event]:
        out: list[ev.Event] = []
        confidence: dict[str, dict[str, float]] = {}
        for (layer, split), part in rows.groupby(["layer", "split"], sort=False):
            values, extra = {}, {}
            for metric, value in zip(part["metric"], part["value"]):
                (extra if split == "unseen" and metric in self._confidence else values)[str(metric)] = float(value)
            if values:
                out.append(ev.LayerMetrics(self.run_id, seed=seed, epoch=epoch, layer=str(layer), split=str(split),
                                           values=values))
            if extra:
                confidence.setdefault(str(layer), {}).update(extra)
        out += [ev.LayerConfidence(self.run_id, seed=seed, epoch=epoch, layer=layer, values=values)
                for layer, values in confidence.items()]          # after every layer, as the engine sends them
        return out

    def _new_projections(self, record, terminal: bool) -> list[ev.Event]:
        keys = record.projection_keys()
        out: list[ev.Event] = []
        order = {"pca": 0, "umap": 1}
        for row in sorted(keys.itertuples(index=False), key=lambda r: (r.seed, r.epoch, order.get(r.method, 2))):
            key = (int(row.seed), int(row.epoch), str(row.layer), str(row.method))
            if key in self._projections or (not terminal and key[:2] not in self._done):
                continue
            try:
                coords, labels, indices = record.projection(*key)
                names = record.projection_class_names(*key) or []
            except (KeyError, OSError, ValueError):
                continue                    # being written (or damaged): the next poll tries again
            self._projections.add(key)
            out.append(ev.ProjectionReady(self.run_id, seed=key[0], epoch=key[1], layer=key[2], method=key[3],
                                          coords=coords, labels=labels, indices=indices, class_names=names))
        return out

    def _unfinished(self, metrics) -> list[ev.Event]:
        """Metric rows of epochs the run never closed (it ended during them)."""
        if metrics is None or not len(metrics):
            return []
        out: list[ev.Event] = []
        for (seed, epoch), rows in metrics.groupby(["seed", "epoch"], sort=True):
            if (int(seed), int(epoch)) not in self._done:
                out += self._metric_events(rows, int(seed), int(epoch))
        return out

    def _end(self, record, status: RunStatus | str) -> ev.Event:
        meta = record.meta
        seconds = _seconds_between(meta.get("started"), meta.get("ended") or meta.get("updated"))
        message = meta.get("message") or ""
        if status == RunStatus.FINISHED:
            return ev.RunFinished(self.run_id, seconds=seconds, summary=dict(meta.get("summary") or {}))
        if status == RunStatus.CANCELLED:
            return ev.RunCancelled(self.run_id, seconds=seconds, message=message or RunStatus.CANCELLED.value)
        if status == RunStatus.INTERRUPTED:
            done = sorted({e for _, e in self._done})
            last = f"its last completed evaluation is epoch {done[-1]}" if done else "no evaluation completed"
            return ev.RunInterrupted(self.run_id, seconds=seconds,
                                     message=f"the process writing it stopped without closing the run ({last})")
        if status == RunStatus.FAILED:
            return ev.RunFailed(self.run_id, message=message or RunStatus.FAILED.value, seconds=seconds)
        return ev.RunFailed(self.run_id, message=f"the run cannot be read ({record.damage or status})",
                            seconds=seconds)


def _seconds_between(start, end) -> float:
    """Seconds from the stored time ``start`` to ``end`` (ISO 8601, as meta.json keeps them); 0 when unknown."""
    import datetime as dt

    try:
        a, b = dt.datetime.fromisoformat(str(start)), dt.datetime.fromisoformat(str(end))
        return max(0.0, (b - a).total_seconds())
    except (TypeError, ValueError):
        return 0.0


def follow(run, *, store=None, every: float = 1.0, timeout: float | None = None) -> Iterator[ev.Event]:
    """Yield a stored run's events as another process writes them, until it ends (see :class:`RunFollower`).

    Parameters
    ----------
    run : str or lab.store.RunRecord
    store : None, lab.RunStore or path
    every : float
        Seconds between looks at the store.
    timeout : float, optional
        Stop following (without an end event) after this many seconds.
    """
    if not every > 0:
        raise ValueError(f"every must be a positive number of seconds. Got {every!r} instead.")
    follower = RunFollower(run, store=store)
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        yield from follower.poll()
        if follower.ended or (deadline is not None and time.monotonic() >= deadline):
            return
        time.sleep(every)
