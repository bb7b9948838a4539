"""The ONE shared layer and the loop over it (and the group layout of num_hidden_groups / inner_group_num),
against the transformers reference (fixtures/reference.npz)."""

import os

import mindspore as ms
import pytest

from albert_min.model.folder import load_arrays
from albert_min.model.config import AlbertConfig
from albert_min.model.modeling import additive_attention_mask
from albert_min.model.heads import AlbertForSequenceClassification
from helpers.paths import FIXTURES
from helpers.reference_model import TOL, accelerated, build, inputs, max_diff, pretraining  # noqa: F401 (fixtures)


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


def test_groups_and_inner_layers_match(inputs, reference, build):
    """num_hidden_groups=2, inner_group_num=2, exact gelu: loops 1-2 use group 0, 3-4 group 1."""
    from albert_min.convert import read_safetensors
    directory = os.path.join(FIXTURES, "tiny_groups")
    config = AlbertConfig.from_json_file(os.path.join(directory, "config.json"))
    model = AlbertForSequenceClassification(config)
    load_arrays(model, read_safetensors(os.path.join(directory, "model.safetensors")), "tiny_groups")
    build(model)
    assert [model.albert.encoder.group_of_loop(i) for i in range(4)] == [0, 0, 1, 1]
    assert max_diff(model.albert.hidden_states(*inputs)[-1], reference["groups_last_hidden"]) <= TOL
    assert max_diff(model(*inputs), reference["groups_logits"]) <= TOL
