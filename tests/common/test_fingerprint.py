"""Nothing lost, round four (issue 44, case 2): a model folder's files belong together. albert_min records
the sha256 of every file it writes into a model folder (and config.json's content) in its .albert_min.json;
weights or a tokenizer that are not the ones written are refused by name, an edited config.json is named
key by key, a folder without a fingerprint loads with one note, and python -m albert_min.fingerprint
records a folder changed on purpose."""

import json
import os
import re
import shutil

import pytest

from helpers.paths import FIXTURES, ROOT

import evaluate  # noqa: E402
from albert_min import fingerprint, pipeline
from albert_min.checkpoints.hf_export import export_hf
from albert_min.common.checksums import sha256_of
from albert_min.common.safe_output import MANIFEST_FILE, OutputError, check_replaceable, read_manifest
from albert_min.model.config import load_config
from albert_min.model.folder import CheckpointError, read_checkpoint, save_model_dir
from albert_min.model.heads import AlbertForSequenceClassification
from tokenizer import AlbertTokenizer, TokenizerError

WEIGHTS = os.path.join(ROOT, "weights")
DEV64 = os.path.join(FIXTURES, "tiny_sst2_hf", "dev64.tsv")


def copy(name, tmp_path, as_name=None):
    dst = str(tmp_path / (as_name or name))
    shutil.copytree(os.path.join(WEIGHTS, name), dst)
    return dst


def refused(path, folder):
    """The message that names the file that is not the one written, and its folder."""
    return re.escape(f"{path}: corrupted or replaced: its sha256 differs from the one albert_min recorded in "
                     f"{folder}/{MANIFEST_FILE}") + ".*" + re.escape(f"python -m albert_min.fingerprint {folder}")


def without_fingerprint(folder):
    """The folder's manifest as albert_min wrote it before it recorded fingerprints."""
    manifest = read_manifest(folder)
    old = {k: manifest[k] for k in ("written_by", "kind", "complete", "files")}
    with open(os.path.join(folder, MANIFEST_FILE), "w", encoding="utf-8") as f:
        json.dump(old, f, indent=1)


def test_the_committed_folders_carry_a_fingerprint_of_every_file():
    for name in ("sst2-small", "sst2-pretrained-small", "pretrained-small"):
        folder = os.path.join(WEIGHTS, name)
        manifest = read_manifest(folder)
        assert manifest["sha256"] == {n: sha256_of(os.path.join(folder, n)) for n in manifest["files"]}
        assert set(manifest["files"]) >= {"config.json", "model.ckpt", "spiece.model"}
        assert manifest["contents"]["config.json"] == json.load(open(os.path.join(folder, "config.json")))
        assert sum(os.path.getsize(os.path.join(folder, n)) for n in os.listdir(folder)) < 20e6


def test_a_saved_folder_records_every_file_and_the_config(tmp_path):
    model = AlbertForSequenceClassification.from_pretrained(os.path.join(WEIGHTS, "sst2-small"))
    folder = save_model_dir(model, str(tmp_path / "m"), spiece_model=os.path.join(WEIGHTS, "sst2-small", "spiece.model"),
                            extra_files={"notes.json": lambda p: open(p, "w").write("{}")})
    manifest = read_manifest(folder)
    assert manifest["sha256"] == {n: sha256_of(os.path.join(folder, n))
                                  for n in ("config.json", "model.ckpt", "spiece.model", "notes.json")}
    assert manifest["contents"] == {"config.json": json.load(open(os.path.join(folder, "config.json")))}


@pytest.mark.parametrize("into, other", [("sst2-small", "sst2-pretrained-small"),
                                         ("sst2-pretrained-small", "sst2-small")])
def test_another_models_weights_of_the_same_shapes_are_refused(into, other, tmp_path, capsys):
    """The issue's swap: same shapes, another vocabulary; evaluate.py scored it 52.41 (and 51.72) with exit 0."""
    folder = copy(into, tmp_path)
    path = os.path.join(folder, "model.ckpt")
    shutil.copyfile(os.path.join(WEIGHTS, other, "model.ckpt"), path)
    with pytest.raises(CheckpointError, match=refused(path, folder)):
        AlbertForSequenceClassification.from_pretrained(folder)
    with pytest.raises(CheckpointError, match=refused(path, folder)):
        read_checkpoint(path)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        evaluate.main(["--model", folder, "--data", DEV64, "--quiet"])
    assert re.fullmatch("error: " + refused(path, folder), str(exit_.value.code))
    assert capsys.readouterr().out == ""


def test_another_models_tokenizer_is_refused(tmp_path, capsys):
    folder = copy("sst2-small", tmp_path)
    path = os.path.join(folder, "spiece.model")
    shutil.copyfile(os.path.join(WEIGHTS, "sst2-pretrained-small", "spiece.model"), path)
    with pytest.raises(TokenizerError, match=refused(path, folder)):
        AlbertTokenizer.from_pretrained(folder)
    with pytest.raises(TokenizerError, match=refused(path, folder)):
        pipeline(folder)
    with pytest.raises(SystemExit) as exit_:
        evaluate.main(["--model", folder, "--data", DEV64, "--quiet"])
    assert re.fullmatch("error: " + refused(path, folder), str(exit_.value.code))
    dst = str(tmp_path / "hf")
    with pytest.raises(CheckpointError, match=refused(path, folder)):   # nor copied on by an export
        export_hf(folder, dst)
    assert not os.path.exists(dst)


