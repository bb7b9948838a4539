"""Convert public ALBERT checkpoints into a model folder (config.json + model.ckpt).

    python -m albert_min.convert SRC DST [--config PATH] [--allow-missing-heads] [--force]

Three source formats are read with numpy and the standard library only:

* PyTorch ``pytorch_model.bin`` (Hugging Face). Since torch 1.6 this is a zip
  archive: ``<archive>/data.pkl`` is a pickle of ``{name: tensor}`` in which every
  tensor is a call ``_rebuild_tensor_v2(storage, offset, size, stride, ...)`` and
  every storage a "persistent id" ``('storage', FloatStorage, key, device, numel)``
  whose raw bytes are the member ``<archive>/data/<key>``. Pickles can run
  arbitrary code, so the unpickler here only knows those few names.
* ``model.safetensors`` (Hugging Face): an 8-byte little-endian header length, a
  JSON header ``{name: {dtype, shape, data_offsets: [begin, end]}}``, then the raw
  data that the offsets point into.
* TensorFlow checkpoints (Google's ALBERT releases, ``model.ckpt-N``), the
  "tensor bundle" format: ``<prefix>.index`` is a LevelDB-style sorted table that
  maps each variable name to a ``BundleEntryProto`` (dtype, shape, shard, offset,
  size, crc32c), and ``<prefix>.data-00000-of-00001`` holds the raw bytes.

Names are mapped to this package's names, which are Hugging Face's
(``albert.encoder.albert_layer_groups.0.albert_layers.0.attention.query.weight``),
TF kernels ``[in, out]`` are transposed to ``[out, in]``, and every tensor is
checked against the model the config describes before anything is written. The
output folder is written atomically: on any error no (partial) folder remains.

The readers need only numpy; mindspore is imported when models are built and saved.
"""

import argparse
import dataclasses
import glob
import json
import math
import os
import pickle
import re
import shutil
import sys
import zipfile
from collections import OrderedDict

import numpy as np

from .config import AlbertConfig, ConfigError, read_json_object
from .errors import AlbertMinError


class ConversionError(AlbertMinError):
    """A source checkpoint that is unreadable, corrupt, or does not fit the model."""


class _Corrupt(ValueError):
    """Raised by the low-level parsers; the readers add the file name."""


# ======================================================================= dtypes
def _np_dtype(code, big_endian=False):
    """A numpy dtype from a code such as ``"<f4"``; ``"bf16"`` is read as raw uint16."""
    if code == "bf16":
        code = "<u2"
    return np.dtype(code.replace("<", ">") if big_endian else code)


def _decode(buf, code, shape, big_endian=False):
    """Raw bytes -> a writable numpy array of ``shape``; bfloat16 becomes float32."""
    array = np.frombuffer(buf, dtype=_np_dtype(code, big_endian))
    if code == "bf16":   # bfloat16 is the upper half of a float32
        array = (array.astype(np.uint32) << 16).view(np.float32)
    else:
        array = array.astype(array.dtype.newbyteorder("="), copy=True)
    return array.reshape(shape)


# ====================================================================== crc32c
# CRC-32C (Castagnoli), which TensorFlow stores for every tensor and table block.
_CRC_POLY = 0x82F63B78          # reflected polynomial
_TF_MASK_DELTA = 0xA282EAD8


def _make_crc_table():
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ _CRC_POLY if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC_TABLE = _make_crc_table()


def _crc_update(crc, data):
    """Feed bytes through the raw CRC register, one table lookup per byte."""
    table = _CRC_TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc


