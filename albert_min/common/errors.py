"""One base class for every error a user can cause, and the one way a command reports it.

The commands (train.py, evaluate.py, ``python -m albert_min.convert`` / ``.export`` /
``.fingerprint``) run their work inside ``reported_errors()``, which turns
``AlbertMinError`` (and ``OSError``) into a single ``error: ...`` line that names the
file, line, tensor or flag; anything else is a bug and keeps its traceback. What a
command finds wrong before it starts (an input not there, a bad setting) ends it through
``fail``, the same line. Each module subclasses ``AlbertMinError``, so a reader sees which
stage failed.

Layer: ``albert_min.common``, the bottom one (the layers: ``albert_min/__init__.py``).
"""

import contextlib
import functools
import sys

EXIT_ERROR = 1           # bad input found by the command (Python's exit status for SystemExit("error: ..."))
EXIT_USAGE = 2           # a bad flag or setting, refused before any work: argparse's status for a bad flag
EXIT_INTERRUPTED = 130   # Ctrl-C: 128 + SIGINT, as a shell reports it


class AlbertMinError(ValueError):
    """Bad input: a file, value or flag albert_min cannot use. The message names it."""


class OutputExistsError(FileExistsError):
    """An output that exists, and replacing it was not asked for. ``filename`` is the path.

    The message names the Python keyword (``force=True``); a script catches this
    class and words its own flag (``--force``), so neither reads the other's."""

    def __init__(self, path):
        super().__init__(17, "already exists", path)     # errno.EEXIST

    def __str__(self):
        return f"{self.filename} already exists (pass force=True to replace it)"


def os_error_text(err: Exception) -> str:
    """``path: reason`` for an OSError from the OS, else the error's own message."""
    if isinstance(err, OSError) and err.filename is not None and err.strerror:
        return f"{err.filename}: {err.strerror}"
    return str(err)


def fail(message: str, exit_code: int = EXIT_ERROR):
    """End the command on bad input: the line ``error: <message>`` on stderr and ``exit_code``.

    Exit 1 raises ``SystemExit("error: <message>")``: Python prints the line and exits 1, and a caller
    that catches SystemExit (a test) reads the line as its ``code``. Another code (``EXIT_USAGE``)
    prints the line, then raises ``SystemExit(exit_code)``. A message may hold more lines (evaluate.py's
    "no model given" lists the model folders ready)."""
    if exit_code == EXIT_ERROR:
        raise SystemExit(f"error: {message}")
    print(f"error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(exit_code)


def error_message(err: Exception, force_flag: str = "--force") -> str:
    """What ``error:`` says for a user error: an ``OutputExistsError`` naming the command's flag that
    replaces the output, an OSError from the OS as ``path: reason`` (``os_error_text``), else the message."""
    if isinstance(err, OutputExistsError):
        return f"{err.filename} already exists (pass {force_flag} to replace it)"
    return os_error_text(err)


@contextlib.contextmanager
def reported_errors(force_flag: str = "--force", interrupted: str = None):
    """The commands' work runs inside this: an ``AlbertMinError`` or ``OSError`` raised there ends the
    command with its one ``error:`` line and exit 1 (``fail``, ``error_message``). ``interrupted``: what
    Ctrl-C prints (not an error line: how to go on), then exit 130; None lets KeyboardInterrupt through."""
    try:
        yield
    except (AlbertMinError, OSError) as err:
        fail(error_message(err, force_flag))
    except KeyboardInterrupt:
        if interrupted is None:
            raise
        print(interrupted, file=sys.stderr, flush=True)
        raise SystemExit(EXIT_INTERRUPTED) from None


def returns_status(main):
    """``main`` (a command that ends through ``fail`` / ``reported_errors``) as a function that returns
    its exit status instead of raising it on bad input: the ``error:`` line printed, then 1. For the
    commands whose ``main`` returns a status (convert, fingerprint: ``sys.exit(main())``); argparse's
    own exits (--help, a bad flag: 0 and 2) pass through."""
    @functools.wraps(main)
    def run(*args, **kwargs):
        try:
            return main(*args, **kwargs)
        except SystemExit as stop:
            if not isinstance(stop.code, str):
                raise
            print(stop.code, file=sys.stderr, flush=True)
            return EXIT_ERROR
    return run
