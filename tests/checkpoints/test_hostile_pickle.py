"""Small hand-built hostile checkpoints: bounded memory and one short error line.

A 145-byte pytorch_model.bin whose pickle used BYTEARRAY8 to declare 6 GiB took
6.7 GB of RSS; 1 TiB gave a MemoryError traceback. The reader now runs only the
opcodes torch.save writes and checks every declared length against the bytes
left before reading it. Errors that quoted a pickled value dumped whole arrays
over several lines; every message is now one line with values shortened.
"""

import json
import os
import subprocess
import sys
import textwrap
import zipfile

import numpy as np
import pytest

from albert_min import convert as cv
from albert_min.checkpoints import formats
from albert_min.checkpoints.formats import ConversionError
from albert_min.checkpoints.formats.common import brief
from albert_min.checkpoints.formats.torch_pickle import ALLOWED_OPCODES
from helpers.checkpoint_writers import (OPCODES, opcode, torch_pickle, write_raw_safetensors, write_safetensors,
                                        write_torch_zip)

from helpers.paths import ROOT  # noqa: E402
PRE = os.path.join(ROOT, "tests", "fixtures", "tiny_pretraining")
TIB = 1 << 40


def hostile_bin(path, body, proto=2):
    """A zip laid out as torch.save writes it, whose data.pkl is PROTO, ``body``, STOP."""
    write_torch_zip(bytes([0x80, proto]) + body + b".", {}, str(path))
    return str(path)


def one_line_error(read, path):
    with pytest.raises(ConversionError) as info:
        read(str(path))
    message = str(info.value)
    assert str(path) in message and "\n" not in message and len(message) < 300 + len(str(path)), message
    return message


# ------------------------------------------------------------------ opcodes
@pytest.mark.parametrize("name", ["BYTEARRAY8", "BINBYTES8", "BINUNICODE8", "BINBYTES", "SHORT_BINBYTES",
                                  "LONG4", "BINSTRING", "DUP", "INST", "OBJ", "NEWOBJ", "EXT1", "PERSID",
                                  "NEXT_BUFFER", "EMPTY_LIST", "BINFLOAT"])
def test_opcodes_torch_save_never_writes_are_refused_by_name(tmp_path, name):
    path = hostile_bin(tmp_path / "pytorch_model.bin", opcode(name, TIB, b"abc"))
    assert os.path.getsize(path) < 400
    message = one_line_error(formats.read_pytorch_bin, path)
    assert f"opcode {name} which torch.save never writes" in message


def test_allow_list_is_what_torch_save_writes():
    # Every opcode outside the list is refused; nothing that builds bytes, lists or runs code is in it.
    assert ALLOWED_OPCODES < set(OPCODES)
    assert not ALLOWED_OPCODES & {"BYTEARRAY8", "BINBYTES8", "BINUNICODE8", "LONG4", "INST", "OBJ",
                                  "NEWOBJ", "NEWOBJ_EX", "DUP", "APPEND", "EXT4", "PERSID"}


@pytest.mark.parametrize("body, proto, words", [
    (opcode("BINUNICODE", 0xFFFFFFFF, b"name"), 2, "BINUNICODE declares 4294967295 bytes but only 5 are left"),
    (opcode("SHORT_BINUNICODE", 200, b"abc"), 4, "SHORT_BINUNICODE declares 200 bytes but only 4 are left"),
    (opcode("LONG1", 255, b"\x01"), 2, "LONG1 declares 255 bytes but only 2 are left"),
    (opcode("FRAME", TIB, b"}"), 4, f"FRAME declares {TIB} bytes but only 2 are left"),
])
def test_declared_lengths_are_bounded_by_the_bytes_left(tmp_path, body, proto, words):
    path = hostile_bin(tmp_path / "pytorch_model.bin", body, proto)
    assert words in one_line_error(formats.read_pytorch_bin, path)


def test_truncated_name_is_an_error_not_a_shorter_name(tmp_path):
    # BINUNICODE "weight" cut to "wei" at the end of data.pkl: the old reader returned "wei" and STOP's EOFError.
    path = hostile_bin(tmp_path / "pytorch_model.bin", opcode("BINUNICODE", 6, b"wei"))
    assert "BINUNICODE declares 6 bytes but only 4 are left" in one_line_error(formats.read_pytorch_bin, path)


def test_build_only_on_a_state_dicts_metadata(tmp_path):
    body = b"ctorch\nFloatStorage\n" + opcode("EMPTY_DICT") + opcode("BUILD")
    path = hostile_bin(tmp_path / "pytorch_model.bin", body)
    assert "sets the state of a StorageType" in one_line_error(formats.read_pytorch_bin, path)


def test_state_dict_with_metadata_as_torch_save_writes_it(tmp_path):
    # state_dict() is an OrderedDict carrying _metadata: REDUCE, SETITEMS, then BUILD with its attributes.
    tensor = torch_pickle([("w", "0", "FloatStorage", 3, 0, (3,), (1,))])[4:-2]      # the entry, no dict
    body = (b"ccollections\nOrderedDict\n)R(" + tensor + b"u" + b"}" + b"X" + (9).to_bytes(4, "little")
            + b"_metadata" + b"}s" + b"b")
    write_torch_zip(b"\x80\x02" + body + b".", {"0": np.arange(3, dtype=np.float32)}, str(tmp_path / "m.bin"))
    arrays = formats.read_pytorch_bin(str(tmp_path / "m.bin"))
    np.testing.assert_array_equal(arrays["w"], [0, 1, 2])


