"""What every command of ``python -m lab`` shares: exit statuses, the one-line usage error, the
parser that reports it, commands with actions, the run store the flags name, and small formatting helpers."""
from __future__ import annotations

import argparse
import math
import sys
import typing
from pathlib import Path
from typing import Any, Callable

from lab import catalogue
from lab.errors import os_error_message
from lab.store import RunStore
from lab.store.lookup import open_store
from lab.text import join_words

__all__ = ["EXIT_OK", "EXIT_FAILED", "EXIT_USAGE", "EXIT_CANCELLED", "UsageError", "Parser", "one_line",
           "message_of", "missing", "command_with_actions", "store_of", "fmt", "check_writable",
           "check_notebook_path", "law_lines", "add_summary_option"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_CANCELLED = 0, 1, 2, 130


class UsageError(Exception):
    """Bad input from the user: reported in one line, exit status 2."""


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (no usage dump), exit status 2."""

    def error(self, message: str) -> typing.NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {one_line(message)} (see --help)\n")


def message_of(exc: BaseException) -> str:
    """One line for an error: an OS error with its path and fix, else the exception's text."""
    if isinstance(exc, OSError) and getattr(exc, "errno", None) is not None:
        return os_error_message(exc)
    return one_line(exc.args[0] if isinstance(exc, KeyError) and exc.args else exc)


def one_line(text: Any) -> str:
    return " ".join(str(text).split())


def missing(parser: argparse.ArgumentParser, what: str) -> int:
    print(f"{parser.prog}: error: give {what} (see --help)", file=sys.stderr)
    return EXIT_USAGE


def command_with_actions(sub, name: str, common, parser_class, *, help: str,
                         description: str) -> Callable[..., argparse.ArgumentParser]:
    """Add command ``name`` whose first argument is an action (``python -m lab runs list``).

    Returns ``add(action, func, **parser_options)``, which adds one action with the common flags and
    ``func`` as its handler, and returns its parser for the action's own arguments. The command given
    without an action says so and lists the actions added, in their order (e.g. "run or show").
    """
    command = sub.add_parser(name, parents=[common], help=help, description=description)
    command.set_defaults(func=lambda args: missing(command, f"an action: {join_words(choices.choices, 'or')}"))
    choices = command.add_subparsers(dest=f"{name}_command", metavar="ACTION", parser_class=parser_class)

    def add(action: str, func: Callable, **options: Any) -> argparse.ArgumentParser:
        parser = choices.add_parser(action, parents=[common], **options)
        parser.set_defaults(func=func)
        return parser

    return add


def store_of(args) -> RunStore:
    """The run store that ``--runs-dir`` names (default: ``$LAB_RUNS_DIR`` or ``./runs``)."""
    return open_store(getattr(args, "runs_dir", None))


def fmt(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def check_writable(output: Path) -> None:
    """Raise the OSError that writing ``output`` would meet (missing folder, a file in the way, a
    folder at its name, no permission), so that it is reported before any work."""
    import errno
    import os

    parent = output.parent
    if output.is_dir():
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(output))
    if not parent.is_dir():
        if parent.exists() or any(p.exists() and not p.is_dir() for p in parent.absolute().parents):
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(output))
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(parent))
    if not os.access(parent, os.W_OK) or (output.exists() and not os.access(output, os.W_OK)):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(output))


def check_notebook_path(output: str | Path) -> Path:
    """The notebook ``-o`` names, checked before any work: a ``.ipynb`` file that can be written."""
    output = Path(output)
    if output.suffix != ".ipynb":
        raise UsageError(f"-o must name a .ipynb file; got {str(output)!r}")
    check_writable(output)
    return output


def law_lines(law: dict | None) -> list[str]:
    """The run summary's ``separation_law`` (:func:`lab.analysis.latest_separation_law`) as lines to print: per
    split its ratio per layer and r at its last evaluation, with the seeds' spread, or why the law is absent."""
    if law is None:
        return ["law of equi-separation: not measured (nc1 is not among the run's metrics)"]
    lines = ["law of equi-separation (log10 NC1 against depth, He & Su 2023; a ratio below 1: each deeper layer "
             "separates better):"]
    for split, e in law.items():
        where = f"{catalogue.split_label(split)} at epoch {e['epoch']}"
        if e["ratio"] is None:
            lines.append(f"  {where}: {e['reason'] or 'no law'}")
            continue
        ratio = f"×{e['ratio']:.3f}" + (f" ± {e['ratio_std']:.3f}" if e["ratio_std"] is not None else "")
        r = "r undefined" if e["r"] is None else (
            f"r {e['r']:+.3f}" + (f" ± {e['r_std']:.3f}" if e["r_std"] is not None else ""))
        seeds = f"{e['n_seeds']} seed{'s' if e['n_seeds'] != 1 else ''}"
        note = f"; {e['reason']}" if e["reason"] else ""
        lines.append(f"  {where}: {ratio} per layer, {r} ({e['n_layers']} layers, {seeds}{note})")
    return lines


def _summary(text: str):
    """--summary's value: "last", "best" or an epoch, checked by :func:`lab.analysis.check_summary`."""
    from lab.analysis import check_summary

    try:
        return check_summary(int(text) if text.strip().isdigit() else text.strip())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_summary_option(parser, default="last", what: str = "") -> None:
    """``--summary last|best|EPOCH``: the epoch each run of a study is read at (:func:`lab.study.figures`)."""
    parser.add_argument("--summary", type=_summary, default=default, metavar="last|best|EPOCH",
                        help=f"{what}the epoch each run is read at: its last complete evaluation (default), its "
                             f"best by unseen g, or a given epoch (a run without it is left out, and named)")
