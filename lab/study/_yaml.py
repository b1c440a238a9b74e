"""A study spec as YAML text, and writing it to a file in one rename."""
from __future__ import annotations

import contextlib
import functools
import os
import tempfile
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
    """Write ``text`` to ``path`` through a temporary file in the same folder and one ``os.replace``: a
    reader sees the old file or the new one, never half of one."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".tmp-{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        else:
            mask = os.umask(0)
            os.umask(mask)
            os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path
