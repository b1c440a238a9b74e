"""``--save`` for every benchmark: its printed output, with how it was produced, in ``benchmarks/results/NAME.txt``.

A saved file is a header, then what the script printed on stdout, then (if anything) what it
printed on stderr (progress, warnings). The header gives the exact command line, the date (UTC,
ISO 8601), the git commit (short hash, "+dirty" when the work tree differs from it; the results
folder itself does not count) and the machine: CPU cores available to the process, torch
threads, the device, the Python and torch versions. It also says whether the script finished:
the file is written when the script ends, normally or not (an exception, Ctrl-C, a non-zero
``sys.exit``), in one atomic rename, and after a failure it ends with the traceback.

NAME is the script's name plus every option that differs from its default (``paper_claims_fast``,
``run_quick``, ``seen_accuracy_epochs-12``), so that a reduced run never overwrites a full one.

In a script::

    parser = argparse.ArgumentParser(...)
    ...
    add_save_option(parser)
    args = parser.parse_args(argv)
    with recording(__file__, parser, args, argv=argv):
        ...                                   # everything the script prints
"""
from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import io
import os
import platform
import re
import shlex
import subprocess
import sys
import time
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path

__all__ = ["RESULTS_DIR", "add_save_option", "result_name", "recording", "git_commit", "machine", "header"]

REPO = Path(__file__).resolve().parents[1]
RESULTS_DIR = REPO / "benchmarks" / "results"
"""Where ``--save`` writes (``benchmarks/results/``)."""

_RULE = "=" * 100


def add_save_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--save`` to a benchmark's parser."""
    parser.add_argument(
        "--save", action="store_true",
        help="also write the printed output, with a header (command line, date, git commit, machine), to "
             "benchmarks/results/NAME.txt, NAME being the script's name plus the options that differ from their "
             "defaults (e.g. paper_claims_fast.txt)")


def result_name(script: str, parser: argparse.ArgumentParser, args: argparse.Namespace, *,
                ignore: Sequence[str] = ()) -> str:
    """The saved file's name without ``.txt``: the script's stem, then ``_OPTION[-VALUE]`` for each option of
    ``args`` that differs from its default, in the parser's order.

    ``ignore`` names the destinations that do not change what is measured (output paths, say);
    ``--save`` itself never counts. Values that are paths contribute their last part.
    """
    parts = [Path(script).stem]
    skip = {"help", "save", *ignore}
    for action in parser._actions:     # argparse lists its options only here
        if not action.option_strings or action.dest in skip:
            continue
        value = getattr(args, action.dest, action.default)
        if value == action.default:
            continue
        flag = max(action.option_strings, key=len).lstrip("-")
        values = [] if action.nargs == 0 else value if isinstance(value, (list, tuple)) else [value]
        parts.append("-".join([flag, *map(_short, values)]))
    return "_".join(re.sub(r"[^A-Za-z0-9_.=-]+", "-", part).strip("-") for part in parts)


def _short(value) -> str:
    text = f"{value:g}" if isinstance(value, float) else str(value)
    return Path(text).name if os.sep in text else text


def git_commit(root: Path = REPO) -> str:
    """Short hash of ``root``'s HEAD, plus "+dirty" when a file outside ``benchmarks/results/`` differs from it
    (modified, staged, deleted or untracked); "unknown" outside a git checkout."""
    try:
        head = _git(root, "rev-parse", "--short", "HEAD").strip()
        changes = _git(root, "status", "--porcelain", "--", ".", ":(exclude)benchmarks/results")
    except (OSError, subprocess.SubprocessError):
        return "unknown (not a git checkout, or git is missing)"
    return head + ("+dirty" if changes.strip() else "")


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True, timeout=60).stdout


