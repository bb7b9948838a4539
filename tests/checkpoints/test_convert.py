"""Checkpoint conversion: PyTorch .bin, safetensors and Google TF checkpoints -> model folders.

The fixtures were written by Hugging Face (make_reference.py) and by TensorFlow
itself (make_tf_checkpoint.py, with its own name mapping); the converted models
must reproduce HF's outputs. No torch or TF is needed here.
"""

import json
import os
import pickle
import shutil
import subprocess
import sys
import zipfile

import numpy as np
import pytest
import mindspore as ms

from albert_min import convert as cv
from albert_min.model.folder import CheckpointError
from albert_min.common.safe_output import OutputError
from albert_min.checkpoints.formats import tf_bundle
from albert_min.model.config import ConfigError
from albert_min.model.heads import AlbertForPreTraining, AlbertForSequenceClassification


from helpers.paths import ROOT  # noqa: E402
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
PRE = os.path.join(FIXTURES, "tiny_pretraining")
CLS = os.path.join(FIXTURES, "tiny_classifier")
PRE_TF = os.path.join(FIXTURES, "tiny_pretraining_tf")
CLS_TF = os.path.join(FIXTURES, "tiny_classifier_tf")
TF_DATA = "model.ckpt-100.data-00000-of-00001"


@pytest.fixture(scope="module")
def ref():
    return dict(np.load(os.path.join(FIXTURES, "reference.npz")))


def run(model, ref):
    model.set_train(False)
    inputs = [ms.Tensor(ref[k].astype(np.int32)) for k in ("input_ids", "token_type_ids", "attention_mask")]
    out = model(*inputs)
    return [o.asnumpy() for o in out] if isinstance(out, tuple) else out.asnumpy()


def max_diff(a, b):
    return float(np.max(np.abs(a - b)))


def assert_nothing_written(dst):
    """No output folder and no temporary sibling left behind."""
    assert not os.path.exists(dst)
    parent, base = os.path.split(os.path.abspath(dst))
    assert not [n for n in os.listdir(parent) if n.startswith(f".{base}.")], os.listdir(parent)


def write_safetensors(arrays, path):
    """A minimal safetensors writer (independent of the reader under test)."""
    header, offset = {}, 0
    for name, a in arrays.items():
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    blob = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(len(blob).to_bytes(8, "little") + blob)
        for a in arrays.values():
            f.write(np.ascontiguousarray(a, np.float32).tobytes())


def hf_dir_with(tmp_path, arrays, config_from=PRE):
    d = tmp_path / "src"
    d.mkdir()
    write_safetensors(arrays, str(d / "model.safetensors"))
    shutil.copy(os.path.join(config_from, "config.json"), d / "config.json")
    return str(d)


def convert_error(src, dst, exc=cv.ConversionError, **kwargs):
    with pytest.raises(exc) as info:
        cv.convert(src, str(dst), **kwargs)
    assert_nothing_written(str(dst))
    return str(info.value)


# ---------------------------------------------------------------- equivalence
@pytest.mark.parametrize("src", [
    os.path.join(PRE, "pytorch_model.bin"),
    os.path.join(PRE, "model.safetensors"),
    PRE_TF,                                              # folder: the TF checkpoint inside it
])
def test_pretraining_matches_reference(src, tmp_path, ref):
    dst = str(tmp_path / "out")
    report = cv.convert(src, dst)
    assert report["heads"] == ["mlm", "sop"] and report["classes"] == ["AlbertForPreTraining"]
    assert report["tensors"] == 32
    if report["format"] == "tf":
        assert "global_step" in report["dropped"] and "bert/embeddings/word_embeddings/adam_m" in report["dropped"]
        with open(os.path.join(dst, "config.json")) as f:
            assert json.load(f)["hidden_act"] == "gelu_new"      # Google's "gelu" is the tanh form
    mlm, sop = run(AlbertForPreTraining.from_pretrained(dst), ref)
    assert max_diff(mlm, ref["mlm_logits"]) <= 1e-5
    assert max_diff(sop, ref["sop_logits"]) <= 1e-5


@pytest.mark.parametrize("src", [
    os.path.join(CLS, "pytorch_model.bin"),
    os.path.join(CLS, "model.safetensors"),
    os.path.join(CLS_TF, "model.ckpt-30.index"),         # config without num_labels: taken from output_weights
])
def test_classifier_matches_reference(src, tmp_path, ref):
    dst = str(tmp_path / "out")
    report = cv.convert(src, dst)
    assert report["heads"] == ["classifier"] and report["num_labels"] == 3
    logits = run(AlbertForSequenceClassification.from_pretrained(dst), ref)
    assert max_diff(logits, ref["cls_logits"]) <= 1e-5


