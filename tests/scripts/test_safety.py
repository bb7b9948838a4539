"""Nothing lost, nothing silently wrong (issue 7): safe outputs, validated flags and
configs, named errors for bad inputs, no tracebacks from the scripts."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from helpers.paths import FIXTURES, ROOT
from helpers.tiny_runs import TINY_MODEL, sentiment_tsv, tiny_config

import evaluate  # noqa: E402
import train  # noqa: E402
from albert_min import convert as cv
from albert_min.model.folder import CheckpointError, read_checkpoint, record_model_dir, save_model_dir, write_checkpoint
from albert_min.common.safe_output import (MANIFEST_FILE, OutputError, atomic_directory, check_replaceable,
                                           read_manifest, recover_directory)
from albert_min.model.config import ConfigError, load_config
from albert_min.tasks.errors import DataError
from albert_min.tasks.text_files import read_tsv
from albert_min.tasks.pretraining.reading import read_documents
from albert_min.model.heads import AlbertForSequenceClassification
from albert_min.training.step import make_optimizer, linear_warmup_decay
from albert_min.training.state import load_training_state, save_training_state
from tokenizer import AlbertTokenizer, TokenizerError

COMMITTED = os.path.join(ROOT, "weights", "sst2-small")
HF_SST2 = os.path.join(FIXTURES, "tiny_sst2_hf")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A converted classifier folder (with spiece.model) that evaluate.py accepts."""
    out = str(tmp_path_factory.mktemp("models") / "cls")
    cv.convert(HF_SST2, out)
    return out


def copy_model(model_dir, tmp_path, name="m"):
    dst = str(tmp_path / name)
    shutil.copytree(model_dir, dst)
    return dst


def without_record(path):
    """Take ``path``'s sha256 out of its folder's manifest, as albert_min wrote folders before it recorded
    fingerprints (issue 44): what the checks below it (CRC, SentencePiece, shapes) then see."""
    manifest_path = os.path.join(os.path.dirname(path), MANIFEST_FILE)
    manifest = json.load(open(manifest_path))
    del manifest["sha256"][os.path.basename(path)]
    json.dump(manifest, open(manifest_path, "w"))


def script(name, *args, cwd=ROOT):
    """Run train.py / evaluate.py as a user does; returns (exit code, stderr)."""
    result = subprocess.run([sys.executable, os.path.join(ROOT, name), *args], cwd=cwd,
                            capture_output=True, text=True, timeout=300)
    return result.returncode, result.stderr


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