def _crc_update_lanes(crc, data):
    """``_crc_update`` for large inputs, vectorised with numpy.

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
    return _crc_update(acc, memoryview(data)[lanes * length:])


def _crc32c_python(data):
    data = memoryview(data).cast("B")
    update = _crc_update_lanes if len(data) >= 16384 else _crc_update
    return update(0xFFFFFFFF, data) ^ 0xFFFFFFFF


def _fast_crc32c():
    """A C implementation if one is installed (optional), else None."""
    try:
        import google_crc32c
        if getattr(google_crc32c, "implementation", "c") == "c":
            return google_crc32c.value
    except ImportError:
        pass
    try:
        import crc32c
        return crc32c.crc32c
    except (ImportError, AttributeError):
        return None


_CRC32C_C = _fast_crc32c()


def crc32c(data) -> int:
    """CRC-32C of ``data`` (bytes-like)."""
    return _CRC32C_C(bytes(data)) if _CRC32C_C else _crc32c_python(data)


def unmask_crc(masked: int) -> int:
    """TF/LevelDB store ``mask(crc) = rotate_right(crc, 15) + 0xa282ead8``; undo it."""
    rot = (masked - _TF_MASK_DELTA) & 0xFFFFFFFF
    return ((rot >> 17) | (rot << 15)) & 0xFFFFFFFF


# ===================================================================== PyTorch
_TORCH_STORAGES = {
    "FloatStorage": "<f4", "DoubleStorage": "<f8", "HalfStorage": "<f2", "BFloat16Storage": "bf16",
    "LongStorage": "<i8", "IntStorage": "<i4", "ShortStorage": "<i2", "CharStorage": "i1",
    "ByteStorage": "u1", "BoolStorage": "?",
}


@dataclasses.dataclass(frozen=True)
class _StorageType:
    """What ``torch.FloatStorage`` & co. unpickle to here: just a dtype code."""
    name: str
    code: str


def _rebuild_tensor_v2(storage, storage_offset, size, stride, *_ignored):
    """torch's tensor constructor: a strided view into a storage, copied out."""
    if not isinstance(storage, np.ndarray):
        raise _Corrupt(f"tensor built from {type(storage).__name__}, not from a storage")
    size, stride = tuple(int(n) for n in size), tuple(int(s) for s in stride)
    if 0 in size:
        return np.zeros(size, storage.dtype)
    last = storage_offset + sum((n - 1) * s for n, s in zip(size, stride))
    if storage_offset < 0 or any(s < 0 for s in stride) or last >= storage.size:
        raise _Corrupt(f"tensor of size {size} at offset {storage_offset} lies outside its storage "
                       f"of {storage.size} elements")
    view = np.lib.stride_tricks.as_strided(storage[storage_offset:], shape=size,
                                           strides=[s * storage.itemsize for s in stride])
    return np.array(view)


def _rebuild_parameter(data, *_ignored):
    return data   # nn.Parameter(tensor) -> the tensor


_TORCH_GLOBALS = {
    ("collections", "OrderedDict"): OrderedDict,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
}


class _TorchUnpickler(pickle.Unpickler):
    """Unpickles ``data.pkl`` knowing only plain tensors, and nothing that runs code."""

    def __init__(self, file, load_storage):
        super().__init__(file)
        self._load_storage = load_storage

    def find_class(self, module, name):
        if (module, name) in _TORCH_GLOBALS:
            return _TORCH_GLOBALS[module, name]
        if module == "torch" and name in _TORCH_STORAGES:
            return _StorageType(name, _TORCH_STORAGES[name])
        raise _Corrupt(f"refusing to unpickle {module}.{name}: only plain tensors are allowed "
                       "(a pickle can run arbitrary code)")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
                and isinstance(pid[1], _StorageType)):
            raise _Corrupt(f"unsupported storage reference {pid!r}")
        _, storage_type, key, _device, numel = pid
        return self._load_storage(storage_type, str(key), int(numel))


def read_pytorch_bin(path) -> dict:
    """``{name: np.ndarray}`` from a zip-format ``torch.save`` file (torch >= 1.6)."""
    if not zipfile.is_zipfile(path):
        with open(path, "rb") as f:
            magic = f.read(4)
        if magic.startswith(b"PK"):
            raise ConversionError(f"{path}: corrupt or truncated zip archive "
                                  "(PyTorch checkpoints are zip files)")
        if magic[:1] == b"\x80":
            raise ConversionError(f"{path}: legacy (pre-1.6, non-zip) PyTorch format; re-save it with a "
                                  "recent torch: torch.save(torch.load(path), path)")
        raise ConversionError(f"{path}: not a PyTorch checkpoint (not a zip archive)")
    try:
        with zipfile.ZipFile(path) as archive:
            return _read_torch_archive(archive)
    except (_Corrupt, zipfile.BadZipFile, pickle.UnpicklingError, EOFError) as err:
        raise ConversionError(f"{path}: {err}") from None
    except (ValueError, TypeError, KeyError, IndexError) as err:     # garbage that unpickled oddly
        raise ConversionError(f"{path}: corrupt data.pkl ({type(err).__name__}: {err})") from None


def _read_torch_archive(archive) -> dict:
    pickles = [n for n in archive.namelist() if n.endswith("/data.pkl") and n.count("/") == 1]
    if len(pickles) != 1:
        raise _Corrupt(f"expected one <archive>/data.pkl, found {pickles}")
    prefix = pickles[0][:-len("data.pkl")]
    big_endian = False
    if prefix + "byteorder" in archive.namelist():
        big_endian = archive.read(prefix + "byteorder").strip() == b"big"
    storages = {}

    def load_storage(storage_type, key, numel):
        if key not in storages:
            member = f"{prefix}data/{key}"
            if member not in archive.namelist():
                raise _Corrupt(f"missing storage member {member}")
            raw = archive.read(member)
            needed = numel * _np_dtype(storage_type.code).itemsize
            if len(raw) < needed:
                raise _Corrupt(f"storage {member} has {len(raw)} bytes, expected {needed}")
            storages[key] = _decode(raw[:needed], storage_type.code, (numel,), big_endian)
        return storages[key]

    with archive.open(pickles[0]) as f:
        state = _TorchUnpickler(f, load_storage).load()
    wrapped = isinstance(state, dict) and len(state) == 1 and next(iter(state)) in ("state_dict", "model")
    if wrapped and isinstance(next(iter(state.values())), dict):      # {"state_dict": {...}}
        state = next(iter(state.values()))
    if not isinstance(state, dict):
        raise _Corrupt(f"expected a state dict {{name: tensor}}, got {type(state).__name__}")
    not_tensors = [k for k, v in state.items() if not isinstance(v, np.ndarray)]
    if not_tensors:
        raise _Corrupt(f"entries that are not tensors: {not_tensors[:5]}")
    return dict(state)