def machine(device: str = "auto") -> dict[str, str]:
    """The machine as the header reports it: CPU cores available to this process, torch threads, the device
    (``device`` resolved by ``lab.device``: "cpu", or the CUDA device's name), Python and torch versions."""
    import torch

    from lab.device import resolve_device

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    try:
        resolved = resolve_device(device)
    except ValueError:                 # not available here: the script has failed on it already
        name = f"{device} (not available)"
    else:
        name = (f"{torch.cuda.get_device_name(resolved)} ({resolved})" if resolved.type == "cuda"
                else resolved.type)
    return {"cpu cores": f"{cores} available to the process (of {os.cpu_count()})",
            "torch threads": str(torch.get_num_threads()), "device": name,
            "python": platform.python_version(), "torch": torch.__version__}


def header(*, command: str, started: _dt.datetime, seconds: float, failure: BaseException | None,
           commit: str, host: dict[str, str]) -> str:
    """The lines above the saved output: ``field: value``, then a rule."""
    if failure is None:
        status = f"finished in {seconds:.0f} s"
    else:
        status = (f"DID NOT FINISH: stopped after {seconds:.0f} s by {_describe(failure)} "
                  "(the output below is what was printed until then; the traceback is at the end)")
    fields = {"command": command, "date": started.strftime("%Y-%m-%dT%H:%M:%SZ") + " (UTC, start)",
              "status": status, "commit": commit, **host}
    return "\n".join(f"{key + ':':<15}{value}" for key, value in fields.items()) + "\n" + _RULE + "\n"


def _describe(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"sys.exit({exc.code!r})"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _command(script: str, argv: Sequence[str] | None) -> str:
    if argv is None:                   # the script parsed this process's own command line
        return shlex.join(getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv])
    path = Path(script).resolve()
    shown = path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path
    return shlex.join([sys.executable, str(shown), *argv])


class _Tee:
    """A text stream that writes to ``stream`` and keeps a copy; anything else is ``stream``'s."""

    def __init__(self, stream, copy: io.StringIO):
        self._stream, self._copy = stream, copy

    def write(self, text: str) -> int:
        self._copy.write(text)
        return self._stream.write(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _write(path: Path, text: str) -> None:
    from lab.store._files import _atomic_file      # the store's temp file + fsync + os.replace

    with _atomic_file(path) as f:
        f.write(text.encode("utf-8"))


@contextlib.contextmanager
def recording(script: str, parser: argparse.ArgumentParser, args: argparse.Namespace, *,
              argv: Sequence[str] | None = None, ignore: Sequence[str] = (), device: str = "auto",
              results_dir: str | os.PathLike | None = None) -> Iterator[Path | None]:
    """With ``args.save``, copy what the block prints and write it with its header to
    ``results_dir/NAME.txt`` (default :data:`RESULTS_DIR`) when the block ends, however it ends; the
    exception, if any, goes on. Yields that path, or None without ``--save`` (then nothing changes).

    ``script`` is the benchmark's ``__file__``; ``argv`` what its ``main`` parsed (None: this process's
    command line); ``ignore`` as for :func:`result_name`; ``device`` the device the benchmark ran on.
    """
    if not getattr(args, "save", False):
        yield None
        return
    path = Path(results_dir or RESULTS_DIR) / f"{result_name(script, parser, args, ignore=ignore)}.txt"
    command = _command(script, argv)
    started, t0 = _dt.datetime.now(_dt.timezone.utc), time.perf_counter()
    out, err = io.StringIO(), io.StringIO()
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Tee(stdout, out), _Tee(stderr, err)
    failure: BaseException | None = None
    try:
        yield path
    except SystemExit as exc:
        failure = exc if exc.code not in (None, 0) else None
        raise
    except BaseException as exc:
        failure = exc
        raise
    finally:
        sys.stdout, sys.stderr = stdout, stderr
        text = header(command=command, started=started, seconds=time.perf_counter() - t0, failure=failure,
                      commit=git_commit(), host=machine(device)) + out.getvalue()
        if err.getvalue():
            text += f"\n{'-' * 40} stderr {'-' * 40}\n" + err.getvalue()
        if failure is not None and not isinstance(failure, SystemExit):
            text += f"\n{'-' * 40} traceback {'-' * 40}\n" + "".join(traceback.format_exception(failure))
        _write(path, text)
        shown = path.relative_to(REPO) if path.is_relative_to(REPO) else path
        print(f"output saved to {shown}", file=sys.stderr, flush=True)