# ------------------------------------------------------------- bad numbers
@pytest.mark.parametrize("flags, message", [
    (["--batch-size", "-1"], "--batch-size: must be an integer >= 1, got '-1'"),
    (["--batch-size", "0"], "--batch-size: must be an integer >= 1"),
    (["--max-length", "0"], "--max-length: must be an integer between 3 and"),
    (["--batch-size", "x"], "--batch-size: 'x' is not an integer"),
])
def test_evaluate_numeric_flags_are_validated(flags, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        evaluate.main(["--model", "m", *flags])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("flags, message", [
    (["--lr", "0"], "--lr: must be a number in (0.0, inf)"),
    (["--lr", "nan"], "--lr: 'nan' is not a finite number"),
    (["--dropout", "1"], "--dropout: must be a number in [0.0, 1.0)"),
    (["--dropout", "-0.1"], "--dropout: must be a number in [0.0, 1.0)"),
    (["--warmup", "1.5"], "--warmup: must be a number in [0.0, 1.0]"),
    (["--epochs", "0"], "--epochs: must be an integer >= 1"),
    (["--batch-size", "-1"], "--batch-size: must be an integer >= 1"),
    (["--max-length", "2"], "--max-length: must be an integer between 3"),
    (["--max-steps", "0"], "--max-steps: must be an integer >= 1"),
    (["--eval-every", "0"], "--eval-every: must be an integer >= 1"),
    (["--save-every", "-5"], "--save-every: must be an integer >= 1"),
    (["--weight-decay", "-1"], "--weight-decay: must be a number in [0.0, inf)"),
    (["--max-grad-norm", "inf"], "--max-grad-norm: 'inf' is not a finite number"),
    (["--heads", "0"], "--heads: must be an integer >= 1"),
    (["--vocab-size", "3"], "--vocab-size: must be an integer >= 8"),
    (["--seed", "-1"], "--seed: must be an integer between 0 and"),
    (["--resume", "--force"], "--resume and --force contradict"),
])
def test_train_numeric_flags_are_validated(flags, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        train.main(["--train", "x.tsv", "--output", "o", *flags])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")   # inf - inf in the softmax
def test_evaluate_refuses_non_finite_outputs(model_dir, tmp_path):
    folder = copy_model(model_dir, tmp_path)
    path = os.path.join(folder, "model.ckpt")
    arrays = read_checkpoint(path)
    arrays["classifier.weight"] = np.full_like(arrays["classifier.weight"], 3e38)   # finite, but overflows
    write_checkpoint(arrays, path)
    record_model_dir(folder)                   # weights put in on purpose (python -m albert_min.fingerprint)
    with pytest.raises(SystemExit, match=f"error: {folder}: the model gives non-finite outputs"):
        evaluate.main(["--model", folder, "--data", os.path.join(HF_SST2, "dev64.tsv"), "--quiet"])


@pytest.mark.parametrize("key, value, message", [
    ("layer_norm_eps", float("nan"), "layer_norm_eps must be a finite number, got nan"),
    ("layer_norm_eps", float("inf"), "layer_norm_eps must be a finite number"),
    ("layer_norm_eps", "1e-12", "layer_norm_eps must be a finite number, got '1e-12'"),
    ("hidden_dropout_prob", True, "hidden_dropout_prob must be a finite number, got True"),
    ("initializer_range", None, "initializer_range must be a finite number"),
    ("hidden_size", "32", "hidden_size must be a positive integer, got '32'"),
    ("hidden_act", ["gelu"], "hidden_act ['gelu'] is not one of"),
    ("max_position_embeddings", 1 << 40, "max_position_embeddings = 1099511627776 is implausibly large"),
    ("vocab_size", 10 ** 9, "vocab_size = 1000000000 is implausibly large"),
    ("intermediate_size", 1 << 18, "about"),       # each size plausible, the model is not
])
def test_config_values_are_checked_with_the_key_named(tmp_path, key, value, message):
    data = {**tiny_config().to_dict(), key: value}
    if key == "intermediate_size":
        data.update(hidden_size=1 << 14, num_attention_heads=16, num_hidden_groups=2, inner_group_num=4)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=f"^{path}: .*" + message.replace("[", r"\[").replace("]", r"\]")):
        load_config(str(path))


@pytest.mark.parametrize("content, message", [
    (b'{"hidden_size": 32, "x": "\xff\xfe"}', ":1: not UTF-8"),
    (b"[" * 100000 + b"]" * 100000, "nested too deeply"),
    (b'{"vocab_size": ' + b"9" * 5000 + b"}", "not usable JSON"),
    (b"[1, 2]", "expected a JSON object"),
])
def test_unreadable_config_json_is_a_config_error(tmp_path, content, message):
    path = tmp_path / "config.json"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=f"{path}.*{message}"):
        load_config(str(path))


def test_config_with_a_bom_loads(tmp_path):
    path = tmp_path / "config.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(tiny_config().to_dict()).encode())
    assert load_config(str(path)) == tiny_config()


# -------------------------------------------------------------------- inputs
def test_tsv_with_a_utf8_bom_is_accepted(tmp_path):
    path = tmp_path / "bom.tsv"
    path.write_bytes(b"\xef\xbb\xbfsentence\tlabel\ngood film\t1\r\n")
    assert read_tsv(str(path)) == (["good film"], [1])


