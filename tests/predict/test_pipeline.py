"""albert_min.pipeline: texts and sentence pairs -> label and probability, settings from the model folder."""

import json
import os
import shutil

import numpy as np
import pytest
import mindspore as ms

from helpers.paths import ROOT
from albert_min import pipeline
from albert_min.predict.pipelines import PipelineError
from albert_min.model.heads import AlbertForSequenceClassification

SST2_SMALL = os.path.join(ROOT, "weights", "sst2-small")
TEXTS = ["a gorgeous , witty , seductive movie .", "a mess", "the plot is thin but the acting is superb",
         "it 's not a bad film , just a forgettable one ."]
PAIRS = [("A man is playing a guitar.", "A man plays the guitar."), ("a mess", "a gorgeous film")]


@pytest.fixture(scope="module")
def clf():
    return pipeline(SST2_SMALL)


def one_by_one(model, tokenizer, text, text_pair=None, max_length=64):
    """The model on one unpadded example: the reference the batched pipeline must match."""
    e = tokenizer.encode(text, text_pair, max_length=max_length)
    logits = model(*[ms.Tensor(np.array([e[k]], np.int32))
                     for k in ("input_ids", "token_type_ids", "attention_mask")]).asnumpy()[0]
    return logits


def softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()


def test_texts_get_the_label_and_probability_of_the_model(clf):
    results = clf(TEXTS)
    model, tokenizer = clf.model, clf.tokenizer
    assert [r["label"] for r in results[:2]] == ["LABEL_1", "LABEL_0"]   # SST-2: 1 = positive
    for text, result in zip(TEXTS, results):
        probs = softmax(one_by_one(model, tokenizer, text))
        assert result["label"] == f"LABEL_{probs.argmax()}"
        assert abs(result["score"] - probs.max()) < 1e-5
    assert clf(TEXTS[0]) == results[0]   # one text in, one dict out
    assert clf([]) == []


def test_sentence_pairs_use_both_segments(clf):
    model, tokenizer = clf.model, clf.tokenizer
    mixed = clf([PAIRS[0], TEXTS[1], PAIRS[1]])
    for item, result in zip([PAIRS[0], (TEXTS[1], None), PAIRS[1]], mixed):
        probs = softmax(one_by_one(model, tokenizer, *item))
        assert result["label"] == f"LABEL_{probs.argmax()}"
        assert abs(result["score"] - probs.max()) < 1e-5
    alone = clf(PAIRS[1])   # padded to its own length, not the batch's: equal to float32 rounding
    assert alone["label"] == mixed[2]["label"] and abs(alone["score"] - mixed[2]["score"]) < 1e-6
    assert clf(PAIRS[1]) != clf(PAIRS[1][0])   # the second segment changes the answer


def test_truncation_comes_from_the_model_folder(clf):
    assert clf.max_length == 64   # train_metrics.json: what training used
    long_text = " ".join(["a gorgeous film"] * 40)
    expected = softmax(one_by_one(clf.model, clf.tokenizer, long_text, max_length=64))
    assert abs(clf(long_text)["score"] - expected.max()) < 1e-5
    assert pipeline(SST2_SMALL, max_length=16).max_length == 16


def test_label_names_from_config(tmp_path):
    folder = tmp_path / "named"
    shutil.copytree(SST2_SMALL, folder)
    config = json.loads((folder / "config.json").read_text())
    config["id2label"] = {"0": "negative", "1": "positive"}
    (folder / "config.json").write_text(json.dumps(config))
    assert [r["label"] for r in pipeline(str(folder))(TEXTS[:2])] == ["positive", "negative"]


def test_regression_model_returns_its_value(tmp_path):
    from albert_min.model.config import AlbertConfig
    from albert_min.model.folder import save_model_dir
    ms.set_seed(0)
    config = AlbertConfig(vocab_size=8000, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                          num_attention_heads=2, intermediate_size=48, max_position_embeddings=64, num_labels=1)
    folder = str(tmp_path / "stsb")
    save_model_dir(AlbertForSequenceClassification(config), folder,
                   spiece_model=os.path.join(SST2_SMALL, "spiece.model"))
    reg = pipeline(folder)
    results = reg([PAIRS[0], TEXTS[0]])
    model, tokenizer = reg.model, reg.tokenizer
    for item, result in zip([PAIRS[0], (TEXTS[0], None)], results):
        assert set(result) == {"score"}
        assert abs(result["score"] - float(one_by_one(model, tokenizer, *item)[0])) < 1e-5


@pytest.mark.parametrize("bad, message", [
    (["fine", ""], "input 1: empty text"),
    ([3], "input 0: expected a string"),
    (["fine", ["a", "b"]], "input 1: expected a string or a"),
    (("only one",), "a tuple of 2 texts"),
    (("a", None), r"input \(text_pair\): expected a string"),
    ({"a set"}, "got set"),
    ("   ", "input: empty text"),
])
def test_bad_input_is_a_clear_error(clf, bad, message):
    with pytest.raises(PipelineError, match=message):
        clf(bad)


def test_missing_model_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="model folder not found"):
        pipeline(str(tmp_path / "nothing"))


def test_pipeline_stays_the_function_after_its_module_is_imported():
    import albert_min
    import albert_min.export  # noqa: F401  (imports albert_min.predict.pipelines)
    assert callable(albert_min.pipeline) and albert_min.pipeline.__name__ == "pipeline"


def test_pipeline_is_classifys_prediction_path(clf):
    """The pipeline predicts through prediction_engine.predict_logits, as evaluate.py does: the same
    numbers exactly, pairs and single texts mixed in one call."""
    from albert_min.tasks.prediction_engine import predict_logits, softmax
    items = [PAIRS[0], TEXTS[1], PAIRS[1], TEXTS[0]]
    logits, _ = predict_logits(clf.model, clf.tokenizer, [i[0] if isinstance(i, tuple) else i for i in items],
                               [i[1] if isinstance(i, tuple) else None for i in items], max_length=clf.max_length,
                               progress=False)
    probs = softmax(logits)
    assert [r["score"] for r in clf(items)] == [float(p.max()) for p in probs]


def test_labels_and_problem_type_come_from_albert_config(tmp_path):
    """config.json as AlbertConfig parses it: id2label's names (values made strings, as
    AlbertConfig does) and problem_type regression with one output."""
    folder = tmp_path / "numbered"
    shutil.copytree(SST2_SMALL, folder)
    config = json.loads((folder / "config.json").read_text())
    config["id2label"] = {"0": 10, "1": 11}
    (folder / "config.json").write_text(json.dumps(config))
    clf = pipeline(str(folder))
    assert clf.labels == clf.model.config.label_names == ["10", "11"]
    assert clf("a gorgeous film")["label"] == "11"
