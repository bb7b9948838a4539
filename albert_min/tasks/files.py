"""JSON in and out for the task modules: reading names the file (and line) of bad JSON,
writing goes to a temporary file renamed over the target, so no reader sees half a file."""

import json

from .data import DataError
from ..common.safe_output import replace_file


def read_json(path):
    """The JSON value in ``path``; a DataError naming ``path:line`` if it is not UTF-8 JSON."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except UnicodeDecodeError:
        raise DataError(f"{path}: not UTF-8") from None
    except json.JSONDecodeError as err:
        raise DataError(f"{path}:{err.lineno}: not JSON ({err.msg})") from None


def write_text(path, text):
    """Write ``text`` to ``path`` atomically (``safe_output.replace_file``: a temporary file of
    its own beside it, never a name a user's file may have, renamed over the target)."""
    with replace_file(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write(text)


def write_json(path, obj):
    """Write ``obj`` as indented JSON to ``path`` atomically."""
    write_text(path, json.dumps(obj, ensure_ascii=False, indent=2) + "\n")
