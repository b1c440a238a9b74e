"""What :class:`app.EmbeddingView` shows, without Panel or HoloViews: checked arrays, layout sources, lasso hits.

A *layout source* holds the 2-D layouts of one set of images at several (layer, epoch): every layout has
one row per image, in the same order (:attr:`~ArrayLayouts.indices`), and ``run()`` names the stored run
they belong to, ``(store, run_id)``, or None (whose per-image record the view reads). Three sources share
that interface:

- :class:`ArrayLayouts` — arrays a caller passes (``EmbeddingView.from_arrays``);
- :class:`StoredLayouts` — the projections of a stored run (images re-read from its dataset, never stored);
- :class:`LiveLayouts` — the layouts of the run the live view is watching, as they arrive.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

from lab.data import png_data_uri

from app.base import ThumbnailSource

__all__ = ["Layout", "ArrayLayouts", "StoredLayouts", "LiveLayouts", "check_selection", "points_in_polygon",
           "points_in_box", "image_data_uri", "neighbour_layer", "no_layouts"]


def no_layouts(run_id: str | None, config: dict) -> str | None:
    """The sentence an explorer shows in place of its controls for a run stored without its layouts (projection
    "none": embeddings off), saying how to get them; None for a run that stores layouts."""
    if (config or {}).get("projection") != "none":
        return None
    from lab.monitor import is_monitored

    if is_monitored(config):            # a loop's Monitor, not the form's Layout
        off, again = "projection='none'", "run the loop again with lab.Monitor(..., projection='pca')"
    else:
        off, again = "its Layout was 'none'", "run it again with Layout 'pca' or 'umap'"
    return f"run {run_id!r} was stored without its 2-D layouts (embeddings off: {off}); {again} to explore them here."


@dataclass(frozen=True)
class Layout:
    """One 2-D layout: ``coords`` (N, 2) float64 in the source's image order, how it was made, a plot title."""

    coords: np.ndarray
    method: str
    title: str


# ---------------------------------------------------------------------------------------------- checks
def _to_numpy(values, dtype=None) -> np.ndarray:
    """``lab.features.to_numpy``: tensors on any device (a run's labels live on its GPU) become host arrays."""
    from lab.features import to_numpy

    return to_numpy(values, dtype)