# ================================================================= safetensors
_SAFETENSORS_DTYPES = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "bf16", "I64": "<i8", "I32": "<i4",
    "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "?",
}


def read_safetensors(path) -> dict:
    """``{name: np.ndarray}`` from a ``.safetensors`` file, checking every offset."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ConversionError(f"{path}: too short to be a safetensors file ({size} bytes)")
        header_len = int.from_bytes(head, "little")
        if header_len > size - 8:
            raise ConversionError(f"{path}: header length {header_len} exceeds the file size {size} "
                                  "(truncated, or not a safetensors file)")
        try:
            header = json.loads(f.read(header_len))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise ConversionError(f"{path}: bad safetensors header, not valid JSON ({err})") from None
        if not isinstance(header, dict):
            raise ConversionError(f"{path}: bad safetensors header, expected a JSON object")
        data_start = 8 + header_len
        arrays = {}
        for name, info in header.items():
            if name == "__metadata__":
                continue
            try:
                dtype, shape, (begin, end) = info["dtype"], tuple(info["shape"]), info["data_offsets"]
                if not all(isinstance(v, int) and v >= 0 for v in (*shape, begin, end)):
                    raise ValueError
            except (KeyError, TypeError, ValueError):
                raise ConversionError(f"{path}: bad safetensors header entry for tensor {name}: "
                                      f"{info!r}") from None
            if dtype not in _SAFETENSORS_DTYPES:
                raise ConversionError(f"{path}: tensor {name} has unsupported dtype {dtype}")
            code = _SAFETENSORS_DTYPES[dtype]
            nbytes = math.prod(shape) * _np_dtype(code).itemsize
            if not 0 <= begin <= end or end - begin != nbytes:
                raise ConversionError(f"{path}: tensor {name}: data_offsets [{begin}, {end}] do not fit "
                                      f"shape {list(shape)} of {dtype}")
            if data_start + end > size:
                raise ConversionError(f"{path}: tensor {name} ends at byte {data_start + end} but the file "
                                      f"has only {size} bytes (truncated?)")
            f.seek(data_start + begin)
            arrays[name] = _decode(f.read(nbytes), code, shape)
    return arrays


# ============================================================ TF tensor bundle
_TABLE_MAGIC = 0xDB4775248B80FB57
_FOOTER_SIZE = 48          # two BlockHandles (varints, padded to 40 bytes) + 8-byte magic
_BLOCK_TRAILER = 5         # 1 byte compression type + 4 bytes masked crc32c

# tensorflow/core/framework/types.proto DataType -> numpy code. Others (DT_STRING=7,
# DT_RESOURCE=20, DT_VARIANT=21, ...) are never weights and are skipped.
_TF_DTYPES = {1: "<f4", 2: "<f8", 3: "<i4", 4: "u1", 5: "<i2", 6: "i1", 9: "<i8", 10: "?",
              14: "bf16", 17: "<u2", 19: "<f2", 22: "<u4", 23: "<u8"}


def _varint(buf, pos):
    """Decode a base-128 varint at ``pos``: (value, next position)."""
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise _Corrupt("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise _Corrupt("varint too long")


def _proto_fields(buf):
    """Iterate over a protobuf message: (field number, value); value is int or bytes."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:                                   # varint
            value, pos = _varint(buf, pos)
        elif wire == 1:                                 # fixed64
            value, pos = int.from_bytes(buf[pos:pos + 8], "little"), pos + 8
        elif wire == 2:                                 # length-delimited
            length, pos = _varint(buf, pos)
            value, pos = bytes(buf[pos:pos + length]), pos + length
        elif wire == 5:                                 # fixed32
            value, pos = int.from_bytes(buf[pos:pos + 4], "little"), pos + 4
        else:
            raise _Corrupt(f"unsupported protobuf wire type {wire}")
        if pos > len(buf):
            raise _Corrupt("truncated protobuf message")
        yield field, value


def _int64(value):
    """A varint read as a signed int64 (negative numbers are 10-byte two's complement)."""
    return value - (1 << 64) if value >= 1 << 63 else value


def _parse_shape(buf):
    """TensorShapeProto: dim = 2 (repeated TensorShapeProto.Dim: size = 1), unknown_rank = 3."""
    dims = []
    for field, value in _proto_fields(buf):
        if field == 2:
            size = 0
            for dim_field, dim_value in _proto_fields(value):
                if dim_field == 1:
                    size = _int64(dim_value)
            dims.append(size)
        elif field == 3 and value:
            return None
    return tuple(dims)


