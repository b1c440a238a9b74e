"""benchmarks/_results.py: ``--save`` writes the printed output under a header that says how it was produced.

A tiny fake benchmark goes through the same ``add_save_option`` + ``recording`` as the real
scripts: the header's fields are checked against independent sources (git, os, torch), the body
against what the benchmark printed, and a run that fails half-way must still leave its file.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def results(repo_root):
    """The module under test, imported as the scripts import it (repository root on sys.path)."""
    if str(repo_root) not in sys.path:
        sys.path.insert(0, str(repo_root))
    from benchmarks import _results

    return _results


def fake_benchmark(results, script: Path, argv: list[str], out_dir: Path) -> int:
    """A benchmark in miniature: two lines on stdout, one on stderr, optionally a failure between them."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--fast", action="store_true")
    parser.add_argument("--fail", choices=("error", "interrupt", "exit0", "exit3"), default=None)
    parser.add_argument("--out-dir", default=None)
    results.add_save_option(parser)
    args = parser.parse_args(argv)
    with results.recording(str(script), parser, args, argv=argv, ignore=("out_dir",), device="cpu",
                           results_dir=out_dir):
        print("measured 1.25 s")
        print("progress: halfway", file=sys.stderr)
        if args.fail == "error":
            raise RuntimeError("boom half-way")
        if args.fail == "interrupt":
            raise KeyboardInterrupt
        if args.fail in ("exit0", "exit3"):
            sys.exit(int(args.fail[-1]))
        print("goal met")
    return 0


def _header_and_body(text: str) -> tuple[dict[str, str], str]:
    head, rule, body = text.partition("=" * 100 + "\n")
    assert rule, text
    fields = {}
    for line in head.splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return fields, body


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()


def test_saved_file_has_the_header_fields_and_the_printed_output(results, tmp_path, repo_root, capsys):
    import torch

    script, out = tmp_path / "bench_fake.py", tmp_path / "results"
    before = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    assert fake_benchmark(results, script, ["--save"], out) == 0
    after = dt.datetime.now(dt.timezone.utc)
    printed = capsys.readouterr()
    assert printed.out == "measured 1.25 s\ngoal met\n"               # still printed as usual
    assert "progress: halfway" in printed.err and "output saved to" in printed.err

    assert sorted(p.name for p in out.iterdir()) == ["bench_fake.txt"]   # no temporary file left
    fields, body = _header_and_body((out / "bench_fake.txt").read_text())
    assert fields["command"] == shlex.join([sys.executable, str(script), "--save"])
    started = dt.datetime.strptime(fields["date"].split()[0], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)
    assert before <= started <= after and "UTC" in fields["date"]
    assert fields["status"].startswith("finished")
    head = _git(repo_root, "rev-parse", "--short", "HEAD")
    assert fields["commit"] in (head, head + "+dirty")
    assert fields["cpu cores"].startswith(f"{len(os.sched_getaffinity(0))} available")
    assert fields["torch threads"] == str(torch.get_num_threads())
    assert fields["device"] == "cpu"
    assert fields["python"] == platform.python_version()
    assert fields["torch"] == torch.__version__
    stdout_part, _, stderr_part = body.partition(" stderr ")
    assert stdout_part.strip("\n-") == "measured 1.25 s\ngoal met"
    assert stderr_part.strip("\n-") == "progress: halfway"


def test_fast_mode_writes_its_own_file_and_leaves_the_full_one(results, tmp_path, capsys):
    script, out = tmp_path / "bench_fake.py", tmp_path / "results"
    fake_benchmark(results, script, ["--save"], out)
    full = (out / "bench_fake.txt").read_text()
    fake_benchmark(results, script, ["--fast", "--save", "--out-dir", "x"], out)   # --out-dir is ignored
    assert sorted(p.name for p in out.iterdir()) == ["bench_fake.txt", "bench_fake_fast.txt"]
    assert (out / "bench_fake.txt").read_text() == full
    fields, _ = _header_and_body((out / "bench_fake_fast.txt").read_text())
    assert "--fast" in fields["command"].split()


@pytest.mark.parametrize("how, said", [("error", "RuntimeError: boom half-way"), ("interrupt", "KeyboardInterrupt"),
                                       ("exit3", "sys.exit(3)")])
def test_a_run_that_fails_half_way_leaves_a_file_that_says_so(results, tmp_path, capsys, how, said):
    script, out, stdout = tmp_path / "bench_fake.py", tmp_path / "results", sys.stdout
    with pytest.raises((RuntimeError, KeyboardInterrupt, SystemExit)):
        fake_benchmark(results, script, ["--save", "--fail", how], out)
    assert sys.stdout is stdout                                      # the streams are restored
    saved = out / f"bench_fake_fail-{how}.txt"
    assert sorted(p.name for p in out.iterdir()) == [saved.name]
    fields, body = _header_and_body(saved.read_text())
    assert fields["status"].startswith("DID NOT FINISH") and said in fields["status"]
    assert "measured 1.25 s" in body and "goal met" not in body     # what was printed until the failure
    if how == "error":
        assert "traceback" in body and 'raise RuntimeError("boom half-way")' in body


