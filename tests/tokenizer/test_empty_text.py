"""Text that is empty once normalised ("\u200b", control characters, a lone accent) or not
valid Unicode (a lone surrogate): refused where texts are tokenized, naming the item or path:line."""

import os
import re
import sys

import pytest

from helpers.paths import ROOT

sys.path.insert(0, ROOT)
from albert_min.tasks.glue import reading as glue_reading  # noqa: E402
from albert_min import pipeline  # noqa: E402
from albert_min.tasks.errors import DataError  # noqa: E402
from albert_min.tasks.batching import encode_examples  # noqa: E402
from albert_min.tasks.text_files import read_tsv  # noqa: E402
from albert_min.predict.pipelines import PipelineError  # noqa: E402
from tokenizer import AlbertTokenizer  # noqa: E402
from tokenizer.albert_tokenizer import TokenizerError  # noqa: E402

SST2_SMALL = os.path.join(ROOT, "weights", "sst2-small")
# Each tokenizes to [CLS] [SEP], exactly like "": zero-width space, control characters, a combining accent.
EMPTY_ONCE_NORMALISED = ["\u200b", "\x01\x02", "\u0301"]


@pytest.fixture(scope="module")
def tokenizer():
    return AlbertTokenizer.from_pretrained(SST2_SMALL)


def write(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return str(path)


@pytest.mark.parametrize("text", EMPTY_ONCE_NORMALISED)
def test_pipeline_refuses_text_empty_once_normalised(text):
    clf = pipeline(SST2_SMALL)
    with pytest.raises(PipelineError, match=r"^input: empty text once normalised"):
        clf(text)
    with pytest.raises(PipelineError, match=r"^input 1: empty text once normalised"):
        clf(["a gorgeous film", text])
    # Either text of a pair, as "" is refused in either.
    with pytest.raises(PipelineError, match=r"^input 0 \(text\): empty text once normalised"):
        clf([(text, "a gorgeous film")])
    with pytest.raises(PipelineError, match=r"^input \(text_pair\): empty text once normalised"):
        clf(("a gorgeous film", text))


def test_pipeline_refuses_a_lone_surrogate():
    clf = pipeline(SST2_SMALL)
    with pytest.raises(PipelineError, match=r"^input: not valid Unicode: lone surrogate U\+D800 at character 0"):
        clf("\ud800")
    with pytest.raises(PipelineError, match=r"^input 1 \(text_pair\): not valid Unicode: lone surrogate U\+DC00 at "
                                            r"character 2"):
        clf(["fine", ("a", "ab\udc00")])


def test_tokenizer_refuses_a_lone_surrogate(tokenizer):
    with pytest.raises(TokenizerError, match="lone surrogate U\\+D800"):
        tokenizer.tokenize("\ud800")
    assert tokenizer.tokenize("\U0001F600") != []   # a whole pair is fine


@pytest.mark.parametrize("text", EMPTY_ONCE_NORMALISED)
def test_data_rows_empty_once_normalised_name_file_and_line(tmp_path, tokenizer, text):
    single = write(tmp_path / "single.tsv", f"sentence\tlabel\ngood\t1\n{text}\t0\n")
    sentences, _ = read_tsv(single)
    with pytest.raises(DataError, match=rf"^{re.escape(single)}:3: empty text once normalised"):
        encode_examples(tokenizer, sentences, None, 64)
    rte = tmp_path / "RTE"
    rte.mkdir()
    pairs = write(rte / "dev.tsv", f"index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n"
                                   f"1\t{text}\t \tentailment\n")
    examples = glue_reading.read_examples(pairs, glue_reading.TASKS["rte"])
    with pytest.raises(DataError, match=rf"^{re.escape(pairs)}:3: empty text once normalised"):
        encode_examples(tokenizer, examples.texts, examples.text_pairs, 64)


def test_plain_lists_name_the_example(tokenizer):
    with pytest.raises(DataError, match=r"^example 1: empty text once normalised"):
        encode_examples(tokenizer, ["fine", "\u200b"], None, 64)


def test_evaluate_and_train_name_file_and_line(tmp_path):
    import evaluate
    import train
    data = write(tmp_path / "dev.tsv", "sentence\tlabel\na gorgeous film\t1\n\u200b\t0\n")
    with pytest.raises(SystemExit, match=rf"^error: {re.escape(data)}:3: empty text once normalised"):
        evaluate.main(["--model", SST2_SMALL, "--data", data, "--quiet"])
    rows = "".join(f"{w} film .\t{i % 2}\n" for i, w in enumerate(["good", "bad", "fine", "dull"] * 8))
    train_tsv = write(tmp_path / "train.tsv", "sentence\tlabel\n" + rows + "\x01\x02\t1\n")
    with pytest.raises(SystemExit, match=rf"^error: {re.escape(train_tsv)}:34: empty text once normalised"):
        train.main(["--train", train_tsv, "--output", str(tmp_path / "out"), "--vocab-size", "40",
                    "--embedding-size", "16", "--hidden-size", "32", "--layers", "2", "--heads", "2",
                    "--intermediate-size", "48", "--quiet"])
    assert not os.path.exists(tmp_path / "out")
