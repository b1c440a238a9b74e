"""The simplest consumer of :func:`lab.run`'s event stream: a progress bar, then the stored run id.

Notebooks and scripts that only want a run done (and stored) call this instead of writing
the event loop again; the app, the CLI and studies consume the same stream their own way.

Examples
--------
>>> import lab                                                          # doctest: +SKIP
>>> from lab.progress import run_with_progress                         # doctest: +SKIP
>>> run_id = run_with_progress(lab.RunConfig(dataset="digits", backbone="mlp", epochs=1))  # doctest: +SKIP
>>> lab.RunStore().load(run_id).summary()                              # doctest: +SKIP
"""
from __future__ import annotations

from lab import events as ev

__all__ = ["run_with_progress"]


def run_with_progress(config, *, store=None, check: bool = True, desc: str | None = None) -> str:
    """Run ``config`` to its end with a tqdm bar (one step per seed and epoch); return the run id.

    Parameters
    ----------
    config : lab.RunConfig or dict
    store : lab.RunStore, None or False, keyword
        As for :func:`lab.run` (None: ``$LAB_RUNS_DIR`` or ``./runs``; False: store nothing).
    check : bool
        Raise when the run fails or is cancelled (default); with False, return its id anyway and
        let the caller read the outcome from the store (``store.load(run_id).status``).
    desc : str, optional
        The bar's label (default: the run's name, else its backbone).

    Returns
    -------
    str
        The run id (every event carries it; with ``store=False`` nothing is stored under it).

    Raises
    ------
    RuntimeError
        ``check`` and the run ended failed or cancelled; the message says which and why.
    """
    from tqdm.auto import tqdm

    from lab.config import RunConfig
    from lab.runs import run

    if isinstance(config, dict):
        config = RunConfig.from_dict(config)
    events = run(config, store=store)
    bar = tqdm(total=len(config.seeds) * (config.n_epochs + 1), desc=desc or config.name or config.backbone)
    run_id, last = None, None
    try:
        for event in events:
            run_id = run_id or event.run_id
            if event.kind == ev.EpochFinished.kind:
                bar.update(1)
                bar.set_postfix(seed=event.seed, epoch=event.epoch, seen_acc=event.heldout_accuracy)
            elif event.kind in (ev.RunFinished.kind, ev.RunFailed.kind, ev.RunCancelled.kind):
                last = event
    finally:
        events.close()              # interrupted (Ctrl-C): the engine stores the run as cancelled
        bar.close()
    if check and last is not None and last.kind != ev.RunFinished.kind:
        raise RuntimeError(f"run {run_id} {last.kind.removeprefix('run_')}: {last.message}")
    return run_id
