"""Hostile export targets and the server's exposure: a notebook path that cannot be written is named
with the fix before any work, and the app as the README starts it listens on 127.0.0.1 only."""
from __future__ import annotations

import errno
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hostile_helpers import assert_one_line, check_kept

REPO = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------------------- export

def test_export_into_a_missing_folder(hcli, store, kept, tmp_path):
    out = tmp_path / "nope" / "runs.ipynb"
    res = hcli("export", kept[0], "-o", out, "--runs-dir", store.root)
    assert res.returncode == 1
    assert f"{out.parent} does not exist" in res.stderr
    assert_one_line(res.stderr)
    assert not out.parent.exists()
    check_kept(store, kept)


def test_export_below_a_file(hcli, store, kept, tmp_path):
    blocker = tmp_path / "notes"
    blocker.write_text("mine")
    res = hcli("export", kept[0], "-o", blocker / "runs.ipynb", "--runs-dir", store.root)
    assert res.returncode == 1
    assert f"{blocker} is a file, not a folder" in res.stderr and "-o" in res.stderr
    assert_one_line(res.stderr)
    assert blocker.read_text() == "mine"
    check_kept(store, kept)


def test_export_onto_a_folder(hcli, store, kept, tmp_path):
    target = tmp_path / "runs.ipynb"
    target.mkdir()
    res = hcli("export", kept[0], "-o", target, "--runs-dir", store.root)
    assert res.returncode == 1
    assert f"{target} is a folder where a file is expected" in res.stderr and "-o" in res.stderr
    assert_one_line(res.stderr)
    assert target.is_dir() and not any(target.iterdir())


def test_export_into_a_read_only_folder(hcli, store, kept, tmp_path, read_only):
    folder = tmp_path / "locked"
    folder.mkdir()
    with read_only(folder):
        res = hcli("export", kept[0], "-o", folder / "runs.ipynb", "--runs-dir", store.root)
    assert res.returncode == 1
    assert "permission denied on" in res.stderr and str(folder / "runs.ipynb") in res.stderr
    assert "write the notebook elsewhere with -o" in res.stderr
    assert_one_line(res.stderr)
    assert not (folder / "runs.ipynb").exists()
    check_kept(store, kept)


def test_export_hits_a_full_disk(store, kept, tmp_path, monkeypatch, capsys):
    import lab.export
    from lab.__main__ import main

    out = tmp_path / "runs.ipynb"

    def full(run_ids, output, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(output))

    monkeypatch.setattr(lab.export, "to_notebook", full)
    assert main(["export", kept[0], "-o", str(out), "--runs-dir", str(store.root)]) == 1
    err = capsys.readouterr().err
    assert f"no space left on the disk holding {out}" in err and "write the notebook elsewhere with -o" in err
    assert_one_line(err)
    check_kept(store, kept)


def test_export_to_a_non_notebook_name(hcli, store, kept, tmp_path):
    res = hcli("export", kept[0], "-o", tmp_path / "runs.txt", "--runs-dir", store.root)
    assert res.returncode == 2 and "-o must name a .ipynb file" in res.stderr
    assert not (tmp_path / "runs.txt").exists()


def test_export_of_an_unknown_run(hcli, store, kept, tmp_path):
    res = hcli("export", "no-such-run", "-o", tmp_path / "x.ipynb", "--runs-dir", store.root)
    assert res.returncode == 2 and "no run 'no-such-run'" in res.stderr and "runs list" in res.stderr
    assert not (tmp_path / "x.ipynb").exists()


# ---------------------------------------------------------------------------------- server

def _app_command() -> str:
    """The Makefile's `app` recipe, as make would run it with this interpreter's virtual environment."""
    lines = (REPO / "Makefile").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"app\s*:", line))
    recipe = [line[1:] for line in lines[start + 1:] if line.startswith("\t")][:1]
    assert recipe, "the Makefile's app target has a recipe"
    venv = Path(sys.executable).parent.parent
    return recipe[0].replace("$(VENV)", str(venv)).replace("$$", "$")


def test_makefile_app_binds_to_localhost():
    command = _app_command()
    assert "--address 127.0.0.1" in command and "0.0.0.0" not in command


def test_readme_serve_commands_bind_to_localhost():
    text = (REPO / "README.md").read_text()
    commands = re.findall(r"`([^`]*panel serve[^`]*)`", text)
    assert commands
    for command in commands:
        if "0.0.0.0" in command:
            continue                                     # the documented, deliberate exposure below
        assert "--address 127.0.0.1" in command, command
    exposed = [c for c in re.findall(r"`([^`]*)`", text) if "0.0.0.0" in c]
    assert all("--allow-websocket-origin" in c for c in exposed)
    assert "authenticating proxy" in text and "listens on 127.0.0.1 only" in text


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_served_app_listens_on_localhost_only(tmp_path):
    psutil = pytest.importorskip("psutil")
    panel = Path(sys.executable).parent / "panel"
    if not panel.exists():
        pytest.skip(f"no panel executable next to {sys.executable}")
    port = _free_port()
    env = {**os.environ, "PORT": str(port), "LAB_RUNS_DIR": str(tmp_path / "runs"),
           "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    log = open(tmp_path / "server.log", "w+")
    proc = subprocess.Popen(["bash", "-c", _app_command()], cwd=REPO, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        listening = []
        deadline = time.monotonic() + 240
        while not listening:
            if proc.poll() is not None:
                log.seek(0)
                pytest.fail(f"the app exited with {proc.returncode}:\n{log.read()[-3000:]}")
            if time.monotonic() > deadline:
                pytest.fail("the app did not listen within 240 s")
            tree = [psutil.Process(proc.pid)] + psutil.Process(proc.pid).children(recursive=True)
            for p in tree:
                try:
                    conns = p.net_connections(kind="inet")
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
                listening += [c for c in conns if c.status == psutil.CONN_LISTEN]
            time.sleep(0.5)
        addresses = {c.laddr.ip for c in listening}
        assert {c.laddr.port for c in listening} == {port}
        assert addresses == {"127.0.0.1"}, addresses                 # not 0.0.0.0 nor ::
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
