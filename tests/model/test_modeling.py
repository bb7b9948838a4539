"""The whole model: dropout only in training, graph mode equal to PyNative, the activations' accuracy and the
parameter counts. Each layer against the transformers reference (fixtures/reference.npz) has its own file:
test_embeddings.py, test_attention.py, test_shared_layer.py, test_pooler.py,
test_pretraining_and_classifier_heads.py (and test_heads.py for the task heads)."""

import os

import numpy as np
import mindspore as ms
import pytest

from albert_min.model.config import AlbertConfig
from albert_min.model.modeling import AlbertModel, count_parameters, gelu, gelu_new, parameter_table, tanh
from helpers.paths import FIXTURES
from helpers.reference_model import TOL, accelerated, build, inputs, max_diff, pretraining  # noqa: F401 (fixtures)


def test_dropout_is_active_only_in_training(pretraining, inputs):
    pretraining.set_train(True)
    try:
        a, _ = pretraining(*inputs)
        b, _ = pretraining(*inputs)
        assert np.abs(a.asnumpy() - b.asnumpy()).max() > 1e-3
    finally:
        pretraining.set_train(False)
    a, _ = pretraining(*inputs)
    b, _ = pretraining(*inputs)
    assert np.array_equal(a.asnumpy(), b.asnumpy())


def test_graph_mode_matches_pynative(pretraining, inputs, reference):
    compiled = ms.jit(pretraining.construct)
    mlm, sop = compiled(*inputs)
    assert max_diff(mlm, reference["mlm_logits"]) <= TOL
    assert max_diff(sop, reference["sop_logits"]) <= TOL


def test_activations_are_accurate_to_float32():
    import math
    x = np.linspace(-20, 20, 4001).astype(np.float32)
    x64 = x.astype(np.float64)
    assert np.abs(tanh(ms.Tensor(x)).asnumpy() - np.tanh(x64)).max() < 5e-7
    ref_gelu = 0.5 * x64 * (1 + np.array([math.erf(v / math.sqrt(2)) for v in x64]))
    assert np.abs(gelu(ms.Tensor(x)).asnumpy() - ref_gelu).max() < 1e-5
    ref_new = 0.5 * x64 * (1 + np.tanh(math.sqrt(2 / math.pi) * (x64 + 0.044715 * x64 ** 3)))
    assert np.abs(gelu_new(ms.Tensor(x)).asnumpy() - ref_new).max() < 1e-5


# --------------------------------------------------------------- parameter counts
@pytest.mark.parametrize("name", ["tiny_pretraining", "tiny_groups"])
def test_parameter_formula_matches_built_model(name, build):
    config = AlbertConfig.from_json_file(os.path.join(FIXTURES, name, "config.json"))
    assert count_parameters(build(AlbertModel(config))) == config.parameter_count()


@pytest.mark.parametrize("sharing, groups, inner", [
    ("all", 1, 1), ("all", 2, 1), ("all", 1, 2), ("all", 3, 2), ("all", 4, 1),
    ("attention", 1, 1), ("ffn", 1, 1), ("none", 1, 1)])
def test_parameter_formula_matches_built_model_for_every_sharing(sharing, groups, inner, build):
    """AlbertConfig.parameter_count (config.py, no MindSpore) is the only formula: it must be
    the built model's count for every sharing strategy and group layout."""
    config = AlbertConfig(vocab_size=50, embedding_size=8, hidden_size=12, num_hidden_layers=4,
                          num_hidden_groups=groups, inner_group_num=inner, num_attention_heads=2,
                          intermediate_size=20, max_position_embeddings=16, cross_layer_sharing=sharing)
    assert count_parameters(build(AlbertModel(config))) == config.parameter_count()


@pytest.mark.parametrize("name, paper_millions, rel", [
    ("base", 12, 0.05), ("large", 18, 0.05), ("xlarge", 60, 0.05),
    ("xxlarge", 235, 0.06),            # HF's albert-xxlarge-v2 has the same 223M; the paper rounds up
    ("bert-base", 108, 0.03), ("bert-large", 334, 0.03)])
def test_presets_have_the_papers_parameter_counts(name, paper_millions, rel):
    count = AlbertConfig.preset(name).parameter_count() / 1e6
    assert count == pytest.approx(paper_millions, rel=rel)


def test_sharing_and_factorization_make_the_gap():
    albert = AlbertConfig.preset("base").parameter_count()
    bert = AlbertConfig.preset("bert-base").parameter_count()
    assert bert / albert > 9
    table = parameter_table()
    assert "base" in table and "11.7M" in table and "109.7M" in table
