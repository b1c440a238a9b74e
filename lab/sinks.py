"""Mirror stored runs into TensorBoard or MLflow, where many researchers keep their experiments.

Both read a run only through :class:`lab.store.RunStore` (tables and arrays as stored) and
write a copy; the run store stays the source of truth.

- :func:`to_tensorboard` writes, with ``torch.utils.tensorboard``, one event folder per run:
  every per-layer metric as a scalar (``unseen/nmi/layer3``, step = epoch), the training
  curves (``training/train_loss``), layer utilization and contribution, and the stored
  unseen-class embeddings for TensorBoard's projector, with class labels and an image
  sprite rebuilt from the run's config (as the app's hover thumbnails are).
- :func:`to_mlflow` logs one MLflow run per stored run: the config as params, every
  metric per epoch and layer, training curves, and the run folder as artefacts.

Command line: ``python -m lab runs to-tensorboard RUN_ID... DIR`` and
``python -m lab runs to-mlflow RUN_ID... [--tracking-uri URI]``.
"""
from __future__ import annotations

import json
import math
import re
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from lab.status import RunStatus
from lab.store.lookup import is_record, load_run

__all__ = ["to_tensorboard", "to_mlflow", "metric_tag"]

_TAG_SAFE = re.compile(r"[^A-Za-z0-9_\-./ ]")
_SPRITE_PX = 32          # projector thumbnails: small enough for a sprite of a few thousand images


def metric_tag(split: str, metric: str, layer: str, seed: int | None = None) -> str:
    """Scalar name of one metric of one layer: ``"unseen/nmi/layer3"`` (``"seed1/..."`` for several seeds).

    Characters MLflow refuses in a key (anything but letters, digits, ``_ - . / space``) become ``_``.
    """
    tag = f"{split}/{metric}/{layer}" if seed is None else f"seed{seed}/{split}/{metric}/{layer}"
    return _TAG_SAFE.sub("_", tag)


def _records(runs, store) -> list:
    ids = [runs] if isinstance(runs, str) or is_record(runs) else list(runs)
    if not ids:
        raise ValueError("no run ids given; list the stored runs with `python -m lab runs list`.")
    return [load_run(run, store) for run in ids]     # unknown ids fail before anything is written


def _seeds(record) -> list[int]:
    seeds = set()
    for frame in (record.metrics, record.training):
        if len(frame) and "seed" in frame:
            seeds |= {int(s) for s in frame["seed"].unique()}
    return sorted(seeds) or [0]


def _scalars(record, seed: int | None):
    """``(tag, step, value)`` of every finite number of one seed (None: the only seed, untagged)."""
    def rows_of(frame):
        if not len(frame):
            return frame
        return frame if seed is None or "seed" not in frame else frame[frame["seed"] == seed]

    prefix = "" if seed is None else f"seed{seed}/"
    for row in rows_of(record.metrics).itertuples(index=False):
        if row.value is not None and math.isfinite(row.value):
            yield metric_tag(row.split, row.metric, row.layer, seed), int(row.epoch), float(row.value)
    training = rows_of(record.training)
    skip = {"seed", "epoch"}
    for col in [c for c in training.columns if c not in skip and pd.api.types.is_numeric_dtype(training[c])]:
        for epoch, value in zip(training["epoch"], training[col]):
            if pd.notna(value) and math.isfinite(float(value)):
                yield _TAG_SAFE.sub("_", f"{prefix}training/{col}"), int(epoch), float(value)
    for row in rows_of(record.utilization).itertuples(index=False):
        for kind in ("absolute", "relative"):
            value = getattr(row, kind, None)
            if value is not None and math.isfinite(value):
                yield _TAG_SAFE.sub("_", f"{prefix}utilization/{kind}/{row.layer}"), int(row.epoch), float(value)
    contribution = rows_of(record.contribution)
    last_epoch = int(record.training["epoch"].max()) if len(record.training) else 0
    for row in contribution.itertuples(index=False):
        if row.value is not None and math.isfinite(row.value):
            yield _TAG_SAFE.sub("_", f"{prefix}contribution/{row.metric}/{row.layer}"), last_epoch, float(row.value)


