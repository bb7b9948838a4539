"""The pre-training heads (MLM, SOP) and the sequence classifier, against the transformers reference
(fixtures/reference.npz). The other task heads: test_heads.py."""

import os

from albert_min.model.folder import load_arrays
from albert_min.model.config import AlbertConfig
from albert_min.model.heads import AlbertForSequenceClassification
from helpers.paths import FIXTURES
from helpers.reference_model import TOL, accelerated, build, inputs, max_diff, pretraining  # noqa: F401 (fixtures)


def test_mlm_and_sop_logits_match(pretraining, inputs, reference):
    mlm, sop = pretraining(*inputs)
    assert mlm.shape == (3, 11, pretraining.config.vocab_size)
    assert max_diff(mlm, reference["mlm_logits"]) <= TOL
    assert sop.shape == (3, 2)
    assert max_diff(sop, reference["sop_logits"]) <= TOL


def test_classifier_logits_match(hf_weights, inputs, reference, build):
    config = AlbertConfig.from_json_file(os.path.join(FIXTURES, "tiny_classifier", "config.json"))
    assert config.num_labels == 3
    model = AlbertForSequenceClassification(config)
    load_arrays(model, hf_weights["classifier"], "weights.npz")
    build(model)
    assert max_diff(model(*inputs), reference["cls_logits"]) <= TOL
