"""``python -m lab export``: stored runs, or a study, as a Jupyter notebook; runs as one HTML file (``-o x.html``)."""
from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Any

from lab.cli._common import (
    EXIT_FAILED, EXIT_OK, UsageError, add_summary_option, check_notebook_path, check_writable, store_of,
)

__all__ = ["add_export_parser", "export_study"]


def add_export_parser(sub, common) -> None:
    exp = sub.add_parser("export", parents=[common],
                         help="write stored runs or a study into a Jupyter notebook, or into one HTML file",
                         description="Write a notebook that reloads and re-plots the given runs, or (--study) "
                                     "a study's figures and tables. With -o FILE.html, write them into one "
                                     "self-contained page that opens offline, its players working, with no server "
                                     "(a study's: its figures, seeds as replicates).")
    exp.add_argument("run_ids", nargs="*", metavar="RUN_ID")
    exp.add_argument("--study", metavar="NAME_OR_SPEC", default=None,
                     help="export a study instead: a study name run into this store, or its spec file")
    exp.add_argument("-o", "--output", required=True, metavar="FILE",
                     help="the file to write, chosen by its suffix: .ipynb (a notebook) or .html (one page)")
    exp.add_argument("--execute", action="store_true", help="also execute the notebook (nbclient)")
    exp.add_argument("--no-thumbnails", dest="thumbnails", action="store_false",
                     help="an .html file without the pictures its layouts show on hover (a smaller file)")
    add_summary_option(exp, default=None, what="with --study: ")
    exp.set_defaults(func=_cmd_export)


def _cmd_export(args) -> int:
    store = store_of(args)
    if args.study is not None and args.run_ids:
        raise UsageError("give run ids or --study, not both")
    if args.study is None and not args.run_ids:
        raise UsageError("give the RUN_IDs to export, or --study NAME_OR_SPEC")
    html = _is_html(args.output)
    if args.study is not None:
        return export_study(args.study, args.output, store, execute=args.execute, summary=args.summary or "last")
    if args.summary is not None:
        raise UsageError("--summary chooses the epoch a study's runs are read at: give --study NAME_OR_SPEC too, "
                         "or leave --summary out")
    if html and args.execute:
        raise UsageError("--execute runs a notebook; an .html file has nothing to execute: leave --execute out")
    if not html and Path(args.output).suffix != ".ipynb":
        raise UsageError(f"-o must name a .ipynb file (a notebook) or a .html file (one page that opens offline); "
                         f"got {str(args.output)!r}")
    for run_id in args.run_ids:
        store.load(run_id)                # unknown or invalid ids: exit 2 before any work
    if html:
        return _export_html(args, store)
    output = check_notebook_path(args.output)   # before any work: nothing is computed for nothing
    try:
        from lab.export import to_notebook
    except ImportError as exc:
        print(f"error: notebook export is not available ({exc})", file=sys.stderr)
        return EXIT_FAILED
    kwargs: dict[str, Any] = {"store": store}
    params = inspect.signature(to_notebook).parameters
    if args.execute:
        if "execute" not in params:
            print("error: this version of lab.export cannot execute notebooks; run without --execute",
                  file=sys.stderr)
            return EXIT_FAILED
        kwargs["execute"] = True
    result = to_notebook(list(args.run_ids), output, **kwargs)
    print(f"wrote {result if isinstance(result, (str, Path)) else output}")
    return EXIT_OK


def _is_html(output: str) -> bool:
    return Path(output).suffix.lower() in (".html", ".htm")


def _export_html(args, store) -> int:
    from lab.export import to_html

    output = Path(args.output)
    check_writable(output)
    result = to_html(list(args.run_ids), output, store=store, thumbnails=args.thumbnails)
    print(f"wrote {result} ({result.stat().st_size / 1e6:.2f} MB; opens offline in any browser)")
    return EXIT_OK


def export_study(name: str, output: str, store, *, execute: bool = False, summary="last") -> int:
    """A study's figures into ``output``: one HTML page (``.html``) or a notebook (``.ipynb``); also
    ``python -m lab study export``."""
    from lab.export import study_to_html, study_to_notebook
    from lab.study import find_study

    html = _is_html(output)
    if html and execute:
        raise UsageError("--execute runs a notebook; an .html file has nothing to execute: leave --execute out")
    study = find_study(name, store=store)   # unknown name or bad spec: exit 2 before any work
    if html:
        target = Path(output)
        check_writable(target)
        result = study_to_html(study, target, store=store, summary=summary)
        print(f"wrote {result} ({result.stat().st_size / 1e6:.2f} MB; opens offline in any browser)")
        return EXIT_OK
    target = check_notebook_path(output)
    result = study_to_notebook(study, target, store=store, execute=execute, summary=summary)
    print(f"wrote {result}")
    return EXIT_OK
