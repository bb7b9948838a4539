"""Hugging Face's ``model.safetensors``, read with the ``safetensors`` package.

The format: an 8-byte little-endian header length, a JSON header
``{name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}``,
then the raw little-endian data that the offsets point into.

The ``safetensors`` package (installed with MindSpore) validates the header:
offsets must tile the data exactly, with no overlaps, gaps or bytes past the end,
and each tensor's byte count must match its shape and dtype. It then returns
numpy arrays for the dtypes numpy has. What it cannot do is kept here: bfloat16
(numpy has no such type) is read from its offsets and widened to float32.
"""

import json
import math
import os

from safetensors import SafetensorError, safe_open

from .common import MALFORMED, ConversionError, brief, decode, malformed, read_exactly

_HEADER_LIMIT = 100 << 20     # the package's own limit
_NUMPY_DTYPES = {"F64", "F32", "F16", "I64", "I32", "I16", "I8", "U8", "BOOL"}   # the package returns these


def read_safetensors(path, select=None) -> dict:
    """``{name: np.ndarray}`` from a ``.safetensors`` file; ``select(name)`` may skip tensors."""
    try:
        with safe_open(path, framework="np") as f:          # validates the whole header
            names = [n for n in f.keys() if select is None or select(n)]
            dtypes = {n: f.get_slice(n).get_dtype() for n in names}
        unsupported = [f"{brief(n)} ({brief(d)})" for n, d in dtypes.items() if d not in _NUMPY_DTYPES and d != "BF16"]
        if unsupported:
            raise ConversionError(f"{path}: tensors with unsupported dtypes: {', '.join(unsupported[:5])}")
        offsets = _bf16_offsets(path) if "BF16" in dtypes.values() else {}
        arrays = {}
        for name in names:
            # One opening (one memory map) per tensor: the mapped pages are released
            # after each copy, so a large file is held once in memory, not twice.
            if dtypes[name] == "BF16":
                arrays[name] = _read_bf16(path, *offsets[name])
            else:
                with safe_open(path, framework="np") as f:
                    arrays[name] = f.get_tensor(name)
        return arrays
    except SafetensorError as err:
        raise ConversionError(f"{path}: {_explain(path) or 'not a valid safetensors file'} ({brief(str(err))})") from None
    except (OSError, *MALFORMED) as err:
        raise malformed(path, err) from None


def _bf16_offsets(path):
    """{name: (absolute begin, shape)} from the header (already validated by ``safe_open``)."""
    with open(path, "rb") as f:
        header_len = int.from_bytes(f.read(8), "little")
        header = json.loads(read_exactly(f, header_len, "safetensors header"))
    return {name: (8 + header_len + info["data_offsets"][0], tuple(info["shape"]))
            for name, info in header.items() if name != "__metadata__" and info["dtype"] == "BF16"}


def _read_bf16(path, begin, shape):
    with open(path, "rb") as f:
        f.seek(begin)
        raw = read_exactly(f, math.prod(shape) * 2, "bfloat16 tensor")
    return decode(raw, "bf16", shape)


def _explain(path):
    """Which tensor makes a header invalid, in words (the package's errors rarely say)."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            header_len = int.from_bytes(f.read(8), "little")
            if size < 8 or header_len > min(size - 8, _HEADER_LIMIT):
                return f"header length {header_len} does not fit the file of {size} bytes (truncated?)"
            header = json.loads(read_exactly(f, header_len, "safetensors header"))
        tensors = sorted(((info["data_offsets"], name, info) for name, info in header.items()
                          if name != "__metadata__"), key=lambda t: tuple(t[0]))
    except (OSError, *MALFORMED):
        return "bad header, not a JSON object of {name: {dtype, shape, data_offsets}}"
    expected_begin, data_size = 0, size - 8 - header_len
    for (begin, end), name, info in tensors:
        if begin != expected_begin:
            how = "overlap the previous tensor" if begin < expected_begin else "leave a gap before it"
            return f"tensor {brief(name)}: data_offsets [{brief(begin)}, {brief(end)}] {how}"
        if end > data_size:
            return f"tensor {brief(name)} ends at byte {brief(8 + header_len + end)} but the file has only {size} bytes (truncated?)"
        expected_begin = end
    if expected_begin != data_size:
        return f"{data_size - expected_begin} bytes after the last tensor"
    return None
