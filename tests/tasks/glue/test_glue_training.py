"""GLUE tasks in training: sentence-pair batching, the regression config, and train.py / evaluate.py
end to end on a few rows of RTE and STS-B. Readers and metrics: test_glue.py."""

import json
import os

import numpy as np
import pytest

from helpers.glue_files import GLUE_DIR, needs_glue, write
from helpers.paths import ROOT

from albert_min.tasks.glue import metric as glue_metric
from albert_min.tasks.glue import reading as glue_reading
from albert_min.model.config import AlbertConfig, ConfigError
from albert_min.tasks.batching import encode_examples, pad_batch, pad_with_types

TASKS = glue_reading.TASKS


# ---------------------------------------------------------- pair batching
@pytest.fixture(scope="module")
def tokenizer():
    from tokenizer import AlbertTokenizer
    return AlbertTokenizer(os.path.join(ROOT, "weights", "sst2-small", "spiece.model"))


def test_pairs_encode_as_cls_a_sep_b_sep(tokenizer):
    a, b = "a gripping film", "the plot is thin and the acting is not much better"
    ids, types = encode_examples(tokenizer, [a], [b], max_length=64)
    ia, ib = tokenizer.encode_ids(a), tokenizer.encode_ids(b)
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    assert ids[0] == [cls] + ia + [sep] + ib + [sep]
    assert types[0] == [0] * (len(ia) + 2) + [1] * (len(ib) + 1)
    # Longest first: b (the longer) loses pieces from its end until they fit.
    ids, types = encode_examples(tokenizer, [a], [b], max_length=len(ia) + 3 + 4)
    assert ids[0] == [cls] + ia + [sep] + ib[:4] + [sep] and sum(types[0]) == 5


def test_pad_with_types_keeps_segments(tokenizer):
    texts, pairs = ["good", "a long and winding sentence about a film"], ["bad movie", "short"]
    ids, types = encode_examples(tokenizer, texts, pairs, max_length=32)
    input_ids, token_type_ids, attention_mask = pad_with_types(ids, types, tokenizer.pad_token_id)
    assert input_ids.shape[1] % 8 == 0 and input_ids.dtype == np.int32
    reference = tokenizer(texts, pairs, max_length=32, padding="longest")
    width = reference["input_ids"].shape[1]
    for got, key in ((input_ids, "input_ids"), (token_type_ids, "token_type_ids"), (attention_mask, "attention_mask")):
        assert (got[:, :width] == reference[key]).all()
    assert (token_type_ids[:, width:] == 0).all() and (attention_mask[:, width:] == 0).all()
    # Single sentences: the same arrays as pad_batch, token types all 0.
    ids, types = encode_examples(tokenizer, texts, None, max_length=32)
    for got, want in zip(pad_with_types(ids, types, tokenizer.pad_token_id), pad_batch(ids, tokenizer.pad_token_id)):
        assert (got == want).all()


# -------------------------------------------------------- regression config
def test_regression_config_round_trip(tmp_path):
    config = AlbertConfig(vocab_size=100, hidden_size=32, num_attention_heads=2, intermediate_size=64,
                          num_labels=1, problem_type="regression")
    path = str(tmp_path / "config.json")
    config.to_json_file(path)
    written = json.load(open(path))
    assert written["problem_type"] == "regression" and written["num_labels"] == 1
    assert written["id2label"] == {"0": "LABEL_0"} and written["label2id"] == {"LABEL_0": 0}
    loaded = AlbertConfig.from_json_file(path)
    assert loaded == config and loaded.is_regression
    plain = AlbertConfig(vocab_size=100, hidden_size=32, num_attention_heads=2, intermediate_size=64)
    assert "problem_type" not in plain.to_dict() and not plain.is_regression


def test_hf_stsb_config_loads_as_regression():
    # What transformers writes for an STS-B model: no num_labels, one LABEL_0, problem_type.
    hf = {"model_type": "albert", "vocab_size": 100, "hidden_size": 32, "num_attention_heads": 2,
          "intermediate_size": 64, "id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0},
          "problem_type": "regression", "architectures": ["AlbertForSequenceClassification"]}
    config = AlbertConfig.from_dict(hf)
    assert config.num_labels == 1 and config.is_regression and config.id2label is None
    del hf["problem_type"]
    assert AlbertConfig.from_dict(hf).is_regression       # HF infers regression from one label


