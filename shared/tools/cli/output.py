"""The CLI's stdout: a reader that goes away (`ksched apply -f many.yaml | head -1`)
must not stop the work half-way nor end it with a traceback.

Python ignores SIGPIPE, so a write to a closed pipe raises BrokenPipeError: the first
one turns stdout into /dev/null (the interpreter's final flush then has nothing to
complain about) and the command carries on, as kubectl's would have had it ignored
SIGPIPE.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Protocol


class Out(Protocol):
    """Where a verb prints its results (emit, or a test's list)."""

    def __call__(self, text: str, end: str = "\n") -> None: ...


def _silence_stdout() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def emit(text: str, end: str = "\n") -> None:
    """Write to stdout; a closed pipe silences stdout and is otherwise ignored."""
    try:
        sys.stdout.write(text + end)
    except BrokenPipeError:
        _silence_stdout()


def stdout_gone() -> bool:
    """Whether nobody reads stdout any more (silenced after a broken pipe): a command
    that would print forever (`top`) stops."""
    try:
        return os.path.samestat(os.fstat(sys.stdout.fileno()), os.stat(os.devnull))
    except (OSError, ValueError):  # no real file behind stdout (a test's capture)
        return False


def flush_stdout() -> None:
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()


def warn(text: str) -> None:
    """One line on stderr (errors and warnings, as kubectl writes them)."""
    with contextlib.suppress(BrokenPipeError):
        print(text, file=sys.stderr, flush=True)
