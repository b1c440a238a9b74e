"""Running a :class:`lab.study.Study` on Dask distributed (the client side and the worker task).

Kept apart from :mod:`lab.study` so that reading specs and stored results never imports Dask.
"""
from __future__ import annotations

import contextlib
import copy
import logging
import os
import secrets
import tempfile
import threading
import time
from typing import Any, Callable

from lab.archive import pack_bytes, unpack_bytes
from lab.study.records import StudyResult, runs_by_cell, tag_run

__all__ = ["run_study", "run_cell", "machine_cores", "local_cluster"]

_TERMINAL = ("run_finished", "run_failed", "run_cancelled")
_PROGRESS_EVERY = 0.5        # seconds between progress messages of one run (keeps the topic light)
_CANCEL_CHECK = 0.25         # seconds between checks of the cancel flag while cells run


def machine_cores() -> int:
    """CPU cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:           # pragma: no cover - macOS, Windows
        return os.cpu_count() or 1


# ---------------------------------------------------------------------------------------------- worker


def _emitter(topic: str | None, cell: int) -> Callable[[dict], None]:
    if topic is None:
        return lambda msg: None
    try:
        from distributed import get_worker
        worker = get_worker()
    except (ImportError, ValueError):
        return lambda msg: None
    return lambda msg: worker.log_event(topic, {"cell": cell, **msg})


def _message(ev) -> dict | None:
    """A small, serialisable summary of an engine event for the client."""
    kind = ev.kind
    if kind == "run_started":
        return {"kind": kind, "run_id": ev.run_id, "layers": len(ev.layers), "pid": os.getpid()}
    if kind == "progress":
        return {"kind": kind, "stage": ev.stage, "done": int(ev.done), "total": int(ev.total),
                "epoch": ev.epoch, "seed": ev.seed}
    if kind == "epoch_finished":
        return {"kind": kind, "epoch": ev.epoch, "seed": ev.seed, "heldout_accuracy": ev.heldout_accuracy}
    if kind in _TERMINAL:
        return {"kind": kind, "run_id": ev.run_id, "message": getattr(ev, "message", None)}
    return None


def run_cell(config: dict, study: str, cell: dict, index: int, threads: int, topic: str | None = None) -> dict:
    """Run one cell on this process (a Dask worker) and return its run as an archive.

    Returns
    -------
    dict: run_id, status ("finished", "failed", "cancelled"), message, archive (bytes)
    """
    import torch
    from threadpoolctl import threadpool_limits

    import lab
    from lab.config import RunConfig
    from lab.store import RunStore

    # Dask's nanny pins OpenMP/BLAS to one thread; torch keeps its own count, so set it here.
    torch.set_num_threads(max(1, int(threads)))
    emit = _emitter(topic, index)
    last = 0.0
    with tempfile.TemporaryDirectory(prefix="lab-study-") as tmp, threadpool_limits(limits=max(1, int(threads))):
        store = RunStore(tmp)
        final = None
        for ev in lab.run(RunConfig.from_dict(config), store=store):
            msg = _message(ev)
            now = time.monotonic()
            if msg is not None and (msg["kind"] != "progress" or now - last >= _PROGRESS_EVERY):
                last = now if msg["kind"] == "progress" else last
                emit(msg)
            if ev.kind in _TERMINAL:
                final = ev
        status = {"run_finished": "finished", "run_failed": "failed"}.get(final.kind, "cancelled")
        tag_run(store, final.run_id, study, cell)
        return {"run_id": final.run_id, "status": status, "message": getattr(final, "message", None),
                "archive": pack_bytes(store, [final.run_id])}


# ---------------------------------------------------------------------------------------------- client


def _has_gpu_workers(client) -> bool:
    workers = client.scheduler_info().get("workers", {})
    return any((w.get("resources") or {}).get("GPU", 0) > 0 for w in workers.values())


# Dask workers sample their task threads' stacks every 10 ms for the dashboard's profile plot; on a
# 2-core machine that sampling costs a run several percent, and a study's runs do not need it.
# Dask also starts workers with MALLOC_TRIM_THRESHOLD_=65536, so glibc hands freed memory back to the
# system at once and every batch's tensors are page-faulted in again: a torch run was ~30 % slower in
# a worker than in the client's process. None drops the variable (glibc's own default, as in-process).
_WORKER_CONFIG = {"distributed.worker.profile.enabled": False,
                  "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}


@contextlib.contextmanager
def local_cluster(n_workers: int, threads_per_worker: int = 1, *, retries: int = 2, dashboard: bool = True):
    """A ``LocalCluster`` of worker processes on 127.0.0.1 (closed on exit), as ``study run`` starts it.

    ``retries`` bounds how often a cell whose worker died is rescheduled (Dask's allowed-failures).
    """
    import dask
    from distributed import LocalCluster

    with dask.config.set({**_WORKER_CONFIG, "distributed.scheduler.allowed-failures": max(0, retries)}):
        # Workers log at CRITICAL only: a worker that heartbeats while the scheduler closes logs an ERROR
        # with a traceback after a study that finished fine; failed cells are reported by the study itself.
        # A nanny keeps a shallow copy of the global config and hands it to every worker it (re)starts:
        # without a deep copy of our own, a worker restarted after this block would sample again.
        worker_config = copy.deepcopy(dask.config.config)
        cluster = LocalCluster(n_workers=n_workers, threads_per_worker=threads_per_worker, processes=True,
                               host="127.0.0.1", dashboard_address="127.0.0.1:0" if dashboard else None,
                               silence_logs=logging.CRITICAL, config=worker_config)
    try:
        yield cluster
    finally:
        cluster.close()


@contextlib.contextmanager
def _client(scheduler: str | None, n_workers: int, retries: int):
    from distributed import Client

    if scheduler:
        with Client(scheduler) as client:
            yield client, None
        return
    with local_cluster(n_workers, retries=retries) as cluster, Client(cluster) as client:
        yield client, cluster


def run_study(study, *, scheduler: str | None, store, workers: int | None, threads_per_worker: int | None,
              on_event: Callable[[dict], None] | None = None, cancel: threading.Event | None = None,
              on_dashboard: Callable[[str], None] | None = None) -> StudyResult:
    """Run the study's unfinished cells; import each finished run into ``store`` as it lands.

    ``on_event`` receives dicts: the workers' run messages (with ``cell``), and the client's own
    ``{"kind": "cell_done" | "cell_failed" | "study_started", ...}``. Setting ``cancel`` (or
    Ctrl-C) stops the study: the local cluster's workers are shut down, running cells are lost,
    and every run already imported stays whole.
    """
    from distributed import wait

    t0 = time.monotonic()
    emit = on_event or (lambda msg: None)
    cells = study.cells()
    stored = runs_by_cell(store, study.name)
    todo = [c for c in cells if not (c.key in stored and stored[c.key].status == "finished")]
    skipped = [c.index for c in cells if c not in todo]
    result = StudyResult(study.name, {c.index: stored[c.key].run_id for c in cells if c.index in skipped},
                         skipped, {})
    if not todo:
        emit({"kind": "study_started", "total": len(cells), "todo": 0, "skipped": len(skipped)})
        return result
    scheduler = scheduler or os.environ.get("DASK_SCHEDULER_ADDRESS") or None
    threads = max(1, int(threads_per_worker or 1))
    n_workers = max(1, int(workers or max(1, machine_cores() // threads)))
    n_workers = min(n_workers, len(todo))
    topic = f"lab-study-{study.name}"
    with _client(scheduler, n_workers, study.retries) as (client, cluster):
        link = client.dashboard_link
        if on_dashboard is not None and link:
            on_dashboard(link)
        client.subscribe_topic(topic, lambda event: emit(event[1]))
        resources = {"GPU": 1} if _has_gpu_workers(client) else None
        token = secrets.token_hex(3)
        futures = {}
        for cell in todo:
            fut = client.submit(run_cell, cell.config.to_dict(), study.name, cell.values, cell.index, threads,
                                topic, pure=False, resources=resources,
                                key=f"lab-study-{study.name}-cell{cell.index + 1}-{token}")
            futures[fut] = cell
        emit({"kind": "study_started", "total": len(cells), "todo": len(todo), "skipped": len(skipped),
              "workers": n_workers, "threads": threads, "dashboard": link})
        remaining = set(futures)
        try:
            while remaining:
                if cancel is not None and cancel.is_set():
                    raise KeyboardInterrupt
                # wait() wakes as soon as a cell ends (polling would add its period to the study); it
                # takes the current client, so make that this study's, not the newest in the process
                try:
                    with client.as_current():
                        done, _ = wait(list(remaining), timeout=_CANCEL_CHECK, return_when="FIRST_COMPLETED")
                except TimeoutError:
                    continue
                for fut in done:
                    remaining.discard(fut)
                    _collect(fut, futures[fut], store, result, emit)
        except KeyboardInterrupt:
            result.cancelled = True
            client.cancel(list(futures), force=True)
            emit({"kind": "study_cancelled"})
    result.seconds = time.monotonic() - t0
    return result


def _collect(fut, cell, store, result: StudyResult, emit: Callable[[dict], Any]) -> None:
    try:
        out = fut.result()
    except Exception as exc:              # noqa: BLE001 - KilledWorker after the retries, or a worker error
        message = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        result.failed[cell.index] = message
        emit({"kind": "cell_failed", "cell": cell.index, "message": message})
        return
    unpack_bytes(store, out["archive"])
    result.run_ids[cell.index] = out["run_id"]
    if out["status"] != "finished":
        result.failed[cell.index] = out["message"] or out["status"]
    emit({"kind": "cell_done", "cell": cell.index, "run_id": out["run_id"], "status": out["status"],
          "message": out["message"]})
