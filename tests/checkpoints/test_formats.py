"""The checkpoint readers (albert_min.checkpoints.formats) on crafted and corrupt files.

Each hostile case from issue 7 is reproduced here at small scale: a crafted
file must end in a ConversionError naming it, quickly and without allocating
what it declares. Random mutations are in test_fuzz_readers.py.
"""

import json
import os
import shutil
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from albert_min import convert as cv
from albert_min.checkpoints import formats
from albert_min.checkpoints.formats import ConversionError, crc32c as crc
from albert_min.checkpoints.formats.common import decode
from helpers.checkpoint_writers import (torch_pickle, write_raw_safetensors, write_safetensors, write_tf_bundle,
                                        write_torch_bin, write_torch_zip)

from helpers.paths import ROOT  # noqa: E402
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
PRE = os.path.join(FIXTURES, "tiny_pretraining")
PRE_TF = os.path.join(FIXTURES, "tiny_pretraining_tf")


def raises(reader, path, *words):
    """``reader(path)`` must raise a ConversionError naming ``path`` and saying ``words``."""
    with pytest.raises(ConversionError) as info:
        reader(str(path))
    message = str(info.value)
    assert str(path) in message, message
    for word in words:
        assert word in message, message
    return message


# ------------------------------------------------------------------ crc32c
def test_crc32c_fast_and_pure_agree():
    assert crc.crc32c(b"123456789") == 0xE3069283                  # the standard check value
    assert crc.crc32c_python(b"123456789") == 0xE3069283
    data = np.random.default_rng(0).integers(0, 256, 70001, dtype=np.uint8).tobytes()
    slow = crc.crc_update(0xFFFFFFFF, data) ^ 0xFFFFFFFF
    assert crc.crc32c_python(data) == slow == crc.crc32c(data) == crc.crc32c(bytearray(data))
    assert crc.crc32c(data[5000:], crc.crc32c(data[:5000])) == slow          # continued in pieces
    assert crc.crc32c_python(data[5000:], crc.crc32c_python(data[:5000])) == slow
    assert crc.unmask_crc(crc.mask_crc(slow)) == slow


def test_bfloat16_and_float16_decoding(tmp_path):
    bf16 = np.array([0x3F80, 0xC000, 0x3EAA], "<u2")                  # 1.0, -2.0, 0.33203125
    np.testing.assert_array_equal(decode(bf16.tobytes(), "bf16", (3,)), np.float32([1.0, -2.0, 0.33203125]))
    np.testing.assert_array_equal(decode(np.float16([0.5, 3]).tobytes(), "<f2", (2,)), [0.5, 3])
    path = tmp_path / "bf16.safetensors"                              # the package has no numpy bfloat16
    write_safetensors({"w": bf16.reshape(1, 3)}, str(path), dtype="BF16")
    np.testing.assert_array_equal(formats.read_safetensors(str(path))["w"], [[1.0, -2.0, 0.33203125]])


# ---------------------------------------------------------- torch zip (.bin)
def test_writer_round_trip(tmp_path):
    arrays = {"a": np.arange(12, dtype=np.float32).reshape(3, 4), "b": np.float32([1.5])}
    write_torch_bin(arrays, str(tmp_path / "x.bin"))
    read = formats.read_pytorch_bin(str(tmp_path / "x.bin"))
    assert read.keys() == arrays.keys() and all(np.array_equal(read[k], arrays[k]) for k in arrays)


def test_stride_zero_view_is_refused_before_allocating(tmp_path):
    # issue 7: one float declared as a 40000 x 40000 view with stride 0 took 6.7 GB and 21 s.
    path = tmp_path / "stride0.bin"
    pickled = torch_pickle([("w", "0", "FloatStorage", 1, 0, (40000, 40000), (0, 0))])
    write_torch_zip(pickled, {"0": np.float32([1.0])}, str(path))
    raises(formats.read_pytorch_bin, path, "(40000, 40000)", "does not fit in its storage of 1 elements")


