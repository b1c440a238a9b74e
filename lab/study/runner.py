"""Running a :class:`lab.study.Study` on Dask distributed (the client side and the worker task).

Kept apart from :mod:`lab.study` so that reading specs and stored results never imports Dask.

On a machine with GPUs, a study whose cells run on "cuda" or "auto" gets one worker per GPU: each
worker sees only its own GPU (``CUDA_VISIBLE_DEVICES``), so inside it "cuda" is that GPU, and
declares the resource ``{"GPU": cells_per_gpu}``; every such cell asks for ``{"GPU": 1}``. A study
on CPU gets one worker per core, as before.
"""
from __future__ import annotations

import contextlib
import copy
import logging
import os
import secrets
import sys
import threading
import time
from typing import Any, Callable, Sequence

from lab import events
from lab.archive import unpack_bytes
from lab.status import RunStatus
from lab.study._book import CellBook, is_finished
from lab.study.cell import _cell_event, run_cell  # noqa: F401  (submitted to the workers; _cell_event: tests)
from lab.study.control import StudyController
from lab.study.records import StudyResult, runs_by_cell

__all__ = ["run_study", "run_cell", "machine_cores", "gpu_count", "local_cluster"]

_CANCEL_CHECK = 0.25         # seconds between checks of the cancel flag while cells run


