"""Where study specs are found and saved: the shipped ``studies/`` folder and the folders of ``$LAB_STUDIES_DIR``."""
from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["shipped_specs", "shipped_folder", "studies_folder", "spec_file"]


def shipped_specs() -> dict[str, Path]:
    """The study specs shipped in ``studies/`` next to the ``app`` package, plus those in the folders of
    ``$LAB_STUDIES_DIR`` (os.pathsep-separated), by file name."""
    folders = [shipped_folder()]
    folders += [Path(p) for p in os.environ.get("LAB_STUDIES_DIR", "").split(os.pathsep) if p]
    specs = {}
    for folder in folders:
        if folder.is_dir():
            specs.update({p.name: p for p in sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")])})
    return specs


def studies_folder() -> Path:
    """Where a composed spec is saved: the first folder of ``$LAB_STUDIES_DIR``, else the shipped ``studies/``
    (the folders :func:`app.studies.shipped_specs` lists)."""
    folders = [p for p in os.environ.get("LAB_STUDIES_DIR", "").split(os.pathsep) if p]
    return Path(folders[0]) if folders else shipped_folder()


def shipped_folder() -> Path:
    """The ``studies/`` folder next to the ``app`` package."""
    return Path(__file__).resolve().parents[2] / "studies"


def spec_file(name: str) -> Path:
    """The file a study named ``name`` is saved to: ``<name>.yaml`` in :func:`studies_folder`, the name's
    characters other than letters, digits, ``-``, ``_`` and ``.`` written as ``_``."""
    stem = re.sub(r"[^\w.-]+", "_", name.strip()).strip("._")
    if not stem:
        raise ValueError(f"a study needs a name to be saved as a file. Got {name!r} instead.")
    return studies_folder() / f"{stem}.yaml"
