"""Small writers for the three checkpoint formats, independent of the readers under test.

Used by the regression/fuzz tests (crafted files) and by
benchmarks/convert_full_size.py (full-size files). No torch or TF needed.
"""

import hashlib
import json
import pickle
import pickletools
import struct
import zipfile

import numpy as np

from albert_min.checkpoints.formats.crc32c import crc32c, mask_crc

_TORCH_STORAGE = {np.dtype("<f4"): "FloatStorage", np.dtype("<f2"): "HalfStorage", np.dtype("<i8"): "LongStorage"}


# ===================================================================== safetensors
def write_safetensors(arrays, path, dtype="F32"):
    """``{name: array}`` -> a safetensors file (float32, or raw uint16 bit patterns as BF16)."""
    header, offset = {}, 0
    for name, a in arrays.items():
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    blob = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(len(blob).to_bytes(8, "little") + blob)
        for a in arrays.values():
            f.write(np.ascontiguousarray(a).tobytes())


def write_raw_safetensors(header, data, path):
    """A safetensors file with exactly the given header dict and data bytes (for crafted cases)."""
    blob = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(len(blob).to_bytes(8, "little") + blob + data)


# ==================================================================== torch zip
def _op(value):
    """Pickle opcodes (protocol 2) for a plain value, without PROTO and STOP."""
    return pickle.dumps(value, protocol=2)[2:-1]


def torch_pickle(tensors):
    """data.pkl for ``[(name, storage key, storage class, numel, offset, size, stride)]``, as torch writes it."""
    out = [b"\x80\x02}("]                                                  # PROTO 2, EMPTY_DICT, MARK
    for name, key, storage_class, numel, offset, size, stride in tensors:
        out += [_op(name), b"ctorch._utils\n_rebuild_tensor_v2\n(",
                b"(" + _op("storage") + f"ctorch\n{storage_class}\n".encode() + _op(key) + _op("cpu")
                + _op(numel) + b"tQ",                                         # TUPLE, BINPERSID
                _op(offset), _op(tuple(size)), _op(tuple(stride)), b"\x89",  # requires_grad=False
                b"ccollections\nOrderedDict\n)R", b"tR"]                    # hooks, TUPLE, REDUCE
    out.append(b"u.")                                                      # SETITEMS, STOP
    return b"".join(out)