def test_pickle_member_declaring_more_than_the_file_holds(tmp_path):
    path = tmp_path / "pytorch_model.bin"
    write_torch_zip(torch_pickle([]), {}, str(path))
    data = bytearray(path.read_bytes())
    entry = data.index(b"PK\x01\x02")                      # data.pkl's central directory entry
    data[entry + 20:entry + 28] = (60 << 20).to_bytes(4, "little") * 2   # compressed and real size: 60 MiB
    path.write_bytes(bytes(data))
    assert "lies outside the file" in one_line_error(formats.read_pytorch_bin, path)


def test_compressed_pickle_member_is_refused(tmp_path):
    path = tmp_path / "pytorch_model.bin"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("archive/data.pkl", torch_pickle([]) + bytes(1 << 20))
    assert "archive/data.pkl is compressed" in one_line_error(formats.read_pytorch_bin, path)


# ---------------------------------------------------------- bounded memory
MEASURE = textwrap.dedent("""
    import json, resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))   # without the bounds: MemoryError, not 6 GB
    sys.path.insert(0, sys.argv[1])
    from albert_min.checkpoints import formats
    readers = {"pytorch": formats.read_pytorch_bin, "safetensors": formats.read_safetensors,
               "tf": formats.read_tf_checkpoint}
    results = []
    for fmt, path in json.loads(sys.argv[2]):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        try:
            readers[fmt](path)
            message = None
        except formats.ConversionError as err:
            message = str(err)
        grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before   # KiB
        results.append([path, grown, message])
    print(json.dumps(results))
""")


def test_hostile_files_take_bounded_memory_and_give_one_line(tmp_path):
    cases = []
    for name, length in [("BYTEARRAY8", 6 << 30), ("BYTEARRAY8", TIB), ("BINBYTES8", TIB), ("BINUNICODE8", TIB),
                         ("BINUNICODE", 0xFFFFFFFF), ("FRAME", TIB)]:
        path = hostile_bin(tmp_path / f"{name}-{length}.bin", opcode(name, length, b"x"), proto=5)
        assert os.path.getsize(path) < 400
        cases.append(("pytorch", path))
    header = tmp_path / "header.safetensors"                 # header length 1 TiB in a 16-byte file
    header.write_bytes(TIB.to_bytes(8, "little") + b"{}" + bytes(6))
    offsets = tmp_path / "offsets.safetensors"               # a tensor "ending" 1 TiB into an 8-byte data part
    write_raw_safetensors({"w": {"dtype": "F32", "shape": [TIB // 4], "data_offsets": [0, TIB]}}, bytes(8),
                          str(offsets))
    cases += [("safetensors", str(header)), ("safetensors", str(offsets))]
    done = subprocess.run([sys.executable, "-c", MEASURE, ROOT, json.dumps(cases)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    for path, grown_kib, message in json.loads(done.stdout):
        assert message is not None and path in message and "\n" not in message, (path, message)
        assert grown_kib < 64 << 10, f"{path}: peak RSS grew by {grown_kib} KiB"


# ------------------------------------------------------- short, one-line values
def test_storage_reference_holding_an_array_is_one_short_line(tmp_path):
    # The pid is ('albert...', <a 40x40 tensor read earlier>): the old message printed the whole array.
    entry = torch_pickle([("w", "0", "FloatStorage", 1600, 0, (40, 40), (40, 1))])[4:-2]
    body = (b"}(" + entry + b"q\x01" + opcode("BINUNICODE", 1, b"v")
            + b"(" + opcode("BINUNICODE", 41, b"albert.embeddings.word_embeddings.weight.") + b"h\x01tQ" + b"u")
    path = tmp_path / "pytorch_model.bin"
    write_torch_zip(b"\x80\x02" + body + b".", {"0": np.zeros(1600, np.float32)}, str(path))
    message = one_line_error(formats.read_pytorch_bin, path)
    assert "unsupported storage reference ('albert.embeddings.word_embeddings.weight.', " \
           "array(shape=(40, 40), dtype=float32))" in message


def test_names_from_the_file_are_escaped_and_cut(tmp_path):
    arrays = formats.read_safetensors(os.path.join(PRE, "model.safetensors"))
    arrays["evil\nname"] = np.zeros(2, np.float32)
    arrays["x" * 5000] = np.zeros(2, np.float32)
    src = tmp_path / "src"
    src.mkdir()
    write_safetensors(arrays, str(src / "model.safetensors"))
    with open(os.path.join(PRE, "config.json")) as f, open(src / "config.json", "w") as g:
        g.write(f.read())
    with pytest.raises(ConversionError) as info:
        cv.convert(str(src), str(tmp_path / "out"))
    message = str(info.value)
    assert "\n" not in message and "evil\\nname" in message and len(message) < 600, message


def test_brief():
    assert brief("albert.pooler.weight") == "albert.pooler.weight"
    assert brief("a\nb") == "a\\nb"
    assert brief(10 ** 5000) == "<16610-bit integer>"
    assert brief(np.zeros((40, 40))) == "array(shape=(40, 40), dtype=float64)"
    assert brief(("storage", 1, "0")) == "('storage', 1, '0')"
    assert len(brief(list(range(10 ** 6)))) <= 200 and len(brief("y" * 10 ** 6)) <= 200