def _parse_header(buf):
    """BundleHeaderProto: num_shards = 1, endianness = 2 (0 little, 1 big), version = 3."""
    header = {"num_shards": 1, "endianness": 0}
    for field, value in _proto_fields(buf):
        if field == 1:
            header["num_shards"] = value
        elif field == 2:
            header["endianness"] = value
    return header


def _parse_entry(buf):
    """BundleEntryProto: dtype = 1, shape = 2, shard_id = 3, offset = 4, size = 5,
    crc32c = 6 (fixed32, masked), slices = 7 (set for partitioned variables)."""
    entry = {"dtype": 0, "shape": (), "shard_id": 0, "offset": 0, "size": 0, "crc32c": None, "sliced": False}
    names = {1: "dtype", 3: "shard_id", 4: "offset", 5: "size", 6: "crc32c"}
    for field, value in _proto_fields(buf):
        if field == 2:
            entry["shape"] = _parse_shape(value)
        elif field == 7:
            entry["sliced"] = True
        elif field in names:
            entry[names[field]] = value
    return entry


def _read_block(table, offset, size):
    """One table block, checked against its 5-byte trailer (compression type, masked crc32c)."""
    end = offset + size
    if end + _BLOCK_TRAILER > len(table) - _FOOTER_SIZE:
        raise _Corrupt(f"block at offset {offset} (size {size}) runs past the end of the table")
    block, kind = table[offset:end], table[end]
    if kind != 0:
        raise _Corrupt(f"block at offset {offset} uses compression type {kind} (1 = snappy); "
                       "only uncompressed tables are supported")
    stored = int.from_bytes(table[end + 1:end + _BLOCK_TRAILER], "little")
    if unmask_crc(stored) != crc32c(table[offset:end + 1]):
        raise _Corrupt(f"checksum mismatch in table block at offset {offset}")
    return block


def _block_entries(block):
    """Iterate (key, value) over a block: prefix-compressed entries, then restart points.

    Entry = varint shared, varint non_shared, varint value_len, key[shared:], value.
    The block ends with uint32 restart offsets and their uint32 count (used for
    binary search; a full scan does not need them).
    """
    if len(block) < 4:
        raise _Corrupt("table block too short")
    num_restarts = int.from_bytes(block[-4:], "little")
    limit = len(block) - 4 - 4 * num_restarts
    if limit < 0:
        raise _Corrupt("bad restart count in table block")
    pos, key = 0, b""
    while pos < limit:
        shared, pos = _varint(block, pos)
        non_shared, pos = _varint(block, pos)
        value_len, pos = _varint(block, pos)
        if shared > len(key) or pos + non_shared + value_len > limit:
            raise _Corrupt("bad entry in table block")
        key = key[:shared] + bytes(block[pos:pos + non_shared])
        pos += non_shared
        yield key, block[pos:pos + value_len]
        pos += value_len


def _read_table(table):
    """Iterate (key, value) over a whole LevelDB-style sorted table (the ``.index`` file).

    Footer (last 48 bytes): metaindex BlockHandle, index BlockHandle (each two
    varints: offset, size), zero padding, magic. The index block maps the last key
    of each data block to that block's handle.
    """
    if len(table) < _FOOTER_SIZE:
        raise _Corrupt(f"too short for a TF checkpoint index ({len(table)} bytes)")
    footer = table[-_FOOTER_SIZE:]
    if int.from_bytes(footer[-8:], "little") != _TABLE_MAGIC:
        raise _Corrupt("bad magic number: not a TF checkpoint index (truncated?)")
    _, pos = _varint(footer, 0)               # metaindex handle: unused (no filters in checkpoints)
    _, pos = _varint(footer, pos)
    index_offset, pos = _varint(footer, pos)
    index_size, _ = _varint(footer, pos)
    for _, handle in _block_entries(_read_block(table, index_offset, index_size)):
        offset, pos = _varint(handle, 0)
        size, _ = _varint(handle, pos)
        yield from _block_entries(_read_block(table, offset, size))


def tf_checkpoint_prefix(path) -> str:
    """The checkpoint prefix (``.../model.ckpt-10000``) from a prefix, ``.index``, data file or folder."""
    if os.path.isdir(path):
        return _tf_prefix_in_dir(path)
    if path.endswith(".index") and os.path.isfile(path):
        return path[:-len(".index")]
    data = re.fullmatch(r"(.*)\.data-\d{5}-of-\d{5}", path)
    if data and os.path.isfile(path):
        return data.group(1)
    if os.path.isfile(path + ".index"):
        return path
    raise FileNotFoundError(f"no TF checkpoint at {path} (no {path}.index)")


