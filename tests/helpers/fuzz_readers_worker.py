"""Fuzz the checkpoint readers inside a memory-limited process (run by test_fuzz_readers.py).

    python tests/helpers/fuzz_readers_worker.py FORMAT EXAMPLES

The address space is limited to about 2 GB first (RLIMIT_AS), so a reader that
tries to allocate what a crafted file declares fails here with MemoryError
instead of taking the machine's memory. Every input must give a result or a
ConversionError of one line; anything else makes hypothesis report a
falsifying example and this process exit non-zero. For PyTorch files, every
pickle opcode (BYTEARRAY8, BINBYTES8, BINUNICODE8, LONG4, FRAME, ...) is also
spliced into a valid data.pkl with hostile declared lengths.
"""

import atexit
import os
import resource
import shutil
import sys
import tempfile

LIMIT = 2 << 30
resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]

import numpy as np  # noqa: E402
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from albert_min.checkpoints import formats  # noqa: E402
from albert_min.checkpoints.formats import ConversionError  # noqa: E402
from helpers.checkpoint_writers import (OPCODES, opcode, pickle_ops, torch_pickle, write_raw_safetensors,  # noqa: E402
                                        write_tf_bundle, write_torch_zip)

FIXTURES = os.path.join(ROOT, "tests", "fixtures")
SOURCES = {
    "pytorch": [os.path.join(FIXTURES, "tiny_pretraining", "pytorch_model.bin")],
    "safetensors": [os.path.join(FIXTURES, "tiny_pretraining", "model.safetensors")],
    "tf": [os.path.join(FIXTURES, "tiny_pretraining_tf", "model.ckpt-100.index"),
           os.path.join(FIXTURES, "tiny_pretraining_tf", "model.ckpt-100.data-00000-of-00001")],
}
WORK = tempfile.mkdtemp(prefix="albert_min_fuzz_")
atexit.register(shutil.rmtree, WORK, ignore_errors=True)

# Values that break size arithmetic when they land on a length, count or offset field.
NASTY = [0, 1, 0x7F, 0x80, 0xFF, 0x7FFFFFFF, 0xFFFFFFFF, 1 << 40, (1 << 63) - 1, (1 << 64) - 1]


def must_be_clean(read, path):
    try:
        arrays = read(path)
    except ConversionError as err:
        message = str(err)
        assert path in message or WORK in message, message
        assert "\n" not in message and len(message) < 1000, message    # one line, values shortened
        return
    assert isinstance(arrays, dict) and all(isinstance(a, np.ndarray) for a in arrays.values())


def read_tf(path):
    return formats.read_tf_checkpoint(os.path.join(WORK, "model.ckpt-100"))


READERS = {"pytorch": formats.read_pytorch_bin, "safetensors": formats.read_safetensors, "tf": read_tf}

edits = st.lists(st.tuples(st.floats(0, 1, exclude_max=True),
                           st.one_of(st.integers(1, 255).map(lambda v: ("xor", v)),
                                     st.sampled_from(NASTY).map(lambda v: ("int", v)))),
                 min_size=1, max_size=6)


def mutate(data, edit_list, cut):
    data = bytearray(data)
    for where, (kind, value) in edit_list:
        pos = int(where * len(data))
        if kind == "xor":
            data[pos] ^= value
        else:                                     # a little-endian integer over 8 (or fewer) bytes
            width = min(8, len(data) - pos)
            data[pos:pos + width] = (value & ((1 << 8 * width) - 1)).to_bytes(width, "little")
    return bytes(data[:int(cut * len(data))]) if cut is not None else bytes(data)


def fuzz_mutations(fmt, examples):
    @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(which=st.integers(0, len(SOURCES[fmt]) - 1), edit_list=edits,
           cut=st.one_of(st.none(), st.floats(0, 1)))
    def run(which, edit_list, cut):
        source = SOURCES[fmt][which]
        if fmt == "tf":                           # mutate one of the two files, keep the other
            for other in SOURCES["tf"]:
                with open(other, "rb") as f, open(os.path.join(WORK, os.path.basename(other)), "wb") as g:
                    g.write(f.read())
        target = os.path.join(WORK, os.path.basename(source))
        with open(source, "rb") as f:
            data = f.read()
        with open(target, "wb") as f:
            f.write(mutate(data, edit_list, cut))
        must_be_clean(READERS[fmt], target)
    run()


