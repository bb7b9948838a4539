"""JSON in and out for the task modules: reading names the file (and line) of bad JSON and
of text that is not Unicode, writing goes to a temporary file renamed over the target, so
no reader sees half a file."""

import json

from ..data import DataError
from ..json_files import load_json
from ..safe_output import replace_file


def read_json(path):
    """The JSON value in ``path`` (``json_files.load_json``, any size); a DataError naming
    ``path:line`` if it is not plain UTF-8 JSON (too deep, an integer too long, NaN...)."""
    return load_json(path, DataError, max_bytes=None)


def check_text(text, where):
    """``text`` unless it holds a lone surrogate (``"\\ud800"``, half of a UTF-16 pair, which a
    JSON escape can write but UTF-8 cannot): then a DataError naming ``where``. The tokenizer,
    SentencePiece and every file written need text that UTF-8 can encode."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise DataError(f"{where}: not valid Unicode (a lone surrogate U+{ord(text[err.start]):04X} at "
                        f"character {err.start}, half of a UTF-16 pair)") from None
    return text


def write_text(path, text):
    """Write ``text`` to ``path`` atomically (``safe_output.replace_file``: a temporary file of
    its own beside it, never a name a user's file may have, renamed over the target)."""
    with replace_file(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write(text)


def write_json(path, obj):
    """Write ``obj`` as indented JSON to ``path`` atomically."""
    write_text(path, json.dumps(obj, ensure_ascii=False, indent=2) + "\n")
