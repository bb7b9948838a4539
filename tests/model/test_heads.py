"""The task heads (masked LM, QA, token classification, multiple choice) and what converts them.

Fixtures come from transformers (tests/fixtures/make_heads_reference.py): each head
is converted from HF's .bin and safetensors and must give HF's outputs to 1e-5.
"""

import os
import sys

import numpy as np
import mindspore as ms
import pytest

from albert_min import convert as cv
from albert_min.model.folder import CheckpointError
from albert_min.model.modeling import AlbertModel
from albert_min.model.heads import (AlbertForMaskedLM, AlbertForMultipleChoice, AlbertForPreTraining,
                                    AlbertForQuestionAnswering, AlbertForSequenceClassification,
                                    AlbertForTokenClassification)
from helpers.paths import FIXTURES, ROOT
from helpers.reference_model import accelerated, build  # noqa: F401 (fixtures: plain and accelerated)

TOL = 1e-5
FORMATS = ["pytorch_model.bin", "model.safetensors"]


@pytest.fixture(scope="module")
def ref():
    return dict(np.load(os.path.join(FIXTURES, "heads_reference.npz")))


def inputs(ref, prefix=""):
    return [ms.Tensor(ref[prefix + k].astype(np.int32)) for k in ("input_ids", "token_type_ids", "attention_mask")]


def converted(tmp_path, folder, weights):
    dst = str(tmp_path / "out")
    return cv.convert(os.path.join(FIXTURES, folder, weights), dst), dst


def max_diff(ours, theirs):
    return float(np.abs(ours.asnumpy() - theirs).max())


@pytest.mark.parametrize("weights", FORMATS)
def test_masked_lm_like_albert_base_v2(tmp_path, ref, weights, build):
    """albert.* + predictions.* only (no SOP head): converts with no flag, loads as AlbertForMaskedLM."""
    report, dst = converted(tmp_path, "tiny_masked_lm", weights)
    assert report["heads"] == ["mlm"] and report["classes"] == ["AlbertForMaskedLM"] and report["pooler"]
    model = AlbertForMaskedLM.from_pretrained(dst)
    build(model)
    logits = model(*inputs(ref))
    assert logits.shape == (3, 11, 120)
    assert max_diff(logits, ref["masked_lm_logits"]) <= TOL
    # The pooler came along (the backbone class uses it); no SOP head was invented.
    assert max_diff(build(AlbertModel.from_pretrained(dst))(*inputs(ref))[1], ref["masked_lm_pooled"]) <= TOL
    with pytest.raises(CheckpointError, match=r"AlbertForPreTraining needs the SOP head \(sop_classifier\.\*\)"):
        AlbertForPreTraining.from_pretrained(dst)
    with pytest.raises(CheckpointError, match=r"needs the classifier head"):
        AlbertForSequenceClassification.from_pretrained(dst)


@pytest.mark.parametrize("weights", FORMATS)
def test_question_answering(tmp_path, ref, weights, build):
    report, dst = converted(tmp_path, "tiny_qa", weights)
    assert report["heads"] == ["qa"] and report["classes"] == ["AlbertForQuestionAnswering"]
    assert not report["pooler"]                                   # HF builds QA without a pooler
    model = AlbertForQuestionAnswering.from_pretrained(dst)
    build(model)
    start, end = model(*inputs(ref))
    assert start.shape == end.shape == (3, 11)
    assert max_diff(start, ref["qa_start_logits"]) <= TOL
    assert max_diff(end, ref["qa_end_logits"]) <= TOL
    with pytest.raises(CheckpointError, match=r"AlbertModel needs the pooler \(albert\.pooler\.\*\)"):
        AlbertModel.from_pretrained(dst)


@pytest.mark.parametrize("weights", FORMATS)
def test_token_classification(tmp_path, ref, weights, build):
    report, dst = converted(tmp_path, "tiny_token_cls", weights)
    assert report["heads"] == ["classifier"] and report["num_labels"] == 5
    assert report["classes"] == ["AlbertForTokenClassification"]    # from config.json's "architectures"
    model = AlbertForTokenClassification.from_pretrained(dst)
    build(model)
    logits = model(*inputs(ref))
    assert logits.shape == (3, 11, 5)
    assert max_diff(logits, ref["token_logits"]) <= TOL


@pytest.mark.parametrize("weights", FORMATS)
def test_multiple_choice(tmp_path, ref, weights, build):
    report, dst = converted(tmp_path, "tiny_multiple_choice", weights)
    assert report["heads"] == ["classifier"] and report["classes"] == ["AlbertForMultipleChoice"]
    model = AlbertForMultipleChoice.from_pretrained(dst)
    build(model)
    logits = model(*inputs(ref, "mc_"))                         # [B=2, C=3, S=11] -> [2, 3]
    assert logits.shape == (2, 3)
    assert max_diff(logits, ref["mc_logits"]) <= TOL


def test_heads_compile_as_graphs(tmp_path, ref, build):
    """The new classes also run under mindspore.jit (as evaluation does), with the same numbers."""
    _, dst = converted(tmp_path, "tiny_qa", "model.safetensors")
    model = AlbertForQuestionAnswering.from_pretrained(dst)
    build(model)
    start, _ = ms.jit(model.construct)(*inputs(ref))
    assert max_diff(start, ref["qa_start_logits"]) <= TOL


def test_a_classifier_is_fine_tuned_from_a_masked_lm_checkpoint(tmp_path):
    """train.py --init from an albert-base-v2-shaped folder: the classifier starts fresh, the rest is loaded."""
    sys.path.insert(0, ROOT)
    import train
    from helpers.tiny_runs import sentiment_tsv
    from tokenizer import train_sentencepiece
    _, dst = converted(tmp_path, "tiny_masked_lm", "model.safetensors")
    train_tsv = sentiment_tsv(tmp_path / "train.tsv", 48, seed=5)
    sentences = [line.split("\t")[0] for line in open(train_tsv).read().splitlines()[1:]]
    spiece = train_sentencepiece(sentences, str(tmp_path / "spiece"), 40)
    out = str(tmp_path / "cls")
    train.main(["--train", train_tsv, "--output", out, "--init", dst, "--tokenizer", spiece, "--epochs", "1",
                "--batch-size", "16", "--max-length", "24", "--quiet"])
    model = AlbertForSequenceClassification.from_pretrained(out)
    assert model.classifier.weight.shape == (2, 32)