# ---------------------------------------------------------------------------------------------- TensorBoard

def _unseen_images(record):
    """uint8 (N, C, H, W) images of the run's unseen evaluation set (ProjectionReady indices index it), or None."""
    config = record.config
    if isinstance(config, dict):
        return None
    try:
        import lab.runs

        return lab.runs.prepare_data(config).unseen.images
    except Exception as exc:  # data moved or not on this machine: the projector still gets points and labels
        warnings.warn(f"run {record.run_id}: no image sprites ({exc})", stacklevel=3)
        return None


def _sprites(images, indices: np.ndarray):
    """Float (n, C, s, s) in [0, 1] for ``add_embedding(label_img=...)``, at most _SPRITE_PX px."""
    import torch
    import torch.nn.functional as F

    x = images[torch.as_tensor(indices, dtype=torch.long)].float() / 255.0
    if x.shape[-1] > _SPRITE_PX or x.shape[-2] > _SPRITE_PX:
        x = F.interpolate(x, size=(_SPRITE_PX, _SPRITE_PX), mode="area")
    if x.shape[1] == 1:
        x = x.repeat(1, 3, 1, 1)          # the projector's sprite is RGB
    return x


def to_tensorboard(runs, logdir, *, embeddings: str = "last", store=None) -> list[Path]:
    """Write stored runs as TensorBoard event files under ``logdir/<run_id>`` (``/seed<n>`` for several seeds).

    Parameters
    ----------
    runs : run id or record, or an iterable of them
    logdir : path
        Point ``tensorboard --logdir`` here.
    embeddings : {"last", "all", "none"}
        Which stored unseen-class embeddings go to the projector: each layer's last epoch,
        every epoch, or none.
    store : lab.RunStore, path or None
        Where the runs are (None: the default store).

    Returns
    -------
    list of pathlib.Path
        The event folders written, one per run and seed.
    """
    if embeddings not in ("last", "all", "none"):
        raise ValueError(f"embeddings must be 'last', 'all' or 'none'; got {embeddings!r}.")
    records = _records(runs, store)
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as exc:
        raise ModuleNotFoundError(f"to_tensorboard needs tensorboard ({exc}): pip install tensorboard") from None
    logdir = Path(logdir)
    written = []
    for record in records:
        seeds = _seeds(record)
        images = None if embeddings == "none" or not len(record.embedding_keys()) else _unseen_images(record)
        class_names = list((record.meta.get("split") or {}).get("unseen") or [])
        for seed in seeds:
            folder = logdir / record.run_id / (f"seed{seed}" if len(seeds) > 1 else "")
            writer = SummaryWriter(log_dir=str(folder))
            try:
                writer.add_text("layerscope/config", "```\n" + json.dumps(record.config_dict, indent=1, default=str)
                                + "\n```", 0)
                for tag, step, value in _scalars(record, seed if len(seeds) > 1 else None):
                    writer.add_scalar(tag, value, step)
                if embeddings != "none":
                    _add_embeddings(writer, record, seed, embeddings, images, class_names)
            finally:
                writer.close()
            written.append(folder)
    return written


def _add_embeddings(writer, record, seed: int, which: str, images, class_names: list[str]) -> None:
    keys = record.embedding_keys()
    if not len(keys):
        return
    keys = keys[keys["seed"] == seed]
    if which == "last":
        keys = keys.loc[keys.groupby("layer")["epoch"].idxmax()]
    order = {name: i for i, name in enumerate(record.meta.get("projection_layers") or [])}
    keys = keys.assign(_o=keys["layer"].map(order).fillna(len(order))).sort_values(["epoch", "_o", "layer"])
    for row in keys.itertuples(index=False):
        X, labels, indices = record.embeddings(row.seed, row.epoch, row.layer)
        names = [class_names[int(i)] if 0 <= int(i) < len(class_names) else str(int(i)) for i in labels]
        sprite = _sprites(images, indices) if images is not None else None
        writer.add_embedding(np.asarray(X, dtype=np.float32), metadata=names, label_img=sprite,
                             global_step=int(row.epoch), tag=_TAG_SAFE.sub("_", f"unseen/{row.layer}"))


