"""The factorized embedding (V x E word, position and token-type tables, E wide) and its projection to H,
against the transformers reference (fixtures/reference.npz)."""

from helpers.reference_model import TOL, accelerated, build, inputs, max_diff, pretraining  # noqa: F401 (fixtures)


def test_embeddings_match(pretraining, inputs, reference):
    input_ids, token_type_ids, _ = inputs
    out = pretraining.albert.embeddings(input_ids, token_type_ids)
    assert out.shape == (3, 11, pretraining.config.embedding_size)   # still E wide: factorized
    assert max_diff(out, reference["embeddings"]) <= TOL


def test_projection_to_hidden_matches(pretraining, inputs, reference):
    hidden = pretraining.albert.hidden_states(*inputs)
    assert hidden[0].shape == (3, 11, pretraining.config.hidden_size)
    assert max_diff(hidden[0], reference["hidden_0"]) <= TOL
