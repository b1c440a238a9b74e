"""``python -m lab``: the command line of :mod:`lab.cli`."""
from __future__ import annotations

import sys

from lab.cli import build_parser, main

__all__ = ["main", "build_parser"]

if __name__ == "__main__":
    sys.exit(main())