sizes = st.integers(0, 50_000)
big = st.one_of(sizes, st.sampled_from([40000, 1 << 31, 1 << 40, (1 << 63) - 1]))


def fuzz_structured(fmt, examples):
    """Files that are well formed but declare hostile sizes, offsets and strides."""
    path = os.path.join(WORK, "crafted")

    @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def run(data):
        if fmt == "safetensors":
            n = data.draw(st.integers(1, 3))
            header = {f"t{i}": {"dtype": data.draw(st.sampled_from(["F32", "BF16", "F16", "I64", "F8_E4M3", "X"])),
                                "shape": data.draw(st.lists(big, max_size=3)),
                                "data_offsets": data.draw(st.lists(big, min_size=2, max_size=2))}
                      for i in range(n)}
            write_raw_safetensors(header, bytes(data.draw(st.integers(0, 64))), path)
            must_be_clean(formats.read_safetensors, path)
        elif fmt == "pytorch":
            numel = data.draw(st.integers(0, 64))
            rank = data.draw(st.integers(0, 3))
            tensors = [("w", "0", data.draw(st.sampled_from(["FloatStorage", "BFloat16Storage", "LongStorage"])),
                        data.draw(st.one_of(st.just(numel), big)), data.draw(st.one_of(st.integers(0, 70), big)),
                        data.draw(st.lists(big, min_size=rank, max_size=rank)),
                        data.draw(st.lists(st.one_of(st.integers(0, 3), big), min_size=rank, max_size=rank)))]
            write_torch_zip(torch_pickle(tensors), {"0": np.zeros(numel, np.float32)}, path)
            must_be_clean(formats.read_pytorch_bin, path)
        else:
            shape = tuple(data.draw(st.lists(big, max_size=3)))
            write_tf_bundle({"w": np.zeros(data.draw(st.integers(0, 64)), np.float32)}, path,
                            declared_shapes={"w": shape})
            must_be_clean(formats.read_tf_checkpoint, path)
    run()


def fuzz_opcodes(examples):
    """Any pickle opcode, declaring any length, spliced in between the opcodes of a valid data.pkl."""
    path = os.path.join(WORK, "opcodes.bin")
    valid = torch_pickle([("w", "0", "FloatStorage", 6, 0, (2, 3), (3, 1)),
                          ("b", "1", "FloatStorage", 3, 0, (3,), (1,))])
    storages = {"0": np.zeros(6, np.float32), "1": np.ones(3, np.float32)}
    lengths = st.one_of(st.integers(0, 300), st.sampled_from(NASTY + [6 << 30, 1 << 40]))
    declaring = ["FRAME"] + sorted(n for n, op in OPCODES.items()                    # BYTEARRAY8, BINUNICODE...
                                   if op.arg is not None and op.arg.n < 0 and "nl" not in op.arg.name)
    names = st.one_of(st.sampled_from(declaring), st.sampled_from(sorted(OPCODES)))   # lengths first: they allocate

    @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(where=st.integers(0, len(pickle_ops(valid)) - 1), proto=st.sampled_from([2, 4, 5]),
           ops=st.lists(st.tuples(names, lengths, st.binary(max_size=12)), min_size=1, max_size=3))
    def run(where, proto, ops):
        at = pickle_ops(valid)[where]
        spliced = b"".join(opcode(name, length, payload) for name, length, payload in ops)
        pickled = bytes([0x80, proto]) + valid[2:at] + spliced + valid[at:] if at >= 2 else \
            bytes([0x80, proto]) + spliced + valid[2:]
        write_torch_zip(pickled, storages, path)
        must_be_clean(formats.read_pytorch_bin, path)
    run()


if __name__ == "__main__":
    fmt, examples = sys.argv[1], int(sys.argv[2])
    fuzz_mutations(fmt, examples)
    fuzz_structured(fmt, max(10, examples // 3))
    spliced = 0
    if fmt == "pytorch":
        spliced = examples
        fuzz_opcodes(spliced)
    print(f"{fmt}: {examples} mutated + {max(10, examples // 3)} crafted + {spliced} spliced-opcode inputs, "
          "all clean")
