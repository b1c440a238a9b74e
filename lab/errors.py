"""Plain one-line messages for errors a user can meet, shared by the CLI, the app and the engine.

Operating-system errors (permissions, a full disk, a path whose parent is a file, a missing
file, a read-only file system) are the environment, not a bug: :func:`os_error_message`
names the path and the fix. :func:`user_message` is the one entry point: input errors keep
their own text, OS errors get the mapping, and anything else is a genuine bug, whose
traceback is written to a file (:func:`keep_traceback`) that the message names.

Example
-------
>>> import errno
>>> os_error_message(OSError(errno.ENOSPC, "No space left on device", "/data/runs/x"))  # doctest: +ELLIPSIS
'no space left on the disk holding /data/runs/x; free some space ...'
"""
from __future__ import annotations

import datetime as _dt
import errno
import os
import tempfile
import traceback as _traceback
from pathlib import Path

from lab.status import RunStatus

__all__ = ["os_error_message", "find_os_error", "user_message", "keep_traceback", "is_bug_message",
           "UnknownNameError", "CheckpointError", "CheckpointNotFoundError", "NoImageRecordError", "not_recorded",
           "not_evaluated"]

_BUG = "This looks like a bug in layerscope rather than a problem with the input"


class UnknownNameError(ValueError):
    """A backbone, dataset or checkpoint name that cannot be loaded here, found before anything is built.

    Parameters
    ----------
    kind : {"backbone", "dataset", "checkpoint"}
    value : the name as given
    suggestions : the closest valid names (possibly empty), best first
    fix : what to write instead
    reason : why the name cannot load, when it is not simply unknown (a missing folder, a hub id
        absent from the cache); it follows the name in the message

    ``str(exc)`` is one line: ``unknown backbone 'resnet1'; closest: 'resnet18', ...; use ...``.
    """

    def __init__(self, kind: str, value, suggestions=(), fix: str = "", reason: str | None = None):
        self.kind, self.value, self.fix, self.reason = kind, value, fix, reason
        self.suggestions = list(suggestions)
        super().__init__(self._message())

    def _message(self) -> str:
        head = (f"unknown {self.kind} {self.value!r}" if self.reason is None
                else f"{self.kind} {self.value!r}: {self.reason}")
        parts = [head.rstrip(" .;")]
        if self.suggestions:
            parts.append("closest: " + ", ".join(repr(s) for s in self.suggestions))
        if self.fix:
            parts.append(self.fix.rstrip(" ."))
        return _one_line("; ".join(parts))

    def __reduce__(self):   # Dask ships errors between processes: rebuild from the fields, not the text
        return type(self), (self.kind, self.value, self.suggestions, self.fix, self.reason)


class CheckpointError(UnknownNameError):
    """A checkpoint spec (a weights file, or ``run:ID[/SEED]``) that cannot be resolved, checked or read.

    The one error of :func:`lab.backbones.resolve_checkpoint`, :func:`lab.backbones.check_checkpoint` and
    :func:`lab.backbones.load`'s ``checkpoint=``: an :class:`UnknownNameError` with ``kind="checkpoint"``
    (so a ValueError), whose ``reason`` says what is wrong and ``fix`` what to give instead.

    ``str(exc)`` reads ``checkpoint 'w.pt': no such file (...); closest: ...; give ...``; a ``reason``
    that names the spec itself (``no run 'x' for checkpoint 'run:x' in the stores [...]``) stands first.
    """

    def __init__(self, value, reason: str | None = None, suggestions=(), fix: str = ""):
        super().__init__("checkpoint", value, suggestions, fix, reason)

    def _message(self) -> str:
        if self.reason is None or repr(self.value) not in self.reason:
            return super()._message()
        parts = [self.reason.rstrip(" .;")]
        if self.suggestions:
            parts.append("closest: " + ", ".join(repr(s) for s in self.suggestions))
        if self.fix:
            parts.append(self.fix.rstrip(" ."))
        return _one_line("; ".join(parts))

    def __reduce__(self):
        return type(self), (self.value, self.reason, self.suggestions, self.fix)


