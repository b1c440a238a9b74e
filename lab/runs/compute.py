"""Per-layer metric computation as the engine runs it: one layer at a time, small problems on one thread."""
from __future__ import annotations

import contextlib

__all__ = ["compute_metrics", "few_threads"]

_SMALL_PROBLEM = 4_000_000   # elements of X below which metrics run single-threaded


def compute_metrics(X, y, names, protocol, layer, samples: dict | None = None,
                    margins: bool = False, head=None) -> dict[str, float]:
    """One layer's metrics via ``lab.metrics.compute_layer``; a metric undefined here is NaN.

    Parameters
    ----------
    X : Tensor (N, d); y : Tensor (N,); names : metric names; protocol : RunConfig.protocol
    samples : dict, optional
        Filled with what each image contributed to NMI and kNN accuracy (``compute_layer``'s
        ``return_samples``), for the bootstrap of :func:`lab.analysis.bootstrap`; with ``margins``
        also each image's class-centre margin and the class-pair CDNV terms (``return_margins``), for the
        per-image record.
    head : lab.metrics.Head, optional
        The trained head whose input X is, for the classifier-side entries (``compute_layer``'s ``head``).
    """
    import lab.metrics

    if not names:
        return {}
    with few_threads(X):
        values = lab.metrics.compute_layer(X, y, metrics=tuple(names), protocol=protocol, layer=layer,
                                           return_samples=samples is not None,
                                           return_margins=margins and samples is not None, head=head)
    if samples is not None:
        values, per_image = values
        samples.update(per_image)
    return {k: float(v) for k, v in values.items()}


@contextlib.contextmanager
def few_threads(X):
    """Run small CPU metric computations on one thread (torch, OpenMP and BLAS pools).

    Measured here on 2 shared cores: for (1500, 128) features numerical_rank took 5.5 s with 2
    threads and 0.03 s with 1, nmi 5.7 s vs 0.14 s; small matrices gain nothing from threads,
    and a busy machine makes their synchronisation very costly.
    """
    import torch

    if getattr(X, "device", None) is None or X.device.type != "cpu" or X.numel() > _SMALL_PROBLEM:
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with _thread_pools().limit(limits=1):
            yield
    finally:
        torch.set_num_threads(previous)


_POOLS: tuple[int, object] | None = None     # (modules loaded when made, threadpoolctl's controller)


def _thread_pools():
    """threadpoolctl's controller of the BLAS/OpenMP libraries loaded now, made again only after an import.

    ``threadpool_limits`` finds the libraries anew on every call, through a ctypes callback per loaded library;
    in a served app, whose main thread redraws plots while a run evaluates, each callback waited for the GIL and
    one evaluation's calls took seconds (py-spy: 18 s of a 60 s lesson run). A library comes with an import, so
    the controller is kept while no module has been imported since."""
    global _POOLS
    import sys

    from threadpoolctl import ThreadpoolController

    loaded = len(sys.modules)
    if _POOLS is None or _POOLS[0] != loaded:
        _POOLS = (loaded, ThreadpoolController())
    return _POOLS[1]
