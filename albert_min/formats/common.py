"""What the three checkpoint readers share: the error class, dtypes, bounded reads.

Every reader treats its file as untrusted. Sizes written in a file (tensor
shapes, byte counts, offsets) are checked against the real size of the file
*before* anything is allocated, so a small crafted file cannot make the
converter allocate gigabytes, and every malformed input ends in a
``ConversionError`` that names the file.
"""

import math
import pickle
import struct
import zipfile
import zlib

import numpy as np

from ..errors import AlbertMinError


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
        return ConversionError(f"{path}: cannot read ({err.strerror or err})")
    return ConversionError(f"{path}: corrupt file ({type(err).__name__}: {err})")


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

