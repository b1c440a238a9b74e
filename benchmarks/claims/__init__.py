"""The seed papers' claims, one module per paper; ``benchmarks/paper_claims.py`` runs them and prints the report.

Each experiment is a function ``(settings, store) -> (rows, values, lines)``: the summary rows with
their verdicts, every measured number (for ``--json``), and the report's text for that experiment.

- :mod:`.nc_transfer`: Li, Liu et al., neural collapse and transfer (Fig. 2, Table 3);
- :mod:`.dyballa`: Dyballa et al. 2024 / Gerritz et al. 2024 (g and its layer on glyphs);
- :mod:`.wang_yang`: Wang & Yang 2022 (utilization and re-initialisation under label noise);
- :mod:`._common`: the verdicts, :class:`Settings`, :class:`Row` and the helpers they share.
"""
from ._common import (
    FAST_VERDICT, MIXED, NOT_MEASURED, NOT_REPRODUCED, REPRODUCED, VERDICTS, Row, RunFailed, Settings, fast_or, log,
    seed_spread, spearman,
)
from .dyballa import dyballa
from .nc_transfer import fig2, table3
from .wang_yang import wang_yang

__all__ = [
    "REPRODUCED", "MIXED", "NOT_REPRODUCED", "FAST_VERDICT", "NOT_MEASURED", "VERDICTS", "Settings", "Row",
    "RunFailed", "log", "spearman", "fast_or", "seed_spread", "fig2", "table3", "dyballa", "wang_yang",
]