def _tf_prefix_in_dir(directory):
    indexes = sorted(glob.glob(os.path.join(directory, "*.index")))
    if len(indexes) == 1:
        return indexes[0][:-len(".index")]
    state = os.path.join(directory, "checkpoint")      # what tf.train.Saver writes: the latest one
    if indexes and os.path.isfile(state):
        with open(state, encoding="utf-8") as f:
            found = re.search(r'^model_checkpoint_path:\s*"(.*)"', f.read(), re.M)
        if found:
            prefix = os.path.join(directory, os.path.basename(found.group(1)))
            if os.path.isfile(prefix + ".index"):
                return prefix
    if indexes:
        names = [os.path.basename(i) for i in indexes]
        raise ConversionError(f"{directory}: several TF checkpoints {names}; name one, e.g. {indexes[-1]}")
    raise FileNotFoundError(f"{directory}: no TF checkpoint (*.index) found")


def read_tf_checkpoint(path) -> dict:
    """``{name: np.ndarray}`` from a TF tensor bundle; string/resource tensors are skipped.

    ``path``: the prefix, the ``.index`` file, a data file, or a folder holding one checkpoint.
    Every tensor's bytes are checked against the crc32c stored in the index.
    """
    prefix = tf_checkpoint_prefix(path)
    index_path = prefix + ".index"
    with open(index_path, "rb") as f:
        table = memoryview(f.read())
    header, entries = None, {}
    try:
        for key, value in _read_table(table):
            if key == b"":
                header = _parse_header(value)
            else:
                entries[key.decode("utf-8", "backslashreplace")] = _parse_entry(value)
    except _Corrupt as err:
        raise ConversionError(f"{index_path}: {err}") from None
    if header is None:
        raise ConversionError(f"{index_path}: no bundle header (not a TF V2 checkpoint index)")
    if header["endianness"] != 0:
        raise ConversionError(f"{index_path}: big-endian checkpoints are not supported")
    sliced = [name for name, entry in entries.items() if entry["sliced"]]
    if sliced:
        raise ConversionError(f"{index_path}: partitioned variables are not supported: {sliced[:5]}")
    return _read_tf_data(prefix, header["num_shards"], entries)


def _read_tf_data(prefix, num_shards, entries):
    arrays, files = {}, {}
    try:
        for name, entry in sorted(entries.items(), key=lambda item: (item[1]["shard_id"], item[1]["offset"])):
            code = _TF_DTYPES.get(entry["dtype"])
            if code is None:
                continue                                   # strings, resources: not weights
            data_path = f"{prefix}.data-{entry['shard_id']:05d}-of-{num_shards:05d}"
            if data_path not in files:
                if not os.path.isfile(data_path):
                    raise FileNotFoundError(f"TF checkpoint data file not found: {data_path}")
                files[data_path] = open(data_path, "rb")
            arrays[name] = _read_tf_tensor(files[data_path], data_path, name, entry, code)
    finally:
        for f in files.values():
            f.close()
    return arrays


def _read_tf_tensor(f, data_path, name, entry, code):
    shape = entry["shape"]
    if shape is None or any(d < 0 for d in shape):
        raise ConversionError(f"{data_path}: tensor {name} has no fully known shape")
    nbytes = math.prod(shape) * _np_dtype(code).itemsize
    if entry["size"] != nbytes:
        raise ConversionError(f"{data_path}: tensor {name}: index says {entry['size']} bytes, "
                              f"shape {list(shape)} needs {nbytes}")
    file_size = os.fstat(f.fileno()).st_size
    if entry["offset"] + nbytes > file_size:
        raise ConversionError(f"{data_path}: tensor {name} needs bytes up to {entry['offset'] + nbytes} "
                              f"but the file has only {file_size} (truncated?)")
    f.seek(entry["offset"])
    buf = f.read(nbytes)
    if entry["crc32c"] is not None and unmask_crc(entry["crc32c"]) != crc32c(buf):
        raise ConversionError(f"{data_path}: checksum (crc32c) mismatch for tensor {name}: "
                              "the data file is corrupt")
    return _decode(buf, code, shape)


# =============================================================== name mapping
# Hugging Face names are ours. Dropped: the MLM decoder, which is tied to the word
# embeddings (weight) and to predictions.bias (bias), and non-persistent buffers.
_HF_TIED = {"predictions.decoder.weight": "albert.embeddings.word_embeddings.weight",
            "predictions.decoder.bias": "predictions.bias"}
_HF_BUFFERS = ("embeddings.position_ids", "embeddings.token_type_ids")
_HF_BACKBONE = ("embeddings.", "encoder.", "pooler.")