def test_view_outside_storage_and_overlapping_copies(tmp_path):
    path = tmp_path / "outside.bin"
    write_torch_zip(torch_pickle([("w", "0", "FloatStorage", 4, 2, (3,), (1,))]),
                    {"0": np.zeros(4, np.float32)}, str(path))
    raises(formats.read_pytorch_bin, path, "does not fit")
    # Many small views of one storage, each a copy: together more than the file holds.
    views = [(f"w{i}", "0", "FloatStorage", 4096, 1, (4095,), (1,)) for i in range(400)]
    path = tmp_path / "copies.bin"
    write_torch_zip(torch_pickle(views), {"0": np.zeros(4096, np.float32)}, str(path))
    raises(formats.read_pytorch_bin, path, "more bytes than the file holds")


def test_shared_and_strided_views(tmp_path):
    """A view of the whole storage is not copied; a transposed view is copied correctly."""
    storage = np.arange(6, dtype=np.float32)
    path = tmp_path / "views.bin"
    write_torch_zip(torch_pickle([("a", "0", "FloatStorage", 6, 0, (2, 3), (3, 1)),
                                  ("tied", "0", "FloatStorage", 6, 0, (2, 3), (3, 1)),
                                  ("t", "0", "FloatStorage", 6, 0, (3, 2), (1, 3))]), {"0": storage}, str(path))
    read = formats.read_pytorch_bin(str(path))
    assert np.shares_memory(read["a"], read["tied"])
    np.testing.assert_array_equal(read["t"], storage.reshape(2, 3).T)


def test_deflate_bomb_is_refused(tmp_path):
    # issue 7: a 2 MB deflate bomb took 4.6 GB. torch.save never compresses its storages.
    path = tmp_path / "bomb.bin"
    numel = 500_000_000
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("archive/data.pkl", torch_pickle([("w", "0", "FloatStorage", numel, 0, (numel,), (1,))]),
                   compress_type=zipfile.ZIP_STORED)
        with z.open("archive/data/0", "w", force_zip64=True) as f:
            zeros = bytes(1 << 24)
            for _ in range(4 * numel >> 24):
                f.write(zeros)
    assert os.path.getsize(path) < 3 << 20
    raises(formats.read_pytorch_bin, path, "archive/data/0 is compressed")


def test_storage_larger_than_its_member(tmp_path):
    path = tmp_path / "lying.bin"
    write_torch_zip(torch_pickle([("w", "0", "FloatStorage", 10 ** 9, 0, (10 ** 9,), (1,))]),
                    {"0": np.zeros(4, np.float32)}, str(path))
    raises(formats.read_pytorch_bin, path, "holds 16 bytes but is declared as 1000000000")