def _check_coords(coords, name: str = "coords", n: int | None = None) -> np.ndarray:
    try:
        xy = _to_numpy(coords, np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an (N, 2) array of x, y numbers; got {type(coords).__name__}.") from None
    if xy.ndim != 2 or xy.shape[1] != 2:
        raise ValueError(f"{name} must be an (N, 2) array of x, y; got shape {xy.shape}.")
    if n is not None and xy.shape[0] != n:
        raise ValueError(f"{name} has {xy.shape[0]} rows; every layout needs one row per point ({n}).")
    bad = np.flatnonzero(~np.isfinite(xy).all(axis=1))
    if bad.size:
        raise ValueError(f"{name} has {bad.size} row{'s' if bad.size > 1 else ''} with NaN or infinite x/y "
                         f"(first: row {int(bad[0])}); drop those points (and their labels and images) first.")
    return xy


def _check_labels(labels, names, n: int) -> tuple[np.ndarray, list[str]]:
    raw = _to_numpy(labels)
    if raw.ndim != 1 or raw.shape[0] != n:
        raise ValueError(f"labels must have one entry per point ({n}); got shape {raw.shape}.")
    if raw.dtype.kind in "iub":
        codes = raw.astype(np.int64)
        if n and codes.min() < 0:
            raise ValueError(f"labels must be class numbers >= 0; got {int(codes.min())}.")
        k = int(codes.max()) + 1 if n else 0
        if names is None:
            return codes, [str(i) for i in range(k)]
        names = [str(c) for c in names]
        if len(names) < k:
            raise ValueError(f"names has {len(names)} class names but labels go up to {k - 1}; "
                             f"give one name per class (0 to {k - 1}).")
        return codes, names
    if raw.dtype.kind in "fc":
        raise ValueError(f"labels must be integer class numbers or class names; got {raw.dtype} numbers.")
    text = raw.astype(str)
    found = list(dict.fromkeys(text.tolist()))
    names = [str(c) for c in names] if names is not None else sorted(found)
    missing = sorted(set(found) - set(names))
    if missing:
        raise ValueError(f"label {missing[0]!r} is not in names ({len(names)} classes); list every class in names.")
    lookup = {c: i for i, c in enumerate(names)}
    return np.fromiter((lookup[c] for c in text.tolist()), dtype=np.int64, count=n), names


def _check_images(images, n: int) -> np.ndarray:
    arr = _to_numpy(images)
    if arr.dtype != np.uint8:
        raise ValueError(f"images must be uint8 (N, H, W) or (N, H, W, C); got dtype {arr.dtype} "
                         "(scale to 0..255 and use .astype(np.uint8)).")
    if arr.ndim not in (3, 4) or (arr.ndim == 4 and arr.shape[-1] not in (1, 3, 4)):
        raise ValueError(f"images must be (N, H, W) or (N, H, W, C) with C in (1, 3, 4); got shape {arr.shape}.")
    if arr.shape[0] != n:
        raise ValueError(f"images must hold one image per point ({n}); got {arr.shape[0]}.")
    return arr


def check_selection(values, valid: np.ndarray) -> list[int]:
    """``values`` as a sorted list of distinct image indices, each one of ``valid`` (sorted, (N,) int).

    Raises ValueError naming the first index out of range, with the range.
    """
    if values is None:
        return []
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise ValueError(f"selection must be a list of integer image indices; got {values!r}.")
    arr = np.asarray(list(values))
    if arr.size == 0:
        return []
    if arr.dtype.kind not in "iu" or arr.ndim != 1:
        raise ValueError(f"selection must be a list of integer image indices; got {arr.dtype} values "
                         f"such as {arr.ravel()[0]!r}.")
    arr = np.unique(arr.astype(np.int64))
    if valid.size == 0:
        raise ValueError("this view has no images yet; its selection can only be [].")
    pos = np.searchsorted(valid, arr).clip(0, valid.size - 1)
    bad = arr[valid[pos] != arr]
    if bad.size:
        lo, hi = int(valid[0]), int(valid[-1])
        where = f"out of range ({lo} to {hi})" if hi - lo + 1 == valid.size else \
            f"not one of this view's {valid.size} images (indices {lo} to {hi})"
        raise ValueError(f"selection index {int(bad[0])} is {where}; the selection was not changed.")
    return arr.tolist()


def neighbour_layer(layers: list[str], layer: str | None) -> str | None:
    """The layer shown beside ``layer`` at first: the next one (where do its points go?), else the one before."""
    if layer not in layers:
        return layers[0] if layers else None
    i = layers.index(layer)
    return layers[i + 1] if i + 1 < len(layers) else layers[max(i - 1, 0)]


# ---------------------------------------------------------------------------------------------- geometry
def points_in_polygon(xy: np.ndarray, polygon: np.ndarray) -> np.ndarray:
    """Boolean mask (N,) of the points ``xy`` (N, 2) inside ``polygon`` (M, 2), by the even-odd rule."""
    poly = np.asarray(polygon, dtype=np.float64)
    if poly.ndim != 2 or poly.shape[0] < 3 or poly.shape[1] != 2:
        return np.zeros(len(xy), dtype=bool)
    (x0, y0), (x1, y1) = poly.min(axis=0), poly.max(axis=0)
    near = np.flatnonzero((xy[:, 0] >= x0) & (xy[:, 0] <= x1) & (xy[:, 1] >= y0) & (xy[:, 1] <= y1))
    x, y = xy[near, 0], xy[near, 1]
    inside = np.zeros(near.size, dtype=bool)
    px, py = poly[:, 0], poly[:, 1]
    qx, qy = np.roll(px, 1), np.roll(py, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        for ax, ay, bx, by in zip(px, py, qx, qy):         # one edge at a time: memory O(N), not O(N M)
            crosses = (ay > y) != (by > y)
            inside ^= crosses & (x < (bx - ax) * (y - ay) / (by - ay) + ax)
    mask = np.zeros(len(xy), dtype=bool)
    mask[near[inside]] = True
    return mask


def points_in_box(xy: np.ndarray, bounds) -> np.ndarray:
    """Boolean mask (N,) of the points ``xy`` (N, 2) inside ``bounds`` = (left, bottom, right, top)."""
    left, bottom, right, top = bounds
    x0, x1 = sorted((left, right))
    y0, y1 = sorted((bottom, top))
    return (xy[:, 0] >= x0) & (xy[:, 0] <= x1) & (xy[:, 1] >= y0) & (xy[:, 1] <= y1)


# ---------------------------------------------------------------------------------------------- images
def image_data_uri(image: np.ndarray, size: int = 64) -> str:
    """A uint8 image (H, W) or (H, W, C) as a PNG data URI at most ``size`` px wide (small ones keep their size)."""
    return png_data_uri(image, size, enlarge=False)


class _ArrayImages:
    """``render(index, size)`` for :class:`ThumbnailSource` over images (N, H, W[, C]) whose row is the index."""

    def __init__(self, images: np.ndarray):
        self.images = images

    def __call__(self, index: int, size: int = 64) -> str:
        return image_data_uri(self.images[int(index)], size)


# ---------------------------------------------------------------------------------------------- sources
class ArrayLayouts:
    """Layouts given as arrays: one (N, 2) array, or ``{name: (N, 2)}`` for several layers of the same points.

    Parameters
    ----------
    coords : array (N, 2) or mapping of layer name -> array (N, 2)
    labels : (N,) class numbers (0..K-1) or class names
    images : uint8 (N, H, W) or (N, H, W, C), optional; image ``i`` belongs to row ``i``
    names : K class names (for number labels), optional
    """

    def __init__(self, coords, labels, images=None, names=None):
        layouts = dict(coords) if isinstance(coords, Mapping) else {"embedding": coords}
        if not layouts:
            raise ValueError("coords must be an (N, 2) array or a non-empty {layer: (N, 2) array} mapping.")
        first = next(iter(layouts))
        n = _check_coords(layouts[first], f"coords[{first!r}]" if isinstance(coords, Mapping) else "coords").shape[0]
        self._layouts = {str(k): _check_coords(v, f"coords[{k!r}]" if isinstance(coords, Mapping) else "coords", n)
                         for k, v in layouts.items()}
        self.labels, self.class_names = _check_labels(labels, names, n)
        self.indices = np.arange(n, dtype=np.int64)
        self._images = _check_images(images, n) if images is not None else None
        self.thumbnails = ThumbnailSource(_ArrayImages(self._images), size=64) if self._images is not None else None
        self.default_layer = first
        self.seed = None

    def run(self) -> None:
        """No stored run: arrays have no per-image record."""
        return None

    def layers(self) -> list[str]:
        return list(self._layouts)

    def epochs(self, layer: str | None) -> list[int]:
        return [0] if layer in self._layouts else []

    def layout(self, layer: str | None, epoch: int | None = None) -> Layout | None:
        xy = self._layouts.get(layer)
        return None if xy is None else Layout(xy, "", str(layer))


def _align(coords: np.ndarray, indices: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """``coords`` (n, 2) of the images ``indices`` reordered to the images ``reference`` (same set)."""
    indices = np.asarray(indices, dtype=np.int64)
    if indices.shape == reference.shape and np.array_equal(indices, reference):
        return np.asarray(coords, dtype=np.float64)
    order = np.argsort(indices, kind="stable")
    pos = np.searchsorted(indices[order], reference).clip(0, max(len(indices) - 1, 0))
    if len(indices) != len(reference) or not np.array_equal(indices[order][pos], reference):
        raise ValueError(f"a layout holds other images than the first one ({len(indices)} vs {len(reference)}); "
                         "every layout of a view must lay out the same images.")
    return np.asarray(coords, dtype=np.float64)[order[pos]]


class StoredLayouts:
    """The stored projections of one run and seed (UMAP where stored, else PCA), read when first shown.

    The images come from the run's own dataset and split (:func:`lab.runs.prepare_data` of its config), loaded
    the first time a thumbnail is asked for; a run whose dataset cannot be read here shows no thumbnails.
    ``store``: the store ``record`` was loaded from (None: the store of its folder).
    """

    def __init__(self, record, seed: int | None = None, store=None):
        from lab import analysis

        from lab.errors import not_evaluated

        keys = record.projection_keys()
        if not len(keys) and record.status == "running" and not record.evaluated:
            raise ValueError(f"run {record.run_id!r} has not finished an evaluation yet; its layouts come with the "
                             f"first")
        if not len(keys) and not record.evaluated:
            raise ValueError(not_evaluated(record.run_id, "2-D layout", record.status))
        if not len(keys) and no_layouts(record.run_id, record.config_dict):
            raise ValueError(no_layouts(record.run_id, record.config_dict))
        if not len(keys):
            raise ValueError(f"run {record.run_id!r} has no stored 2-D layout (its config has projection="
                             f"{record.config_dict.get('projection')!r}); run it with projection 'pca' or 'umap'.")
        seeds = sorted(int(s) for s in keys["seed"].unique())
        if seed is None:
            seed = seeds[0]
        if int(seed) not in seeds:
            raise ValueError(f"run {record.run_id!r} has no layout of seed {seed}; stored seeds: {seeds}.")
        self.record, self.seed, self._store = record, int(seed), store
        self.axis = str(record.meta.get("axis") or "epoch")      # what its epoch numbers count ("step": steps)
        keys = keys[keys["seed"] == self.seed]
        self._methods: dict[tuple[str, int], str] = {}
        for row in keys.itertuples(index=False):
            key = (str(row.layer), int(row.epoch))
            if self._methods.get(key) != "umap":
                self._methods[key] = str(row.method)
        order = analysis.layer_order(record.meta.get("layers"), record.metrics)
        present = {layer for layer, _ in self._methods}
        self._layers = [x for x in order if x in present] + sorted(present - set(order))
        best = record.summary().get("best_layer")
        self.default_layer = best if best in present else self._layers[-1]
        layer, epoch = next(iter(self._methods))
        _, labels, self.indices = record.projection(self.seed, epoch, layer, self._methods[(layer, epoch)])
        self.indices = np.asarray(self.indices, dtype=np.int64)
        self.labels = np.asarray(labels, dtype=np.int64)
        names = record.projection_class_names(self.seed, epoch, layer, self._methods[(layer, epoch)])
        names = names or (record.meta.get("split") or {}).get("unseen")
        k = int(self.labels.max()) + 1 if self.labels.size else 0
        self.class_names = [str(c) for c in names] if names and len(names) >= k else [str(i) for i in range(k)]
        self._cache: dict[tuple[str, int], Layout] = {}
        self._thumbs: ThumbnailSource | None = None
        self._thumbs_guard = threading.Lock()
        self._thumbs_tried = False

    def run(self) -> tuple:
        """(store, run_id) of the run."""
        if self._store is None:
            from lab.store import RunStore

            self._store = RunStore(self.record.path.parent)
        return self._store, self.record.run_id

    def layers(self) -> list[str]:
        return list(self._layers)

    def epochs(self, layer: str | None) -> list[int]:
        return sorted(e for (name, e) in self._methods if name == layer)

    def layout(self, layer: str | None, epoch: int | None = None) -> Layout | None:
        epochs = self.epochs(layer)
        if not epochs:
            return None
        epoch = epochs[-1] if epoch is None or epoch not in epochs else int(epoch)
        key = (str(layer), epoch)
        if key not in self._cache:
            method = self._methods[key]
            coords, _, indices = self.record.projection(self.seed, epoch, layer, method)
            title = f"{method.upper()} · {layer} · {self.axis} {epoch}"
            self._cache[key] = Layout(_align(coords, indices, self.indices), method, title)
        return self._cache[key]

    @property
    def thumbnails(self) -> ThumbnailSource | None:
        with self._thumbs_guard:
            if not self._thumbs_tried:
                self._thumbs_tried = True
                try:
                    import lab.runs

                    kept = self.record.thumbnails()      # a monitored run's own pictures of its images
                    if kept is not None:
                        from app.base import array_thumbnails

                        self._thumbs = array_thumbnails(kept, size=64)
                        return self._thumbs
                    data = lab.runs.prepare_data(self.record.config)
                    self._thumbs = ThumbnailSource(data.unseen.thumbnail, size=64)
                except Exception:   # thumbnails are a nicety: a dataset that is not here leaves the points
                    self._thumbs = None
            return self._thumbs


class LiveLayouts:
    """The layouts of the run a :class:`~app.live.LiveView` watches: ``model()`` is its current
    :class:`~app.live._model.RunModel`, ``thumbnails()`` its current thumbnail source (either may change).

    Only the seed of the first layout is shown: another seed may split the classes otherwise, and a
    view's layouts must all hold the same images. ``run()`` returns the run's store (None: none known) and id.
    """

    def __init__(self, model: Callable, thumbnails: Callable[[], ThumbnailSource | None],
                 run: Callable[[], tuple | None] = lambda: None):
        self._model, self._thumbs, self.run = model, thumbnails, run
        keys = model().projection_keys()
        self.seed = int(keys[0][0]) if keys else None
        first = model().projection(keys[0][2], keys[0][1], seed=self.seed) if keys else None
        self.indices = np.asarray(first.indices, dtype=np.int64) if first is not None else np.zeros(0, np.int64)
        self.labels = np.asarray(first.labels, dtype=np.int64) if first is not None else np.zeros(0, np.int64)
        names = list(first.class_names or []) if first is not None else []
        k = int(self.labels.max()) + 1 if self.labels.size else 0
        self.class_names = names if len(names) >= k else names + [str(i) for i in range(len(names), k)]
        self.default_layer = None

    @property
    def axis(self) -> str:
        """What the run's epoch numbers count: "epoch", or "step" (:attr:`app.live._model.RunModel.axis`)."""
        return getattr(self._model(), "axis", "epoch")

    def _keys(self) -> list[tuple[int, str]]:
        return [(int(e), str(layer)) for s, e, layer in self._model().projection_keys() if int(s) == self.seed]

    def layers(self) -> list[str]:
        present = {layer for _, layer in self._keys()}
        return [name for name in self._model().projection_layers() if name in present]

    def epochs(self, layer: str | None) -> list[int]:
        return sorted({e for e, name in self._keys() if name == layer})

    def layout(self, layer: str | None, epoch: int | None = None) -> Layout | None:
        epochs = self.epochs(layer)
        if not epochs:
            return None
        shown = epoch if epoch in epochs else epochs[-1]
        proj = self._model().projection(layer, shown, seed=self.seed)
        try:
            coords = _align(proj.coords, proj.indices, self.indices)
        except ValueError:           # not the images of the first layout: nothing to link it with
            return None
        return Layout(coords, proj.method, f"{proj.method.upper()} · {layer} · {self.axis} {shown}")

    @property
    def thumbnails(self) -> ThumbnailSource | None:
        return self._thumbs()