# Google's TF names. Whole names first, then scopes whose leaves are kernel/bias
# (dense, kernel [in, out] is transposed) or gamma/beta (LayerNorm).
_TF_NAMES = {
    "bert/embeddings/word_embeddings": "albert.embeddings.word_embeddings.weight",
    "bert/embeddings/position_embeddings": "albert.embeddings.position_embeddings.weight",
    "bert/embeddings/token_type_embeddings": "albert.embeddings.token_type_embeddings.weight",
    "cls/predictions/output_bias": "predictions.bias",
    "cls/seq_relationship/output_weights": "sop_classifier.classifier.weight",   # already [2, H]
    "cls/seq_relationship/output_bias": "sop_classifier.classifier.bias",
    "output_weights": "classifier.weight",                                     # run_classifier.py, [labels, H]
    "output_bias": "classifier.bias",
}
_TF_SCOPES = {
    "bert/embeddings/LayerNorm": "albert.embeddings.LayerNorm",
    "bert/encoder/embedding_hidden_mapping_in": "albert.encoder.embedding_hidden_mapping_in",
    "bert/pooler/dense": "albert.pooler",
    "cls/predictions/transform/dense": "predictions.dense",
    "cls/predictions/transform/LayerNorm": "predictions.LayerNorm",
}
_TF_LAYER_SCOPES = {   # inside bert/encoder/transformer/group_{g}/inner_group_{i}/
    "attention_1/self/query": "attention.query",
    "attention_1/self/key": "attention.key",
    "attention_1/self/value": "attention.value",
    "attention_1/output/dense": "attention.dense",
    "LayerNorm": "attention.LayerNorm",                 # after attention + residual
    "ffn_1/intermediate/dense": "ffn",
    "ffn_1/intermediate/output/dense": "ffn_output",
    "LayerNorm_1": "full_layer_layer_norm",             # after the feed-forward + residual
}
_TF_LAYER = re.compile(r"bert/encoder/transformer/group_(\d+)/inner_group_(\d+)/(.+)")
_TF_DENSE_LEAVES = {"kernel": "weight", "bias": "bias"}
_TF_NORM_LEAVES = {"gamma": "weight", "beta": "bias"}
_TF_BOOKKEEPING = ("adam_m", "adam_v", "/Adam", "_power", "global_step")


def hf_name(name):
    """Our name for a Hugging Face tensor, or None to drop it (tied decoder, buffers)."""
    if name in _HF_TIED or name.endswith(_HF_BUFFERS):
        return None
    return "albert." + name if name.startswith(_HF_BACKBONE) else name


def tf_name(name):
    """(our name, transpose?) for a Google TF variable, or None if it has no place in ALBERT."""
    if name.startswith("module/"):            # TF-Hub exports
        name = name[len("module/"):]
    if name in _TF_NAMES:
        return _TF_NAMES[name], False
    scope, _, leaf = name.rpartition("/")
    layer = _TF_LAYER.fullmatch(scope)
    if layer:
        group, inner, sub = layer.groups()
        module = _TF_LAYER_SCOPES.get(sub)
        module = module and f"albert.encoder.albert_layer_groups.{group}.albert_layers.{inner}.{module}"
    else:
        module = _TF_SCOPES.get(scope)
    if module is None:
        return None
    leaves = _TF_NORM_LEAVES if module.endswith(("LayerNorm", "layer_norm")) else _TF_DENSE_LEAVES
    if leaf not in leaves:
        return None
    return f"{module}.{leaves[leaf]}", leaf == "kernel"


def is_tf_bookkeeping(name):
    """Optimizer slots and step counters that TF checkpoints carry next to the weights."""
    return any(marker in name for marker in _TF_BOOKKEEPING)


def map_names(arrays, fmt):
    """Rename source tensors to ours.

    Returns (mapped {our name: array}, source {our name: source name},
    dropped [source names deliberately left out], unknown [source names with no place]).
    """
    mapped, source, dropped, unknown = {}, {}, [], []
    for name, array in arrays.items():
        if fmt == "tf":
            if is_tf_bookkeeping(name):
                dropped.append(name)
                continue
            target = tf_name(name)
            if target is None:
                unknown.append(name)
                continue
            ours, transpose = target
            if transpose:
                array = array.T
        else:
            ours = hf_name(name)
            if ours is None:
                dropped.append(name)
                continue
        if ours in mapped:
            raise ConversionError(f"both {source[ours]} and {name} map to {ours}")
        mapped[ours], source[ours] = array, name
    if fmt != "tf":
        if "predictions.bias" not in mapped and "predictions.decoder.bias" in arrays:   # older HF files
            mapped["predictions.bias"] = arrays["predictions.decoder.bias"]
            source["predictions.bias"] = "predictions.decoder.bias"
            dropped.remove("predictions.decoder.bias")
        _check_tied(arrays, mapped)
    return mapped, source, dropped, unknown


def _check_tied(arrays, mapped):
    """The dropped HF decoder must really equal what our model ties it to."""
    for dropped, tied in _HF_TIED.items():
        if dropped in arrays and tied in mapped and not np.array_equal(arrays[dropped], mapped[tied]):
            raise ConversionError(f"{dropped} differs from {tied}: untied MLM decoders are not supported")


