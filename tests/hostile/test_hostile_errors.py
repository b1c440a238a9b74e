"""The one mapping from operating-system errors to messages (lab.errors): each names the path, the
problem and a fix; input errors keep their text; only genuine bugs say "bug"."""
from __future__ import annotations

import errno
import os

import pytest

from lab.errors import find_os_error, os_error_message, user_message


@pytest.mark.parametrize("code, problem, fix", [
    (errno.EACCES, "permission denied on", "chmod"),
    (errno.EPERM, "permission denied on", "choose another location"),
    (errno.ENOSPC, "no space left on the disk holding", "free some space"),
    (errno.EDQUOT, "disk quota exceeded on the disk holding", "free some space"),
    (errno.EROFS, "is on a read-only file system", "choose a writable location"),
    (errno.ENOENT, "does not exist", "check the path"),
    (errno.EISDIR, "is a folder where a file is expected", "give the path of a file"),
])
def test_os_error_messages_name_path_and_fix(code, problem, fix):
    path = "/data/runs/r1/meta.json"
    message = os_error_message(OSError(code, os.strerror(code), path))
    assert path in message and problem in message and fix in message
    assert "\n" not in message and "bug" not in message


def test_not_a_directory_names_the_file_in_the_way(tmp_path):
    blocker = tmp_path / "notes"
    blocker.write_text("x")
    target = blocker / "runs" / "meta.json"
    message = os_error_message(NotADirectoryError(errno.ENOTDIR, "Not a directory", str(target)))
    assert message.startswith(f"{blocker} is a file, not a folder, so {target} cannot be used")
    assert "move that file away" in message


def test_context_fix_replaces_the_generic_advice():
    message = os_error_message(OSError(errno.EROFS, "Read-only file system", "/mnt/ro/runs"),
                               fix="choose another run store with --runs-dir or $LAB_RUNS_DIR")
    assert message.endswith("choose another run store with --runs-dir or $LAB_RUNS_DIR")


def test_input_errors_keep_their_text_even_when_caused_by_an_os_error():
    try:
        try:
            raise OSError(errno.EIO, "Input/output error", "/x.png")
        except OSError as cause:
            raise ValueError("cannot read image /x.png: I/O error. Remove or fix the file.") from cause
    except ValueError as exc:
        assert user_message(exc) == "cannot read image /x.png: I/O error. Remove or fix the file."
        assert find_os_error(exc).errno == errno.EIO


def test_wrapped_os_error_is_found():
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device", "/runs/r/tables")
        except OSError as cause:
            raise RuntimeError("writer thread failed") from cause
    except RuntimeError as exc:
        assert user_message(exc).startswith("no space left on the disk holding /runs/r/tables")


def test_memory_and_decompression_bomb_are_not_bugs():
    assert "Lower batch_size" in user_message(MemoryError())

    class DecompressionBombError(Exception):
        pass

    message = user_message(DecompressionBombError("Image size (200000000 pixels) exceeds limit"))
    assert "too large to open safely" in message and "bug" not in message
