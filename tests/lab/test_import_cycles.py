"""No import cycles: among lab/ and app/ modules counting every import that runs, at module level and inside
functions (a lazy import is still a dependency); and among lab/ modules even counting those under
``if TYPE_CHECKING:`` (a cycle of parts for types only still means the shared types live in the wrong part)."""
from __future__ import annotations

from tests.fixtures.import_graph import cycles, graph, modules
from tests.fixtures.paths import REPO


def test_the_cycle_finder_finds_a_cycle_through_a_lazy_import():
    found = graph({"lab.a": REPO / "lab" / "__init__.py"})            # a real file: no cycle alone
    assert cycles(found) == []
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_finder_sees_imports_under_type_checking_when_asked(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.b import f\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import T\n")
    found = {"pkg": pkg / "__init__.py", "pkg.a": pkg / "a.py", "pkg.b": pkg / "b.py"}
    assert cycles(graph(found, types=True)) == [["pkg.a", "pkg.b"]]
    assert cycles(graph(found)) == []                                 # an import for types only never runs
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles_in_lab_or_app():
    assert cycles(graph(modules("lab", "app"))) == []


# Cycles through these packages are being taken apart by their own change (lab.store: _writer names RunStore
# for its types from the package that imports it); remove a package here once its cycles are gone.
_BEING_FIXED = ("lab.store",)


def test_no_import_cycles_in_lab_even_for_types():
    found = cycles(graph(modules("lab"), types=True))
    assert [c for c in found if not any(m == p or m.startswith(p + ".") for m in c for p in _BEING_FIXED)] == []
