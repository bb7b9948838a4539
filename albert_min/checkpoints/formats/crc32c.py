"""CRC-32C (Castagnoli), which TensorFlow stores for every tensor and table block.

``crc32c(data)`` uses the C implementation of the ``google-crc32c`` package when it
is installed (several GB/s), else the pure Python/numpy version below (~0.1-0.2 GB/s);
both give the same numbers. ``benchmarks/convert_full_size.py`` measures the two.
"""

import numpy as np

_CRC_POLY = 0x82F63B78          # reflected polynomial
_TF_MASK_DELTA = 0xA282EAD8
_PIECE = 16 << 20                # the pure version works through 16 MiB at a time


def _make_crc_table():
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ _CRC_POLY if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC_TABLE = _make_crc_table()


def crc_update(crc, data):
    """Feed bytes through the raw CRC register, one table lookup per byte."""
    table = _CRC_TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc


def crc_update_lanes(crc, data):
    """``crc_update`` for large inputs, vectorised with numpy.

    The data is cut into K equal lanes whose CRCs are computed side by side
    (the first lane starts from ``crc``, the others from 0). CRCs are linear, so
    CRC(A + B) = shift(CRC(A), len(B)) xor CRC(B), where shift feeds zero bytes;
    the lanes are folded together with that rule, the tail byte by byte.
    """
    lanes = min(65536, len(data) // 256)
    length = len(data) // lanes
    body = np.frombuffer(data, np.uint8, count=lanes * length).reshape(lanes, length)
    body = np.ascontiguousarray(body.T)                       # row j = byte j of every lane
    table = np.asarray(_CRC_TABLE, np.uint32)
    state = np.zeros(lanes, np.uint32)
    state[0] = crc
    for row in body:
        state = table[(state ^ row) & 0xFF] ^ (state >> 8)
    # shift(x) by `length` zero bytes is linear in x: tabulate it per byte of x.
    probe = (np.arange(256, dtype=np.uint32)[None, :] << (8 * np.arange(4, dtype=np.uint32))[:, None]).ravel()
    for _ in range(length):
        probe = table[probe & 0xFF] ^ (probe >> 8)
    t0, t1, t2, t3 = probe.reshape(4, 256).tolist()
    acc = 0
    for lane in state.tolist():
        acc = t0[acc & 0xFF] ^ t1[(acc >> 8) & 0xFF] ^ t2[(acc >> 16) & 0xFF] ^ t3[acc >> 24] ^ lane
    return crc_update(acc, memoryview(data)[lanes * length:])


def crc32c_python(data, crc=0) -> int:
    """The pure version; ``crc`` continues a previous result (for data read in pieces)."""
    data = memoryview(data).cast("B")
    crc ^= 0xFFFFFFFF
    for start in range(0, len(data), _PIECE):                 # bounded temporary copies
        piece = data[start:start + _PIECE]
        crc = (crc_update_lanes if len(piece) >= 16384 else crc_update)(crc, piece)
    return crc ^ 0xFFFFFFFF


def _fast_crc32c():
    """google-crc32c's C ``extend(crc, data)`` if installed, else None."""
    try:
        import google_crc32c
    except ImportError:
        return None
    if getattr(google_crc32c, "implementation", "c") != "c":     # its own pure-Python fallback is slow
        return None
    return google_crc32c.extend


_EXTEND_C = _fast_crc32c()
IMPLEMENTATION = "google-crc32c (C)" if _EXTEND_C else "pure Python/numpy"


def crc32c(data, crc=0) -> int:
    """CRC-32C of ``data`` (bytes-like); ``crc`` continues a previous result."""
    if _EXTEND_C is not None:
        # It takes bytes or a numpy array (not a bytearray/memoryview): wrap, don't copy.
        return _EXTEND_C(crc, data if isinstance(data, bytes) else np.frombuffer(data, np.uint8))
    return crc32c_python(data, crc)


def unmask_crc(masked: int) -> int:
    """TF/LevelDB store ``mask(crc) = rotate_right(crc, 15) + 0xa282ead8``; undo it."""
    rot = (masked - _TF_MASK_DELTA) & 0xFFFFFFFF
    return ((rot >> 17) | (rot << 15)) & 0xFFFFFFFF


def mask_crc(crc: int) -> int:
    """The inverse of ``unmask_crc`` (for writers)."""
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _TF_MASK_DELTA) & 0xFFFFFFFF
