"""environment.yml (the conda route) names every runtime dependency of pyproject.toml, with the same
lower bounds, and installs this checkout; constraints.txt pins every dependency and extra."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

try:
    import tomllib
except ImportError:                      # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[2]
CONDA_NAMES = {"torch": "pytorch"}       # pip name -> conda-forge name where they differ
_REQ = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*)$")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement(text: str) -> tuple[str, list[str], str]:
    """``"dask[distributed]>=2024.1"`` -> ("dask", ["distributed"], ">=2024.1")."""
    m = _REQ.match(text)
    assert m, f"cannot parse requirement {text!r}"
    extras = [e.strip() for e in (m.group(2) or "[]")[1:-1].split(",") if e.strip()]
    return _norm(m.group(1)), extras, m.group(3).replace(" ", "")


def _lower_bound(spec: str) -> str | None:
    m = re.search(r">=([0-9][^,<>=!]*)", spec)
    return m.group(1) if m else None


@pytest.fixture(scope="module")
def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


@pytest.fixture(scope="module")
def env() -> dict:
    return yaml.safe_load((ROOT / "environment.yml").read_text())


def _conda_specs(env: dict) -> tuple[dict[str, str], list[str]]:
    conda, pip = {}, []
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            pip += list(dep.get("pip", []))
            continue
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(.*)$", dep)
        conda[_norm(m.group(1))] = m.group(2).replace(" ", "")
    return conda, pip


def test_environment_uses_conda_forge_and_installs_the_checkout(env):
    assert env["channels"] == ["conda-forge"]
    conda, pip = _conda_specs(env)
    assert "python" in conda and "pip" in conda
    assert "-e ." in pip, "environment.yml must `pip install -e .` so that `lab` and `app` import"
    assert "./jupyter-config" in pip, "environment.yml must install ./jupyter-config (commsOverSubshells off)"


def test_environment_names_every_runtime_dependency_with_its_lower_bound(pyproject, env):
    conda, pip = _conda_specs(env)
    pip_specs = {_requirement(p)[0]: _requirement(p)[2] for p in pip if not p.startswith(("-", "./"))}
    deps = pyproject["project"]["dependencies"]
    assert len(deps) >= 20
    missing, bounds = [], []
    for text in deps:
        name, extras, spec = _requirement(text)
        for wanted in [name] + [_norm(e) for e in extras if name == "dask"]:     # dask[distributed]
            conda_name = CONDA_NAMES.get(wanted, wanted)
            found = conda.get(conda_name, pip_specs.get(wanted))
            if found is None:
                missing.append(wanted)
            elif _lower_bound(spec) and _lower_bound(found) != _lower_bound(spec):
                bounds.append(f"{wanted}: pyproject {spec!r}, environment.yml {found!r}")
    assert not missing, f"environment.yml lacks runtime dependencies of pyproject.toml: {missing}"
    assert not bounds, f"lower bounds differ: {bounds}"


def test_environment_has_the_notebook_and_sink_extras(pyproject, env):
    conda, _ = _conda_specs(env)
    extras = pyproject["project"]["optional-dependencies"]
    for extra in ("lab", "sinks"):
        for text in extras[extra]:
            assert _requirement(text)[0] in conda, f"environment.yml lacks {text} (the [{extra}] extra)"


def test_constraints_pin_every_dependency_and_extra(pyproject):
    pinned = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not an exact pin (NAME==VERSION)"
            pinned[_norm(name)] = version
    project = pyproject["project"]
    wanted = list(project["dependencies"])
    for extra, reqs in project["optional-dependencies"].items():
        wanted += [r for r in reqs if not _requirement(r)[0] == _norm(project["name"])]
    unpinned = [r for r in wanted if _requirement(r)[0] not in pinned]
    assert not unpinned, f"constraints.txt does not pin {unpinned}"
    assert pinned["jupyterlab"] == "4.6.6" and pinned["tensorboard"] == "2.21.0"
    assert pinned["mlflow-skinny"] == "3.17.2"
    assert {"distributed", "dask"} <= set(pinned)
