"""Model folders in MindSpore's two checkpoint formats (issue 28, part 2): model.ckpt and
model.safetensors, written by train.py --format / convert --format, read by every loader,
readable by MindSpore itself, and checked (the recorded sha256) since safetensors has no CRC."""

import json
import os
import re
import shutil

import mindspore as ms
import numpy as np
import pytest

from helpers.paths import FIXTURES
from helpers.tiny_runs import TINY_MODEL, sentiment_tsv

import evaluate  # noqa: E402
import train  # noqa: E402
from albert_min import convert as cv
from albert_min.model.folder import (FORMATS, SAFETENSORS_FILE, CheckpointError, load_model_dir, model_arrays,
                                     read_checkpoint, save_model_dir, weights_file, write_model_dir)
from albert_min.model.config import AlbertConfig
from albert_min.checkpoints.hf_export import export_hf
from albert_min.model.heads import AlbertForSequenceClassification
from albert_min.training.run_config import RunConfig
from albert_min.common.checksums import sha256_of
from albert_min.common.safe_output import MANIFEST_FILE, read_manifest
from albert_min.training.config import WEIGHTS_FORMATS, TrainingConfig, TrainingConfigError

ms.set_device("CPU")
HF_SST2 = os.path.join(FIXTURES, "tiny_sst2_hf")
DEV = os.path.join(HF_SST2, "dev64.tsv")
TINY = AlbertConfig(vocab_size=50, embedding_size=8, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=24)


def tiny_model():
    ms.set_seed(0)
    return AlbertForSequenceClassification(TINY)


def flip_a_tensor_byte(path):
    """Flip one bit in the last tensor's data (the safetensors header stays valid)."""
    data = bytearray(open(path, "rb").read())
    data[-3] ^= 0x01
    open(path, "wb").write(bytes(data))


def test_the_flags_formats_are_the_folders():
    assert FORMATS == WEIGHTS_FORMATS


@pytest.mark.parametrize("fmt", FORMATS)
def test_save_then_load_is_bit_identical(fmt, tmp_path):
    model = tiny_model()
    folder = save_model_dir(model, str(tmp_path / "m"), weights_format=fmt)
    name = {"ckpt": "model.ckpt", "safetensors": "model.safetensors"}[fmt]
    assert sorted(os.listdir(folder)) == sorted([MANIFEST_FILE, "config.json", name])
    loaded = load_model_dir(AlbertForSequenceClassification(TINY), folder)
    saved, back = model_arrays(model), model_arrays(loaded)
    assert saved.keys() == back.keys() and all(np.array_equal(saved[k], back[k]) for k in saved)
    recorded = read_manifest(folder).get("sha256", {})
    # both formats: every file's sha256 (a .ckpt's CRC passes for another model's weights of the same shapes)
    assert recorded == {n: sha256_of(os.path.join(folder, n)) for n in (name, "config.json")}


def test_mindspore_reads_our_safetensors_and_we_read_mindspores(tmp_path, capfd):
    model = tiny_model()
    ours = save_model_dir(model, str(tmp_path / "ours"), weights_format="safetensors")
    expected = model_arrays(model)
    # MindSpore's own reader, with its own CRC check, on the file albert_min wrote
    params = ms.load_checkpoint(os.path.join(ours, SAFETENSORS_FILE), format="safetensors", crc_check=True)
    assert {k: p.asnumpy() for k, p in params.items()}.keys() == expected.keys()
    assert all(np.array_equal(params[k].asnumpy(), expected[k]) for k in expected)
    # A file MindSpore wrote from the model itself (its parameter names are the folder's names)
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    TINY.to_json_file(str(theirs / "config.json"))
    ms.save_checkpoint(model, str(theirs / SAFETENSORS_FILE), format="safetensors")
    capfd.readouterr()
    for _ in range(2):
        loaded = AlbertForSequenceClassification.from_pretrained(str(theirs))
    back = model_arrays(loaded)
    assert all(np.array_equal(back[k], expected[k]) for k in expected)
    noted = capfd.readouterr().err
    # said once, saying what was and was not checked
    assert noted.count("note:") == 1 and "no sha256 recorded" in noted and "no MindSpore CRC" in noted


