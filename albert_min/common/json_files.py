"""Reading the JSON files albert_min itself writes (state.json, train_metrics.json,
training_settings.json) without trusting them: a hand-edited or hostile file is one
``JSONFileError`` naming the file and the key, never a traceback from deep inside.

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


def load_json(path):
    """The parsed content of ``path``; JSONFileError naming ``path`` if it is not plain, finite JSON."""
    with open(path, "rb") as f:
        raw = f.read(MAX_BYTES + 1)
    if len(raw) > MAX_BYTES:
        raise JSONFileError(f"{path}: larger than {MAX_BYTES >> 20} MiB; not a file albert_min wrote")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise JSONFileError(f"{path}: not UTF-8") from None
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise JSONFileError(f"{path}: nested too deeply to be a file albert_min wrote") from None
    except ValueError as err:   # JSONDecodeError, integers over 4300 digits, NaN/Infinity
        raise JSONFileError(f"{path}: not usable JSON ({str(err)[:120]})") from None


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