class CheckpointNotFoundError(CheckpointError, FileNotFoundError):
    """A :class:`CheckpointError` for weights that are not there (no such file, no weights for that seed);
    also a FileNotFoundError, so code that handles missing files handles it."""


def not_recorded(run_id: str | None, what: str, config_file: str | os.PathLike | None = None) -> str:
    """The one line for something a stored run does not hold because it was recorded without it (by a
    layerscope that did not store it yet, or with it turned off): names what is missing and how to get it.

    >>> not_recorded("r1", "class means")
    "run 'r1' has no class means: it was recorded without them; run it again to get them"
    """
    run = "this run" if run_id is None else f"run {run_id!r}"
    them = "them" if what.endswith("s") else "it"
    again = (f"run it again (`python -m lab run --config {config_file}`, or Run in the app)" if config_file
             else "run it again")
    return f"{run} has no {what}: it was recorded without {them}; {again} to get {them}"


def not_evaluated(run_id: str | None, what: str, status: str) -> str:
    """The one line for something a stored run does not hold because it ended (``status``) before its first
    evaluation: nothing was measured, so there is nothing to hold (unlike :func:`not_recorded`, the version
    and settings that wrote it are not to blame).

    >>> not_evaluated("r1", "per-image record", "cancelled")
    "run 'r1' was cancelled before its first evaluation: it measured nothing, so it has no per-image record"
    """
    run = "this run" if run_id is None else f"run {run_id!r}"
    ended = RunStatus.phrase_of(status)
    return f"{run} {ended} before its first evaluation: it measured nothing, so it has no {what}"


class NoImageRecordError(KeyError):
    """A run (or one of its evaluations) without the per-image record that :func:`lab.analysis.image_table`
    and :func:`lab.analysis.selection_report` read: recorded without it (:func:`not_recorded`), without kNN
    accuracy among its metrics, not evaluated yet, or its record file is damaged. ``str(exc)`` is one line that says
    which, and how to get one (usually: run it again); ``reason`` is that line. A KeyError, as the store's
    other "not stored" errors, so :func:`user_message` keeps its text."""

    def __init__(self, reason: str):
        self.reason = _one_line(reason)
        super().__init__(self.reason)

    def __str__(self) -> str:
        return self.reason


def _first_file_in(path: Path) -> Path | None:
    """The first component of ``path`` (from the root down) that exists and is not a folder."""
    parts = path.absolute().parts
    for i in range(1, len(parts) + 1):
        head = Path(*parts[:i])
        if head.exists() and not head.is_dir():
            return head
    return None


def os_error_message(exc: OSError, fix: str | None = None) -> str | None:
    """One line naming the path, the problem and the fix of an operating-system error.

    Parameters
    ----------
    exc : OSError with ``errno`` set (None is returned for OSErrors raised with a message only)
    fix : what the user can do instead, in this context (e.g. "choose another store with
        --runs-dir or $LAB_RUNS_DIR"); replaces the generic advice

    Returns
    -------
    str or None
    """
    code = getattr(exc, "errno", None)
    if not isinstance(exc, OSError) or code is None:
        return None
    path = exc.filename if isinstance(exc.filename, (str, os.PathLike)) else None
    where = str(path) if path is not None else "a file"
    other = f" (and {exc.filename2})" if getattr(exc, "filename2", None) else ""

    def advice(problem: str, default: str) -> str:
        return problem + (fix or default)

    if code in (errno.EACCES, errno.EPERM):
        return advice(f"permission denied on {where}{other}; make it writable/readable for this user "
                      "(chmod/chown) or ", "choose another location")
    if code in (errno.ENOSPC, getattr(errno, "EDQUOT", -1)):
        what = "no space left" if code == errno.ENOSPC else "disk quota exceeded"
        return advice(f"{what} on the disk holding {where}; free some space or ",
                      "choose a location on another disk")
    if code == errno.EROFS:
        return advice(f"{where} is on a read-only file system; ", "choose a writable location")
    if code == errno.ENOTDIR:
        blocker = _first_file_in(Path(path)) if path is not None else None
        if blocker is not None:
            so = "" if blocker == Path(path).absolute() else f", so {where} cannot be used"
            return advice(f"{blocker} is a file, not a folder{so}; move that file away or ",
                          "choose another path")
        return advice(f"{where} is not a folder; ", "give the path of a folder")
    if code == errno.EEXIST and path is not None and Path(path).exists() and not Path(path).is_dir():
        return advice(f"{where} is a file, not a folder; move that file away or ", "choose another path")
    if code == errno.EISDIR:
        return advice(f"{where} is a folder where a file is expected; ", "give the path of a file")
    if code == errno.ENOENT:
        return advice(f"{where} does not exist; check the path or ", "create it first")
    if code == errno.ENAMETOOLONG:
        return f"the path {where} is too long for the file system; choose a shorter one"
    if code in (errno.EMFILE, errno.ENFILE):
        return "too many open files; raise the limit (ulimit -n) or close other programs, then retry"
    if code == errno.EIO:
        return f"input/output error on {where}: the disk may be failing; copy the data elsewhere and retry"
    text = exc.strerror or str(exc)
    return f"{text} ({where}); check the path and its permissions"