def test_a_flipped_byte_in_model_safetensors_is_an_error_naming_the_file(tmp_path):
    folder = cv.convert(HF_SST2, str(tmp_path / "m"), weights_format="safetensors")["dst"]
    path = os.path.join(folder, SAFETENSORS_FILE)
    flip_a_tensor_byte(path)
    with pytest.raises(CheckpointError, match=re.escape(f"{path}: corrupted or replaced: its sha256 differs")):
        read_checkpoint(path)
    with pytest.raises(SystemExit, match=f"^error: {re.escape(path)}: corrupted or replaced"):
        evaluate.main(["--model", folder, "--data", DEV, "--quiet"])


def test_convert_refuses_a_corrupted_albert_min_folder_as_every_loader_does(tmp_path, capsys):
    """Issue 36.1: convert read an albert_min folder's model.safetensors as a public checkpoint,
    so a flipped bit came out as a model.ckpt with a fresh, valid CRC."""
    folder = cv.convert(HF_SST2, str(tmp_path / "m"), weights_format="safetensors")["dst"]
    path = os.path.join(folder, SAFETENSORS_FILE)
    intact = model_arrays(AlbertForSequenceClassification.from_pretrained(folder))
    again = cv.convert(folder, str(tmp_path / "again"))["dst"]   # an intact folder converts, bit for bit
    back = read_checkpoint(os.path.join(again, "model.ckpt"))
    assert all(np.array_equal(back[k], intact[k]) for k in intact)
    flip_a_tensor_byte(path)
    capsys.readouterr()
    assert cv.main([folder, str(tmp_path / "out")]) == 1
    assert capsys.readouterr().err == (f"error: {path}: corrupted or replaced: its sha256 differs from the one "
                                       f"albert_min recorded in {folder}/{MANIFEST_FILE} when it wrote the folder "
                                       "(a file of another model does not belong with this one's files); put back "
                                       "the file it wrote, or, if you replaced it on purpose, record the folder as "
                                       f"it is now: python -m albert_min.fingerprint {folder}\n")
    assert not os.path.exists(tmp_path / "out")
    os.remove(os.path.join(folder, MANIFEST_FILE))   # the folder lost its manifest: MindSpore's CRC still refuses it
    assert cv.main([folder, str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.endswith(f"error: {path}: not a readable MindSpore checkpoint (corrupted: failed its CRC check, "
                        "or could not be parsed)\n") and "only its MindSpore CRC is checked" in err
    assert not os.path.exists(tmp_path / "out")


def test_without_a_recorded_sha256_mindspores_crc_still_catches_a_flipped_byte(tmp_path, capfd):
    path = str(tmp_path / SAFETENSORS_FILE)   # no manifest: as a user drops in MindSpore's own file
    ms.save_checkpoint(tiny_model(), path, format="safetensors", crc_check=True)
    read_checkpoint(path)
    assert "only its MindSpore CRC is checked" in capfd.readouterr().err
    flip_a_tensor_byte(path)
    with pytest.raises(CheckpointError, match=re.escape(f"{path}: not a readable MindSpore checkpoint")):
        read_checkpoint(path)


def test_non_finite_values_are_refused_in_safetensors_too(tmp_path):
    arrays = model_arrays(tiny_model())
    arrays["classifier.bias"] = np.array([0.0, np.nan], dtype=np.float32)
    folder = write_model_dir(TINY, arrays, str(tmp_path / "m"), "safetensors")
    with pytest.raises(CheckpointError, match=r"non-finite values \(NaN/Inf\) in \['classifier.bias'\]"):
        load_model_dir(AlbertForSequenceClassification(TINY), folder)


def test_a_folder_with_both_weights_files_is_refused_naming_both(tmp_path):
    folder = save_model_dir(tiny_model(), str(tmp_path / "m"))
    shutil.copy(os.path.join(HF_SST2, "spiece.model"), folder)
    save_model_dir(tiny_model(), str(tmp_path / "other"), weights_format="safetensors")
    shutil.copy(str(tmp_path / "other" / SAFETENSORS_FILE), folder)
    both = f"{folder}/model.ckpt and {folder}/model.safetensors: a model folder holds one weights file"
    with pytest.raises(CheckpointError, match=re.escape(both)):
        weights_file(folder)
    with pytest.raises(SystemExit, match="^error: " + re.escape(both)):
        evaluate.main(["--model", folder, "--data", DEV, "--quiet"])


def test_convert_writes_safetensors_that_evaluate_and_hf_export_read_alike(tmp_path, capsys):
    assert cv.main([HF_SST2, str(tmp_path / "st"), "--format", "safetensors"]) == 0
    assert "weights:    model.safetensors" in capsys.readouterr().out
    cv.convert(HF_SST2, str(tmp_path / "ckpt"))
    assert sorted(os.listdir(tmp_path / "st")) == [MANIFEST_FILE, "config.json", SAFETENSORS_FILE, "spiece.model"]
    scores = [evaluate.main(["--model", str(tmp_path / d), "--data", DEV, "--json"]) for d in ("ckpt", "st")]
    assert scores[0]["accuracy"] == scores[1]["accuracy"] and scores[0]["confusion"] == scores[1]["confusion"]
    exported = [export_hf(str(tmp_path / d), str(tmp_path / f"hf-{d}")) for d in ("ckpt", "st")]
    assert exported[0]["tensors"] == exported[1]["tensors"]
    assert sha256_of(str(tmp_path / "hf-ckpt" / "model.safetensors")) == \
        sha256_of(str(tmp_path / "hf-st" / "model.safetensors"))
    with pytest.raises(SystemExit):   # --format is for folders albert_min reads, not transformers' layout
        cv.main(["--to", "hf", str(tmp_path / "st"), str(tmp_path / "x"), "--format", "safetensors"])


def test_an_init_folders_safetensors_is_fingerprinted_for_resume(tmp_path):
    folder = save_model_dir(tiny_model(), str(tmp_path / "m"), weights_format="safetensors")
    run = RunConfig(task="cls", training=TrainingConfig(output=str(tmp_path / "out")), init=folder)
    assert os.path.join(folder, SAFETENSORS_FILE) in run.fingerprints()


def test_training_config_refuses_an_unknown_format():
    with pytest.raises(TrainingConfigError, match="format must be one of ckpt, safetensors, got 'bin'"):
        TrainingConfig(output="o", format="bin")


def test_train_py_format_safetensors_end_to_end_and_resume_keeps_it(tmp_path, capsys):
    tsv = sentiment_tsv(tmp_path / "train.tsv", 64, seed=5)
    dev = sentiment_tsv(tmp_path / "dev.tsv", 16, seed=6)
    out = str(tmp_path / "run")
    args = ["--train", tsv, "--dev", dev, "--batch-size", "16", "--lr", "3e-3", *TINY_MODEL]
    train.main(args + ["--epochs", "1", "--format", "safetensors", "--output", out])
    assert SAFETENSORS_FILE in os.listdir(out) and "model.ckpt" not in os.listdir(out)
    recorded = json.load(open(os.path.join(out, "train_metrics.json")))
    metrics = evaluate.main(["--model", out, "--data", dev, "--json"])
    assert metrics["accuracy"] == pytest.approx(recorded["dev_accuracy"])
    with pytest.raises(SystemExit, match=re.escape("error: --format ckpt (the run has safetensors)")):
        train.main(["--output", out, "--resume", "--epochs", "2", "--format", "ckpt"])
    state = train.main(["--output", out, "--resume", "--epochs", "2"])   # --format not given: the run's own
    assert state["step"] == 8
    assert SAFETENSORS_FILE in os.listdir(out) and "model.ckpt" not in os.listdir(out)
    assert json.load(open(os.path.join(out, "train_metrics.json")))["step"] == 8
    read_checkpoint(os.path.join(out, SAFETENSORS_FILE))   # the re-saved folder's sha256 was recorded anew


@pytest.mark.parametrize("fixture, head", [("tiny_qa", "qa"), ("tiny_token_cls", "token")])
def test_pipeline_picks_the_head_from_a_safetensors_folder_too(fixture, head, tmp_path):
    from albert_min.predict.task_pipelines import model_head
    dst = str(tmp_path / "m")
    cv.convert(os.path.join(FIXTURES, fixture), dst, weights_format="safetensors")
    assert model_head(dst) == head
