"""``kernels.accelerate``: the compiled kernels swapped into a built, plain model. The model layer itself
(modeling.py, heads.py) never names the kernels; what accelerate swaps keeps every parameter (the same
objects, under the same names), every sharing of cells, and the numbers (the parity suite runs on both:
helpers/reference_model.py's ``accelerated``)."""

import os

import numpy as np
import mindspore as ms
import pytest
from mindspore import nn

from albert_min.model import kernels
from albert_min.model.config import AlbertConfig
from albert_min.model.heads import AlbertForPreTraining
from albert_min.model.kernels.accelerate import swap_layers
from albert_min.model.kernels.layers import (BatchMatMul, BatchMatMulWithKernels, Linear, LinearWithKernels, Softmax,
                                             SoftmaxWithKernels)
from albert_min.model.modeling import AlbertAttention, Dense, LayerNorm
from albert_min.model.kernels.philox_dropout import DropoutWithKernels
from helpers.paths import ROOT
from helpers.reference_model import tiny_classifier


def pretraining_model(sharing="all", groups=1, inner=1):
    return AlbertForPreTraining(AlbertConfig(vocab_size=50, embedding_size=8, hidden_size=12, num_hidden_layers=4,
                                             num_hidden_groups=groups, inner_group_num=inner, num_attention_heads=2,
                                             intermediate_size=20, max_position_embeddings=16,
                                             hidden_dropout_prob=0.1, cross_layer_sharing=sharing))


@pytest.mark.parametrize("name", ["modeling.py", "heads.py"])
def test_the_model_files_never_name_the_kernels(name):
    """model/ is the plain architecture: the kernels are a step applied to a built model."""
    with open(os.path.join(ROOT, "albert_min", "model", name), encoding="utf-8") as f:
        text = f.read()
    assert "kernels" not in text
    assert "def dense(" not in text                                   # the alias of Dense is gone


@pytest.mark.parametrize("sharing, groups, inner", [("all", 1, 1), ("all", 2, 2), ("attention", 1, 1),
                                                    ("ffn", 1, 1), ("none", 1, 1)])
def test_accelerate_keeps_the_parameters_their_names_and_the_sharing(library, sharing, groups, inner):
    model = pretraining_model(sharing, groups, inner)
    before = [(p, p.name) for p in model.get_parameters()]
    trainable = len(model.trainable_params())
    layers = [layer for group in model.albert.encoder.albert_layer_groups for layer in group.albert_layers]
    shared = {part: len({id(getattr(layer, part)) for layer in layers}) for part in ("attention", "ffn")}
    assert kernels.accelerate(model) is model
    after = [(p, p.name) for p in model.get_parameters()]
    assert [(id(p), name) for p, name in after] == [(id(p), name) for p, name in before]   # the same objects, names
    assert len(model.trainable_params()) == trainable
    layers = [layer for group in model.albert.encoder.albert_layer_groups for layer in group.albert_layers]
    # a cell shared by several loops is swapped once: still one cell wherever it was one
    assert {part: len({id(getattr(layer, part)) for layer in layers}) for part in ("attention", "ffn")} == shared
    assert all(isinstance(layer.attention, kernels.KernelAttention) for layer in layers)
    assert all(isinstance(layer.ffn.linear, LinearWithKernels) for layer in layers)
    assert isinstance(model.predictions, kernels.KernelMLMHead)
    assert isinstance(model.predictions.decoder, LinearWithKernels)
    plain = (Dense, LayerNorm, AlbertAttention, nn.Dropout)
    assert [name for name, cell in model.cells_and_names() if type(cell) in plain] == []   # every plain layer swapped
    assert isinstance(model.albert.embeddings.dropout, DropoutWithKernels)


def test_the_one_shared_layer_is_swapped_once(library):
    """ALBERT's one layer looped L times: its 6 Dense, 2 LayerNorm and 3 dropouts are swapped once each."""
    model = pretraining_model()
    dense = {id(c) for _, c in model.cells_and_names() if isinstance(c, Dense)}
    # embedding projection, q, k, v, attention output, ffn, ffn_output, pooler, MLM dense, SOP classifier
    assert len(dense) == 10
    # Dense, LayerNorm (embeddings, attention, layer, MLM), dropouts (embeddings, 3 in the layer, SOP),
    # gelu_new (layer, MLM head), the attention, the MLM head
    assert swap_layers(model, kernels.library()) == 10 + 4 + 5 + 2 + 1 + 1
    assert swap_layers(model, kernels.library()) == 0                  # a second time: nothing left to swap
    assert kernels.uses_kernels(model)


def test_an_accelerated_model_predicts_and_trains_as_the_plain_one(library):
    ms.set_seed(5)
    plain = tiny_classifier()
    fast = tiny_classifier()
    ms.load_param_into_net(fast, {p.name: p for p in plain.get_parameters()})
    kernels.accelerate(fast)
    ids = ms.Tensor(np.random.default_rng(0).integers(5, 40, (3, 7)).astype(np.int32))
    for model in (plain, fast):
        model.set_train(False)
    np.testing.assert_allclose(fast(ids).asnumpy(), plain(ids).asnumpy(), rtol=0, atol=1e-5)

    def gradients(model):
        return [g.asnumpy() for g in ms.grad(lambda x: model(x).sum(), None, model.trainable_params())(ids)]
    for ours, theirs in zip(gradients(fast), gradients(plain), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-5 * max(1.0, float(np.abs(theirs).max())))


def test_mindspores_op_cells_give_a_plain_model_the_layout_mixed_precision_casts():
    """use_mindspore_ops (mixed precision): the same layout as accelerate's, with MindSpore's op cells, and
    the dropout kernel kept where the kernels are built."""
    for accelerated in (False, True):
        model = tiny_classifier()
        if accelerated:
            kernels.accelerate(model)
        kernels.use_mindspore_ops(model)
        kinds = {type(c) for _, c in model.cells_and_names()}
        assert {Linear, BatchMatMul, Softmax} <= kinds
        assert not kinds & {LinearWithKernels, BatchMatMulWithKernels, SoftmaxWithKernels}
        assert (DropoutWithKernels in kinds) == (accelerated and kernels.library() is not None)


def test_the_compile_cache_tells_the_plain_model_from_the_accelerated_one(library):
    from albert_min.tasks.prediction_engine import DYNAMIC_SHAPE, cache_key
    ms.set_seed(6)
    model = tiny_classifier()
    plain_key = cache_key(model, [DYNAMIC_SHAPE])
    assert cache_key(kernels.accelerate(model), [DYNAMIC_SHAPE]) != plain_key
