"""Nothing lost (issue 7): safe outputs (manifests, --force, interrupted saves), checksummed
checkpoints, the training state that --resume reads. Flags, configs and inputs: test_flag_and_input_checks.py."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from helpers.paths import FIXTURES, ROOT
from helpers.safety import COMMITTED, HF_SST2, copy_model, model_dir, script, without_record  # noqa: F401 (a fixture)
from helpers.tiny_runs import TINY_MODEL, sentiment_tsv, tiny_config

import evaluate  # noqa: E402
import train  # noqa: E402
from albert_min import convert as cv
from albert_min.model.folder import CheckpointError, read_checkpoint, save_model_dir, write_checkpoint
from albert_min.common.safe_output import (MANIFEST_FILE, OutputError, atomic_directory, check_replaceable,
                                           read_manifest, recover_directory)
from albert_min.model.heads import AlbertForSequenceClassification
from albert_min.training.step import make_optimizer, linear_warmup_decay
from albert_min.training.state import load_training_state, save_training_state


# ------------------------------------------------------------- safe outputs
def test_written_folders_carry_a_manifest_of_their_files(tmp_path):
    model = AlbertForSequenceClassification(tiny_config())
    save_model_dir(model, str(tmp_path / "m"), extra_files={"notes.json": lambda p: open(p, "w").write("{}")})
    manifest = read_manifest(str(tmp_path / "m"))
    assert manifest["kind"] == "model" and manifest["complete"] is True
    assert manifest["files"] == ["config.json", "model.ckpt", "notes.json"]
    committed = read_manifest(COMMITTED)
    assert committed and sorted(committed["files"]) == sorted(n for n in os.listdir(COMMITTED) if n != MANIFEST_FILE)


def test_force_replaces_only_what_albert_min_wrote(tmp_path):
    model = AlbertForSequenceClassification(tiny_config())
    target = str(tmp_path / "m")
    save_model_dir(model, target)
    save_model_dir(model, target, overwrite=True)            # our own folder: replaced
    (tmp_path / "m" / "notes.txt").write_text("mine")
    os.makedirs(tmp_path / "m" / "sub")
    (tmp_path / "m" / "sub" / "important.csv").write_text("1,2")
    with pytest.raises(OutputError, match=r"did not write \(notes.txt, sub/important.csv\)"):
        save_model_dir(model, target, overwrite=True)
    assert (tmp_path / "m" / "notes.txt").read_text() == "mine"
    user = tmp_path / "user"
    user.mkdir()
    (user / "data.tsv").write_text("x")
    with pytest.raises(OutputError, match=f"{user}: not a folder written by albert_min"):
        save_model_dir(model, str(user), overwrite=True)
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputError, match="exists and is not a folder"):
        save_model_dir(model, str(tmp_path / "file"), overwrite=True)
    assert (user / "data.tsv").exists() and (tmp_path / "file").read_text() == "x"


def test_current_directory_and_its_parents_are_refused(tmp_path, monkeypatch):
    work = tmp_path / "project" / "run"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    for target in (".", str(work), str(tmp_path / "project"), "..", "/"):
        with pytest.raises(OutputError, match="the current directory"):
            check_replaceable(target, overwrite=True)
    with pytest.raises(OutputError, match="is or contains"):
        check_replaceable(str(tmp_path), overwrite=True, protect=[str(work / "train.tsv")])


def test_train_force_into_the_current_directory_deletes_nothing(tmp_path):
    tsv = sentiment_tsv(tmp_path / "train.tsv", 32, seed=0)
    code, err = script("train.py", "--train", "train.tsv", "--output", ".", "--force", *TINY_MODEL, cwd=tmp_path)
    assert code == 1 and err.strip().splitlines() == [
        f"error: {tmp_path}: refusing to write here, it is or contains {tsv}"]
    assert os.listdir(tmp_path) == ["train.tsv"]
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("keep")
    with pytest.raises(SystemExit, match="did not write|not a folder written by albert_min"):
        train.main(["--train", tsv, "--output", str(tmp_path / "out"), "--force", *TINY_MODEL])
    assert (tmp_path / "out" / "notes.txt").read_text() == "keep"


def test_converter_force_into_a_parent_of_the_source_is_refused(tmp_path):
    src = tmp_path / "models" / "tiny"
    shutil.copytree(os.path.join(FIXTURES, "tiny_pretraining"), src)
    before = sorted(os.listdir(src))
    for dst in (tmp_path / "models", tmp_path, src):
        with pytest.raises(cv.ConversionError if dst == src else OutputError, match="source|contains"):
            cv.convert(str(src), str(dst), force=True)
    assert sorted(os.listdir(src)) == before


def test_leftovers_of_a_killed_save_are_cleaned_and_foreign_ones_kept(tmp_path):
    target = str(tmp_path / "m")
    model = AlbertForSequenceClassification(tiny_config())
    save_model_dir(model, target)
    partial = tmp_path / ".m.tmp-killed1"          # a save killed half-way: our manifest, incomplete
    partial.mkdir()
    (partial / MANIFEST_FILE).write_text(json.dumps({"written_by": "albert_min", "kind": "model",
                                                     "complete": False, "files": []}))
    (partial / "model.ckpt").write_bytes(b"half")
    (tmp_path / ".m.tmp-empty").mkdir()             # killed right after mkdtemp
    (tmp_path / ".m.old-user").mkdir()              # not ours: no manifest, not empty
    (tmp_path / ".m.old-user" / "keep").write_text("x")
    assert recover_directory(target) is None         # the target is there: nothing to complete
    assert sorted(os.listdir(tmp_path)) == [".m.old-user", "m"]


KILL_BETWEEN_RENAMES = """
import os, sys
sys.path.insert(0, {root!r})
from albert_min.common import safe_output
with safe_output.atomic_directory({target!r}) as tmp:
    open(os.path.join(tmp, "v"), "w").write("1")
