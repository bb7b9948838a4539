"""JSON in and out for the task modules: reading names the file (and line) of bad JSON and
of text that is not Unicode, writing goes to a temporary file renamed over the target, so no
reader sees half a file, and ``json_kind`` recognises a predictions file written so (what
``evaluate.py --force`` may replace: one whose record, written beside it, still holds its sha256)."""

import json
import os

from ..common.json_files import load_json
from ..common.safe_output import FileKind, remove_dead_temp_files, replace_file
from .errors import DataError


def read_json_data(path):
    """The JSON value in ``path`` (``json_files.load_json``, any size); a DataError naming
    ``path:line`` if it is not plain UTF-8 JSON (too deep, an integer too long, NaN...)."""
    return load_json(path, DataError, max_bytes=None)


def check_utf8_text(text, where):
    """``text`` unless it holds a lone surrogate (``"\\ud800"``, half of a UTF-16 pair, which a
    JSON escape can write but UTF-8 cannot): then a DataError naming ``where``. The tokenizer,
    SentencePiece and every file written need text that UTF-8 can encode."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise DataError(f"{where}: not valid Unicode (a lone surrogate U+{ord(text[err.start]):04X} at "
                        f"character {err.start}, half of a UTF-16 pair)") from None
    return text


def write_text(path, text, record=False):
    """Write ``text`` to ``path`` atomically (``safe_output.replace_file``: a temporary file of
    its own beside it, never a name a user's file may have, renamed over the target), first
    removing the temporaries a killed writer left there. ``record``: a predictions file, whose
    sha256 is recorded beside it (``safe_output.output_record_path``) for ``--force`` to check."""
    remove_dead_temp_files(os.path.abspath(path))
    with replace_file(path, record=record) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write(text)


def json_text(obj):
    """The exact text ``write_json`` writes for ``obj``."""
    return json.dumps(obj, ensure_ascii=False, indent=2) + "\n"


def write_json(path, obj, record=False):
    """Write ``obj`` as indented JSON to ``path`` atomically (``record``: as ``write_text``)."""
    write_text(path, json_text(obj), record)


# ---------------------------------------------------------- recognising what was written
# The official prediction layouts (SQuAD's {id: answer}, conlleval's columns) have no room for
# a mark of their own, so evaluate.py --force recognises its earlier output by its exact bytes:
# what these writers write for the value read back, of the task's shape. A hand-made file, another
# tool's (Google's and Hugging Face's SQuAD scripts indent by 4) or a data file is refused. And the
# file must still have the sha256 recorded beside it when it was written (FileKind.recorded): a
# user's file of the same layout, or evaluate.py's output edited since, is refused too.
PREDICTIONS = "a predictions file evaluate.py wrote"   # FileKind.name, for messages
MAX_BYTES = 64 << 20      # recognising reads at most this much: a bigger file is not one of ours


def bounded_text(path):
    """The UTF-8 text of ``path`` if it has at most ``MAX_BYTES`` bytes, else None."""
    with open(path, "rb") as f:
        raw = f.read(MAX_BYTES + 1)
    try:
        return raw.decode("utf-8") if len(raw) <= MAX_BYTES else None
    except UnicodeDecodeError:
        return None


def json_kind(shape):
    """The ``FileKind`` of a JSON predictions file: exactly what ``write_json`` writes for its
    value, a value ``shape(value)`` accepts."""
    def is_ours(path):
        text = bounded_text(path)
        try:
            value = json.loads(text) if text else None
        except (ValueError, RecursionError):
            return False
        return value is not None and shape(value) and json_text(value) == text
    return FileKind(PREDICTIONS, is_ours, recorded=True)
