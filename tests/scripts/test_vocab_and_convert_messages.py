"""Issue 46's leftovers: python -m albert_min.convert answers a missing or unreadable SRC (and bad
flags) before MindSpore is imported, as train and evaluate do; a model folder whose tokenizer has
more pieces than its config's vocab_size is one error line naming the folder, never a gather
traceback from the embedding."""

import os
import subprocess
import sys

import pytest

from conftest import ROOT
# the commands' runner and MindSpore's import time, as test_commands measures them for train and evaluate
from test_commands import import_mindspore_seconds, run  # noqa: F401  (a fixture)

FIXTURES = os.path.join(ROOT, "tests", "fixtures")
TINY_HF = os.path.join(FIXTURES, "tiny_classifier")            # an HF checkpoint, vocab_size 120
BIG_TOKENIZER = os.path.join(FIXTURES, "spiece_sst2_2k.model")   # 2000 pieces
SST2_SMALL = os.path.join(ROOT, "weights", "sst2-small")

CONVERT = ("module", "albert_min.convert")
FAST_CONVERT = {   # name -> (arguments, exit status, what stderr says)
    "missing SRC": (("no/such", "out"), 1, "error: no such file or folder: no/such"),
    "a folder with no checkpoint": (("docs", "out"), 1, "error: docs: no checkpoint found"),
    "missing --config": ((TINY_HF, "out", "--config", "no/such.json"), 1, "error: config file not found: no/such.json"),
    "missing --tokenizer": ((TINY_HF, "out", "--tokenizer", "no/spiece.model"), 1,
                            "error: SentencePiece model not found: no/spiece.model"),
    "existing DST": ((TINY_HF, "weights"), 1, "error: weights already exists (pass --force to replace it)"),
    "--to hf, missing SRC": (("--to", "hf", "no/such", "out"), 1, "error: model folder not found: no/such"),
    "bad --to": (("--to", "tf", TINY_HF, "out"), 2, "argument --to: invalid choice: 'tf'"),
    "bad --format": (("--format", "bin", TINY_HF, "out"), 2, "argument --format: invalid choice: 'bin'"),
}


@pytest.mark.parametrize("name", FAST_CONVERT)
def test_convert_answers_a_bad_source_before_mindspore_is_imported(name, import_mindspore_seconds):
    argv, status, says = FAST_CONVERT[name]
    code, out, err, seconds = run(*CONVERT, *argv)
    assert code == status, (out, err)
    assert says in err, err
    assert out.rstrip().endswith("mindspore imported: False"), out[-300:]
    assert len([line for line in err.splitlines() if "error:" in line]) == 1 and "Traceback" not in err, err
    assert not os.path.exists(os.path.join(ROOT, "out"))
    # MindSpore's import alone took 4.5-6 s on a loaded 2-core machine; these 0.3 s (9.8 s for a missing SRC before)
    assert seconds < 0.5 * import_mindspore_seconds, (seconds, import_mindspore_seconds)


# ------------------------------------------------------------ tokenizer vs vocab_size
def folder_with_a_bigger_tokenizer(tmp_path, spiece_model=BIG_TOKENIZER):
    """A model folder (vocab_size 120) written by albert_min's own writer, whose spiece.model has 2000
    pieces: its fingerprint is right, so only the vocabulary check can refuse it."""
    from albert_min.model.config import AlbertConfig
    from albert_min.model.folder import model_arrays, write_model_dir
    from albert_min.model.heads import AlbertForSequenceClassification
    config = AlbertConfig(vocab_size=120, embedding_size=8, hidden_size=16, num_hidden_layers=1,
                          num_attention_heads=2, intermediate_size=32, max_position_embeddings=64)
    folder = str(tmp_path / "model")
    write_model_dir(config, model_arrays(AlbertForSequenceClassification(config)), folder,
                    spiece_model=spiece_model)
    return folder


def expected_message(folder):
    return (f"{folder}: its spiece.model has 2000 pieces, more than the model's vocab_size 120: "
            "ids from 120 on have no embedding")


