"""No module of lab/ or app/ imports another package's private names or private modules.

A private module (``_name.py``) or name (``_name``) belongs to its package; another package imports what the
owner exports. (Private names of third-party libraries are guarded where they are used: see
lab/metrics/_kmeans.py and _probe.py.)
"""
from __future__ import annotations

import ast

from tests.fixtures.paths import REPO


def _private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__")


def _owner(name: str, root) -> str:
    """The package a dotted name belongs to: the package that holds its first private part (a private
    name of a module belongs to that module's package)."""
    parts = name.split(".")
    for i, part in enumerate(parts):
        if _private(part):
            owner = parts[:i]
            if owner and not (root.joinpath(*owner) / "__init__.py").is_file():
                owner = owner[:-1]                      # a module, not a package: its package owns it
            return ".".join(owner)
    return name


def private_imports(root=REPO) -> list[str]:
    found = []
    for top in ("lab", "app"):
        for path in sorted((root / top).rglob("*.py")):
            rel = path.relative_to(root).with_suffix("")
            package = ".".join(rel.parts[:-1])          # the importing module's own package
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                    continue
                if node.module.split(".")[0] not in ("lab", "app"):
                    continue
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names if _private(a.name)]
                for name in names:
                    owner = _owner(name, root)
                    if owner != name and not (package == owner or package.startswith(owner + ".")):
                        found.append(f"{rel}.py:{node.lineno} imports {name}")
    return found


def test_no_module_imports_another_packages_private_names():
    assert private_imports() == []


def test_the_check_finds_a_private_import_across_packages(tmp_path):
    (tmp_path / "lab" / "a").mkdir(parents=True)
    (tmp_path / "lab" / "b").mkdir()
    (tmp_path / "app").mkdir()
    for package in ("lab/a", "lab/b"):
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "lab" / "a" / "m.py").write_text(
        "from lab.b._x import helper\nfrom lab.b import _y\nfrom lab.a._z import ok\nfrom lab.a.n import _fine\n"
        "from lab.b.n import _not\n")
    assert private_imports(tmp_path) == ["lab/a/m.py:1 imports lab.b._x", "lab/a/m.py:2 imports lab.b._y",
                                         "lab/a/m.py:5 imports lab.b.n._not"]
