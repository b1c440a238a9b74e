"""A study spec as YAML text, and writing it to a file in one rename."""
from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any, Mapping

__all__ = ["spec_yaml", "save_text", "leading_comments"]


def _plain(value: Any) -> Any:
    """``value`` with tuples as lists (safe_dump writes no tuple) and mappings as dicts."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


@functools.lru_cache(maxsize=1)
def _dumper():
    """A SafeDumper that writes a list of scalars, or of lists of scalars, on one line (``seeds: [[0], [1]]``,
    ``metrics: [nmi, ...]``) and everything else in block style, as the shipped specs are written."""
    import yaml

    class Dumper(yaml.SafeDumper):
        pass

    def flat(value) -> bool:
        return not isinstance(value, (dict, list))

    def represent_list(dumper, data):
        flow = all(flat(v) or (isinstance(v, list) and all(map(flat, v))) for v in data)
        return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)

    Dumper.add_representer(list, represent_list)
    return Dumper


def spec_yaml(data: Mapping) -> str:
    """The YAML text of a study's :meth:`~lab.Study.to_dict` (keys in its order, read back by
    :meth:`~lab.Study.from_file`)."""
    import yaml

    return yaml.dump(_plain(data), Dumper=_dumper(), sort_keys=False, allow_unicode=True, width=110)


def leading_comments(path: Path) -> str:
    """The comment lines that open the file at ``path`` (kept when the spec is written back), "" if none."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines(keepends=True)
    except (FileNotFoundError, UnicodeDecodeError):
        return ""
    head = []
    for line in lines:
        if not line.startswith("#"):
            break
        head.append(line)
    return "".join(head)


def save_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` in one rename (:func:`lab.store.atomic_file`): a reader sees the old file or the
    new one, never half of one. A file written over keeps its permissions."""
    from lab.store import atomic_file

    path = Path(path)
    mode = path.stat().st_mode & 0o777 if path.exists() else None
    with atomic_file(path) as f:
        f.write(text.encode("utf-8"))
    if mode is not None:
        os.chmod(path, mode)
    return path
