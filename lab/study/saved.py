"""Study specs kept in the run store: every study run into a store leaves its spec there, so that
``study show NAME`` and ``export --study NAME`` find it by name."""
from __future__ import annotations

import json
from pathlib import Path

from lab.store.lookup import open_store
from lab.study.spec import Study

__all__ = ["SPECS_FOLDER", "save_spec", "find_study"]

SPECS_FOLDER = ".studies"           # inside the run store: the spec of every study run there


def save_spec(study: Study, *, store=None) -> None:
    """Keep ``study``'s spec in ``store`` (default: the default store), found later by :func:`find_study`."""
    from lab.store import write_json

    store = open_store(store)
    write_json(store.root / SPECS_FOLDER / f"{study.name}.json", study.to_dict())


def find_study(name: str, *, store=None) -> Study:
    """A spec file (``.yaml``/``.yml``/``.json``), else the spec of the study ``name`` run into ``store``."""
    store = open_store(store)
    path = Path(name)
    if path.suffix.lower() in (".yaml", ".yml", ".json") and path.is_file():
        return Study.from_file(path)
    saved = store.root / SPECS_FOLDER / f"{name}.json"
    if saved.is_file():
        return Study.from_dict(json.loads(saved.read_text(encoding="utf-8")), where=str(saved))
    folder = store.root / SPECS_FOLDER
    known = sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []
    raise ValueError(f"no study {name!r} in the store {store.root}; studies run there: "
                     f"{', '.join(known) or 'none'} (or give a spec file)")