# ====================================================================== config
_CONFIG_NAMES = ("config.json", "albert_config.json")


def find_config(weights_path, fmt):
    """``config.json`` (HF) or ``albert_config.json`` (Google) next to the weights."""
    directory = os.path.dirname(os.path.abspath(weights_path))
    for name in (reversed(_CONFIG_NAMES) if fmt == "tf" else _CONFIG_NAMES):
        if os.path.isfile(os.path.join(directory, name)):
            return os.path.join(directory, name)
    raise FileNotFoundError(f"no config.json or albert_config.json next to {weights_path}; pass --config PATH")


def load_source_config(path, tf_source):
    """(AlbertConfig, whether the file fixes num_labels) from an HF or Google config file.

    Google's ``albert_config.json`` has no ``model_type`` and its ``"gelu"`` is the
    tanh approximation (HF's ``gelu_new``); an HF ``config.json`` means what it says.
    """
    data = read_json_object(path)
    if tf_source and "model_type" not in data and data.get("hidden_act") == "gelu":
        data["hidden_act"] = "gelu_new"
    if data.get("net_structure_type", 0) or data.get("layers_to_keep"):
        raise ConfigError(f"{path}: net_structure_type / layers_to_keep variants are not supported")
    labels_given = "num_labels" in data or isinstance(data.get("id2label"), dict)
    return AlbertConfig.from_dict(data, source=path), labels_given


# ==================================================================== convert
HEADS = {"mlm": "predictions.", "sop": "sop_classifier.", "classifier": "classifier."}
OPTIONAL_HEADS = ("predictions.", "sop_classifier.")
SPIECE_NAMES = ("spiece.model", "30k-clean.model")
READERS = {"pytorch": read_pytorch_bin, "safetensors": read_safetensors, "tf": read_tf_checkpoint}


def find_weights(src):
    """(weights path, format) for a file, a TF prefix, or a folder holding one of them."""
    if os.path.isdir(src):
        for name, fmt in (("model.safetensors", "safetensors"), ("pytorch_model.bin", "pytorch")):
            if os.path.isfile(os.path.join(src, name)):
                return os.path.join(src, name), fmt
        return tf_checkpoint_prefix(src), "tf"
    if os.path.isfile(src):
        if src.endswith(".safetensors"):
            return src, "safetensors"
        if src.endswith(".index") or re.search(r"\.data-\d{5}-of-\d{5}$", src):
            return tf_checkpoint_prefix(src), "tf"
        return src, "pytorch"
    if os.path.isfile(src + ".index"):
        return src, "tf"
    raise FileNotFoundError(f"no such file or folder: {src}")


def model_classes(heads):
    """The model classes whose parameters the converted tensors must match."""
    from .modeling import AlbertForPreTraining, AlbertForSequenceClassification, AlbertModel
    classes = []
    if {"mlm", "sop"} & set(heads):
        classes.append(AlbertForPreTraining)
    if "classifier" in heads:
        classes.append(AlbertForSequenceClassification)
    return classes or [AlbertModel]


def expected_shapes(config, classes):
    """{our name: shape} of every parameter of the given model classes, built from ``config``."""
    from .checkpoint import full_name
    shapes = {}
    for cls in classes:
        model = cls(config)
        shapes.update({full_name(model, p.name): tuple(p.shape) for p in model.get_parameters()})
    return shapes


def _listing(names, limit=8):
    names = list(names)
    more = f" ... and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def check_tensors(mapped, source, unknown, expected, allow_missing_heads, weights_path):
    """Every tensor must have a place of the right shape; every parameter must be there.

    Missing MLM/SOP head tensors are tolerated with ``allow_missing_heads``.
    """
    problems = []
    unknown = unknown + [source[n] for n in mapped if n not in expected]
    if unknown:
        problems.append(f"tensors with no place in the model: {_listing(unknown)}")
    mismatched = [f"{n}{'' if source[n] == n else f' ({source[n]})'}: checkpoint {tuple(mapped[n].shape)} "
                  f"vs config {shape}"
                  for n, shape in expected.items() if n in mapped and tuple(mapped[n].shape) != shape]
    if mismatched:
        problems.append(f"shape mismatch (does the config fit these weights?): {_listing(mismatched, 4)}")
    missing = [n for n in expected if n not in mapped]
    optional = [n for n in missing if n.startswith(OPTIONAL_HEADS)]
    if allow_missing_heads:
        missing = [n for n in missing if n not in optional]
    if missing:
        hint = ""
        if optional and not allow_missing_heads:
            hint = " (MLM/SOP head tensors may be left out with --allow-missing-heads)"
        problems.append(f"missing tensors: {_listing(missing)}{hint}")
    if problems:
        raise ConversionError(f"{weights_path}: " + "; ".join(problems))