real_rename = os.rename
def rename(src, dst):
    real_rename(src, dst)
    if ".old-" in dst:
        os._exit(9)    # killed after NAME -> .NAME.old-*, before .NAME.tmp-* -> NAME
os.rename = rename
with safe_output.atomic_directory({target!r}, overwrite=True) as tmp:
    open(os.path.join(tmp, "v"), "w").write("2")
"""


def test_a_crash_between_the_two_renames_is_completed_by_the_next_run(tmp_path):
    target = str(tmp_path / "state")
    code = subprocess.run([sys.executable, "-c", KILL_BETWEEN_RENAMES.format(root=ROOT, target=target)]).returncode
    assert code == 9 and not os.path.exists(target)
    # Killed holding the lock: its lock file stays, unlocked (the kernel dropped the flock); the next run removes it.
    assert sorted(n.split("-")[0] for n in os.listdir(tmp_path)) == [".state.lock", ".state.old", ".state.tmp"]
    assert recover_directory(target) == f"completed an interrupted save of {target}"
    assert open(os.path.join(target, "v")).read() == "2" and os.listdir(tmp_path) == ["state"]
    # Rolled back instead when the new version never became complete.
    os.rename(target, str(tmp_path / ".state.old-x"))
    assert recover_directory(target) == f"rolled back an interrupted save of {target}"
    assert open(os.path.join(target, "v")).read() == "2" and os.listdir(tmp_path) == ["state"]


def test_a_failing_final_rename_puts_the_old_version_back(tmp_path, monkeypatch):
    target = str(tmp_path / "m")
    with atomic_directory(target) as tmp:
        open(os.path.join(tmp, "v"), "w").write("1")
    real_rename = os.rename

    def rename(src, dst):
        if ".tmp-" in src:
            raise OSError(28, "No space left on device", dst)
        real_rename(src, dst)
    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(OSError, match="No space left"):
        with atomic_directory(target, overwrite=True) as tmp:
            open(os.path.join(tmp, "v"), "w").write("2")
    assert open(os.path.join(target, "v")).read() == "1" and os.listdir(tmp_path) == ["m"]


def test_a_flipped_byte_in_model_ckpt_is_an_error_naming_the_file(model_dir, tmp_path):
    folder = copy_model(model_dir, tmp_path)
    path = os.path.join(folder, "model.ckpt")
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0x01
    open(path, "wb").write(bytes(data))
    with pytest.raises(CheckpointError, match=f"{path}: corrupted or replaced: its sha256 differs"):
        read_checkpoint(path)                  # its folder's fingerprint tells first
    without_record(path)                       # a folder from before fingerprints: the CRC tells
    with pytest.raises(CheckpointError, match=f"{path}: .*CRC"):
        read_checkpoint(path)
    with pytest.raises(SystemExit, match=f"^error: {path}: not a readable MindSpore checkpoint"):
        evaluate.main(["--model", folder, "--data", os.path.join(HF_SST2, "dev64.tsv"), "--quiet"])


@pytest.mark.parametrize("folder", sorted(d for d in os.listdir(os.path.join(ROOT, "weights"))
                                           if os.path.isfile(os.path.join(ROOT, "weights", d, "model.ckpt"))))
def test_every_committed_checkpoint_carries_a_crc(folder, tmp_path):
    # A model.ckpt written before albert_min asked MindSpore for a CRC loads unchecked, flipped bytes and all.
    path = str(tmp_path / "model.ckpt")
    data = bytearray(open(os.path.join(ROOT, "weights", folder, "model.ckpt"), "rb").read())
    data[len(data) // 2] ^= 0x01
    open(path, "wb").write(bytes(data))
    with pytest.raises(CheckpointError, match="CRC"):
        read_checkpoint(path)


def test_non_finite_weights_are_refused(tmp_path):
    path = str(tmp_path / "w.ckpt")
    write_checkpoint({"a": np.array([1.0, np.nan], np.float32)}, path)
    with pytest.raises(CheckpointError, match=r"non-finite values \(NaN/Inf\) in \['a'\]"):
        read_checkpoint(path)


# ---------------------------------------------------------- training state
def test_training_state_holds_the_adamw_moments(tmp_path):
    model = AlbertForSequenceClassification(tiny_config())
    optimizer = make_optimizer(model, linear_warmup_decay(1e-3, 10, 0.1), 0.01)
    optimizer.moments1[0].set_data(optimizer.moments1[0] + 0.5)
    optimizer.global_step.set_data(optimizer.global_step + 3)   # the state's step is the optimizer's own
    save_training_state(str(tmp_path / "s"), model, optimizer, {"epoch": 0, "step": 3})
    saved = read_checkpoint(str(tmp_path / "s" / "optimizer.ckpt"))
    assert len([k for k in saved if k.startswith("adam_m.")]) == len(optimizer.moments1)
    assert len([k for k in saved if k.startswith("adam_v.")]) == len(optimizer.moments2)
    assert "global_step" in saved and "learning_rate" not in saved
    fresh = make_optimizer(model, linear_warmup_decay(1e-3, 10, 0.1), 0.01)
    assert load_training_state(str(tmp_path / "s"), model, fresh)["step"] == 3
    assert np.array_equal(fresh.moments1[0].asnumpy(), optimizer.moments1[0].asnumpy())
    assert read_manifest(str(tmp_path / "s"))["kind"] == "training-state"
    # A state without the moments (as older albert_min wrote them) cannot resume exactly.
    write_checkpoint({"global_step": saved["global_step"]}, str(tmp_path / "s" / "optimizer.ckpt"))
    with pytest.raises(CheckpointError, match="optimizer.ckpt: corrupted or replaced"):   # not the file written
        load_training_state(str(tmp_path / "s"), model, fresh)
    without_record(str(tmp_path / "s" / "optimizer.ckpt"))
    with pytest.raises(CheckpointError, match="lacks optimizer state"):
        load_training_state(str(tmp_path / "s"), model, fresh)


def test_resume_without_a_state_is_a_plain_error(tmp_path):
    tsv = sentiment_tsv(tmp_path / "train.tsv", 32, seed=0)
    with pytest.raises(SystemExit, match="no training state to resume"):
        train.main(["--train", tsv, "--output", str(tmp_path / "out"), "--resume", *TINY_MODEL])
