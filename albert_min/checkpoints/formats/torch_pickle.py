"""The restricted unpickler for the ``data.pkl`` inside a ``pytorch_model.bin``.

A pickle is a small program: its opcodes build objects, call functions and
declare lengths. This one runs only what ``torch.save(state_dict)`` writes:

* **opcodes**: an allow-list, exactly those CPython's pickler emits for a state
  dict at protocols 2 (torch's default) to 5. Anything else (``BYTEARRAY8``,
  ``BINBYTES8``, ``LONG4``, ``DUP``, ``INST``, ...) is refused by name before
  its argument is read. Before this list, a 145-byte file declaring a 6 GiB
  ``BYTEARRAY8`` made the reader allocate 6 GiB;
* **lengths**: every length an allowed opcode declares (``BINUNICODE``,
  ``SHORT_BINUNICODE``, ``LONG1``, ``FRAME``) is checked against the bytes left
  in the member before it is read, so nothing is allocated for bytes that are
  not there, and a short string is an error, not a silently cut name;
* **names**: ``find_class`` knows only the few functions and classes a tensor
  needs, so nothing that runs code can be reached;
* **BUILD** only sets the attributes of an ``OrderedDict`` (a ``state_dict()``'s
  ``_metadata``), never the state of another object.

The pure-Python unpickler is the base on purpose: its memo is a dict, so a
crafted ``LONG_BINPUT 2**31`` cannot make it allocate a gigantic memo array.
"""

import io
import math
import pickle
import pickletools
from collections import OrderedDict

import numpy as np

from .common import Corrupt, brief

STORAGES = {
    "FloatStorage": "<f4", "DoubleStorage": "<f8", "HalfStorage": "<f2", "BFloat16Storage": "bf16",
    "LongStorage": "<i8", "IntStorage": "<i4", "ShortStorage": "<i2", "CharStorage": "i1",
    "ByteStorage": "u1", "BoolStorage": "?",
}

# What CPython's pickler writes for torch.save(state_dict) at protocols 2 to 5 (checked
# on an OrderedDict with _metadata, parameters and storages of 2**31+ elements).
ALLOWED_OPCODES = frozenset({
    "PROTO", "FRAME", "STOP",
    "MARK", "EMPTY_DICT", "EMPTY_TUPLE", "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3", "SETITEM", "SETITEMS",
    "NONE", "NEWTRUE", "NEWFALSE", "BININT", "BININT1", "BININT2", "LONG1", "BINUNICODE", "SHORT_BINUNICODE",
    "GLOBAL", "STACK_GLOBAL", "REDUCE", "BUILD", "BINPERSID",
    "BINPUT", "LONG_BINPUT", "MEMOIZE", "BINGET", "LONG_BINGET",
})
OPCODE_NAMES = {op.code.encode("latin-1")[0]: op.name for op in pickletools.opcodes}


class _OpcodeTable(dict):
    """The unpickler's dispatch table: an opcode not in it is refused, by name."""

    def __missing__(self, code):
        name = OPCODE_NAMES.get(code)
        what = f"opcode {name}" if name else f"byte {code:#04x}, not a pickle opcode,"
        raise Corrupt(f"data.pkl uses {what} which torch.save never writes for a state dict; refusing it")


class StorageType:
    """What ``torch.FloatStorage`` & co. unpickle to here: just a dtype code."""

    def __init__(self, name, code):
        self.name, self.code = name, code

    def __repr__(self):
        return f"torch.{self.name}"


def _ints(values, what):
    if not isinstance(values, (tuple, list)) or not all(type(v) is int and v >= 0 for v in values):
        raise Corrupt(f"tensor {what} {brief(values)} is not a tuple of non-negative integers")
    return tuple(values)


def _c_strides(size):
    strides, step = [], 1
    for n in reversed(size):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def _rebuild_parameter(data, *_ignored):
    return data   # nn.Parameter(tensor) -> the tensor


