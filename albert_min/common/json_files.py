"""Reading JSON without trusting it: one reader (``load_json``) for every JSON file albert_min
reads, its own (state.json, train_metrics.json, training_settings.json), config.json and
the SQuAD and RACE data files. A hand-edited or hostile file is one error naming the file
and line (and, through ``check_fields``, the key), never a traceback from deep inside.

    state = read_json(path, {"epoch": Field(int, low=0), "step": Field(int, low=0),
                             "best": Field(float, required=False, none=True)})

``read_json`` refuses what Python's ``json`` turns into exceptions of its own
(integers over 4300 digits: ValueError; deep nesting: RecursionError; NaN and
Infinity, which are not JSON), then checks every key of the schema: its type,
its range, and for lists the type of each item.

Layer: ``albert_min.common``, the bottom one (the layers: ``albert_min/__init__.py``).
"""

import dataclasses
import json
import math
import re
import sys
from typing import Optional

from .errors import AlbertMinError

MAX_BYTES = 64 << 20   # far above any file albert_min writes; a bigger one is not ours


class JSONFileError(AlbertMinError):
    """A JSON file albert_min wrote that is unreadable or does not hold what it should."""


@dataclasses.dataclass(frozen=True)
class Field:
    """What one key of a JSON object must hold."""
    kind: type                       # int, float (an int is accepted too), str, bool, list or dict
    low: Optional[float] = None      # smallest allowed number (ints and floats)
    high: Optional[float] = None     # largest allowed number
    required: bool = True            # False: the key may be absent (older files)
    none: bool = False               # True: null is allowed
    items: Optional[type] = None     # for lists: the type of every item (float accepts ints)


def _is(value, kind):
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def _refuse_constant(name):
    raise ValueError(f"{name} is not a JSON number")


def load_json(path, error=JSONFileError, max_bytes=MAX_BYTES, kind="a file albert_min wrote", constants=False):
    """The parsed content of ``path``: plain, finite UTF-8 JSON (a byte-order mark is skipped),
    else ``error`` naming ``path:line``. Every JSON file albert_min reads comes through here:
    its own (JSONFileError), config.json (ConfigError), SQuAD and RACE files (DataError).

    ``max_bytes``: a bigger file is ``error`` ("not ``kind``"); None reads any size (a data set).
    ``constants``: read NaN and Infinity as floats (config.json, whose checks name the key
    that holds one) instead of refusing them here.
    """
    with open(path, "rb") as f:
        raw = f.read() if max_bytes is None else f.read(max_bytes + 1)
    if max_bytes is not None and len(raw) > max_bytes:
        raise error(f"{path}: larger than {_size(max_bytes)}; not {kind}")
    return parse_json(path, raw, error, constants)


def parse_json(path, raw: bytes, error=JSONFileError, constants=False):
    """``raw`` (the bytes of ``path``) parsed as ``load_json`` parses them."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        raise error(f"{path}:{line}: not UTF-8") from None
    try:
        return json.loads(text, parse_constant=None if constants else _refuse_constant)
    except json.JSONDecodeError as err:
        raise error(f"{path}:{err.lineno}: not JSON ({err.msg})") from None
    except RecursionError:   # Python's reader recurses once per level
        line, depth = _deepest(text)
        raise error(f"{path}:{line}: not usable JSON (nested too deeply: {depth} levels)") from None
    except ValueError as err:   # integers over 4300 digits, NaN/Infinity
        line, what = _unusable_number(text, constants)
        raise error(f"{path}:{line}: not usable JSON ({what or str(err)[:120]})") from None


# JSON's tokens as far as finding the place of an error needs them: strings (skipped whole),
# brackets, numbers (integer part, fraction, exponent), the constants NaN and Infinity.
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[{]|[\]}]|-?(\d+)(\.\d+)?([eE][-+]?\d+)?|NaN|-?Infinity')


def _deepest(text):
    """(line, depth) where ``text`` is first nested deepest; only read after an error."""
    depth, best, at = 0, 0, 0
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
            if depth > best:
                best, at = depth, match.start()
        elif token in ("]", "}"):
            depth -= 1
    return text.count("\n", 0, at) + 1, best


def _unusable_number(text, constants=False):
    """(line, what) of the first number Python cannot read as JSON: an integer of more than
    ``sys.get_int_max_str_digits()`` digits, or (``constants`` False) NaN or Infinity; (1, None)
    if none is found."""
    limit = sys.get_int_max_str_digits() or float("inf")
    for match in _TOKENS.finditer(text):
        token, digits = match.group(), match.group(1)
        if digits is not None and not (match.group(2) or match.group(3)) and len(digits) > limit:
            what = f"an integer of {len(digits)} digits; Python reads at most {limit}"
        elif token in ("NaN", "Infinity", "-Infinity") and not constants:
            what = f"{token} is not a JSON number"
        else:
            continue
        return text.count("\n", 0, match.start()) + 1, what
    return 1, None


def _size(n):
    return f"{n >> 20} MiB" if n >= 1 << 20 and not n % (1 << 20) else f"{n} bytes"


def check_fields(path, data, schema: dict, where=""):
    """Raise JSONFileError unless ``data`` is an object whose keys fit ``schema`` ({key: Field});
    ``where``: the key path of ``data`` inside the file, for nested objects."""
    if not isinstance(data, dict):
        raise JSONFileError(f"{path}: {where or 'the file'} must be a JSON object, got {type(data).__name__}")
    for key, field in schema.items():
        name = f"{where}.{key}" if where else key
        if key not in data:
            if field.required:
                raise JSONFileError(f"{path}: key {name!r} is missing")
            continue
        value = data[key]
        if value is None and field.none:
            continue
        if not _is(value, field.kind):
            raise JSONFileError(f"{path}: {name!r} must be {field.kind.__name__}, got {_shown(value)}")
        if field.kind in (int, float):
            if not math.isfinite(value):
                raise JSONFileError(f"{path}: {name!r} must be finite, got {value!r}")
            if (field.low is not None and value < field.low) or (field.high is not None and value > field.high):
                bounds = f">= {field.low}" if field.high is None else f"in [{field.low}, {field.high}]"
                raise JSONFileError(f"{path}: {name!r} must be {bounds}, got {value!r}")
        if field.kind is list and field.items is not None:
            for i, item in enumerate(value):
                if not _is(item, field.items) or (field.items is float and not math.isfinite(item)):
                    raise JSONFileError(f"{path}: {name}[{i}] must be a finite {field.items.__name__}, "
                                        f"got {_shown(item)}")
    return data


def read_json(path, schema: dict):
    """``load_json`` + ``check_fields``: the object in ``path``, checked against ``schema``."""
    return check_fields(path, load_json(path), schema)


def _shown(value, limit=40):
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."
