"""``python -m albert_min.convert --to hf``: albert_min folders written in Hugging Face's layout.

transformers is never imported here. tests/fixtures/make_hf_export_reference.py
exported the same fixtures, loaded them with transformers and committed their
outputs, a digest of the exported tensors and the exported config.json. Each case
must export exactly that, give transformers' outputs to 1e-5 with albert_min's
classes, and come back through the converter bit for bit.
"""

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import mindspore as ms
import pytest

from albert_min import convert as cv
from albert_min.model import heads
from albert_min.model.folder import read_checkpoint, save_model_dir
from albert_min.model.config import AlbertConfig, load_config
from albert_min.checkpoints.formats import read_safetensors, read_weights
from albert_min.checkpoints.hf_export import HF_WEIGHTS_FILE, export_hf
from helpers.checkpoint_writers import tensors_digest
from helpers.paths import FIXTURES, ROOT

REF = dict(np.load(os.path.join(FIXTURES, "hf_export_reference.npz")))
INPUTS = dict(np.load(os.path.join(FIXTURES, "heads_reference.npz")))
CASES = json.loads(str(REF["cases"]))      # {name: [fixture folder, classifier class or None]}
TOL = 1e-5


def outputs(model_class, folder, multiple_choice):
    model = model_class.from_pretrained(folder)
    model.set_train(False)
    prefix = "mc_" if multiple_choice else ""
    result = model(*[ms.Tensor(INPUTS[prefix + k].astype(np.int32))
                     for k in ("input_ids", "token_type_ids", "attention_mask")])
    return [r.asnumpy() for r in (result if isinstance(result, tuple) else (result,))]


@pytest.mark.parametrize("case", sorted(CASES))
def test_export_gives_transformers_outputs_and_round_trips_bit_for_bit(tmp_path, case):
    fixture, classifier_class = CASES[case]
    ours, hf, back = str(tmp_path / "ours"), str(tmp_path / "hf"), str(tmp_path / "back")
    cv.convert(os.path.join(FIXTURES, fixture), ours)
    report = export_hf(ours, hf, classifier_class=classifier_class)

    # Exactly the folder transformers loaded in the oracle.
    with open(os.path.join(hf, "config.json"), encoding="utf-8") as f:
        assert json.load(f) == json.loads(str(REF[f"{case}/config"]))
    exported = read_safetensors(os.path.join(hf, HF_WEIGHTS_FILE))
    assert tensors_digest(exported) == str(REF[f"{case}/tensors_sha256"])

    # albert_min's class on the albert_min folder gives transformers' outputs on the export.
    architecture = report["architectures"][0]
    ours_out = outputs(getattr(heads, architecture), ours, architecture == "AlbertForMultipleChoice")
    theirs = [REF[f"{case}/out{i}"] for i in range(len(ours_out))]
    assert f"{case}/out{len(ours_out)}" not in REF
    for mine, ref in zip(ours_out, theirs):
        assert mine.shape == ref.shape and float(np.abs(mine - ref).max()) <= TOL

    # Round trip: the export converts back to the same weights, bit for bit, and the same config.
    assert cv.convert(hf, back)["classes"] == cv.convert(os.path.join(FIXTURES, fixture), str(tmp_path / "again"))[
        "classes"]
    first, second = read_checkpoint(os.path.join(ours, "model.ckpt")), read_checkpoint(os.path.join(back, "model.ckpt"))
    assert sorted(first) == sorted(second)
    assert all(np.array_equal(first[n], second[n]) and first[n].dtype == second[n].dtype for n in first)
    # A TF checkpoint's Google loop -> group formula is exported only where it runs the same groups.
    assert dataclasses.replace(load_config(ours), group_mapping="hf") == load_config(back)

    # From a Hugging Face fixture, the export holds the fixture's own tensors (the tied decoder left out).
    source, fmt = cv.find_weights(os.path.join(FIXTURES, fixture))
    if fmt != "tf":
        original = {n: a for n, a in read_weights(source, fmt).items() if cv.hf_name(n) is not None}
        assert sorted(original) == sorted(exported)
        assert all(np.array_equal(original[n], exported[n]) for n in original)


def test_google_group_mapping_that_moves_a_loop_is_refused(tmp_path):
    ours = str(tmp_path / "ours")
    cv.convert(os.path.join(FIXTURES, "tiny_google_eh_tf"), ours)          # L = 18, G = 14, Google's formula
    with pytest.raises(cv.ConversionError, match=r"group_mapping 'google' runs loop\(s\) \[9\] with another group"):
        export_hf(ours, str(tmp_path / "hf"))
    assert not os.path.exists(tmp_path / "hf")


def test_partial_cross_layer_sharing_is_refused(tmp_path):
    config = AlbertConfig(vocab_size=120, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                          num_attention_heads=4, intermediate_size=37, cross_layer_sharing="attention")
    ours = save_model_dir(heads.AlbertModel(config), str(tmp_path / "ours"))
    with pytest.raises(cv.ConversionError, match="cross_layer_sharing 'attention' cannot be written for transformers"):
        export_hf(ours, str(tmp_path / "hf"))
    assert not os.path.exists(tmp_path / "hf")


def test_export_follows_the_output_rules(tmp_path):
    ours, hf = str(tmp_path / "ours"), tmp_path / "hf"
    cv.convert(os.path.join(FIXTURES, "tiny_qa"), ours)
    with pytest.raises(cv.ConversionError, match="is not one of"):
        export_hf(ours, str(hf), classifier_class="AlbertForPizza")
    with pytest.raises(Exception, match="refusing to write here"):
        export_hf(ours, os.path.join(ours, "hf"))                          # inside the source folder
    hf.mkdir()
    (hf / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="pass force=True"):
        export_hf(ours, str(hf))
    with pytest.raises(Exception, match="not a folder written by albert_min"):
        export_hf(ours, str(hf), force=True)
    assert (hf / "notes.txt").read_text() == "mine"
    (hf / "notes.txt").unlink()
    export_hf(ours, str(hf), force=True)
    assert oct(os.stat(hf / HF_WEIGHTS_FILE).st_mode & 0o777) == oct(0o666 & ~current_umask())


def current_umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_cli(tmp_path):
    ours, hf = str(tmp_path / "ours"), str(tmp_path / "hf")
    cv.convert(os.path.join(FIXTURES, "tiny_pretraining"), ours)
    cmd = [sys.executable, "-m", "albert_min.convert", "--to", "hf", ours, hf]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "architectures: AlbertForPreTraining" in done.stdout and "decoder is tied" in done.stdout
    assert sorted(os.listdir(hf)) == [".albert_min.json", "config.json", HF_WEIGHTS_FILE]
    again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert again.returncode == 1 and again.stderr.strip() == f"error: {hf} already exists (pass --force to replace it)"
    mixed = subprocess.run(cmd + ["--tokenizer", "x.model"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert mixed.returncode == 2 and "--tokenizer: only when reading a public checkpoint" in mixed.stderr
