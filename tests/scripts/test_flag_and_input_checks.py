"""Nothing silently wrong (issue 7): validated flags and configs, named errors for bad inputs,
no tracebacks and no debris from the scripts. Safe outputs and checkpoints: test_safety.py."""

import json
import os

import numpy as np
import pytest

from helpers.paths import FIXTURES
from helpers.safety import COMMITTED, HF_SST2, copy_model, model_dir, script, without_record  # noqa: F401 (a fixture)
from helpers.tiny_runs import TINY_MODEL, sentiment_tsv, tiny_config

import evaluate  # noqa: E402
import train  # noqa: E402
from albert_min.model.folder import read_checkpoint, record_model_dir, write_checkpoint
from albert_min.model.config import ConfigError, load_config
from albert_min.tasks.errors import DataError
from albert_min.tasks.text_files import read_tsv
from albert_min.tasks.pretraining.reading import read_documents
from albert_min.model.heads import AlbertForSequenceClassification
from tokenizer import AlbertTokenizer, TokenizerError


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