def machine_cores() -> int:
    """CPU cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:           # pragma: no cover - macOS, Windows
        return os.cpu_count() or 1


def gpu_count() -> int:
    """CUDA devices this process sees (``torch.cuda.device_count()``, 0 without CUDA).

    torch asks NVML where it can, so counting does not initialise CUDA in the client.
    """
    import torch

    return int(torch.cuda.device_count())


def _machine_gpus(n: int) -> list[str]:
    """The first ``n`` GPUs as ``CUDA_VISIBLE_DEVICES`` names them for the workers.

    This process's own ``CUDA_VISIBLE_DEVICES`` when set (its GPU 0 is the first entry), else 0 to n-1.
    """
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    return (visible or [str(i) for i in range(n)])[:n]


def _device(config: dict) -> str:
    return str(config.get("device", "auto")).strip().lower()


def _may_use_gpu(device: str) -> bool:
    return device == "auto" or device.startswith("cuda")


# ---------------------------------------------------------------------------------------------- client


def _has_gpu_workers(client) -> bool:
    workers = client.scheduler_info().get("workers", {})
    return any((w.get("resources") or {}).get("GPU", 0) > 0 for w in workers.values())


def _visible_devices() -> str | None:
    # a function of this module: `os.environ.get` would travel with the client's environ, pickled
    return os.environ.get("CUDA_VISIBLE_DEVICES")


def _worker_devices(client) -> list[str]:
    """What each worker's cells run on: "GPU <id>" (the first of its ``CUDA_VISIBLE_DEVICES``, its
    cuda:0) for a worker with a GPU resource, else "cpu"."""
    workers = client.scheduler_info().get("workers", {})
    try:
        visible = client.run(_visible_devices)
    except Exception:                     # noqa: BLE001 - a worker left meanwhile: the names only lose their id
        visible = {}
    out = []
    for address in sorted(workers):
        if (workers[address].get("resources") or {}).get("GPU", 0) > 0:
            first = (visible.get(address) or "").split(",")[0].strip()
            out.append(f"GPU {first}" if first else "GPU")
        else:
            out.append("cpu")
    return out


def _check_cuda(study, cells, gpus: int | None, scheduler: str | None = None) -> None:
    """ValueError naming the first cell that asks for a CUDA device the cluster cannot give.

    ``gpus``: this machine's GPU count (no ``scheduler``); for a ``scheduler``, None when it has GPU
    workers (their device indices are their own) and 0 when it has none.
    """
    for cell in cells:
        device = _device(cell.config.to_dict())
        if not device.startswith("cuda"):
            continue
        index = int(device.partition(":")[2] or 0)
        if gpus is None or index < gpus:
            continue
        if scheduler is not None:
            has = f"no worker of the scheduler at {scheduler} has a GPU resource (start them with --resources GPU=1)"
        elif gpus:
            has = (f"this machine has {gpus} CUDA device{'s' if gpus > 1 else ''} "
                   + ("(cuda:0)" if gpus == 1 else f"(cuda:0 to cuda:{gpus - 1})"))
        else:
            has = "this machine has no CUDA device"
        who = f"cell {cell.index + 1} ({cell.label()})" if cell.values else "its config"
        raise ValueError(f"study {study.name!r}: {who} asks for device {device!r}, but {has}; use device 'auto' "
                         f"(a GPU where there is one) or 'cpu', or a scheduler whose workers have GPUs")


# Dask workers sample their task threads' stacks every 10 ms for the dashboard's profile plot; on a
# 2-core machine that sampling costs a run several percent, and a study's runs do not need it.
# Dask also starts workers with MALLOC_TRIM_THRESHOLD_=65536, so glibc hands freed memory back to the
# system at once and every batch's tensors are page-faulted in again: a torch run was ~30 % slower in
# a worker than in the client's process. None drops the variable (glibc's own default, as in-process).
_WORKER_CONFIG = {"distributed.worker.profile.enabled": False,
                  "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}


# CPU workers fork from one server process that imported these once, instead of each worker being a
# fresh interpreter that imports torch and lab again (about 3 CPU-s per worker on a 2-core machine;
# benchmarks/study_start.py). Imports only: the server must not start torch's or BLAS's thread pools
# before it forks. GPU workers keep "spawn", so nothing of CUDA's can be in a process before its
# CUDA_VISIBLE_DEVICES is set.
_FORKSERVER_PRELOAD = ["distributed", "numpy", "pandas", "torch", "lab.study.runner", "lab.study.cell",
                       "lab.runs.engine", "lab.metrics"]


def _start_method(asked: str | None) -> str:
    import multiprocessing

    # Linux only: on macOS a process forked after torch loaded Apple's frameworks may crash (why Python
    # spawns there by default)
    methods = [m for m in ("forkserver", "spawn") if m in multiprocessing.get_all_start_methods()
               and (m != "forkserver" or sys.platform.startswith("linux"))]
    if asked is None:
        return methods[0]
    if asked not in methods:
        raise ValueError(f"start_method must be one of {methods} on this platform. Got {asked!r} instead.")
    return asked


def _preload_forkserver() -> None:
    """Name the modules the fork server imports (while dask's start method setting is "forkserver")."""
    import multiprocessing

    from distributed.utils import get_mp_context

    get_mp_context()        # dask names its own preload list the first time; ours replaces it
    multiprocessing.get_context("forkserver").set_forkserver_preload(_FORKSERVER_PRELOAD)


@contextlib.contextmanager
def local_cluster(n_workers: int, threads_per_worker: int = 1, *, retries: int = 2, dashboard: bool = True,
                  gpus: Sequence[str] | None = None, cells_per_gpu: int = 1, start_method: str | None = None):
    """A ``LocalCluster`` of worker processes on 127.0.0.1 (closed on exit), as ``study run`` starts it.

    Parameters
    ----------
    n_workers, threads_per_worker : int
        Worker processes and the cells each runs at a time (without ``gpus``).
    retries : int
        How often a cell whose worker died is rescheduled (Dask's allowed-failures).
    dashboard : bool
        Serve the scheduler's dashboard on a free port.
    gpus : list of str, optional
        GPUs as ``CUDA_VISIBLE_DEVICES`` names them: worker ``i`` (of the first ``n_workers``) sees only
        ``gpus[i]``, declares the resource ``{"GPU": cells_per_gpu}`` and runs that many cells at a time.
        dask-cuda's ``LocalCUDACluster`` starts them when it is installed (it also binds each worker to
        the CPU cores near its GPU).
    cells_per_gpu : int
        Cells that share one GPU (with ``gpus``).
    start_method : {"forkserver", "spawn"}, optional
        How CPU worker processes start: "forkserver" (the default on Linux) forks
        each from one process of this session that imported torch and lab once; "spawn" starts a
        fresh interpreter per worker. GPU workers always spawn.
    """
    import dask
    from distributed import LocalCluster

    method = _start_method(start_method)
    settings = {**_WORKER_CONFIG, "distributed.scheduler.allowed-failures": max(0, retries)}
    if not gpus:
        settings["distributed.worker.multiprocessing-method"] = method
    with dask.config.set(settings):
        # Workers log at CRITICAL only: a worker that heartbeats while the scheduler closes logs an ERROR
        # with a traceback after a study that finished fine; failed cells are reported by the study itself.
        # A nanny keeps a shallow copy of the global config and hands it to every worker it (re)starts:
        # without a deep copy of our own, a worker restarted after this block would sample again.
        worker_config = copy.deepcopy(dask.config.config)
        if gpus:
            cluster = _gpu_cluster(list(gpus)[:max(1, int(n_workers))], cells_per_gpu, worker_config, dashboard)
        else:
            if method == "forkserver":
                _preload_forkserver()
            cluster = LocalCluster(n_workers=n_workers, threads_per_worker=threads_per_worker, processes=True,
                                   host="127.0.0.1", dashboard_address="127.0.0.1:0" if dashboard else None,
                                   silence_logs=logging.CRITICAL, config=worker_config)
    try:
        yield cluster
    finally:
        cluster.close()


def _gpu_cluster(gpus: list[str], cells_per_gpu: int, config: dict, dashboard: bool):
    """One worker process per GPU, each pinned to its own (see :func:`local_cluster`)."""
    resources = {"GPU": int(cells_per_gpu)}
    address = "127.0.0.1:0" if dashboard else None
    try:
        from dask_cuda import LocalCUDACluster
    except ImportError:
        LocalCUDACluster = None
    if LocalCUDACluster is not None:
        # dask-cuda sets a worker config of its own (so no `config=` here); its nannies copy the
        # global config when they start, which is ours while local_cluster's block lasts
        return LocalCUDACluster(n_workers=len(gpus), CUDA_VISIBLE_DEVICES=",".join(gpus),
                                threads_per_worker=int(cells_per_gpu), resources=resources, host="127.0.0.1",
                                dashboard_address=address, silence_logs=logging.CRITICAL)
    from distributed import Nanny, Scheduler, SpecCluster, system

    # A nanny sets `env` in its worker process before torch is imported there, so the worker's
    # "cuda" (cuda:0) is its own GPU; the memory is shared out as LocalCluster does by worker count.
    options = {"host": "127.0.0.1", "nthreads": int(cells_per_gpu), "resources": resources, "config": config,
               "silence_logs": logging.CRITICAL, "memory_limit": system.MEMORY_LIMIT // len(gpus)}
    workers = {f"gpu-{gpu}": {"cls": Nanny, "options": {**options, "env": {"CUDA_VISIBLE_DEVICES": gpu}}}
               for gpu in gpus}
    scheduler = {"cls": Scheduler, "options": {"host": "127.0.0.1", "dashboard": dashboard,
                                               "dashboard_address": address}}
    return SpecCluster(workers=workers, scheduler=scheduler, silence_logs=logging.CRITICAL)


@contextlib.contextmanager
def _client(scheduler: str | None, n_workers: int, retries: int, gpus: list[str], cells_per_gpu: int):
    from distributed import Client

    if scheduler:
        with Client(scheduler) as client:
            yield client, None
        return
    with local_cluster(n_workers, retries=retries, gpus=gpus, cells_per_gpu=cells_per_gpu) as cluster, \
            Client(cluster) as client:
        yield client, cluster


def run_study(study, *, scheduler: str | None, store, workers: int | None, threads_per_worker: int | None,
              on_event: Callable[[events.StudyEvent], None] | None = None, cancel: threading.Event | None = None,
              on_dashboard: Callable[[str], None] | None = None, cells_per_gpu: int = 1,
              control: StudyController | None = None) -> StudyResult:
    """Run the study's unfinished cells, in :meth:`~lab.Study.run_order`; import each finished run into ``store``
    as it lands.

    Without ``scheduler`` a local cluster runs them: on a machine with GPUs (:func:`gpu_count`),
    when a cell runs on "cuda" or "auto", one worker per GPU (at most ``workers``), each pinned to
    its GPU and running ``cells_per_gpu`` cells at a time; otherwise one worker per core (or
    ``workers``). On any cluster with GPU workers those cells ask for ``{"GPU": 1}`` and run on the
    worker's own GPU ("cuda:N" becomes "cuda": which GPU runs a cell is the scheduler's choice).
    A cell asking for "cuda" where there is no GPU is refused (ValueError) before any cell starts.

    ``on_event`` receives :class:`lab.events.StudyEvent` objects: the workers' events of their cells
    (:class:`~lab.events.CellStarted`, :class:`~lab.events.CellProgress`, ...), and the client's own
    :class:`~lab.events.StudyStarted` (naming each worker's device, "GPU 0" or "cpu", under ``devices``),
    :class:`~lab.events.CellDone`, :class:`~lab.events.CellFailed` and :class:`~lab.events.StudyCancelled`.
    Setting ``cancel`` (or Ctrl-C) stops the study: running cells are told to stop (a remote worker's run
    ends as "cancelled"), the local cluster's workers are shut down, running cells are lost, and every run
    already imported stays whole.

    ``control`` (a :class:`lab.study.StudyController`) lets the study grow or shrink while it runs, on the same
    cluster: between two completions the runner takes the latest study given to it, submits the cells new to it
    (:class:`~lab.events.CellQueued`), takes off the cluster the submitted cells it no longer has that have not
    started (:class:`~lab.events.CellDropped`; one whose start is still on its way from the worker may be
    dropped too, nothing of it reaches the store), lets running cells finish, and never runs a finished cell
    again; :class:`~lab.events.StudyUpdated` comes first, and from it on the events name a cell by its index in
    the new grid. The result is that of the study as it ended. A local cluster started for fewer cells than
    it may run at a time grows by workers for the new cells.
    """
    from distributed import Event, wait

    t0 = time.monotonic()
    emit = on_event or (lambda msg: None)
    if isinstance(cells_per_gpu, bool) or not isinstance(cells_per_gpu, int) or cells_per_gpu < 1:
        raise ValueError(f"cells_per_gpu must be a positive integer. Got {cells_per_gpu!r} instead.")
    cells = study.cells()
    book = CellBook(study, runs_by_cell(study.name, store=store, axes=study.axes))
    todo = [c for c in study.run_order() if c.key not in book.skipped]
    if not todo:
        emit(events.StudyStarted(total=len(cells), todo=0, skipped=len(book.skipped)))
        return book.result(False, 0.0)
    scheduler = scheduler or os.environ.get("DASK_SCHEDULER_ADDRESS") or None
    gpus: list[str] = []
    n_gpus = 0
    if scheduler is None:
        n_gpus = gpu_count()
        _check_cuda(study, todo, n_gpus)                          # before any cluster starts
        if n_gpus and any(_may_use_gpu(_device(c.config.to_dict())) for c in todo):
            gpus = _machine_gpus(n_gpus)
    if gpus:
        most = min(len(gpus), max(1, int(workers or len(gpus))))
        n_workers = min(most, -(-len(todo) // cells_per_gpu))
        # the workers share the cores: each run's torch threads (its CPU-side work) get their share
        threads = max(1, int(threads_per_worker or machine_cores() // (n_workers * cells_per_gpu)))
    else:
        threads = max(1, int(threads_per_worker or 1))
        most = max(1, int(workers or max(1, machine_cores() // threads)))
        n_workers = min(most, len(todo))
    topic = f"lab-study-{study.name}"
    if control is not None:
        control.attach(study, store)
    cancelled = False
    try:
        with _client(scheduler, n_workers, study.retries, gpus[:n_workers], cells_per_gpu) as (client, cluster):
            gpu_workers = _has_gpu_workers(client)
            # what _check_cuda is told of this cluster's GPUs (again for the cells queued later)
            cuda = n_gpus if scheduler is None else None if gpu_workers else 0
            if scheduler is not None:
                _check_cuda(study, todo, cuda, scheduler)
            devices = _worker_devices(client)
            link = client.dashboard_link
            if on_dashboard is not None and link:
                on_dashboard(link)
            client.subscribe_topic(topic, lambda event: emit(book.worker_event(events.study_event(event[1]))))
            token = secrets.token_hex(3)
            stop = Event(f"lab-study-{study.name}-{token}-stop", client=client)

            def submit(cell) -> None:
                config = cell.config.to_dict()
                resources = None
                if gpu_workers and _may_use_gpu(_device(config)):
                    resources = {"GPU": 1}
                    # a GPU worker's own GPU is its cuda:0 (CUDA_VISIBLE_DEVICES): "cuda:1" would be another's
                    config["device"] = "cuda" if _device(config).startswith("cuda") else config["device"]
                serial = book.serial(cell)
                fut = client.submit(run_cell, config, study.name, cell.values, serial, threads, topic, stop.name,
                                    pure=False, resources=resources,
                                    key=f"lab-study-{study.name}-cell{serial + 1}-{token}")
                book.futures[fut] = cell.key
                book.submitted[cell.key] = fut

            for cell in todo:
                submit(cell)
            emit(events.StudyStarted(total=len(cells), todo=len(todo), skipped=len(book.skipped),
                                     workers=len(devices), threads=threads, devices=tuple(devices), dashboard=link))
            try:
                while book.futures:
                    if cancel is not None and cancel.is_set():
                        raise KeyboardInterrupt
                    if control is not None:
                        _apply(control, book, store, submit, emit, client, cuda, scheduler)
                        if cluster is not None and not gpus and most > len(cluster.workers):
                            # started for fewer cells than it may run: grow for the cells queued since
                            want = min(most, len(book.futures))
                            if want > len(cluster.workers):
                                cluster.scale(want)
                        if not book.futures:
                            break
                    # wait() wakes as soon as a cell ends (polling would add its period to the study); it
                    # takes the current client, so make that this study's, not the newest in the process
                    try:
                        with client.as_current():
                            done, _ = wait(list(book.futures), timeout=_CANCEL_CHECK, return_when="FIRST_COMPLETED")
                    except TimeoutError:
                        continue
                    for fut in done:
                        if cancel is not None and cancel.is_set():
                            raise KeyboardInterrupt        # between two imports: a user's Stop waits for none
                        key = book.futures.pop(fut, None)
                        if key is None:
                            continue
                        book.submitted.pop(key, None)
                        run_id, failed = _collect(fut, book.index_of(key), store, emit)
                        if run_id is not None:
                            book.run_ids[key] = run_id
                        if failed is not None:
                            book.failed[key] = failed
            except KeyboardInterrupt:
                # running cells stop at their next batch; the futures are cancelled whatever happens here
                with contextlib.suppress(Exception):
                    stop.set()
                client.cancel(list(book.futures), force=True)
                emit(events.StudyCancelled())
                cancelled = True
    finally:
        if control is not None:
            control.detach()
    return book.result(cancelled, time.monotonic() - t0)


def _apply(control: StudyController, book: CellBook, store, submit, emit, client, cuda: int | None,
           scheduler: str | None) -> None:
    """Take what waits in ``control``: switch to the updated study (queue its new cells, drop the submitted
    cells it no longer has), then drop the keys asked for; a cell that started is left to finish."""
    updated, drop = control.take()
    if updated is not None:
        stored = runs_by_cell(updated.name, store=store, axes=updated.axes)
        # a cell that ran (or failed on the cluster) in this study run is not run again by an update
        new = [c for c in updated.run_order()
               if c.key not in book.submitted and c.key not in book.run_ids and c.key not in book.failed]
        skipped = [c for c in new if is_finished(stored, c.key)]
        queued = [c for c in new if not is_finished(stored, c.key)]
        # cells asking for a CUDA device this cluster cannot give: failed, as a worker's error would be
        failing: dict[str, str] = {}
        for cell in queued:
            try:
                _check_cuda(updated, [cell], cuda, scheduler)
            except ValueError as exc:
                failing[cell.key] = str(exc)
        book.study, book.index = updated, {c.key: c.index for c in updated.cells()}
        book.cells.update({c.key: c for c in updated.cells()})
        for cell in skipped:
            book.skipped.append(cell.key)
            book.run_ids[cell.key] = stored[cell.key].run_id
        drop |= {key for key in book.submitted if key not in book.index}
        queued = [c for c in queued if c.key not in failing]
        drops = [k for k in drop if k in book.submitted and k not in book.started]
        emit(events.StudyUpdated(total=len(updated.cells()), queued=len(queued), dropped=len(drops),
                                 skipped=len(skipped)))
        for key, message in failing.items():
            book.failed[key] = message
            emit(events.CellFailed(book.index[key], message=message))
        for cell in queued:
            submit(cell)
            emit(events.CellQueued(cell.index, key=cell.key))
    for key in sorted(drop):
        fut = book.submitted.get(key)
        if fut is None or key in book.started:
            continue
        client.cancel([fut])
        book.submitted.pop(key)
        book.futures.pop(fut, None)
        values = dict(book.cells[key].values)
        book.dropped.append(values)
        emit(events.CellDropped(book.index_of(key), key=key))


def _collect(fut, index: int, store, emit: Callable[[events.StudyEvent], Any]) -> tuple[str | None, str | None]:
    """Import the run of cell ``index``'s finished future: (its run id or None, why it did not finish or None)."""
    try:
        out = fut.result()
    except Exception as exc:              # noqa: BLE001 - KilledWorker after the retries, or a worker error
        message = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        emit(events.CellFailed(index, message=message))
        return None, message
    unpack_bytes(out["archive"], store=store)
    status = RunStatus(out["status"])
    emit(events.CellDone(index, run_id=out["run_id"], status=status, message=out["message"]))
    return out["run_id"], None if status is RunStatus.FINISHED else (out["message"] or status.value)
