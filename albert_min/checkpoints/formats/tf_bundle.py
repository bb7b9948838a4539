"""TensorFlow checkpoints (Google's ALBERT releases, ``model.ckpt-N``): the "tensor bundle".

* ``<prefix>.index``: a LevelDB-style sorted table (SSTable). Its entries map each
  variable name to a ``BundleEntryProto`` (dtype, shape, shard, offset, size,
  crc32c); the entry with the empty key is the ``BundleHeaderProto``.
* ``<prefix>.data-00000-of-0000N``: the raw bytes the entries point into.

Both protobuf messages are decoded by hand (a dozen lines: varints and
length-delimited fields), so neither TensorFlow nor protobuf is needed. Every
table block and every tensor is checked against its crc32c, and every offset
and size against the real file size before anything is read.
"""

import glob
import math
import os
import re

from .common import CHUNK, MALFORMED, ConversionError, Corrupt, brief, decode, malformed, np_dtype, read_exactly
from .crc32c import crc32c, unmask_crc

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
            raise Corrupt("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise Corrupt("varint too long")


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
            raise Corrupt(f"unsupported protobuf wire type {wire}")
        if pos > len(buf):
            raise Corrupt("truncated protobuf message")
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
        raise Corrupt(f"block at offset {offset} (size {size}) runs past the end of the table")
    block, kind = table[offset:end], table[end]
    if kind != 0:
        raise Corrupt(f"block at offset {offset} uses compression type {kind} (1 = snappy); "
                       "only uncompressed tables are supported")
    stored = int.from_bytes(table[end + 1:end + _BLOCK_TRAILER], "little")
    if unmask_crc(stored) != crc32c(table[offset:end + 1]):
        raise Corrupt(f"checksum mismatch in table block at offset {offset}")
    return block


def _block_entries(block):
    """Iterate (key, value) over a block: prefix-compressed entries, then restart points.

    Entry = varint shared, varint non_shared, varint value_len, key[shared:], value.
    The block ends with uint32 restart offsets and their uint32 count (used for
    binary search; a full scan does not need them).
    """
    if len(block) < 4:
        raise Corrupt("table block too short")
    num_restarts = int.from_bytes(block[-4:], "little")
    limit = len(block) - 4 - 4 * num_restarts
    if limit < 0:
        raise Corrupt("bad restart count in table block")
    pos, key = 0, b""
    while pos < limit:
        shared, pos = _varint(block, pos)
        non_shared, pos = _varint(block, pos)
        value_len, pos = _varint(block, pos)
        if shared > len(key) or pos + non_shared + value_len > limit:
            raise Corrupt("bad entry in table block")
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
        raise Corrupt(f"too short for a TF checkpoint index ({len(table)} bytes)")
    footer = table[-_FOOTER_SIZE:]
    if int.from_bytes(footer[-8:], "little") != _TABLE_MAGIC:
        raise Corrupt("bad magic number: not a TF checkpoint index (truncated?)")
    _, pos = _varint(footer, 0)               # metaindex handle: unused (no filters in checkpoints)
    _, pos = _varint(footer, pos)
    index_offset, pos = _varint(footer, pos)
    index_size, _ = _varint(footer, pos)
    for _, handle in _block_entries(_read_block(table, index_offset, index_size)):
        offset, pos = _varint(handle, 0)
        size, _ = _varint(handle, pos)
        yield from _block_entries(_read_block(table, offset, size))



# ================================================================ the bundle
_INDEX_LIMIT = 1 << 30     # an index is ~100 bytes per variable; refuse absurd ones before reading


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
    raise ConversionError(f"no TF checkpoint at {path} (no {path}.index)")


def _tf_prefix_in_dir(directory):
    indexes = sorted(glob.glob(os.path.join(glob.escape(directory), "*.index")))
    if len(indexes) == 1:
        return indexes[0][:-len(".index")]
    state = os.path.join(directory, "checkpoint")      # what tf.train.Saver writes: the latest one
    if indexes and os.path.isfile(state):
        try:
            with open(state, "rb") as f:
                text = f.read(1 << 20).decode("utf-8", "replace")
        except OSError as err:
            raise malformed(state, err) from None
        found = re.search(r'^model_checkpoint_path:\s*"(.*)"', text, re.M)
        if found:
            prefix = os.path.join(directory, os.path.basename(found.group(1)))
            if os.path.isfile(prefix + ".index"):
                return prefix
    if indexes:
        names = [os.path.basename(i) for i in indexes]
        raise ConversionError(f"{directory}: several TF checkpoints {brief(names)}; name one, e.g. {indexes[-1]}")
    raise ConversionError(f"{directory}: no checkpoint found (no model.safetensors, pytorch_model.bin, "
                          "*.index.json or TF *.index)")


def read_tf_checkpoint(path, select=None, verify_skipped=True) -> dict:
    """``{name: np.ndarray}`` from a TF tensor bundle; string/resource tensors are skipped.

    ``path``: the prefix, the ``.index`` file, a data file, or a folder holding one checkpoint.
    ``select(name)`` may leave tensors out (e.g. Adam slots, 2/3 of a training
    checkpoint); they are never held in memory, but with ``verify_skipped`` their
    bytes are still checked against their crc32c, in pieces, so a corrupt bundle
    is reported whichever tensors are used.
    """
    prefix = tf_checkpoint_prefix(path)
    index_path = prefix + ".index"
    header, entries = None, {}
    try:
        if os.path.getsize(index_path) > _INDEX_LIMIT:
            raise Corrupt(f"{os.path.getsize(index_path)} bytes is far too large for a checkpoint index")
        with open(index_path, "rb") as f:
            table = memoryview(f.read())
        for key, value in _read_table(table):
            if key == b"":
                header = _parse_header(value)
            else:
                entries[key.decode("utf-8", "backslashreplace")] = _parse_entry(value)
    except (OSError, *MALFORMED) as err:
        raise malformed(index_path, err) from None
    if header is None:
        raise ConversionError(f"{index_path}: no bundle header (not a TF V2 checkpoint index)")
    if header["endianness"] != 0:
        raise ConversionError(f"{index_path}: big-endian checkpoints are not supported")
    if not 1 <= header["num_shards"] <= 99999:
        raise ConversionError(f"{index_path}: bad number of shards {header['num_shards']}")
    sliced = [name for name, entry in entries.items() if entry["sliced"]]
    if sliced:
        raise ConversionError(f"{index_path}: partitioned variables are not supported: {brief(sliced[:5])}")
    return _read_tf_data(prefix, header["num_shards"], entries, select, verify_skipped)


def _read_tf_data(prefix, num_shards, entries, select, verify_skipped):
    arrays, files = {}, {}
    data_path = prefix + ".data-?????"
    try:
        for name, entry in sorted(entries.items(), key=lambda item: (item[1]["shard_id"], item[1]["offset"])):
            code = _TF_DTYPES.get(entry["dtype"])
            if code is None:
                continue                                   # strings, resources: not weights
            keep = select is None or select(name)
            if not keep and not verify_skipped:
                continue
            if not 0 <= entry["shard_id"] < num_shards:
                raise ConversionError(f"{prefix}.index: tensor {brief(name)} is in shard {entry['shard_id']} "
                                      f"of {num_shards}")
            data_path = f"{prefix}.data-{entry['shard_id']:05d}-of-{num_shards:05d}"
            if data_path not in files:
                if not os.path.isfile(data_path):
                    raise ConversionError(f"TF checkpoint data file not found: {data_path}")
                files[data_path] = open(data_path, "rb")
            if keep:
                arrays[name] = _read_tf_tensor(files[data_path], name, entry, code)
            else:
                _verify_tf_tensor(files[data_path], name, entry, code)
    except Corrupt as err:
        raise ConversionError(f"{data_path}: {err}") from None
    except (OSError, *MALFORMED) as err:
        raise malformed(data_path, err) from None
    finally:
        for f in files.values():
            f.close()
    return arrays


def _check_extent(f, name, entry, code):
    """The tensor's byte count from its shape; checked against the index and the file size."""
    shape = entry["shape"]
    if shape is None or any(d < 0 for d in shape):
        raise Corrupt(f"tensor {brief(name)} has no fully known shape")
    nbytes = math.prod(shape) * np_dtype(code).itemsize
    if entry["size"] != nbytes:
        raise Corrupt(f"tensor {brief(name)}: index says {entry['size']} bytes, shape {brief(list(shape))} needs {nbytes}")
    file_size = os.fstat(f.fileno()).st_size
    if entry["offset"] + nbytes > file_size:
        raise Corrupt(f"tensor {brief(name)} needs bytes up to {entry['offset'] + nbytes} but the file has only "
                      f"{file_size} (truncated?)")
    f.seek(entry["offset"])
    return shape, nbytes


def _check_crc(entry, crc, name):
    if entry["crc32c"] is not None and unmask_crc(entry["crc32c"]) != crc:
        raise Corrupt(f"checksum (crc32c) mismatch for tensor {brief(name)}: the data file is corrupt")


def _read_tf_tensor(f, name, entry, code):
    shape, nbytes = _check_extent(f, name, entry, code)
    buf = read_exactly(f, nbytes, f"tensor {name}")
    _check_crc(entry, crc32c(buf), name)
    return decode(buf, code, shape)


def _verify_tf_tensor(f, name, entry, code):
    """Check a tensor's crc32c without keeping it: read and hash it a piece at a time."""
    _, nbytes = _check_extent(f, name, entry, code)
    crc, left = 0, nbytes
    while left:
        piece = f.read(min(CHUNK, left))
        if not piece:
            raise Corrupt(f"tensor {brief(name)}: the file ends early (truncated?)")
        crc, left = crc32c(piece, crc), left - len(piece)
    _check_crc(entry, crc, name)
