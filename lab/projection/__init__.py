"""2-D layouts of unseen-class embeddings: PCA at once, UMAP when it is ready.

UMAP (McInnes et al. 2018, umap-learn) is the picture the papers show, but on a
CPU it is costly: a fresh process pays ~14 s of numba compilation on its first
fit, and umap's own neighbour graph dominates a fit of a few thousand points. So:

- :func:`warm_up` compiles umap's numba code once per process, in a background
  thread, on a tiny problem that takes the same code path as real fits;
- :func:`umap_layout` takes an exact k-nearest-neighbour graph computed on the
  device (:func:`knn_graph`, from :func:`lab.metrics.knn_indices`) through umap's
  ``precomputed_knn``, so umap never builds its own;
- :func:`pca_layout` is immediate and deterministic (sign-fixed), and serves as
  the first layout and as the initialisation of the first UMAP;
- :func:`umap_layout` fits at most ``fit_points`` points (a class-stratified sample) and
  places the others with umap's ``transform`` (:mod:`lab.projection.budget`; cuML's UMAP
  on a CUDA device when it is installed);
- :class:`Projector` runs UMAP fits one at a time in a background thread for the
  run engine, the current best layer and its neighbours first, initialising each fit
  from the previous layout of the same layer (or the nearest layer) so layouts stay
  comparable across epochs and layers.
"""
from __future__ import annotations

from lab.projection.layouts import is_warm, knn_graph, pca_layout, umap_layout, warm_up
from lab.projection.projector import ProjectionResult, Projector

__all__ = [
    "pca_layout", "knn_graph", "umap_layout", "warm_up", "is_warm", "Projector", "ProjectionResult",
]
