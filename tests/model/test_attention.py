"""Self-attention of the shared layer, and the attention mask that keeps padding out, against the transformers
reference (fixtures/reference.npz)."""

import numpy as np
import mindspore as ms

from albert_min.model.modeling import additive_attention_mask
from helpers.reference_model import TOL, accelerated, build, inputs, max_diff, pretraining  # noqa: F401 (fixtures)


def test_attention_of_first_loop_matches(pretraining, inputs, reference):
    layer = pretraining.albert.encoder.albert_layer_groups[0].albert_layers[0]
    mask = additive_attention_mask(inputs[2])
    out = layer.attention(ms.Tensor(reference["hidden_0"]), mask)
    assert max_diff(out, reference["attention_loop1"]) <= TOL


def test_padding_does_not_change_real_tokens(pretraining, reference):
    """Row 2 has 4 real tokens: running it alone, unpadded, gives the same vectors."""
    input_ids, token_type_ids, attention_mask = (reference[k][2:3, :4].astype(np.int32)
                                                 for k in ("input_ids", "token_type_ids", "attention_mask"))
    alone, _ = pretraining.albert(ms.Tensor(input_ids), ms.Tensor(token_type_ids), ms.Tensor(attention_mask))
    assert max_diff(alone, reference["sequence_output"][2:3, :4]) <= TOL