def find_os_error(exc: BaseException | None) -> OSError | None:
    """``exc`` or the first error of its cause/context chain that is an OSError with an errno."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and getattr(exc, "errno", None) is not None:
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def is_bug_message(text: str | None) -> bool:
    """Whether a message from :func:`user_message` reports a genuine bug (its run folder holds the traceback)."""
    return bool(text) and _BUG in text


def keep_traceback(exc: BaseException, folder: str | os.PathLike | None = None,
                   name: str = "traceback.txt") -> Path | None:
    """Write ``exc``'s traceback to ``folder/name`` when that works, else to a file under the user's
    cache folder (``$XDG_CACHE_HOME/layerscope`` or ``~/.cache/layerscope``), else the temp folder.

    Returns
    -------
    Path of the file written, or None when nothing could be written anywhere.
    """
    text = "".join(_traceback.format_exception(type(exc), exc, exc.__traceback__))
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "layerscope"
    candidates = [Path(folder) / name] if folder is not None else []
    candidates += [cache / f"traceback-{stamp}-{os.getpid()}.txt",
                   Path(tempfile.gettempdir()) / "layerscope" / f"traceback-{stamp}-{os.getpid()}.txt"]
    for path in candidates:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            return path
        except OSError:
            continue
    return None


def user_message(exc: BaseException, *, fix: str | None = None, folder: str | os.PathLike | None = None) -> str:
    """The one line a user sees for ``exc``.

    Input errors (ValueError, KeyError, FileNotFoundError raised with a message) keep their
    text; operating-system errors get :func:`os_error_message` (with ``fix`` as the advice);
    running out of memory says what to lower; anything else is a bug: its traceback is kept
    (:func:`keep_traceback` into ``folder`` or the user's cache) and the message names the file.
    """
    if isinstance(exc, OSError) and getattr(exc, "errno", None) is not None:
        return os_error_message(exc, fix=fix)
    text = _one_line(exc.args[0] if isinstance(exc, KeyError) and exc.args else exc) or type(exc).__name__
    if isinstance(exc, (ValueError, KeyError, FileNotFoundError)):
        return text                       # input errors say what to change (even when caused by an OSError)
    os_error = find_os_error(exc)
    if os_error is not None:
        return os_error_message(os_error, fix=fix)
    if isinstance(exc, MemoryError) or "out of memory" in text.lower():
        return (f"ran out of memory ({type(exc).__name__}: {text}). Lower batch_size or eval_batch_size, "
                f"cap unseen_per_class / seen_per_class, measure fewer layers, or use a smaller img_size.")
    if type(exc).__name__ == "DecompressionBombError":
        return (f"an image is too large to open safely ({text}); remove or shrink that image in the "
                f"dataset folder")
    if isinstance(exc, OSError):
        return f"{type(exc).__name__}: {text}; check the file named and its permissions"
    kept = keep_traceback(exc, folder)
    where = f"the traceback is kept in {kept}" if kept else "the traceback could not be written anywhere"
    return f"{type(exc).__name__}: {text}. {_BUG}; {where}. Please report it with that file."
