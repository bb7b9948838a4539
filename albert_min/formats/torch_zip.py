"""PyTorch's ``pytorch_model.bin`` (``torch.save``, torch >= 1.6), read without torch.

The file is a zip archive (members stored uncompressed):

* ``<archive>/data.pkl``: a pickle of ``{name: tensor}``. Every tensor is the call
  ``torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...)`` and every
  storage a "persistent id" ``('storage', torch.FloatStorage, key, device, numel)``.
* ``<archive>/data/<key>``: the raw little-endian bytes of storage ``key``.
* ``<archive>/byteorder`` (optional): ``little`` or ``big``.

A pickle can run arbitrary code, so the unpickler below knows only those few
names. The file is untrusted in other ways too, so before anything is allocated:

* a storage must be a stored (uncompressed) member whose size is exactly what its
  persistent id declares, and all storages together fit in the file: no
  decompression bombs, no overlapping members counted twice;
* a tensor view must lie inside its storage and have no more elements than it
  (a stride-0 "40000 x 40000" view of one float is refused, not materialised);
  a view covering its whole storage is returned without a copy.
"""

import io
import math
import os
import pickle
import zipfile
from collections import OrderedDict

import numpy as np

from .common import MALFORMED, ConversionError, Corrupt, decode, malformed, np_dtype, read_exactly

_STORAGES = {
    "FloatStorage": "<f4", "DoubleStorage": "<f8", "HalfStorage": "<f2", "BFloat16Storage": "bf16",
    "LongStorage": "<i8", "IntStorage": "<i4", "ShortStorage": "<i2", "CharStorage": "i1",
    "ByteStorage": "u1", "BoolStorage": "?",
}
_PICKLE_LIMIT = 64 << 20     # data.pkl of a state dict is ~100 bytes per tensor


class _StorageType:
    """What ``torch.FloatStorage`` & co. unpickle to here: just a dtype code."""

    def __init__(self, name, code):
        self.name, self.code = name, code


def _ints(values, what):
    if not isinstance(values, (tuple, list)) or not all(type(v) is int and v >= 0 for v in values):
        raise Corrupt(f"tensor {what} {values!r} is not a tuple of non-negative integers")
    return tuple(values)


class _TorchUnpickler(pickle._Unpickler):
    """Unpickles ``data.pkl`` knowing only plain tensors, and nothing that runs code.

    The pure-Python unpickler is used on purpose: its memo is a dict, so a crafted
    ``LONG_BINPUT 2**31`` cannot make it allocate a gigantic memo array.
    """

    def __init__(self, file, load_storage, copy_budget):
        super().__init__(file)
        self._load_storage = load_storage
        self._copy_budget = copy_budget        # bytes that views may still copy out of storages

    def find_class(self, module, name):
        if (module, name) == ("collections", "OrderedDict"):
            return OrderedDict
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return self._rebuild_tensor
        if (module, name) in (("torch._utils", "_rebuild_parameter"),
                              ("torch._utils", "_rebuild_parameter_with_state")):
            return _rebuild_parameter
        if module == "torch" and name in _STORAGES:
            return _StorageType(name, _STORAGES[name])
        raise Corrupt(f"refusing to unpickle {module}.{name}: only plain tensors are allowed "
                      "(a pickle can run arbitrary code)")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
                and isinstance(pid[1], _StorageType) and isinstance(pid[2], (str, int))
                and type(pid[4]) is int and pid[4] >= 0):
            raise Corrupt(f"unsupported storage reference {str(pid)[:200]}")
        _, storage_type, key, _device, numel = pid
        return self._load_storage(storage_type, str(key), numel)

    def _rebuild_tensor(self, storage, offset, size, stride, *_ignored):
        """torch's tensor constructor: a strided view into a storage."""
        if not isinstance(storage, np.ndarray):
            raise Corrupt(f"tensor built from {type(storage).__name__}, not from a storage")
        if type(offset) is not int or offset < 0:
            raise Corrupt(f"bad storage offset {offset!r}")
        size, stride = _ints(size, "size"), _ints(stride, "stride")
        if len(size) != len(stride):
            raise Corrupt(f"tensor size {size} and stride {stride} differ in length")
        numel = math.prod(size)
        if numel == 0:
            return np.zeros(size, storage.dtype)
        last = offset + sum((n - 1) * s for n, s in zip(size, stride))
        if numel > storage.size or last >= storage.size:
            raise Corrupt(f"tensor of size {size} (stride {stride}, offset {offset}) does not fit in its "
                          f"storage of {storage.size} elements")
        if offset == 0 and numel == storage.size and stride == _c_strides(size):
            return storage.reshape(size)              # the usual case: no copy
        self._copy_budget -= numel * storage.itemsize
        if self._copy_budget < 0:
            raise Corrupt("tensor views copy more bytes than the file holds")
        view = np.lib.stride_tricks.as_strided(storage[offset:], shape=size,
                                               strides=[s * storage.itemsize for s in stride])
        return np.array(view)


