"""Validation of a run's metric fields (``metrics``, ``lidar_views``, ``lidar_images``), for :class:`lab.RunConfig`."""
from __future__ import annotations

from lab import _config_checks as _check
from lab import catalogue

__all__ = ["check_metrics"]


def check_metrics(metrics, lidar_views, lidar_images) -> None:
    """Raise ValueError when the metric names or LiDAR's settings are not a valid choice (one message, the fix)."""
    if len(metrics) == 0:
        raise ValueError("metrics must name at least one metric.")
    known = tuple(catalogue.METRICS)
    unknown = [m for m in metrics if m not in known]
    if unknown:
        raise ValueError(f"metrics: unknown metric {unknown[0]!r}. Allowed: {_check.fmt_choices(known)}.")
    _check.str_list("metrics", metrics)
    _check.int_at_least("lidar_images", lidar_images, 2)
    if not _check.is_int(lidar_views) or lidar_views == 1 or lidar_views < 0:
        raise ValueError(f"lidar_views must be 0 (LiDAR off) or an integer >= 2 (views per unseen image). "
                         f"Got {lidar_views!r} instead.")
    if ("lidar" in metrics) != (lidar_views != 0):
        raise ValueError(
            f"lidar_views={lidar_views} and metrics {'' if 'lidar' in metrics else 'without '}'lidar' disagree: "
            "LiDAR is measured on lidar_views >= 2 augmented views of each unseen image; add 'lidar' to metrics "
            "and set lidar_views (e.g. 4), or neither.")