class TorchUnpickler(pickle._Unpickler):
    """Unpickles ``data.pkl`` (the bytes ``pickled``) knowing only plain tensors.

    ``load_storage(storage_type, key, numel)`` returns a storage's elements as a
    1-D array; ``copy_budget`` is the bytes that strided views may copy out of
    storages in all (the file's size: views cannot multiply the data).
    """

    dispatch = _OpcodeTable({code: load for code, load in pickle._Unpickler.dispatch.items()
                             if OPCODE_NAMES.get(code) in ALLOWED_OPCODES})

    def __init__(self, pickled, load_storage, copy_budget):
        self._source = io.BytesIO(pickled)
        self._size = len(pickled)
        super().__init__(self._source)
        self._load_storage = load_storage
        self._copy_budget = copy_budget

    # ------------------------------------------------------- declared lengths
    def _bytes_left(self):
        frame = self._unframer.current_frame
        in_frame = 0
        if frame is not None:
            with frame.getbuffer() as view:
                in_frame = view.nbytes - frame.tell()
        return in_frame + self._size - self._source.tell()

    def _payload(self, length, opcode):
        """Exactly ``length`` bytes, checked against what is left before anything is read."""
        left = self._bytes_left()
        if length > left:
            raise Corrupt(f"data.pkl: {opcode} declares {brief(length)} bytes but only {left} are left "
                          "(truncated or crafted pickle)")
        data = self.read(length)
        if len(data) != length:
            raise Corrupt(f"data.pkl: {opcode} declares {length} bytes but the pickle ends after {len(data)}")
        return data

    def _length(self, width, opcode):
        return int.from_bytes(self._payload(width, opcode), "little")

    def load_binunicode(self):
        self.append(str(self._payload(self._length(4, "BINUNICODE"), "BINUNICODE"), "utf-8", "surrogatepass"))

    def load_short_binunicode(self):
        self.append(str(self._payload(self._length(1, "SHORT_BINUNICODE"), "SHORT_BINUNICODE"),
                        "utf-8", "surrogatepass"))

    def load_long1(self):
        self.append(pickle.decode_long(self._payload(self._length(1, "LONG1"), "LONG1")))

    def load_frame(self):
        size = self._length(8, "FRAME")
        if size > self._size - self._source.tell():
            raise Corrupt(f"data.pkl: FRAME declares {brief(size)} bytes but only "
                          f"{self._size - self._source.tell()} are left (truncated or crafted pickle)")
        self._unframer.load_frame(size)

    def load_build(self):
        state, target = self.stack.pop(), self.stack[-1]
        if type(target) is not OrderedDict:
            raise Corrupt(f"data.pkl sets the state of a {type(target).__name__}; torch.save does that "
                          "only for a state dict's metadata")
        del state    # a state_dict()'s _metadata (module versions): not needed to read the tensors

    dispatch[pickle.BINUNICODE[0]] = load_binunicode
    dispatch[pickle.SHORT_BINUNICODE[0]] = load_short_binunicode
    dispatch[pickle.LONG1[0]] = load_long1
    dispatch[pickle.FRAME[0]] = load_frame
    dispatch[pickle.BUILD[0]] = load_build

    # ---------------------------------------------------------------- names
    def find_class(self, module, name):
        if (module, name) == ("collections", "OrderedDict"):
            return OrderedDict
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return self._rebuild_tensor
        if (module, name) in (("torch._utils", "_rebuild_parameter"),
                              ("torch._utils", "_rebuild_parameter_with_state")):
            return _rebuild_parameter
        if module == "torch" and name in STORAGES:
            return StorageType(name, STORAGES[name])
        raise Corrupt(f"refusing to unpickle {brief(f'{module}.{name}')}: only plain tensors are allowed "
                      "(a pickle can run arbitrary code)")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
                and isinstance(pid[1], StorageType) and isinstance(pid[2], (str, int))
                and type(pid[4]) is int and pid[4] >= 0):
            raise Corrupt(f"unsupported storage reference {brief(pid)}")
        _, storage_type, key, _device, numel = pid
        return self._load_storage(storage_type, str(key), numel)

    def _rebuild_tensor(self, storage, offset, size, stride, *_ignored):
        """torch's tensor constructor: a strided view into a storage."""
        if not isinstance(storage, np.ndarray):
            raise Corrupt(f"tensor built from {type(storage).__name__}, not from a storage")
        if type(offset) is not int or offset < 0:
            raise Corrupt(f"bad storage offset {brief(offset)}")
        size, stride = _ints(size, "size"), _ints(stride, "stride")
        if len(size) != len(stride):
            raise Corrupt(f"tensor size {brief(size)} and stride {brief(stride)} differ in length")
        numel = math.prod(size)
        if numel == 0:
            return np.zeros(size, storage.dtype)
        last = offset + sum((n - 1) * s for n, s in zip(size, stride))
        if numel > storage.size or last >= storage.size:
            raise Corrupt(f"tensor of size {brief(size)} (stride {brief(stride)}, offset {brief(offset)}) "
                          f"does not fit in its storage of {storage.size} elements")
        if offset == 0 and numel == storage.size and stride == _c_strides(size):
            return storage.reshape(size)              # the usual case: no copy
        self._copy_budget -= numel * storage.itemsize
        if self._copy_budget < 0:
            raise Corrupt("tensor views copy more bytes than the file holds")
        view = np.lib.stride_tricks.as_strided(storage[offset:], shape=size,
                                               strides=[s * storage.itemsize for s in stride])
        return np.array(view)