def test_label_names_round_trip_and_checks():
    config = AlbertConfig.from_dict({"vocab_size": 100, "hidden_size": 32, "num_attention_heads": 2,
                                     "intermediate_size": 64, "id2label": {"0": "entailment", "1": "not_entailment"}})
    assert config.num_labels == 2 and config.id2label == {0: "entailment", 1: "not_entailment"}
    assert config.to_dict()["label2id"] == {"entailment": 0, "not_entailment": 1}
    assert AlbertConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ConfigError, match="problem_type 'regresion' is not one of"):
        AlbertConfig(problem_type="regresion")
    with pytest.raises(ConfigError, match="needs num_labels 1"):
        AlbertConfig(problem_type="regression", num_labels=2)
    with pytest.raises(ConfigError, match="id2label must name the ids 0..1"):
        AlbertConfig(num_labels=2, id2label={0: "a"})


# ------------------------------------------------------ scripts end to end
TINY = ["--embedding-size", "16", "--hidden-size", "32", "--layers", "2", "--heads", "2", "--intermediate-size", "48",
        "--vocab-size", "300", "--max-length", "48", "--quiet", "--batch-size", "16", "--epochs", "1", "--lr", "1e-3"]


def glue_subset(tmp_path, folder, n_train, n_dev):
    """The first rows of a real GLUE task, in a folder of the task's name (so the task is inferred)."""
    os.makedirs(tmp_path / folder)
    paths = []
    for split, n in (("train", n_train), ("dev", n_dev)):
        with open(os.path.join(GLUE_DIR, folder, f"{split}.tsv"), encoding="utf-8") as f:
            lines = [next(f) for _ in range(n + 1)]
        paths.append(write(tmp_path / folder / f"{split}.tsv", [line.rstrip("\n") for line in lines]))
    return paths


@needs_glue
def test_rte_train_then_evaluate(tmp_path, capsys):
    import evaluate
    import train
    train_tsv, dev_tsv = glue_subset(tmp_path, "RTE", 64, 24)
    output = str(tmp_path / "rte")
    state = train.main(["--train", train_tsv, "--dev", dev_tsv, "--output", output, *TINY])
    config = json.load(open(os.path.join(output, "config.json")))
    assert config["id2label"] == {"0": "entailment", "1": "not_entailment"} and "problem_type" not in config
    assert state["history"][-1]["dev_examples"] == 24
    preds = str(tmp_path / "preds.tsv")
    capsys.readouterr()
    metrics = evaluate.main(["--model", output, "--data", dev_tsv, "--json", "--output", preds])
    best = json.load(open(os.path.join(output, "train_metrics.json")))
    assert metrics["task"] == "rte" and metrics["accuracy"] == pytest.approx(best["dev_accuracy"])
    assert json.loads(capsys.readouterr().out)["task"] == "rte"
    lines = open(preds).read().splitlines()
    assert lines[0] == "index\tprediction" and len(lines) == 25
    assert {line.split("\t")[1] for line in lines[1:]} <= {"entailment", "not_entailment"}
    assert lines[1].split("\t")[0] == open(dev_tsv).read().splitlines()[1].split("\t")[0]
    # A test file (no label column): predictions only, in the submission layout.
    test_tsv = write(tmp_path / "RTE" / "test.tsv", ["index\tsentence1\tsentence2"] + [
        "\t".join(line.split("\t")[:3]) for line in open(dev_tsv).read().splitlines()[1:5]])
    evaluate.main(["--model", output, "--data", test_tsv, "--output", str(tmp_path / "RTE.tsv"), "--quiet"])
    assert open(tmp_path / "RTE.tsv").read().splitlines()[1:] == lines[1:5]
    with pytest.raises(SystemExit, match="has no labels to score; pass --output"):
        evaluate.main(["--model", output, "--data", test_tsv])