def test_a_tokenizer_bigger_than_the_vocabulary_is_refused_where_a_folder_is_loaded(tmp_path):
    from albert_min import pipeline
    from albert_min.common.errors import AlbertMinError
    from albert_min.export import make_inputs
    from albert_min.model.heads import AlbertForSequenceClassification
    folder = folder_with_a_bigger_tokenizer(tmp_path)
    for load in (lambda: pipeline(folder), lambda: AlbertForSequenceClassification.from_pretrained(folder),
                 lambda: make_inputs(folder, ["a film"])):
        with pytest.raises(AlbertMinError) as err:
            load()
        assert str(err.value).startswith(expected_message(folder)) and "\n" not in str(err.value)
        assert "python -m albert_min.fingerprint" in str(err.value)


def test_evaluate_says_one_line_for_a_tokenizer_bigger_than_the_vocabulary(tmp_path):
    """Was a MindSpore gather traceback (an index past the embedding table)."""
    folder = folder_with_a_bigger_tokenizer(tmp_path)
    done = subprocess.run([sys.executable, "evaluate.py", "--model", folder, "--data",
                           os.path.join(FIXTURES, "tiny_sst2_hf", "dev64.tsv"), "--quiet"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr[-2000:]
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {expected_message(folder)}"), done.stderr[-2000:]


def train_error(*flags):
    done = subprocess.run([sys.executable, "train.py", "--train", os.path.join(FIXTURES, "tiny_sst2_hf", "dev64.tsv"),
                           "--max-steps", "1", *flags], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if "error:" in line or "Traceback" in line]
    assert len(errors) == 1, done.stderr[-2000:]
    return errors[0]


def test_train_init_names_the_folder_or_the_tokenizer_whose_pieces_do_not_fit(tmp_path):
    """train.py --init DIR: the folder's own tokenizer, or --tokenizer FILE: said with the file and
    the model it does not fit (was "the tokenizer has 2000 pieces but the model only 120")."""
    folder = folder_with_a_bigger_tokenizer(tmp_path)
    output = str(tmp_path / "out")
    assert train_error("--init", folder, "--output", output).startswith(f"error: {expected_message(folder)}")
    no_tokenizer = folder_with_a_bigger_tokenizer(tmp_path / "bare", spiece_model=None)
    assert train_error("--init", no_tokenizer, "--tokenizer", BIG_TOKENIZER, "--output", output) == (
        f"error: --tokenizer {BIG_TOKENIZER} has 2000 pieces, more than the vocab_size 120 of --init {no_tokenizer}: "
        "ids from 120 on would have no embedding; pass the tokenizer that model was trained with")
    assert not os.path.exists(output)


def test_train_config_says_how_to_make_the_tokenizer_fit(tmp_path):
    """train.py --config (vocab_size 120) with a bigger --tokenizer, or the tokenizer it trains: the
    flag that makes them fit (was "the tokenizer has N pieces but the model only 120")."""
    config = os.path.join(folder_with_a_bigger_tokenizer(tmp_path), "config.json")
    output = str(tmp_path / "out")
    assert train_error("--config", config, "--tokenizer", BIG_TOKENIZER, "--output", output) == (
        f"error: --tokenizer {BIG_TOKENIZER} has 2000 pieces, more than the vocab_size 120 of --config {config}: "
        "ids from 120 on would have no embedding; pass a tokenizer of at most 120 pieces, or a --config with "
        "vocab_size 2000")
    assert train_error("--config", config, "--output", output).endswith(
        f"more than the vocab_size 120 of --config {config}: pass --vocab-size 120")
    assert not os.path.exists(output)


def test_a_source_the_os_will_not_read_is_said_with_its_reason(monkeypatch):
    """A weights file without read permission (root, as here, reads any file: the OS refusal is simulated
    where convert opens it)."""
    from albert_min import convert as cv

    def refuse(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", path)
    monkeypatch.setattr(cv, "open", refuse, raising=False)
    args = cv.argparse.Namespace(to="albert_min", src=TINY_HF, dst="out", config=None, tokenizer=None, force=False)
    assert cv.missing_input(args) == f"{os.path.join(TINY_HF, 'model.safetensors')}: Permission denied"