def test_groups_matches_reference(tmp_path, ref):
    dst = str(tmp_path / "out")
    cv.convert(os.path.join(FIXTURES, "tiny_groups"), dst)      # folder with model.safetensors
    logits = run(AlbertForSequenceClassification.from_pretrained(dst), ref)
    assert max_diff(logits, ref["groups_logits"]) <= 1e-5


def test_readers_agree():
    """The three formats hold the same numbers as the oracle (TF kernels transposed back)."""
    weights = np.load(os.path.join(FIXTURES, "weights.npz"))
    read = {"pytorch": cv.read_pytorch_bin(os.path.join(PRE, "pytorch_model.bin")),
            "safetensors": cv.read_safetensors(os.path.join(PRE, "model.safetensors")),
            "tf": cv.read_tf_checkpoint(os.path.join(PRE_TF, "model.ckpt-100"))}
    for fmt, arrays in read.items():
        mapped = cv.map_names(arrays, fmt)[0]
        assert len(mapped) == 32, fmt
        for name, array in mapped.items():
            np.testing.assert_array_equal(array, weights[f"pretraining/{name}"], err_msg=f"{fmt} {name}")


def test_name_mapping():
    name = "encoder.embedding_hidden_mapping_in.bias"          # saved from AlbertModel: no prefix
    assert cv.hf_name(name) == "albert." + name
    assert cv.hf_name("albert.pooler.bias") == "albert.pooler.bias"
    assert cv.hf_name("albert.embeddings.position_ids") is None
    assert cv.hf_name("predictions.decoder.weight") is None
    layer = "bert/encoder/transformer/group_1/inner_group_0/"
    assert cv.tf_name("module/" + layer + "ffn_1/intermediate/output/dense/kernel") == (
        "albert.encoder.albert_layer_groups.1.albert_layers.0.ffn_output.weight", True)
    assert cv.tf_name(layer + "LayerNorm/gamma") == (
        "albert.encoder.albert_layer_groups.1.albert_layers.0.attention.LayerNorm.weight", False)
    assert cv.tf_name(layer + "LayerNorm/kernel") is None
    assert cv.tf_name("cls/seq_relationship/output_weights") == ("sop_classifier.classifier.weight", False)
    assert all(cv.is_tf_bookkeeping(n) for n in ("global_step", "x/adam_m", "x/Adam_1", "beta1_power"))


