"""PyTorch's ``pytorch_model.bin`` (``torch.save``, torch >= 1.6), read without torch.

The file is a zip archive (members stored uncompressed):

* ``<archive>/data.pkl``: a pickle of ``{name: tensor}``. Every tensor is the call
  ``torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...)`` and every
  storage a "persistent id" ``('storage', torch.FloatStorage, key, device, numel)``.
* ``<archive>/data/<key>``: the raw little-endian bytes of storage ``key``.
* ``<archive>/byteorder`` (optional): ``little`` or ``big``.

A pickle can run arbitrary code and declare any length, so ``torch_pickle``'s
unpickler runs only the opcodes and names a state dict needs. The file is
untrusted in other ways too, so before anything is allocated:

* every member read (``data.pkl``, the storages) must be stored uncompressed, as
  torch.save writes them, and lie inside the file: no decompression bombs, and a
  size written in the zip directory is never allocated unless the bytes are there;
* a storage's size must be exactly what its persistent id declares, and all
  storages together fit in the file: no overlapping members counted twice;
* a tensor view must lie inside its storage and have no more elements than it
  (a stride-0 "40000 x 40000" view of one float is refused, not materialised);
  a view covering its whole storage is returned without a copy.
"""

import os
import zipfile

import numpy as np

from .common import MALFORMED, ConversionError, Corrupt, brief, decode, malformed, np_dtype, read_exactly
from .torch_pickle import TorchUnpickler

_PICKLE_LIMIT = 64 << 20     # data.pkl of a state dict is ~100 bytes per tensor


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


def _check_member(info, declared, file_size, what):
    """A member torch.save wrote: stored, ``declared`` bytes, inside the file; before it is read."""
    name = brief(info.filename)
    if info.compress_type != zipfile.ZIP_STORED:
        raise Corrupt(f"{what} {name} is compressed; torch.save stores every member uncompressed")
    if info.file_size != declared or info.compress_size != declared:
        return False
    if info.header_offset + declared > file_size:
        raise Corrupt(f"{what} {name} ({declared} bytes) lies outside the file of {file_size} bytes (truncated?)")
    return True


def _read_archive(archive, file_size) -> dict:
    infos = {info.filename: info for info in archive.infolist()}
    pickles = [n for n in infos if n.endswith("/data.pkl") and n.count("/") == 1]
    if len(pickles) != 1:
        raise Corrupt(f"expected one <archive>/data.pkl, found {brief(pickles[:5])}")
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
            raise Corrupt(f"missing storage member {brief(member)}")
        needed = numel * np_dtype(storage_type.code).itemsize
        if not _check_member(info, needed, file_size, "storage"):
            raise Corrupt(f"storage {brief(member)} holds {info.file_size} bytes but is declared as "
                          f"{brief(numel)} {storage_type.name} elements ({brief(needed)} bytes)")
        loaded[0] += needed
        if loaded[0] > file_size:
            raise Corrupt(f"storage {brief(member)} ({needed} bytes) lies outside the file of {file_size} bytes "
                          "(truncated?)")
        with archive.open(info) as f:
            raw = read_exactly(f, needed, f"storage {brief(member)}")
        storages[key] = decode(raw, storage_type.code, (numel,), big_endian)
        return storages[key]

    info = infos[pickles[0]]
    if info.file_size > _PICKLE_LIMIT:
        raise Corrupt(f"{brief(info.filename)} declares {info.file_size} bytes; a state dict's pickle is far smaller")
    if not _check_member(info, info.file_size, file_size, "pickle"):
        raise Corrupt(f"{brief(info.filename)} declares {info.file_size} bytes but stores {info.compress_size}")
    with archive.open(info) as f:
        pickled = read_exactly(f, info.file_size, brief(info.filename))
    state = TorchUnpickler(pickled, load_storage, copy_budget=file_size).load()
    wrapped = isinstance(state, dict) and len(state) == 1 and next(iter(state)) in ("state_dict", "model")
    if wrapped and isinstance(next(iter(state.values())), dict):      # {"state_dict": {...}}
        state = next(iter(state.values()))
    if not isinstance(state, dict):
        raise Corrupt(f"expected a state dict {{name: tensor}}, got {type(state).__name__}")
    bad = [k for k, v in state.items() if not isinstance(k, str) or not isinstance(v, np.ndarray)]
    if bad:
        raise Corrupt(f"entries that are not named tensors: {brief(bad[:5])}")
    return dict(state)