def _c_strides(size):
    strides, step = [], 1
    for n in reversed(size):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def _rebuild_parameter(data, *_ignored):
    return data   # nn.Parameter(tensor) -> the tensor


def read_pytorch_bin(path) -> dict:
    """``{name: np.ndarray}`` from a zip-format ``torch.save`` file (torch >= 1.6)."""
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
        if not zipfile.is_zipfile(path):
            if magic.startswith(b"PK"):
                raise ConversionError(f"{path}: corrupt or truncated zip archive "
                                      "(PyTorch checkpoints are zip files)")
            if magic[:1] == b"\x80":
                raise ConversionError(f"{path}: legacy (pre-1.6, non-zip) PyTorch format; re-save it with "
                                      "a recent torch: torch.save(torch.load(path), path)")
            raise ConversionError(f"{path}: not a PyTorch checkpoint (not a zip archive)")
        with zipfile.ZipFile(path) as archive:
            return _read_archive(archive, os.path.getsize(path))
    except (OSError, *MALFORMED) as err:
        raise malformed(path, err) from None


def _read_archive(archive, file_size) -> dict:
    infos = {info.filename: info for info in archive.infolist()}
    pickles = [n for n in infos if n.endswith("/data.pkl") and n.count("/") == 1]
    if len(pickles) != 1:
        raise Corrupt(f"expected one <archive>/data.pkl, found {pickles[:5]}")
    prefix = pickles[0][:-len("data.pkl")]
    big_endian = False
    if prefix + "byteorder" in infos:
        with archive.open(infos[prefix + "byteorder"]) as f:
            big_endian = f.read(16).strip() == b"big"
    storages, loaded = {}, [0]

    def load_storage(storage_type, key, numel):
        if key in storages:
            return storages[key]
        member = f"{prefix}data/{key}"
        info = infos.get(member)
        if info is None:
            raise Corrupt(f"missing storage member {member}")
        needed = numel * np_dtype(storage_type.code).itemsize
        if info.compress_type != zipfile.ZIP_STORED:
            raise Corrupt(f"storage {member} is compressed; torch.save stores storages uncompressed")
        if info.file_size != needed or info.compress_size != needed:
            raise Corrupt(f"storage {member} holds {info.file_size} bytes but is declared as {numel} "
                          f"{storage_type.name} elements ({needed} bytes)")
        loaded[0] += needed
        if info.header_offset + needed > file_size or loaded[0] > file_size:
            raise Corrupt(f"storage {member} ({needed} bytes) lies outside the file of {file_size} bytes "
                          "(truncated?)")
        with archive.open(info) as f:
            raw = read_exactly(f, needed, f"storage {member}")
        storages[key] = decode(raw, storage_type.code, (numel,), big_endian)
        return storages[key]

    info = infos[pickles[0]]
    if info.file_size > _PICKLE_LIMIT:
        raise Corrupt(f"{info.filename} declares {info.file_size} bytes; a state dict's pickle is far smaller")
    with archive.open(info) as f:
        pickled = read_exactly(f, info.file_size, info.filename)
    state = _TorchUnpickler(io.BytesIO(pickled), load_storage, copy_budget=file_size).load()
    wrapped = isinstance(state, dict) and len(state) == 1 and next(iter(state)) in ("state_dict", "model")
    if wrapped and isinstance(next(iter(state.values())), dict):      # {"state_dict": {...}}
        state = next(iter(state.values()))
    if not isinstance(state, dict):
        raise Corrupt(f"expected a state dict {{name: tensor}}, got {type(state).__name__}")
    bad = [k for k, v in state.items() if not isinstance(k, str) or not isinstance(v, np.ndarray)]
    if bad:
        raise Corrupt(f"entries that are not named tensors: {[str(k)[:80] for k in bad[:5]]}")
    return dict(state)