def test_tsv_with_invalid_utf8_names_the_line(tmp_path):
    path = tmp_path / "bad.tsv"
    path.write_bytes(b"sentence\tlabel\ngood film\t1\nbad \xff film\t0\n")
    with pytest.raises(DataError, match=f"^{path}:3: not UTF-8$"):
        read_tsv(str(path))
    code, err = script("evaluate.py", "--model", COMMITTED, "--data", str(path))
    assert code == 1 and err.strip().splitlines() == [f"error: {path}:3: not UTF-8"]


def test_a_str_where_a_list_is_expected_is_rejected():
    tok = AlbertTokenizer(os.path.join(FIXTURES, "spiece_sst2_2k.model"))
    with pytest.raises(TokenizerError, match="text_pairs must be a str or a list of str, got str"):
        tok(["x", "z"], text_pairs="yw")
    with pytest.raises(TokenizerError, match="text_pairs must be one str too"):
        tok("x", text_pairs=["y"])
    with pytest.raises(TokenizerError, match="texts must be a str or a list of str"):
        tok([1, 2])
    assert tok(["x", "z"], text_pairs=["y", "w"])["input_ids"].shape[0] == 2


def test_sop_text_that_is_empty_is_a_plain_error_and_a_long_line_trains_a_tokenizer(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n  \n")
    with pytest.raises(DataError, match=f"{empty}: no text"):
        read_documents(str(empty))
    code, err = script("train.py", "--task", "sop", "--text", str(empty), "--output", str(tmp_path / "o"))
    assert code == 1 and err.strip().splitlines() == [f"error: {empty}: no text"]
    # A line over SentencePiece's 4,192-byte sentence limit is cut at spaces for tokenizer training (issue 36).
    long = tmp_path / "long.txt"
    long.write_text("a short line .\n" + "word " * 1000 + "\n\nanother one .\nand more .\n")
    from albert_min.tasks import get_task
    from albert_min.training.run import tokenizer_sentences
    from tokenizer import train_sentencepiece
    task = get_task("sop")
    sentences = tokenizer_sentences(task, read_documents(str(long)), [])
    assert max(len(s.encode()) for s in sentences) == 4999
    spiece = AlbertTokenizer(train_sentencepiece(sentences, str(tmp_path / "sp"), vocab_size=40))
    assert spiece.tokenize("word word") == ["\u2581word"] * 2
    # Its 2 documents are too few to hold 2 out for NSP's negatives: one line naming the file, no traceback.
    code, err = script("train.py", "--task", "sop", "--text", str(long), "--output", str(tmp_path / "o"))
    assert code == 1 and err.strip().splitlines()[-1].startswith(f"error: {long}: pre-training holds out 5%"), err
    assert "needs 30+ documents" in err and not (tmp_path / "o").exists()


def test_corrupt_spiece_model_and_train_metrics_name_the_path(model_dir, tmp_path):
    data = os.path.join(HF_SST2, "dev64.tsv")
    folder = copy_model(model_dir, tmp_path, "spiece")
    spiece = os.path.join(folder, "spiece.model")
    open(spiece, "wb").write(b"\x00garbage" * 50)
    with pytest.raises(SystemExit, match=f"^error: {spiece}: corrupted or replaced"):
        evaluate.main(["--model", folder, "--data", data, "--quiet"])
    without_record(spiece)
    with pytest.raises(SystemExit, match=f"^error: {spiece}: not a SentencePiece model"):
        evaluate.main(["--model", folder, "--data", data, "--quiet"])
    folder = copy_model(model_dir, tmp_path, "metrics")
    metrics = os.path.join(folder, "train_metrics.json")
    open(metrics, "wb").write(b'{"max_length": 6')
    with pytest.raises(SystemExit, match=f"^error: {metrics}:1: not JSON"):
        evaluate.main(["--model", folder, "--data", data, "--quiet"])
    open(metrics, "w").write('{"max_length": "long"}')
    with pytest.raises(SystemExit, match=f"^error: {metrics}: 'max_length' must be int, got 'long'"):
        evaluate.main(["--model", folder, "--data", data, "--quiet"])


# ----------------------------------------------------- no tracebacks, no debris
def test_train_data_errors_are_one_line(tmp_path):
    missing = str(tmp_path / "missing.tsv")
    code, err = script("train.py", "--train", missing, "--output", str(tmp_path / "o"))
    assert code == 1 and err.strip().splitlines() == [f"error: data file not found: {missing}"]
    bad = tmp_path / "bad.tsv"
    bad.write_text("sentence\tlabel\ngood\t1\nno label here\n")
    with pytest.raises(SystemExit, match=f"^error: {bad}:3: expected 2 tab-separated fields"):
        train.main(["--train", str(bad), "--output", str(tmp_path / "o"), *TINY_MODEL])
    assert sorted(os.listdir(tmp_path)) == ["bad.tsv"]   # nothing left, the lock file included (released)


def test_evaluate_checks_its_output_before_the_work(model_dir, tmp_path, monkeypatch):
    data = os.path.join(HF_SST2, "dev64.tsv")
    (tmp_path / "file").write_text("x")

    def must_not_run(*args, **kwargs):
        raise AssertionError("evaluated although the output cannot be written")
    with monkeypatch.context() as patch:
        patch.setattr("albert_min.tasks.prediction_engine.predict_logits", must_not_run)
        with pytest.raises(SystemExit, match=f"^error: {tmp_path / 'file'}: not a folder, so "
                                             f"{tmp_path / 'file' / 'preds.tsv'} cannot be written below it$"):
            evaluate.main(["--model", model_dir, "--data", data, "--output", str(tmp_path / "file" / "preds.tsv")])
        with pytest.raises(SystemExit, match=f"^error: {tmp_path}: is a folder, not a file$"):
            evaluate.main(["--model", model_dir, "--data", data, "--output", str(tmp_path)])
    (tmp_path / "file").unlink()
    # A full disk while writing: one line, and no half-written file (nor a folder made for it) left behind.
    real_replace = os.replace

    def full_disk(src, dst):
        raise OSError(28, "No space left on device", dst)
    monkeypatch.setattr(os, "replace", full_disk)
    out = str(tmp_path / "new" / "preds.tsv")
    with pytest.raises(SystemExit, match=f"^error: {out}: No space left on device$"):
        evaluate.main(["--model", model_dir, "--data", data, "--output", out, "--quiet"])
    monkeypatch.setattr(os, "replace", real_replace)
    assert os.listdir(tmp_path) == []


def test_train_on_a_full_disk_leaves_nothing_half_written(tmp_path, monkeypatch):
    tsv = sentiment_tsv(tmp_path / "train.tsv", 16, seed=0)

    def full_disk(arrays, path):
        raise OSError(28, "No space left on device", path)
    monkeypatch.setattr("albert_min.model.folder.write_checkpoint", full_disk)
    output = str(tmp_path / "out")
    with pytest.raises(SystemExit, match=r"^error: .*model.ckpt: No space left on device$"):
        train.main(["--train", tsv, "--output", output, "--epochs", "1", "--batch-size", "16", *TINY_MODEL])
    assert sorted(os.listdir(tmp_path)) == ["train.tsv"]   # nothing left, the lock file included (released)


def test_dropout_masks_are_a_function_of_seed_and_step():
    """What makes resume exact: reseeding at a step gives that step's masks whatever came before."""
    import mindspore as ms
    from albert_min.training.step import reseed_dropout
    model = AlbertForSequenceClassification(tiny_config(hidden_dropout_prob=0.5))
    model.set_train(True)
    x = ms.Tensor(np.ones((4, 32), np.float32))
    dropout = model.albert.embeddings.dropout

    def masks(step, calls):
        reseed_dropout(model, seed=7, step=step)

        def forward(x):
            return dropout(x)
        compiled = ms.jit(forward)   # a new graph with fresh kernels, as Trainer.step compiles one
        return [compiled(x).asnumpy() for _ in range(calls)]

    first, again = masks(0, 3), masks(0, 2)
    assert np.array_equal(first[0], again[0]) and np.array_equal(first[1], again[1])
    assert not np.array_equal(first[0], first[1])          # the masks change from call to call
    assert not np.array_equal(masks(2, 1)[0], first[0])   # and a later segment does not repeat them