# ---------------------------------------------------------------------------------------------- MLflow

_MLFLOW_STATUS = {RunStatus.FINISHED: "FINISHED", RunStatus.FAILED: "FAILED", RunStatus.CANCELLED: "KILLED",
                  RunStatus.INTERRUPTED: "KILLED"}


def _params(record) -> dict[str, str]:
    out = {}
    for key, value in record.config_dict.items():
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        out[_TAG_SAFE.sub("_", key)] = text[:6000]           # MLflow's limit on a param value
    split = record.meta.get("split") or {}
    for part, classes in split.items():          # lab.data.Split.to_dict(): the seen and the unseen classes
        if classes:
            out.setdefault(f"{part}_classes", json.dumps(classes)[:6000])
    return out


def to_mlflow(runs, tracking_uri: str | None = None, *, experiment: str = "layerscope", store=None) -> list[str]:
    """Log stored runs to MLflow: params, metrics per epoch and layer, and the run folder as artefacts.

    Parameters
    ----------
    runs : run id or record, or an iterable of them
    tracking_uri : str, optional
        MLflow tracking URI (a server, or ``file:///path`` for a local store); None: MLflow's
        default (``$MLFLOW_TRACKING_URI`` or its local default).
    experiment : str
        MLflow experiment to log into (created when missing).
    store : lab.RunStore, path or None
        Where the runs are (None: the default store).

    Returns
    -------
    list of str
        The MLflow run ids, in the order of ``runs``. Each MLflow run is tagged
        ``layerscope.run_id``; its step is the epoch.
    """
    records = _records(runs, store)
    try:
        import mlflow
        from mlflow.entities import Metric, Param, RunTag
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise ModuleNotFoundError("to_mlflow needs MLflow, which is not installed: pip install mlflow "
                                  "(or the smaller mlflow-skinny)") from None
    uri = tracking_uri or mlflow.get_tracking_uri()
    try:
        client = MlflowClient(tracking_uri=uri)
        found = client.get_experiment_by_name(experiment)
        experiment_id = found.experiment_id if found is not None else client.create_experiment(experiment)
    except Exception as exc:  # MlflowException, a missing database driver, an unreachable server ...
        first = str(exc).strip().split(". ")[0].splitlines()[0]
        raise ValueError(f"MLflow cannot use tracking URI {uri!r}: {first}. Pass --tracking-uri (a server, or "
                         f"file:///PATH with MLFLOW_ALLOW_FILE_STORE=true).") from exc
    out = []
    for record in records:
        tags = {"layerscope.run_id": record.run_id, "layerscope.status": record.status,
                "mlflow.note.content": str(record.meta.get("describe") or "")}
        run = client.create_run(experiment_id, run_name=record.name or record.run_id, tags=tags)
        mlflow_id = run.info.run_id
        now = int(time.time() * 1000)
        seeds = _seeds(record)
        metrics = []
        for seed in seeds:
            for tag, step, value in _scalars(record, seed if len(seeds) > 1 else None):
                metrics.append(Metric(tag, value, now, step))
        params = [Param(k, v) for k, v in _params(record).items()]
        for i in range(0, max(len(params), 1), 100):                 # MLflow: at most 100 params per batch
            client.log_batch(mlflow_id, params=params[i:i + 100])
        for i in range(0, len(metrics), 1000):                      # and 1000 metrics
            client.log_batch(mlflow_id, metrics=metrics[i:i + 1000])
        client.log_batch(mlflow_id, tags=[RunTag("layerscope.path", str(record.path))])
        client.log_artifacts(mlflow_id, str(record.path), artifact_path=f"layerscope/{record.run_id}")
        client.set_terminated(mlflow_id, status=_MLFLOW_STATUS.get(record.status, "FINISHED"))
        out.append(mlflow_id)
    return out