def _with_num_labels(config, labels_given, mapped, config_path):
    rows = mapped["classifier.weight"].shape[0] if "classifier.weight" in mapped else config.num_labels
    if rows == config.num_labels:
        return config
    if labels_given:
        raise ConversionError(f"{config_path} says num_labels={config.num_labels} but classifier.weight "
                              f"has {rows} rows")
    return dataclasses.replace(config, num_labels=rows)


def convert(src, dst, config_path=None, allow_missing_heads=False, force=False) -> dict:
    """Convert ``src`` (a checkpoint file, TF prefix or folder) into the model folder ``dst``.

    Returns a report: source, format, dst, tensors, dropped, heads, classes, parameters.
    """
    if os.path.exists(dst) and not force:
        raise FileExistsError(f"{dst} already exists (pass force=True / --force to replace it)")
    weights_path, fmt = find_weights(src)
    if os.path.abspath(dst) == os.path.dirname(os.path.abspath(weights_path)):
        raise ConversionError(f"{dst}: the output folder must not be the source folder")
    arrays = READERS[fmt](weights_path)
    try:
        mapped, source, dropped, unknown = map_names(arrays, fmt)
    except ConversionError as err:
        raise ConversionError(f"{weights_path}: {err}") from None
    del arrays                                    # frees what was dropped (optimizer slots...)
    config_path = config_path or find_config(weights_path, fmt)
    config, labels_given = load_source_config(config_path, fmt == "tf")
    heads = [h for h, prefix in HEADS.items() if any(n.startswith(prefix) for n in mapped)]
    if "classifier" in heads:
        config = _with_num_labels(config, labels_given, mapped, config_path)
    classes = model_classes(heads)
    check_tensors(mapped, source, unknown, expected_shapes(config, classes), allow_missing_heads, weights_path)

    from .checkpoint import CHECKPOINT_FILE, CONFIG_FILE, SPIECE_FILE, atomic_directory, write_checkpoint
    arrays = {n: np.ascontiguousarray(a, dtype=np.float32) for n, a in mapped.items()}
    spiece = [os.path.join(os.path.dirname(os.path.abspath(weights_path)), n) for n in SPIECE_NAMES]
    spiece = next((p for p in spiece if os.path.isfile(p)), None)
    with atomic_directory(dst, overwrite=force, protect=(src, weights_path)) as tmp:
        config.to_json_file(os.path.join(tmp, CONFIG_FILE))
        write_checkpoint(arrays, os.path.join(tmp, CHECKPOINT_FILE))
        if spiece:
            shutil.copyfile(spiece, os.path.join(tmp, SPIECE_FILE))
    return {"source": weights_path, "format": fmt, "config": config_path, "dst": dst,
            "tensors": len(arrays), "dropped": dropped, "heads": heads,
            "classes": [c.__name__ for c in classes],
            "num_labels": config.num_labels if "classifier" in heads else None,
            "parameters": sum(a.size for a in arrays.values()), "spiece": spiece,
            "model_config": config}


# ======================================================================== CLI
def summary(report) -> str:
    c = report["model_config"]
    dropped = report["dropped"]
    lines = [
        f"converted {report['source']} ({report['format']}) -> {report['dst']}",
        f"  config:     {report['config']}",
        f"              L={c.num_hidden_layers} H={c.hidden_size} E={c.embedding_size} "
        f"heads={c.num_attention_heads} I={c.intermediate_size} groups={c.num_hidden_groups}x{c.inner_group_num} "
        f"vocab={c.vocab_size} act={c.hidden_act}",
        f"  tensors:    {report['tensors']} converted, {len(dropped)} dropped"
        + (f" ({_listing(dropped, 4)})" if dropped else ""),
        f"  heads:      {', '.join(report['heads']) or 'none (backbone only)'}"
        + (f"  num_labels={report['num_labels']}" if report["num_labels"] else ""),
        f"  load with:  {', '.join(report['classes'])}.from_pretrained({report['dst']!r})",
        f"  parameters: {report['parameters']:,}",
        f"  tokenizer:  {report['spiece'] or 'none (no spiece.model / 30k-clean.model next to the weights)'}",
    ]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m albert_min.convert", description=__doc__.split("\n\n")[0])
    parser.add_argument("src", help="pytorch_model.bin, model.safetensors, a TF checkpoint (prefix or .index), "
                                    "or a folder holding one")
    parser.add_argument("dst", help="output model folder")
    parser.add_argument("--config", help="config file (default: config.json / albert_config.json next to SRC)")
    parser.add_argument("--allow-missing-heads", action="store_true",
                        help="accept a checkpoint without (some) MLM/SOP head tensors")
    parser.add_argument("--force", action="store_true", help="replace DST if it exists")
    args = parser.parse_args(argv)
    import mindspore as ms
    ms.set_device("CPU")
    try:
        report = convert(args.src, args.dst, args.config, args.allow_missing_heads, args.force)
    except (ConversionError, ConfigError, FileNotFoundError, FileExistsError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(summary(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