def write_torch_bin(arrays, path, compress=False):
    """``{name: array}`` -> a zip-format ``torch.save`` file (one storage per tensor)."""
    tensors, storages = [], {}
    for i, (name, a) in enumerate(arrays.items()):
        a = np.asarray(a, order="C")
        strides = [s // a.itemsize for s in a.strides]
        tensors.append((name, str(i), _TORCH_STORAGE[a.dtype], a.size, 0, a.shape, strides))
        storages[str(i)] = a
    write_torch_zip(torch_pickle(tensors), storages, path, compress)


def write_torch_zip(pickled, storages, path, compress=False):
    method = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    with zipfile.ZipFile(path, "w", method) as z:
        z.writestr("archive/data.pkl", pickled)
        z.writestr("archive/byteorder", "little")
        z.writestr("archive/version", "3\n")
        for key, a in storages.items():
            with z.open(f"archive/data/{key}", "w", force_zip64=a.nbytes > (1 << 31)) as f:
                data = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
                for start in range(0, data.size, 1 << 24):
                    f.write(data[start:start + (1 << 24)])


# ==================================================================== TF bundle
_TF_DTYPE = {np.dtype("<f4"): 1, np.dtype("<i8"): 9}


def _varint(n):
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not out[-1] & 0x80:
            return bytes(out)


def _field(number, wire, payload):
    key = _varint(number << 3 | wire)
    return key + (_varint(payload) if wire == 0 else payload if wire == 5 else _varint(len(payload)) + payload)


def _entry(dtype, shape, offset, size, crc):
    shape_proto = b"".join(_field(2, 2, _field(1, 0, d)) for d in shape)
    return (_field(1, 0, dtype) + _field(2, 2, shape_proto) + _field(4, 0, offset) + _field(5, 0, size)
            + _field(6, 5, struct.pack("<I", mask_crc(crc))))


def _block(entries):
    """A table block without prefix compression: one restart point."""
    body = b"".join(_varint(0) + _varint(len(k)) + _varint(len(v)) + k + v for k, v in entries)
    return body + struct.pack("<II", 0, 1)


def _with_trailer(block):
    return block + b"\x00" + struct.pack("<I", mask_crc(crc32c(block + b"\x00")))


def write_tf_bundle(arrays, prefix, declared_shapes=None):
    """``{name: array}`` -> ``prefix.index`` + ``prefix.data-00000-of-00001`` (one shard).

    ``declared_shapes``: {name: shape} written into the index instead of the real one (crafted files).
    """
    declared_shapes = declared_shapes or {}
    entries = [(b"", _field(1, 0, 1) + _field(3, 2, _field(1, 0, 1)))]     # header: num_shards=1, version
    offset = 0
    with open(prefix + ".data-00000-of-00001", "wb") as f:
        for name in sorted(arrays):
            a = np.asarray(arrays[name], order="C")
            data = a.reshape(-1).view(np.uint8)
            f.write(data)
            shape = declared_shapes.get(name, a.shape)
            size = int(np.prod(shape)) * a.itemsize
            entries.append((name.encode(), _entry(_TF_DTYPE[a.dtype], shape, offset, size, crc32c(data))))
            offset += a.nbytes
    data_block = _with_trailer(_block(entries))
    meta_block = _with_trailer(_block([]))
    handle = _varint(0) + _varint(len(data_block) - 5)
    index_block = _with_trailer(_block([(entries[-1][0], handle)]))
    meta_at, index_at = len(data_block), len(data_block) + len(meta_block)
    footer = (_varint(meta_at) + _varint(len(meta_block) - 5) + _varint(index_at) + _varint(len(index_block) - 5))
    footer = footer.ljust(40, b"\x00") + struct.pack("<Q", 0xDB4775248B80FB57)
    with open(prefix + ".index", "wb") as f:
        f.write(data_block + meta_block + index_block + footer)


# ============================================================ hostile pickles
_LENGTH_WIDTH = {"bytes1": 1, "string1": 1, "unicodestring1": 1, "long1": 1, "bytes4": 4, "string4": 4,
                 "unicodestring4": 4, "long4": 4, "bytes8": 8, "bytearray8": 8, "unicodestring8": 8, "uint8": 8}
OPCODES = {op.name: op for op in pickletools.opcodes}


def opcode(name, length=0, payload=b""):
    """One pickle opcode with its argument: a declared ``length`` (cut to the field's width)
    and then ``payload`` for the length-prefixed ones, zeros or a short line for the others."""
    op = OPCODES[name]
    code = op.code.encode("latin-1")
    if op.arg is None:
        return code
    width = _LENGTH_WIDTH.get(op.arg.name)
    if width:
        return code + (length % (1 << 8 * width)).to_bytes(width, "little") + payload
    if op.arg.n > 0:                                        # fixed-size integers
        return code + bytes(op.arg.n)
    return code + (b"x\ny\n" if "pair" in op.arg.name else b"0\n")   # newline-terminated arguments


def pickle_ops(pickled):
    """Positions where each opcode of ``pickled`` starts (to splice hostile ones in between)."""
    return [pos for _, _, pos in pickletools.genops(pickled)]


# ==================================================================== digests
def tensors_digest(arrays):
    """sha256 over every tensor's name, dtype, shape and bytes, in name order."""
    digest = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        digest.update(f"{name}|{a.dtype.str}|{a.shape}|".encode() + a.tobytes())
    return digest.hexdigest()