def test_an_edited_config_loads_with_one_note_naming_each_changed_key(tmp_path, capfd):
    folder = copy("sst2-small", tmp_path)
    path = os.path.join(folder, "config.json")
    config = json.load(open(path))
    config.update(num_hidden_layers=12, id2label={"0": "negative", "1": "positive"})
    json.dump(config, open(path, "w"), indent=2)
    capfd.readouterr()
    for _ in range(2):   # said once
        assert load_config(folder).num_hidden_layers == 12
        AlbertForSequenceClassification.from_pretrained(folder)
    err = capfd.readouterr().err
    assert err == (f"note: {path}: changed since albert_min wrote it: "
                   'id2label {"0": "LABEL_0", "1": "LABEL_1"} -> {"0": "negative", "1": "positive"}; '
                   f"num_hidden_layers 4 -> 12 (the model is built as it says now; python -m albert_min.fingerprint {folder} records it "
                   "as it is)\n")
    del config["num_hidden_layers"]   # a key taken out is named too
    json.dump(config, open(path, "w"))
    load_config(folder)
    assert "num_hidden_layers 4 -> (absent)" in capfd.readouterr().err


def test_a_folder_without_a_fingerprint_loads_with_one_note(tmp_path, capfd):
    folder = copy("sst2-small", tmp_path)
    without_fingerprint(folder)
    shutil.copyfile(os.path.join(WEIGHTS, "sst2-pretrained-small", "model.ckpt"), os.path.join(folder, "model.ckpt"))
    capfd.readouterr()
    for _ in range(2):
        AlbertForSequenceClassification.from_pretrained(folder)   # as before this change: nothing can tell
        AlbertTokenizer.from_pretrained(folder)
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"note: {folder}/model.ckpt: no sha256 recorded for it or its "
                                                   "folder's files (its folder was written before albert_min "
                                                   "recorded fingerprints), so only its MindSpore CRC is checked")
    assert err.endswith(f"record them: python -m albert_min.fingerprint {folder}\n")


def test_the_fingerprint_command_records_a_folder_changed_on_purpose(tmp_path, capsys):
    folder = copy("sst2-small", tmp_path)
    path = os.path.join(folder, "model.ckpt")
    shutil.copyfile(os.path.join(WEIGHTS, "sst2-pretrained-small", "model.ckpt"), path)
    with pytest.raises(CheckpointError):
        AlbertForSequenceClassification.from_pretrained(folder)
    assert fingerprint.main([folder]) == 0
    assert capsys.readouterr().out == (f"recorded {folder}: config.json (unchanged), model.ckpt (changed), "
                                       "spiece.model (unchanged), train_metrics.json (unchanged)\n")
    AlbertForSequenceClassification.from_pretrained(folder)          # what the user chose is the model now
    assert read_manifest(folder)["sha256"]["model.ckpt"] == sha256_of(path)
    old = copy("pretrained-small", tmp_path)                       # a folder from before fingerprints gets one
    without_fingerprint(old)
    assert fingerprint.main([old]) == 0 and "config.json (recorded)" in capsys.readouterr().out
    assert read_manifest(old)["contents"]["config.json"] == json.load(open(os.path.join(old, "config.json")))
    assert sorted(os.listdir(old)) == sorted(os.listdir(os.path.join(WEIGHTS, "pretrained-small")))   # nothing left
    assert fingerprint.main([str(tmp_path / "none")]) == 1
    assert capsys.readouterr().err == f"error: model folder not found: {tmp_path / 'none'}\n"


def test_a_folder_albert_min_did_not_write_is_recorded_without_taking_the_users_files(tmp_path):
    """A model folder put together by hand (no .albert_min.json) gets a manifest listing its model files
    only: the user's notes and folders in it stay theirs, so --force still refuses to replace it."""
    folder = tmp_path / "mine"
    folder.mkdir()
    for name in ("config.json", "model.ckpt", "spiece.model"):
        shutil.copyfile(os.path.join(WEIGHTS, "sst2-small", name), folder / name)
    (folder / "notes.txt").write_text("mine")
    (folder / "results").mkdir()
    assert fingerprint.main([str(folder)]) == 0
    manifest = read_manifest(str(folder))
    assert manifest["files"] == ["config.json", "model.ckpt", "spiece.model"] and manifest["folders"] == []
    with pytest.raises(OutputError, match=re.escape("holds files albert_min did not write (notes.txt, results/)")):
        check_replaceable(str(folder), overwrite=True)
    AlbertForSequenceClassification.from_pretrained(str(folder))
