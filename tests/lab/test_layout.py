"""The house by its parts: no import cycles in lab/ or app/, no module over 500 lines, lab never
imports the UI stack, and the public entry points of the moved parts still import."""
from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 500
UI = ("panel", "bokeh", "holoviews", "hvplot", "app")


def _modules(*packages: str) -> dict[str, Path]:
    out = {}
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST):
    """Every import statement, at any depth (a lazy import inside a function is still a dependency),
    except those under ``if TYPE_CHECKING:``, which never run."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(parts + ([base] if base else []))
                # `from pkg import sub` depends on the submodule when there is one
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            graph[name] |= {t for t in map(owner, targets) if t and t != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_cycle_through_a_lazy_import():
    graph = _graph({"lab.a": ROOT / "lab" / "__init__.py"})            # a real file: no cycle alone
    assert _cycles(graph) == []
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles_in_lab_or_app():
    assert _cycles(_graph(_modules("lab", "app"))) == []


def test_no_module_over_500_lines():
    files = [*(ROOT / "lab").rglob("*.py"), *(ROOT / "app").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py"),
             *(ROOT / "notebooks").glob("*.py")]
    long = {str(f.relative_to(ROOT)): n for f in files if (n := len(f.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}


def test_lab_never_imports_the_ui_stack():
    modules = _modules("lab")
    bad = {}
    for name, path in modules.items():
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if not getattr(node, "level", 0) and any(n.split(".")[0] in UI for n in names):
                bad.setdefault(name, []).extend(names)
    assert bad == {}


@pytest.mark.parametrize("module, names", [
    ("lab.cli", ["main", "build_parser"]),
    ("lab.__main__", ["main"]),
    ("lab.study", ["Study", "figures", "load_study", "study_status", "find_study", "local_cluster"]),
    ("lab.export", ["to_notebook", "study_to_notebook", "execute_notebook", "notebook_summary", "py_literal"]),
    ("lab.export.tables", ["generalization_table", "run_labels"]),
    ("lab.analysis", ["generalization", "latest_generalization", "layer_curve", "aggregate_seeds", "bootstrap",
                      "confidence_text", "rank_correlation", "accuracy_vs_g", "transfer_vs_g", "run_summary"]),
    ("lab.projection", ["pca_layout", "umap_layout", "knn_graph", "warm_up", "is_warm", "Projector"]),
])
def test_public_entry_points_import(module, names):
    mod = importlib.import_module(module)
    missing = [n for n in names if not hasattr(mod, n)]
    assert missing == []