def test_sys_exit_0_counts_as_finished(results, tmp_path, capsys):
    out = tmp_path / "results"
    with pytest.raises(SystemExit):
        fake_benchmark(results, tmp_path / "bench_fake.py", ["--save", "--fail", "exit0"], out)
    fields, _ = _header_and_body((out / "bench_fake_fail-exit0.txt").read_text())
    assert fields["status"].startswith("finished")


def test_without_save_nothing_is_written_and_output_is_untouched(results, tmp_path, capsys):
    stdout = sys.stdout
    fake_benchmark(results, tmp_path / "bench_fake.py", [], tmp_path / "results")
    assert sys.stdout is stdout
    assert not (tmp_path / "results").exists()
    assert capsys.readouterr().out == "measured 1.25 s\ngoal met\n"


def test_name_is_the_stem_plus_the_options_that_differ_from_their_defaults(results):
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-augment", dest="augment", action="store_false")
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--lr", type=float, default=None)
    parser.add_argument("--only", nargs="+", default=["a", "b"])
    parser.add_argument("--archive", default=None)
    parser.add_argument("--json", dest="json_out", default=None)
    results.add_save_option(parser)

    def name(*argv):
        return results.result_name("benchmarks/bench.py", parser, parser.parse_args(argv), ignore=("json_out",))

    assert name() == name("--save") == name("--epochs", "6", "--json", "out.json") == "bench"
    assert name("--quick") == "bench_quick"
    assert name("--no-augment", "--epochs", "12", "--lr", "0.0005") == "bench_no-augment_epochs-12_lr-0.0005"
    assert name("--only", "b") == "bench_only-b"
    assert name("--archive", "/tmp/glyphs plain.npz") == "bench_archive-glyphs-plain.npz"


def test_commit_is_the_short_head_plus_dirty_for_uncommitted_changes(results, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["-c", "user.name=t", "-c", "user.email=t@example.org", "-c", "commit.gpgsign=false"]
    _git(repo, "init", "-q")
    (repo / "a.py").write_text("x = 1\n")
    _git(repo, "add", "a.py")
    _git(repo, *git, "commit", "-q", "-m", "one")
    head = _git(repo, "rev-parse", "--short", "HEAD")
    assert results.git_commit(repo) == head
    (repo / "benchmarks" / "results").mkdir(parents=True)
    (repo / "benchmarks" / "results" / "x.txt").write_text("saved\n")     # results do not count
    assert results.git_commit(repo) == head
    (repo / "b.py").write_text("new\n")                                   # an untracked file does
    assert results.git_commit(repo) == head + "+dirty"
    (repo / "b.py").unlink()
    (repo / "a.py").write_text("x = 2\n")                                 # so does a modified one
    assert results.git_commit(repo) == head + "+dirty"
    assert results.git_commit(tmp_path / "elsewhere").startswith("unknown")


def test_the_command_line_is_the_processs_own(results, tmp_path, repo_root):
    """Run as a script, the header shows the command exactly as typed."""
    script = tmp_path / "bench_cli.py"
    script.write_text(
        "import argparse, sys\n"
        f"sys.path.insert(0, {str(repo_root)!r})\n"
        "from benchmarks._results import add_save_option, recording\n"
        "parser = argparse.ArgumentParser()\n"
        "add_save_option(parser)\n"
        "args = parser.parse_args()\n"
        f"with recording(__file__, parser, args, device='cpu', results_dir={str(tmp_path / 'out')!r}):\n"
        "    print('hello')\n")
    proc = subprocess.run([sys.executable, "bench_cli.py", "--save"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "hello\n"
    fields, body = _header_and_body((tmp_path / "out" / "bench_cli.txt").read_text())
    assert fields["command"] == shlex.join([sys.executable, "bench_cli.py", "--save"])
    assert body == "hello\n"


def test_every_benchmark_script_offers_save_through_the_shared_module(repo_root):
    scripts = [p for p in (repo_root / "benchmarks").glob("*.py") if not p.name.startswith("_")]
    assert {p.stem for p in scripts} >= {"app_timings", "data", "extraction", "metrics", "paper_claims", "run",
                                         "seen_accuracy", "study"}
    for path in scripts:
        text = path.read_text()
        assert "from benchmarks._results import add_save_option, recording" in text, path.name
        assert "add_save_option(" in text and "with recording(__file__," in text, path.name
