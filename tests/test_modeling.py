"""Each layer of our MindSpore ALBERT against the transformers reference (fixtures/reference.npz)."""

import os

import numpy as np
import mindspore as ms
import pytest

from albert_min.model.folder import load_arrays
from albert_min.model.config import AlbertConfig
from albert_min.model.modeling import (AlbertModel, additive_attention_mask, count_parameters, gelu, gelu_new,
                                       parameter_table, tanh)
from albert_min.model.heads import AlbertForPreTraining, AlbertForSequenceClassification
from conftest import FIXTURES, to_tensors

TOL = 1e-5


def max_diff(ours, ref):
    return float(np.abs(ours.asnumpy() - ref).max())


@pytest.fixture(scope="module")
def pretraining(hf_weights):
    config = AlbertConfig.from_json_file(os.path.join(FIXTURES, "tiny_pretraining", "config.json"))
    model = AlbertForPreTraining(config)
    load_arrays(model, hf_weights["pretraining"], "weights.npz")
    model.set_train(False)
    return model


@pytest.fixture(scope="module")
def inputs(reference):
    return to_tensors(reference, "input_ids", "token_type_ids", "attention_mask")


def test_embeddings_match(pretraining, inputs, reference):
    input_ids, token_type_ids, _ = inputs
    out = pretraining.albert.embeddings(input_ids, token_type_ids)
    assert out.shape == (3, 11, pretraining.config.embedding_size)   # still E wide: factorized
    assert max_diff(out, reference["embeddings"]) <= TOL


def test_projection_to_hidden_matches(pretraining, inputs, reference):
    hidden = pretraining.albert.hidden_states(*inputs)
    assert hidden[0].shape == (3, 11, pretraining.config.hidden_size)
    assert max_diff(hidden[0], reference["hidden_0"]) <= TOL


def test_attention_of_first_loop_matches(pretraining, inputs, reference):
    layer = pretraining.albert.encoder.albert_layer_groups[0].albert_layers[0]
    mask = additive_attention_mask(inputs[2])
    out = layer.attention(ms.Tensor(reference["hidden_0"]), mask)
    assert max_diff(out, reference["attention_loop1"]) <= TOL


@pytest.mark.parametrize("loop", [1, 2, 3])
def test_each_loop_of_the_shared_layer_matches(pretraining, inputs, reference, loop):
    hidden = pretraining.albert.hidden_states(*inputs)
    assert len(hidden) == pretraining.config.num_hidden_layers + 1
    assert max_diff(hidden[loop], reference[f"hidden_{loop}"]) <= TOL


def test_the_block_is_shared_across_loops(pretraining, inputs, reference):
    """Applying the one layer by hand L times reproduces every loop's output."""
    layer = pretraining.albert.encoder.albert_layer_groups[0].albert_layers[0]
    mask = additive_attention_mask(inputs[2])
    hidden = ms.Tensor(reference["hidden_0"])
    for loop in range(1, 4):
        hidden = layer(hidden, mask)
        assert max_diff(hidden, reference[f"hidden_{loop}"]) <= TOL
    names = [p.name for p in pretraining.albert.get_parameters()]
    assert sum(".attention.query.weight" in n for n in names) == 1


def test_pooled_and_sequence_output_match(pretraining, inputs, reference):
    sequence_output, pooled = pretraining.albert(*inputs)
    assert max_diff(sequence_output, reference["sequence_output"]) <= TOL
    assert pooled.shape == (3, pretraining.config.hidden_size)
    assert max_diff(pooled, reference["pooled"]) <= TOL


def test_mlm_and_sop_logits_match(pretraining, inputs, reference):
    mlm, sop = pretraining(*inputs)
    assert mlm.shape == (3, 11, pretraining.config.vocab_size)
    assert max_diff(mlm, reference["mlm_logits"]) <= TOL
    assert sop.shape == (3, 2)
    assert max_diff(sop, reference["sop_logits"]) <= TOL


def test_classifier_logits_match(hf_weights, inputs, reference):
    config = AlbertConfig.from_json_file(os.path.join(FIXTURES, "tiny_classifier", "config.json"))
    assert config.num_labels == 3
    model = AlbertForSequenceClassification(config)
    load_arrays(model, hf_weights["classifier"], "weights.npz")
    model.set_train(False)
    assert max_diff(model(*inputs), reference["cls_logits"]) <= TOL


def test_groups_and_inner_layers_match(inputs, reference):
    """num_hidden_groups=2, inner_group_num=2, exact gelu: loops 1-2 use group 0, 3-4 group 1."""
    from albert_min.convert import read_safetensors
    directory = os.path.join(FIXTURES, "tiny_groups")
    config = AlbertConfig.from_json_file(os.path.join(directory, "config.json"))
    model = AlbertForSequenceClassification(config)
    load_arrays(model, read_safetensors(os.path.join(directory, "model.safetensors")), "tiny_groups")
    model.set_train(False)
    assert [model.albert.encoder.group_of_loop(i) for i in range(4)] == [0, 0, 1, 1]
    assert max_diff(model.albert.hidden_states(*inputs)[-1], reference["groups_last_hidden"]) <= TOL
    assert max_diff(model(*inputs), reference["groups_logits"]) <= TOL


def test_padding_does_not_change_real_tokens(pretraining, reference):
    """Row 2 has 4 real tokens: running it alone, unpadded, gives the same vectors."""
    input_ids, token_type_ids, attention_mask = (reference[k][2:3, :4].astype(np.int32)
                                                 for k in ("input_ids", "token_type_ids", "attention_mask"))
    alone, _ = pretraining.albert(ms.Tensor(input_ids), ms.Tensor(token_type_ids), ms.Tensor(attention_mask))
    assert max_diff(alone, reference["sequence_output"][2:3, :4]) <= TOL


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
def test_parameter_formula_matches_built_model(name):
    config = AlbertConfig.from_json_file(os.path.join(FIXTURES, name, "config.json"))
    assert count_parameters(AlbertModel(config)) == config.parameter_count()


@pytest.mark.parametrize("sharing, groups, inner", [
    ("all", 1, 1), ("all", 2, 1), ("all", 1, 2), ("all", 3, 2), ("all", 4, 1),
    ("attention", 1, 1), ("ffn", 1, 1), ("none", 1, 1)])
def test_parameter_formula_matches_built_model_for_every_sharing(sharing, groups, inner):
    """AlbertConfig.parameter_count (config.py, no MindSpore) is the only formula: it must be
    the built model's count for every sharing strategy and group layout."""
    config = AlbertConfig(vocab_size=50, embedding_size=8, hidden_size=12, num_hidden_layers=4,
                          num_hidden_groups=groups, inner_group_num=inner, num_attention_heads=2,
                          intermediate_size=20, max_position_embeddings=16, cross_layer_sharing=sharing)
    assert count_parameters(AlbertModel(config)) == config.parameter_count()


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
