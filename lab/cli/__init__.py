"""The ``python -m lab`` (or ``layerscope``) command line, one module per command group.

::

    python -m lab run --dataset glyphs --backbone resnet18 --epochs 2      # lab.cli.run
    python -m lab runs list|show|delete|pack|unpack|to-tensorboard|to-mlflow   # lab.cli.runs
    python -m lab export RUN_ID [RUN_ID ...] -o runs.ipynb --execute       # lab.cli.export
    python -m lab study run|show|export|extend SPEC                        # lab.cli.study
    python -m lab pretrain --arch resnet18 --out lab/zoo/glyph_resnet18    # lab.cli.pretrain

Every :class:`lab.config.RunConfig` field is a flag of ``run`` (``n_unseen`` is ``--n-unseen``,
booleans are ``--augment/--no-augment``, lists take several values, ``none`` sets an optional field to
None); flags override ``--config``. Names (dataset, backbone, checkpoint) are resolved before anything
runs. Bad input exits with status 2 and one line on stderr; a run that fails exits 1, a cancelled one
(Ctrl-C) 130. An operating-system error (permissions, a full disk, a path whose parent is a file, a
read-only file system) exits 1 with one line naming the path and the fix (:mod:`lab.errors`); only a
genuine bug says so, and then names the file that keeps its traceback (``--traceback`` shows it).
Warnings are one line each.
"""
from __future__ import annotations

from lab.cli.entry import build_parser, main

__all__ = ["main", "build_parser"]
