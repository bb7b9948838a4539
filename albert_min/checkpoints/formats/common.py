"""What the three checkpoint readers share: the error class, dtypes, bounded reads.

Every reader treats its file as untrusted. Sizes written in a file (tensor
shapes, byte counts, offsets) are checked against the real size of the file
*before* anything is allocated, so a small crafted file cannot make the
converter allocate gigabytes, and every malformed input ends in a
``ConversionError`` that names the file.
"""

import itertools
import math
import pickle
import struct
import zipfile
import zlib

import numpy as np

from ...common.errors import AlbertMinError


class ConversionError(AlbertMinError):
    """A source checkpoint that is unreadable, corrupt, or does not fit the model."""


class Corrupt(ValueError):
    """Raised by the low-level parsers; the readers add the file name."""


# What a parser may raise on garbage input. MemoryError is deliberately absent:
# sizes are checked before allocating, so running out of memory would be a bug.
MALFORMED = (Corrupt, ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError,
             EOFError, RecursionError, NotImplementedError, UnicodeError, struct.error, zlib.error,
             pickle.UnpicklingError, zipfile.BadZipFile, zipfile.LargeZipFile)


def malformed(path, err) -> ConversionError:
    """A ConversionError naming ``path`` for an exception a parser raised on bad bytes."""
    if isinstance(err, ConversionError):
        return err
    if isinstance(err, Corrupt):
        return ConversionError(f"{path}: {err}")
    if isinstance(err, OSError) and not isinstance(err, zipfile.BadZipFile):
        return ConversionError(f"{path}: cannot read ({brief(err.strerror or err)})")
    return ConversionError(f"{path}: corrupt file ({type(err).__name__}: {brief(str(err))})")


# ============================================================ values in messages
SHOWN = 200     # characters of a value an error message shows: whole tensor names, cut crafted ones


def brief(value, limit=SHOWN) -> str:
    """``value`` as one short line for an error message.

    What a crafted file holds ends up in messages (tensor names, pickled tuples,
    sizes): a name with a newline, an array's multi-line repr or a 5000-digit
    integer would break the one-line ``error: ...`` rule, or take seconds to
    print. Strings are shown as they are when printable, escaped otherwise;
    arrays by shape and dtype; containers by their first items; everything
    cut to about ``limit`` characters.
    """
    text = _brief(value, limit, nested=False)
    return text if len(text) <= limit else text[:max(limit - 3, 0)] + "..."


def _brief(value, limit, nested):
    if isinstance(value, str):
        cut = value[:limit]
        if nested:
            text = repr(cut)
        else:
            text = cut if cut.isprintable() else repr(cut)[1:-1]     # a name with a newline: escaped
        return text + ("..." if len(value) > limit else "")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return repr(bytes(value[:limit])) + ("..." if len(value) > limit else "")
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"<{value.bit_length()}-bit integer>"    # str() of a 5000-digit int raises
    if isinstance(value, np.ndarray):
        return f"array(shape={value.shape}, dtype={value.dtype})"
    containers = {tuple: "()", list: "[]", dict: "{}", set: "{}", frozenset: "{}"}
    brackets = next((b for t, b in containers.items() if isinstance(value, t)), None)
    if brackets:
        items = value.items() if isinstance(value, dict) else value
        parts, length = [], 0
        for item in itertools.islice(items, limit // 2 + 1):
            part = (f"{_brief(item[0], limit, True)}: {_brief(item[1], limit, True)}"
                    if isinstance(value, dict) else _brief(item, limit, True))
            parts.append(part)
            length += len(part) + 2
            if length > limit:
                parts.append("...")
                break
        trailing = "," if isinstance(value, tuple) and len(parts) == 1 else ""
        return brackets[0] + ", ".join(parts) + trailing + brackets[1]
    try:
        text = repr(value)
    except Exception:          # a repr that fails: say what it is  # noqa: BLE001
        text = f"<{type(value).__name__}>"
    return " ".join(text[:4 * limit].split())


# ======================================================================= dtypes
def np_dtype(code, big_endian=False):
    """A numpy dtype from a code such as ``"<f4"``; ``"bf16"`` is read as raw uint16."""
    if code == "bf16":
        code = "<u2"
    return np.dtype(code.replace("<", ">") if big_endian else code)


def nbytes_of(shape, code) -> int:
    """Bytes a tensor of ``shape`` and dtype ``code`` occupies (Python ints: no overflow)."""
    return math.prod(shape) * np_dtype(code).itemsize


def decode(buf, code, shape, big_endian=False):
    """Raw bytes -> a numpy array of ``shape``; bfloat16 becomes float32.

    A writable buffer in native byte order (e.g. a bytearray) is used in place,
    without a copy: a 900 MB checkpoint is then held once, not twice.
    """
    array = np.frombuffer(buf, dtype=np_dtype(code, big_endian))
    if code == "bf16":   # bfloat16 is the upper half of a float32
        array = (array.astype(np.uint32) << 16).view(np.float32)
    elif not array.dtype.isnative or not array.flags.writeable:
        array = array.astype(array.dtype.newbyteorder("="), copy=True)
    return array.reshape(shape)


# ================================================================ bounded reads
CHUNK = 16 << 20      # read in 16 MiB pieces: bounded temporary buffers


def read_exactly(f, nbytes, what):
    """Exactly ``nbytes`` from the file object ``f`` into a new bytearray, in chunks.

    The caller has already checked ``nbytes`` against the file's real size; a
    short read (truncated or lying stream) is an error, and at most ``nbytes``
    are ever read, whatever the stream would yield.
    """
    buf = bytearray(nbytes)
    view, pos = memoryview(buf), 0
    while pos < nbytes:
        chunk = f.readinto(view[pos:pos + CHUNK]) if hasattr(f, "readinto") else None
        if chunk is None:
            piece = f.read(min(CHUNK, nbytes - pos))
            view[pos:pos + len(piece)] = piece
            chunk = len(piece)
        if not chunk:
            raise Corrupt(f"{what}: expected {nbytes} bytes, the file ends after {pos} (truncated?)")
        pos += chunk
    return buf

