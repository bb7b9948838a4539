"""One base class for every error a user can cause.

The scripts (train.py, evaluate.py, ``python -m albert_min.convert``) catch
``AlbertMinError`` (and ``OSError``) and print a single ``error: ...`` line that
names the file, line, tensor or flag; anything else is a bug and keeps its
traceback. Each module subclasses it, so a reader sees which stage failed.
"""


class AlbertMinError(ValueError):
    """Bad input: a file, value or flag albert_min cannot use. The message names it."""