# --------------------------------------------------------------------- errors
def test_truncated_bin(tmp_path):
    src = tmp_path / "pytorch_model.bin"
    data = open(os.path.join(PRE, "pytorch_model.bin"), "rb").read()
    src.write_bytes(data[:len(data) // 2])
    shutil.copy(os.path.join(PRE, "config.json"), tmp_path / "config.json")
    msg = convert_error(str(src), tmp_path / "out")
    assert str(src) in msg and "truncated" in msg


def test_legacy_and_malicious_bin(tmp_path):
    legacy = tmp_path / "legacy.bin"
    legacy.write_bytes(pickle.dumps({"a": 1}, protocol=2))
    with pytest.raises(cv.ConversionError, match="legacy"):
        cv.read_pytorch_bin(str(legacy))

    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    evil = tmp_path / "evil.bin"
    with zipfile.ZipFile(evil, "w") as z:
        z.writestr("archive/data.pkl", pickle.dumps({"w": Evil()}, protocol=2))
    with pytest.raises(cv.ConversionError, match=r"refusing to unpickle (posix|os|nt)\.system"):
        cv.read_pytorch_bin(str(evil))


def test_truncated_safetensors(tmp_path):
    data = open(os.path.join(PRE, "model.safetensors"), "rb").read()
    src = tmp_path / "model.safetensors"
    src.write_bytes(data[:-100])
    shutil.copy(os.path.join(PRE, "config.json"), tmp_path / "config.json")
    msg = convert_error(str(src), tmp_path / "out")
    assert str(src) in msg and "truncated" in msg and "tensor " in msg


def test_bad_safetensors_header(tmp_path):
    data = bytearray(open(os.path.join(PRE, "model.safetensors"), "rb").read())
    data[8] = ord("#")                                    # the JSON header's opening brace
    src = tmp_path / "model.safetensors"
    src.write_bytes(bytes(data))
    shutil.copy(os.path.join(PRE, "config.json"), tmp_path / "config.json")
    msg = convert_error(str(src), tmp_path / "out")
    assert str(src) in msg and "header" in msg


def copy_tf(tmp_path):
    d = tmp_path / "tf"
    shutil.copytree(PRE_TF, d)
    return d


def test_truncated_tf_data(tmp_path):
    d = copy_tf(tmp_path)
    data = (d / TF_DATA).read_bytes()
    (d / TF_DATA).write_bytes(data[:len(data) - 1000])
    msg = convert_error(str(d), tmp_path / "out")
    assert str(d / TF_DATA) in msg and "truncated" in msg and "tensor " in msg


def test_corrupt_tf_data_fails_crc(tmp_path):
    d = copy_tf(tmp_path)
    data = bytearray((d / TF_DATA).read_bytes())
    position = len(data) // 2
    data[position] ^= 0x40
    (d / TF_DATA).write_bytes(bytes(data))
    # Which tensor holds that byte, according to TF's own index.
    table = memoryview((d / "model.ckpt-100.index").read_bytes())
    entries = {k.decode(): tf_bundle._parse_entry(v) for k, v in tf_bundle._read_table(table) if k}
    hit = [n for n, e in entries.items() if e["offset"] <= position < e["offset"] + e["size"]]
    msg = convert_error(str(d / "model.ckpt-100"), tmp_path / "out")
    assert "crc32c" in msg and str(d / TF_DATA) in msg and f"tensor {hit[0]}" in msg


def test_corrupt_tf_index(tmp_path):
    d = copy_tf(tmp_path)
    index = d / "model.ckpt-100.index"
    index.write_bytes(index.read_bytes()[:-1])
    msg = convert_error(str(index), tmp_path / "out")
    assert str(index) in msg and "magic" in msg


def test_config_shape_mismatch_names_tensor(tmp_path):
    with open(os.path.join(PRE, "config.json")) as f:
        config = json.load(f)
    config["hidden_size"] = 64
    path = tmp_path / "wrong.json"
    path.write_text(json.dumps(config))
    msg = convert_error(os.path.join(PRE, "model.safetensors"), tmp_path / "out", config_path=str(path))
    assert "shape mismatch" in msg and "albert.encoder.embedding_hidden_mapping_in.weight" in msg


def test_unknown_config_key(tmp_path):
    path = tmp_path / "typo.json"
    path.write_text(json.dumps({"hiden_size": 32}))
    convert_error(os.path.join(PRE, "model.safetensors"), tmp_path / "out", exc=ConfigError, config_path=str(path))


def test_unknown_tensor_is_named(tmp_path):
    arrays = cv.read_safetensors(os.path.join(PRE, "model.safetensors"))
    arrays["albert.encoder.mystery.weight"] = np.zeros((3, 3), np.float32)
    msg = convert_error(hf_dir_with(tmp_path, arrays), tmp_path / "out")
    assert "albert.encoder.mystery.weight" in msg and "no place" in msg


def test_heads_are_converted_by_content(tmp_path, ref):
    """No SOP head (like the published albert-*-v2): converted as it is, nothing invented."""
    arrays = cv.read_safetensors(os.path.join(PRE, "model.safetensors"))
    del arrays["sop_classifier.classifier.weight"], arrays["sop_classifier.classifier.bias"]
    src, dst = hf_dir_with(tmp_path, arrays), str(tmp_path / "out")
    report = cv.convert(src, dst)
    assert report["heads"] == ["mlm"] and report["classes"] == ["AlbertForMaskedLM"] and report["pooler"]
    assert "sop" in cv.summary(report).split("not in the checkpoint:")[1]
    assert not [n for n in ms.load_checkpoint(os.path.join(dst, "model.ckpt")) if n.startswith("sop_")]
    with pytest.raises(CheckpointError, match=r"AlbertForPreTraining needs the SOP head \(sop_classifier\.\*\)"):
        AlbertForPreTraining.from_pretrained(dst)
    model = AlbertForPreTraining.from_pretrained(dst, allow_missing=("sop_classifier.",))
    assert max_diff(run(model, ref)[0], ref["mlm_logits"]) <= 1e-5


def test_partial_head_needs_the_flag(tmp_path):
    arrays = cv.read_safetensors(os.path.join(PRE, "model.safetensors"))
    del arrays["predictions.dense.weight"]
    src, dst = hf_dir_with(tmp_path, arrays), str(tmp_path / "out")
    msg = convert_error(src, dst)
    assert "predictions.dense.weight" in msg and "--allow-missing-heads" in msg
    assert cv.convert(src, dst, allow_missing_heads=True)["heads"] == ["mlm", "sop"]


def test_missing_backbone_tensor_always_fails(tmp_path):
    arrays = cv.read_safetensors(os.path.join(PRE, "model.safetensors"))
    del arrays["albert.pooler.weight"]
    msg = convert_error(hf_dir_with(tmp_path, arrays), tmp_path / "out", allow_missing_heads=True)
    assert "missing tensors: albert.pooler.weight" in msg


def test_existing_dst_needs_force(tmp_path):
    dst = tmp_path / "out"
    dst.mkdir()
    (dst / "keep.txt").write_text("old")
    with pytest.raises(FileExistsError, match=f"{dst} already exists .pass force=True to replace it."):
        cv.convert(CLS, str(dst))
    assert (dst / "keep.txt").exists()
    # --force replaces only a folder albert_min wrote: not one holding the user's files.
    with pytest.raises(OutputError, match="did not write|not a folder written by albert_min"):
        cv.convert(CLS, str(dst), force=True)
    assert (dst / "keep.txt").read_text() == "old"
    (dst / "keep.txt").unlink()
    cv.convert(CLS, str(dst), force=True)   # an empty folder loses nothing
    cv.convert(CLS, str(dst), force=True)   # and albert_min's own output is replaced
    assert sorted(os.listdir(dst)) == [".albert_min.json", "config.json", "model.ckpt"]
    assert [n for n in os.listdir(tmp_path) if n.startswith(".")] == []


SST2_HF = os.path.join(FIXTURES, "tiny_sst2_hf")          # a classifier with its 2000-piece spiece.model


def sst2_source(tmp_path, tokenizer_name=None):
    """tiny_sst2_hf's weights and config; its tokenizer as ``tokenizer_name``, or none (like a TF release)."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pytorch_model.bin", "config.json"):
        shutil.copy(os.path.join(SST2_HF, name), src / name)
    if tokenizer_name:
        shutil.copy(os.path.join(SST2_HF, "spiece.model"), src / tokenizer_name)
    return str(src)


def test_google_tokenizer_model_is_copied(tmp_path):
    dst = tmp_path / "out"
    assert cv.convert(sst2_source(tmp_path, "30k-clean.model"), str(dst))["heads"] == ["classifier"]
    assert (dst / "spiece.model").read_bytes() == open(os.path.join(SST2_HF, "spiece.model"), "rb").read()


def test_folder_without_tokenizer_names_the_file_and_the_remedy(tmp_path):
    from albert_min import pipeline
    from albert_min.predict.pipelines import PipelineError
    import evaluate
    src, dst = sst2_source(tmp_path), tmp_path / "out"
    assert cv.convert(src, str(dst))["spiece"] is None
    remedy = f"python -m albert_min.convert SRC {dst} --tokenizer spiece.model --force"
    with pytest.raises(PipelineError) as info:               # was a FileNotFoundError traceback
        pipeline(str(dst))
    assert str(dst / "spiece.model") in str(info.value) and remedy in str(info.value)
    with pytest.raises(SystemExit) as info:
        evaluate.main(["--model", str(dst), "--data", os.path.join(SST2_HF, "dev64.tsv")])
    message = str(info.value.code)
    assert message.startswith(f"error: {dst / 'spiece.model'}: not found") and remedy in message
    assert "\n" not in message

    # The remedy works: the tokenizer is copied in, and the pipeline classifies.
    report = cv.convert(src, str(dst), force=True, tokenizer=os.path.join(SST2_HF, "spiece.model"))
    assert report["spiece"] == os.path.join(SST2_HF, "spiece.model")
    assert pipeline(str(dst), use_jit=False)("a gorgeous film")["label"] in ("LABEL_0", "LABEL_1")


def test_tokenizer_is_checked_before_anything_is_written(tmp_path):
    src, dst = sst2_source(tmp_path), tmp_path / "out"
    bogus = tmp_path / "spiece.model"
    bogus.write_bytes(b"not a sentencepiece model")
    assert str(bogus) in convert_error(src, dst, tokenizer=str(bogus)) and "not a SentencePiece model" \
        in convert_error(src, dst, tokenizer=str(bogus))
    assert "tokenizer not found" in convert_error(src, dst, tokenizer=str(tmp_path / "missing.model"))
    big = os.path.join(SST2_HF, "spiece.model")              # 2000 pieces for a 120-id embedding
    assert "2000 pieces, more than the model's vocab_size 120" in convert_error(CLS, dst, tokenizer=big)


# ------------------------------------------------------------------------ CLI
def test_cli(tmp_path):
    dst = tmp_path / "out"
    cmd = [sys.executable, "-m", "albert_min.convert", CLS_TF, str(dst)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "num_labels=3" in done.stdout and "AlbertForSequenceClassification" in done.stdout
    assert (dst / "model.ckpt").exists()

    again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert again.returncode != 0
    # The CLI names its flag, not the Python API's keyword.
    assert again.stderr.strip() == f"error: {dst} already exists (pass --force to replace it)"


def test_cli_tokenizer_flag(tmp_path):
    dst = tmp_path / "out"
    cmd = [sys.executable, "-m", "albert_min.convert", sst2_source(tmp_path), str(dst), "--tokenizer",
           os.path.join(SST2_HF, "spiece.model")]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"tokenizer:  {os.path.join(SST2_HF, 'spiece.model')}" in done.stdout
    assert (dst / "spiece.model").read_bytes() == open(os.path.join(SST2_HF, "spiece.model"), "rb").read()
