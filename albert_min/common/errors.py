"""One base class for every error a user can cause.

The scripts (train.py, evaluate.py, ``python -m albert_min.convert``) catch
``AlbertMinError`` (and ``OSError``) and print a single ``error: ...`` line that
names the file, line, tensor or flag; anything else is a bug and keeps its
traceback. Each module subclasses it, so a reader sees which stage failed.

Layer: ``albert_min.common``, the bottom one (the layers: ``albert_min/__init__.py``).
"""


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
