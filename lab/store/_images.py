"""The per-image record of a run's evaluations: what each unseen image got right at each layer.

One parquet file per evaluation, ``tables/images/s<seed>-e<epoch>-<seq>.parquet`` (the part names
of the other tables, so damaged parts are found the same way), one row per tapped layer in the
run's order, whose per-image columns are lists in the unseen images' order (the ``indices`` of the
stored embeddings and layouts):

==========  ==================  ==============================================================
layer       string              the tap
label       list<int32> (N)     each image's class code (the same in every row)
right       list<bool> (N)      its leave-one-out kNN vote is its class (null: kNN undefined there)
margin      list<float16> (N)   its nearest-class-centre margin (null: undefined there)
cluster     list<int32> (N)     its k-means cluster of the NMI (null: NMI not measured there)
cdnv_pairs  list<float32>       the CDNV term of each class pair i < j, row by row over the
                                classes in label order, K (K - 1) / 2 values (null: undefined)
==========  ==================  ==============================================================

Definitions: docs/METRICS.md, "The answer per image". Kept small (the budget is 3 bytes per image
and layer, ``benchmarks/image_record.py``): booleans are bit-packed, labels and clusters
dictionary-encoded (a few bits each), margins float16 with their bytes split by significance
before zstd; no column statistics, no Arrow schema copy.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from lab.store._files import _atomic_file, _one_line
from lab.store._tables import _group_files

__all__ = ["ImageRecord", "write_image_record", "read_image_record", "image_record_parts", "IMAGES_TABLE"]

IMAGES_TABLE = "images"
_COLUMNS = ("layer", "label", "right", "margin", "cluster", "cdnv_pairs")
_WRITE_OPTIONS = dict(
    compression="zstd", write_statistics=False, store_schema=False,
    use_dictionary=["layer", "label.list.element", "cluster.list.element"],
    use_byte_stream_split=["margin.list.element", "cdnv_pairs.list.element"],
)


@dataclass(frozen=True)
class ImageRecord:
    """One evaluation's per-image record, read back.

    Attributes
    ----------
    seed, epoch : the evaluation
    layers : the taps, input -> output (L)
    labels : (N,) int64, each unseen image's class code (an index into the run's unseen classes)
    right : (L, N) bool, whether its leave-one-out kNN vote is right (False where ``voted`` is False)
    voted : (L,) bool, whether the layer has kNN votes (kNN accuracy was defined there)
    margin : (L, N) float32, the nearest-class-centre margin (NaN where undefined)
    cluster : (L, N) int64, the k-means cluster of the layer's NMI (-1 where NMI was not measured)
    cdnv_pairs : (L, K, K) float64, the CDNV term of each class pair (NaN on the diagonal and where undefined)
    classes : (K,) int64, the class codes that index ``cdnv_pairs`` (sorted)
    """

    seed: int
    epoch: int
    layers: tuple[str, ...]
    labels: np.ndarray
    right: np.ndarray
    voted: np.ndarray
    margin: np.ndarray
    cluster: np.ndarray
    cdnv_pairs: np.ndarray
    classes: np.ndarray

    @property
    def n_images(self) -> int:
        return int(self.labels.size)


def _per_layer(samples: Mapping[str, Mapping], layers: Sequence[str], key: str, n: int | None):
    out = []
    for layer in layers:
        value = samples.get(layer, {}).get(key)
        if value is None:
            out.append(None)
            continue
        value = np.asarray(value)
        if n is not None and value.shape != (n,):
            raise ValueError(f"the per-image record needs one {key!r} value per unseen image ({n}) at layer "
                             f"{layer!r}; got shape {value.shape}")
        out.append(value)
    return out


def write_image_record(path: Path, layers: Sequence[str], labels, samples: Mapping[str, Mapping]) -> None:
    """Write one evaluation's record to ``path`` atomically.

    Parameters
    ----------
    layers : the taps, input -> output
    labels : (N,) class codes of the unseen images
    samples : ``{layer: {"knn_accuracy": (N,) bool, "nmi": (N,) cluster ids, "margin": (N,) float,
        "cdnv_pairs": (K, K)}}`` as :func:`lab.metrics.compute_layer` returns them (``return_samples``,
        ``return_margins``); a missing entry is stored as null (not measured or undefined there). The
        ``right`` and ``cluster`` columns come from the metrics the catalogue names for them
        (:func:`lab.catalogue.per_image_metric`)
    """
    from lab.catalogue import per_image_metric

    import pyarrow as pa
    import pyarrow.parquet as pq

    labels = np.asarray(labels, dtype=np.int64)
    if labels.ndim != 1 or labels.size == 0:
        raise ValueError(f"the per-image record needs the labels of the unseen images (N,); got shape {labels.shape}")
    n, layers = labels.size, [str(layer) for layer in layers]
    k = np.unique(labels).size
    upper = np.triu_indices(k, 1)
    pairs = []
    for layer, matrix in zip(layers, _per_layer(samples, layers, "cdnv_pairs", None)):
        if matrix is not None and matrix.shape != (k, k):
            raise ValueError(f"cdnv_pairs of layer {layer!r} must be ({k}, {k}) for the {k} classes; "
                             f"got {matrix.shape}")
        pairs.append(None if matrix is None else matrix[upper].astype(np.float32))

    def column(values, dtype, arrow_type):
        return pa.array([None if v is None else v.astype(dtype) for v in values], type=pa.list_(arrow_type))

    table = pa.table({
        "layer": pa.array(layers, type=pa.string()),
        "label": pa.array([labels.astype(np.int32)] * len(layers), type=pa.list_(pa.int32())),
        "right": column(_per_layer(samples, layers, per_image_metric("right"), n), bool, pa.bool_()),
        "margin": column(_per_layer(samples, layers, "margin", n), np.float16, pa.float16()),
        "cluster": column(_per_layer(samples, layers, per_image_metric("cluster"), n), np.int32, pa.int32()),
        "cdnv_pairs": column(pairs, np.float32, pa.float32()),
    })
    with _atomic_file(path) as f:
        pq.write_table(table, f, **_WRITE_OPTIONS)


def image_record_parts(folder: Path) -> dict[tuple[int, int], Path]:
    """``{(seed, epoch): the file of that evaluation's record}`` (the newest part when one was written twice)."""
    return {(seed, epoch): live[-1][1] for (seed, epoch), live in _group_files(folder).items()
            if epoch is not None and live}


def read_image_record(path: Path, seed: int, epoch: int) -> ImageRecord:
    """Read one evaluation's record. Raises ``ValueError`` naming the file when it is not a whole record."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as exc:
        raise ValueError(f"{type(exc).__name__}: {_one_line(exc)}") from exc
    missing = [c for c in _COLUMNS if c not in table.column_names]
    if missing or table.num_rows == 0:
        raise ValueError(f"it lacks the column(s) {missing} of a per-image record" if missing else "it has no layer")
    layers = tuple(str(v) for v in table.column("layer").to_pylist())
    labels = _cell(table, "label", np.int64, 0)
    if labels is None:
        raise ValueError("it holds no labels")
    n, n_layers = labels.size, len(layers)
    classes = np.unique(labels)
    k = classes.size
    right = np.zeros((n_layers, n), dtype=bool)
    voted = np.zeros(n_layers, dtype=bool)
    margin = np.full((n_layers, n), np.nan, dtype=np.float32)
    cluster = np.full((n_layers, n), -1, dtype=np.int64)
    pairs = np.full((n_layers, k, k), np.nan)
    upper = np.triu_indices(k, 1)
    for i in range(n_layers):
        for name, out, dtype in (("right", right, bool), ("margin", margin, np.float32),
                                 ("cluster", cluster, np.int64)):
            value = _cell(table, name, dtype, i)
            if value is None:
                continue
            if value.shape != (n,):
                raise ValueError(f"its {name!r} of layer {layers[i]!r} holds {value.size} values for {n} images")
            out[i] = value
            if name == "right":
                voted[i] = True
        value = _cell(table, "cdnv_pairs", np.float64, i)
        if value is not None and value.size == upper[0].size:
            pairs[i][upper] = value
            pairs[i].T[upper] = value
    return ImageRecord(int(seed), int(epoch), layers, labels, right, voted, margin, cluster, pairs, classes)


def _cell(table, column: str, dtype, row: int) -> np.ndarray | None:
    """Row ``row`` of a list column as a numpy array (None for a null list)."""
    cell = table.column(column)[row]
    if not cell.is_valid:
        return None
    return np.asarray(cell.values.to_numpy(zero_copy_only=False)).astype(dtype, copy=False)