def test_byte_flips_in_zip_structure(tmp_path):
    data = open(os.path.join(PRE, "pytorch_model.bin"), "rb").read()
    path = tmp_path / "flipped.bin"
    for position in (0, 30, len(data) - 22, len(data) - 10, len(data) - 60, len(data) // 2):
        mutated = bytearray(data)
        mutated[position] ^= 0xFF
        path.write_bytes(bytes(mutated))
        try:
            formats.read_pytorch_bin(str(path))
        except ConversionError as err:
            assert str(path) in str(err)
    path.write_bytes(b"")
    raises(formats.read_pytorch_bin, path, "not a PyTorch checkpoint")


# ------------------------------------------------------------------ safetensors
@pytest.mark.parametrize("offsets, words", [
    ([[0, 8], [4, 12]], ["tensor b", "overlap"]),
    ([[0, 8], [12, 20]], ["tensor b", "gap"]),
    ([[0, 8], [8, 16]], []),
    ([[0, 8], [8, 400]], []),
])
def test_safetensors_offsets_are_checked(tmp_path, offsets, words):
    header = {"a": {"dtype": "F32", "shape": [2], "data_offsets": offsets[0]},
              "b": {"dtype": "F32", "shape": [(offsets[1][1] - offsets[1][0]) // 4], "data_offsets": offsets[1]}}
    path = tmp_path / "x.safetensors"
    write_raw_safetensors(header, bytes(range(20)), str(path))
    if offsets == [[0, 8], [8, 16]]:                    # tiles 16 of 20 bytes: trailing garbage
        raises(formats.read_safetensors, path, "4 bytes after the last tensor")
    elif offsets[1][1] == 400:
        raises(formats.read_safetensors, path, "tensor b ends at byte", "truncated")
    else:
        raises(formats.read_safetensors, path, *words)


def test_safetensors_huge_declared_shape(tmp_path):
    path = tmp_path / "x.safetensors"
    write_raw_safetensors({"w": {"dtype": "F32", "shape": [40000, 40000], "data_offsets": [0, 6_400_000_000]}},
                          b"\0" * 8, str(path))
    raises(formats.read_safetensors, path, "tensor w ends at byte")


def test_safetensors_unsupported_dtype(tmp_path):
    path = tmp_path / "x.safetensors"
    write_raw_safetensors({"w": {"dtype": "F8_E4M3", "shape": [1], "data_offsets": [0, 1]}}, b"\0", str(path))
    raises(formats.read_safetensors, path, "w (F8_E4M3)")


# -------------------------------------------------------------------- TF bundle
def test_tf_writer_round_trip_and_skipped_slots(tmp_path):
    arrays = {"bert/x": np.arange(6, dtype=np.float32).reshape(2, 3), "bert/x/adam_m": np.ones(6, np.float32)}
    write_tf_bundle(arrays, str(tmp_path / "m"))
    read = formats.read_tf_checkpoint(str(tmp_path / "m"), select=lambda n: "adam" not in n)
    assert list(read) == ["bert/x"] and np.array_equal(read["bert/x"], arrays["bert/x"])
    data = tmp_path / "m.data-00000-of-00001"             # a skipped tensor is still crc-checked
    raw = bytearray(data.read_bytes())
    raw[-1] ^= 1
    data.write_bytes(bytes(raw))
    raises(lambda p: formats.read_tf_checkpoint(p, select=lambda n: "adam" not in n), data,
           "crc32c", "bert/x/adam_m")


def test_tf_huge_declared_tensor(tmp_path):
    write_tf_bundle({"w": np.zeros(2, np.float32)}, str(tmp_path / "m"), declared_shapes={"w": (40000, 40000)})
    raises(formats.read_tf_checkpoint, tmp_path / "m.data-00000-of-00001", "tensor w needs bytes up to 6400000000",
           "truncated")


def test_tf_index_byte_flips(tmp_path):
    d = tmp_path / "tf"
    shutil.copytree(PRE_TF, d)
    index = d / "model.ckpt-100.index"
    data = index.read_bytes()
    original = formats.read_tf_checkpoint(str(index))
    for position in range(0, len(data), max(1, len(data) // 60)):
        mutated = bytearray(data)
        mutated[position] ^= 0x10
        index.write_bytes(bytes(mutated))
        try:                   # blocks are crc-checked; only footer padding / unused handles are harmless
            read = formats.read_tf_checkpoint(str(index))
        except ConversionError as err:
            assert str(index) in str(err)
            continue
        assert read.keys() == original.keys() and position >= len(data) - 48, position


# ------------------------------------------------------------------ sharded HF
def shard(tmp_path, fmt):
    arrays = formats.read_safetensors(os.path.join(PRE, "model.safetensors"))
    names = sorted(arrays)
    parts = {"model-00001-of-00002": names[:10], "model-00002-of-00002": names[10:]}
    src = tmp_path / "sharded"
    src.mkdir()
    ext = ".safetensors" if fmt == "safetensors" else ".bin"
    weight_map = {}
    for part, part_names in parts.items():
        writer = write_safetensors if fmt == "safetensors" else write_torch_bin
        writer({n: arrays[n] for n in part_names}, str(src / (part + ext)))
        weight_map.update({n: part + ext for n in part_names})
    index = src / ("model.safetensors.index.json" if fmt == "safetensors" else "pytorch_model.bin.index.json")
    index.write_text(json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map}))
    shutil.copy(os.path.join(PRE, "config.json"), src / "config.json")
    return src, index, weight_map, arrays


@pytest.mark.parametrize("fmt", ["safetensors", "pytorch"])
def test_sharded_checkpoint(tmp_path, fmt):
    src, index, weight_map, arrays = shard(tmp_path, fmt)
    assert formats.find_weights(str(src)) == (str(index), fmt)
    read = formats.read_weights(str(index), fmt)
    assert read.keys() == arrays.keys() and all(np.array_equal(read[n], arrays[n]) for n in arrays)
    report = cv.convert(str(src), str(tmp_path / "out"))
    assert report["tensors"] == 32 and report["heads"] == ["mlm", "sop"]


def test_sharded_checkpoint_errors(tmp_path):
    src, index, weight_map, _ = shard(tmp_path, "safetensors")
    read = lambda p: formats.read_weights(p, "safetensors")     # noqa: E731
    name = sorted(weight_map)[0]                               # really in shard 1; the index says 2
    index.write_text(json.dumps({"weight_map": dict(weight_map, **{name: "model-00002-of-00002.safetensors"})}))
    with pytest.raises(ConversionError, match="model-00001-of-00002.safetensors: does not match .*not in the index"):
        read(str(index))
    index.write_text(json.dumps({"weight_map": dict(weight_map, extra="../../etc/passwd")}))
    raises(read, index, "bad shard file name")
    index.write_text("{\"weight_map\": ")
    raises(read, index, "not valid JSON")
    index.write_text(json.dumps({"weight_map": weight_map}))
    (src / "model-00002-of-00002.safetensors").unlink()
    raises(read, index, "shard files not found", "model-00002-of-00002.safetensors")


# ------------------------------------------------------------- converter / CLI
def test_non_finite_tensor_is_named(tmp_path):
    arrays = formats.read_safetensors(os.path.join(PRE, "model.safetensors"))
    arrays["albert.pooler.bias"][3] = np.nan
    arrays["predictions.bias"][0] = np.inf
    src = tmp_path / "src"
    src.mkdir()
    write_safetensors(arrays, str(src / "model.safetensors"))
    shutil.copy(os.path.join(PRE, "config.json"), src / "config.json")
    with pytest.raises(ConversionError, match="NaN or Inf values: .*albert.pooler.bias") as info:
        cv.convert(str(src), str(tmp_path / "out"))
    assert "predictions.bias" in str(info.value) and not os.path.exists(tmp_path / "out")


def cli(*args):
    done = subprocess.run([sys.executable, "-m", "albert_min.convert", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    return done.returncode, done.stdout, done.stderr.strip()


def test_cli_user_errors_are_one_line(tmp_path):
    bad = tmp_path / "src"
    bad.mkdir()
    data = bytearray(open(os.path.join(PRE, "pytorch_model.bin"), "rb").read())
    data[-30:] = bytes(30)                                    # the zip's end record: is_zipfile fails
    (bad / "pytorch_model.bin").write_bytes(bytes(data))
    shutil.copy(os.path.join(PRE, "config.json"), bad / "config.json")
    cases = [(tmp_path / "missing", "no such file"), (bad, "pytorch_model.bin")]
    for src, words in cases:
        dst = tmp_path / "out"
        code, out, err = cli(src, dst)
        assert code == 1 and err.startswith("error: ") and words in err, err
        assert len(err.splitlines()) == 1 and "Traceback" not in err
        assert not dst.exists() and not [n for n in os.listdir(tmp_path) if n.startswith(".out")]