@needs_glue
def test_stsb_regression_train_then_evaluate(tmp_path, capsys):
    import evaluate
    import train
    train_tsv, dev_tsv = glue_subset(tmp_path, "STS-B", 64, 32)
    output = str(tmp_path / "stsb")
    train.main(["--train", train_tsv, "--dev", dev_tsv, "--output", output, *TINY])
    config = json.load(open(os.path.join(output, "config.json")))
    assert config["problem_type"] == "regression" and config["num_labels"] == 1
    preds = str(tmp_path / "preds.tsv")
    capsys.readouterr()
    metrics = evaluate.main(["--model", output, "--data", dev_tsv, "--json", "--output", preds])
    printed = json.loads(capsys.readouterr().out)
    assert list(printed)[:3] == ["task", "pearson", "spearman"] and printed["task"] == "stsb"
    best = json.load(open(os.path.join(output, "train_metrics.json")))
    assert metrics["pearson"] == pytest.approx(best["dev_pearson"], abs=1e-6)
    # The submission file holds the model's scores (3 decimals, as GLUE's scorer reads them).
    from albert_min.tasks.prediction_engine import predict_logits
    from albert_min.model import kernels
    from albert_min.model.heads import AlbertForSequenceClassification
    from tokenizer import AlbertTokenizer
    dev = glue_reading.read_examples(dev_tsv, TASKS["stsb"])
    # the model as evaluate.py runs it (accelerated): a near-constant regression's pearson moves with rounding
    logits, _ = predict_logits(kernels.accelerate(AlbertForSequenceClassification.from_pretrained(output)),
                               AlbertTokenizer.from_pretrained(output), dev.texts, dev.text_pairs,
                               max_length=48, progress=False)
    lines = open(preds).read().splitlines()
    assert lines[0] == "index\tprediction" and [line.split("\t")[0] for line in lines[1:]] == dev.index
    assert np.abs(np.array([float(line.split("\t")[1]) for line in lines[1:]]) - logits[:, 0]).max() <= 5e-4
    assert glue_metric.pearson(dev.labels, logits[:, 0]) == pytest.approx(metrics["pearson"], abs=1e-6)
    # A regression model on a classification task is refused with a plain error.
    rte_tsv = write(tmp_path / "rte.tsv", ["index\tsentence1\tsentence2\tlabel", "0\ta\tb\tentailment"])
    with pytest.raises(SystemExit, match="is a regression model .one score.; task rte"):
        evaluate.main(["--model", output, "--data", rte_tsv, "--task", "rte"])


def test_train_task_flag_inference():
    import train
    assert train.parse_args(["--train", "glue/RTE/train.tsv", "--output", "o"]).task == "rte"
    assert train.parse_args(["--train", "x/train.tsv", "--output", "o"]).task == "sentence_label"
    assert train.parse_args(["--train", "x/train.tsv", "--task", "mnli", "--output", "o"]).task == "mnli"
    assert train.parse_args(["--task", "sop", "--text", "c.txt", "--output", "o"]).task == "sop"
    with pytest.raises(SystemExit):
        train.parse_args(["--task", "stsb", "--output", "o"])   # needs --train


def test_cls_still_names_the_generic_sentence_label_task():
    """Issue 45: the generic sentence<TAB>label task is named sentence_label (cls read as the [CLS] piece);
    cls, in users' commands and older model folders' records, still names it, and the help says the new name."""
    import evaluate
    import train
    from albert_min.tasks import TASK_NAMES, get_task, task_name
    assert task_name("cls") == "sentence_label" and get_task("cls").name == "sentence_label"
    assert "cls" not in TASK_NAMES and "sentence_label" in TASK_NAMES
    assert train.parse_args(["--task", "cls", "--train", "x/train.tsv", "--output", "o"]).task == "sentence_label"
    assert evaluate.parse_args(["--task", "cls", "--model", "m"]).task == "sentence_label"
    assert "sentence_label (any sentence<TAB>label TSV; cls still names it)" in " ".join(
        evaluate.build_parser().format_help().split())
