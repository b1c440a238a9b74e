"""The entry point of ``python -m lab``: the parser of every command group, and :func:`main`, which
turns every error into one line and an exit status."""
from __future__ import annotations

import argparse
import sys
import warnings
from typing import Sequence

from lab.cli._common import (EXIT_CANCELLED, EXIT_FAILED, EXIT_OK, EXIT_USAGE, Parser, UsageError, message_of,
                             missing, one_line, store_of)
from lab.cli.export import add_export_parser
from lab.cli.models import add_models_parser
from lab.cli.pretrain import add_pretrain_parser
from lab.cli.run import add_run_parser
from lab.cli.runs import add_runs_parser
from lab.cli.study import add_study_parser
from lab.errors import find_os_error, os_error_message, user_message
from lab.store import RunNotFoundError

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``python -m lab``."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--runs-dir", metavar="DIR", default=argparse.SUPPRESS,
                        help="run store folder (default: $LAB_RUNS_DIR or ./runs)")
    common.add_argument("--traceback", action="store_true", default=argparse.SUPPRESS,
                        help="show the full traceback of an error (for debugging)")

    parser = Parser(prog="python -m lab", parents=[common],
                    description="layerscope: which layer of a vision backbone generalizes to unseen "
                                "classes, and how its features collapse.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    add_run_parser(sub, common)
    add_runs_parser(sub, common, Parser)
    add_export_parser(sub, common)
    add_pretrain_parser(sub, common)
    add_study_parser(sub, common, Parser)
    add_models_parser(sub, common)
    parser.set_defaults(func=lambda args: missing(parser, "a command: run, runs, export, study, pretrain or models"))
    return parser


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings as one clean line (no source file, line or code)."""
    print(f"warning: {one_line(message)}", file=sys.stderr if file is None else file)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 failed run or operating-system error,
    2 bad input, 130 cancelled)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    debug = getattr(args, "traceback", False)
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        try:
            return int(args.func(args) or EXIT_OK)
        except (UsageError, RunNotFoundError, ValueError) as exc:
            if debug:
                raise
            print(f"{parser.prog}: error: {message_of(exc)}", file=sys.stderr)
            return EXIT_USAGE
        except KeyboardInterrupt:
            print("cancelled", file=sys.stderr)
            return EXIT_CANCELLED
        except BrokenPipeError:           # `python -m lab runs list | head`
            return EXIT_OK
        except Exception as exc:          # noqa: BLE001 - OS errors and bugs: one line, never a traceback
            if debug:
                raise
            os_error = find_os_error(exc)
            if os_error is not None:
                text = os_error_message(os_error, fix=_fix_for(args, os_error))
            else:
                text = user_message(exc)  # a bug: its traceback is kept in a file the message names
            print(f"{parser.prog}: error: {text}", file=sys.stderr)
            return EXIT_FAILED


def _fix_for(args, exc: OSError) -> str | None:
    """The advice for an OS error on a path the user chose: the store or the notebook."""
    import os

    filename = os.path.abspath(str(exc.filename)) if exc.filename is not None else None
    output = getattr(args, "output", None)
    if output is not None and filename == os.path.abspath(output):
        return "write the notebook elsewhere with -o"
    root = os.path.abspath(str(store_of(args).root))
    if filename is not None and (filename == root or filename.startswith(root + os.sep)
                                 or root.startswith(filename + os.sep)):
        return "choose another run store with --runs-dir or $LAB_RUNS_DIR"
    return None
