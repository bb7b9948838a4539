"""The pooler ([CLS] -> dense -> tanh) and the sequence output, against the transformers reference
(fixtures/reference.npz)."""

from helpers.reference_model import TOL, accelerated, build, inputs, max_diff, pretraining  # noqa: F401 (fixtures)


def test_pooled_and_sequence_output_match(pretraining, inputs, reference):
    sequence_output, pooled = pretraining.albert(*inputs)
    assert max_diff(sequence_output, reference["sequence_output"]) <= TOL
    assert pooled.shape == (3, pretraining.config.hidden_size)
    assert max_diff(pooled, reference["pooled"]) <= TOL
