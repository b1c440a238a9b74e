"""``python -m lab run``: every RunConfig field is a flag; one run, streamed to the console and stored."""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import re
import sys
import types
import typing
from pathlib import Path
from typing import Any

from lab import catalogue
from lab.cli._common import (EXIT_CANCELLED, EXIT_FAILED, EXIT_OK, UsageError, law_lines, message_of, one_line,
                             store_of)
from lab.cli.console import RunConsole
from lab.config import RunConfig
from lab.errors import is_bug_message, os_error_message, user_message
from lab.events import TERMINAL_KINDS, RunCancelled, RunFinished

__all__ = ["add_run_parser"]


def _none_or(convert, name: str):
    def parse(text: str):
        return None if text.lower() in ("none", "null") else convert(text)

    parse.__name__ = name                 # argparse names the type in "invalid int value: 'x'"
    return parse


def _int_or_str(text: str):
    return int(text) if re.fullmatch(r"[+-]?\d+", text) else text


def _flag_spec(hint: Any) -> dict[str, Any]:
    """argparse keyword arguments for a field annotated ``hint``."""
    args = typing.get_args(hint)
    optional = type(None) in args
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        inner = [a for a in args if a is not type(None)]
    else:
        inner = [hint]
    if inner == [bool]:
        return {"action": argparse.BooleanOptionalAction}
    if len(inner) == 1 and typing.get_origin(inner[0]) in (tuple, list):
        elem = typing.get_args(inner[0])[0]
        spec = {"nargs": "+", "type": elem if elem in (int, float) else str, "metavar": elem.__name__.upper()}
        if optional:
            spec["type"] = _none_or(spec["type"], elem.__name__)
        return spec
    if set(inner) == {str, int}:
        return {"type": _none_or(_int_or_str, "value") if optional else _int_or_str, "metavar": "NAME|INDEX"}
    base = inner[0] if len(inner) == 1 and inner[0] in (int, float, str) else str
    return {"type": _none_or(base, base.__name__) if optional else base, "metavar": base.__name__.upper()}


def _config_flags() -> list[tuple[str, str, dict[str, Any]]]:
    """(field, flag, argparse kwargs) for every RunConfig field."""
    hints = typing.get_type_hints(RunConfig)
    docs = RunConfig.field_docs()
    defaults = RunConfig.defaults()      # asked as the parser is built: a metric registered later is a default
    out = []
    for f in dataclasses.fields(RunConfig):
        spec = _flag_spec(hints[f.name])
        default = defaults[f.name]
        if isinstance(default, tuple):
            default = " ".join(map(str, default))
        helptext = docs.get(f.name, "").replace("``", "")
        if f.name == "metrics":       # the catalogue's names, read as the parser is built (registered ones too)
            helptext += f" Choices: {', '.join(catalogue.METRICS)}."
        spec["help"] = f"{helptext} (default: {default})".strip().replace("%", "%%")
        out.append((f.name, "--" + f.name.replace("_", "-"), spec))
    return out


def add_run_parser(sub, common) -> None:
    run = sub.add_parser("run", parents=[common], help="run one experiment and store it",
                         description="Fine-tune on the seen classes and measure every layer, epoch by "
                                     "epoch. Flags override the values of --config.")
    run.add_argument("--config", metavar="FILE", help="a RunConfig JSON file (e.g. a stored config.json)")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    fields = run.add_argument_group("RunConfig fields")
    for name, flag, spec in _config_flags():
        fields.add_argument(flag, dest=name, default=argparse.SUPPRESS, **spec)
    run.set_defaults(func=_cmd_run)


def _build_config(args) -> RunConfig:
    data: dict[str, Any] = {}
    if args.config:
        path = Path(args.config)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise UsageError(f"cannot read --config {path}: {os_error_message(exc) or exc}") from exc
        except json.JSONDecodeError as exc:
            raise UsageError(f"--config {path} is not valid JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise UsageError(f"--config {path} must hold a JSON object of RunConfig fields; "
                              f"got {type(data).__name__}")
    names = {f.name for f in dataclasses.fields(RunConfig)}
    data.update({k: v for k, v in vars(args).items() if k in names})
    try:
        return RunConfig.from_dict(data)
    except (ValueError, TypeError) as exc:
        raise UsageError(str(exc)) from exc


def _cmd_run(args) -> int:
    config = _build_config(args)
    store = store_of(args)
    try:
        from lab.runs.names import check_names

        check_names(config, store=store)   # a typo in a name is reported before anything is built
        from lab.device import check_device

        check_device(config.device, config.precision)   # a GPU or precision this machine lacks, too
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    try:
        from lab.runs import run as run_engine
    except ImportError as exc:
        print(f"error: the run engine is not available ({exc})", file=sys.stderr)
        return EXIT_FAILED
    console = RunConsole(progress=not args.no_progress)
    outcome = None
    events = run_engine(config, store=store)
    try:
        # iterate to the end even after the terminal event, so the engine closes the run itself
        for ev in events:
            console.handle(ev)
            if ev.kind in TERMINAL_KINDS:
                outcome = ev
    except KeyboardInterrupt:
        events.close()                    # cooperative cancel: the engine marks the run cancelled
        console.close()
        where = f" (partial results in {store.root / console.run_id})" if console.run_id else ""
        print(f"cancelled{where}", file=sys.stderr)
        return EXIT_CANCELLED
    except Exception as exc:              # noqa: BLE001 - reported in one line, like RunFailed
        console.close()
        if not console.started and isinstance(exc, (ValueError, KeyError, FileNotFoundError)):
            raise UsageError(message_of(exc)) from exc       # the config could not be resolved
        if getattr(args, "traceback", False):
            raise
        where = f" (partial results in {store.root / console.run_id})" if console.run_id else ""
        folder = store.root / console.run_id if console.run_id else None
        print(f"error: the run failed: {user_message(exc, folder=folder)}{where}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        console.close()
    if outcome is None:
        print("error: the run ended without a final event", file=sys.stderr)
        return EXIT_FAILED
    where = store.root / outcome.run_id
    if outcome.kind == RunFinished.kind:
        if "separation_law" in (outcome.summary or {}):      # the run summary's law (lab.analysis)
            for line in law_lines(outcome.summary["separation_law"]):
                print(line)
        print(f"finished in {outcome.seconds:.1f} s: run {outcome.run_id} stored in {where}")
        return EXIT_OK
    if outcome.kind == RunCancelled.kind:
        print(f"cancelled: run {outcome.run_id} (partial results in {where})", file=sys.stderr)
        return EXIT_CANCELLED
    if not console.started and not is_bug_message(outcome.message):
        # failed while resolving dataset/backbone/split: bad input, nothing was measured, so keep no
        # record of it (a bug's run folder is kept: it holds the traceback the message names)
        with contextlib.suppress(Exception):
            store.delete(outcome.run_id)
        raise UsageError(outcome.message)
    print(f"error: run {outcome.run_id} failed: {one_line(outcome.message)} (partial results in {where})",
          file=sys.stderr)
    return EXIT_FAILED
