"""Checkpoints run as their origin ran them: the loop -> group formula (HF vs Google),
Google's E == H layout without a projection, and config.json from any transformers version."""

import dataclasses
import json
import os

import numpy as np
import mindspore as ms
import pytest

from albert_min import convert as cv
from albert_min.model.config import AlbertConfig, ConfigError
from albert_min.model.modeling import AlbertModel, loop_group
from albert_min.model.heads import AlbertForSequenceClassification
from helpers.paths import FIXTURES

TOL = 1e-5


@pytest.fixture(scope="module")
def ref():
    return dict(np.load(os.path.join(FIXTURES, "heads_reference.npz")))


def inputs(ref):
    return [ms.Tensor(ref[k].astype(np.int32)) for k in ("input_ids", "token_type_ids", "attention_mask")]


# ------------------------------------------------------------- loop -> group
def hf_reference(i, L, G):        # transformers' AlbertTransformer.forward
    return int(i / (L / G))


def google_reference(i, L, G):    # google-research/albert modeling.py transformer_model
    return int(i / L * G)


def test_both_formulas_on_a_grid():
    differ = []
    for L in range(1, 49):
        for G in range(1, L + 1):
            for i in range(L):
                assert loop_group(i, L, G, "hf") == hf_reference(i, L, G)
                assert loop_group(i, L, G, "google") == google_reference(i, L, G)
                if hf_reference(i, L, G) != google_reference(i, L, G):
                    differ.append((L, G))
    # Up to L = 48 they disagree for these 24 shapes; never for G = 1 (every released ALBERT).
    assert sorted(set(differ)) == [
        (18, 14), (22, 22), (23, 23), (26, 26), (27, 21), (36, 14), (36, 28), (39, 39), (42, 18), (42, 36),
        (42, 38), (43, 43), (44, 20), (44, 22), (44, 36), (44, 40), (44, 44), (45, 35), (45, 45), (46, 23),
        (46, 30), (46, 42), (46, 46), (47, 47)]


def test_encoder_uses_the_configured_formula():
    config = AlbertConfig(vocab_size=10, embedding_size=4, hidden_size=8, num_hidden_layers=18,
                          num_hidden_groups=14, num_attention_heads=2, intermediate_size=8)
    assert AlbertModel(config).encoder.group_of_loop(9) == 6
    google = AlbertModel(dataclasses.replace(config, group_mapping="google"))
    assert google.encoder.group_of_loop(9) == 7


def test_hf_checkpoint_where_the_formulas_differ(tmp_path, ref):
    """L=18, G=14: HF's formula reproduces HF; Google's would be off by far more than the tolerance."""
    dst = str(tmp_path / "out")
    cv.convert(os.path.join(FIXTURES, "tiny_groups_18x14"), dst)
    config = json.load(open(os.path.join(dst, "config.json")))
    assert "group_mapping" not in config                       # HF's formula is the default: not written
    model = AlbertModel.from_pretrained(dst)
    model.set_train(False)
    hidden = model(*inputs(ref))[0].asnumpy()
    assert np.abs(hidden - ref["groups18_hf_last_hidden"]).max() <= TOL
    assert np.abs(ref["groups18_hf_last_hidden"] - ref["groups18_google_last_hidden"]).max() > 0.1

    google = AlbertModel(dataclasses.replace(model.config, group_mapping="google"))
    ms.load_param_into_net(google, {p.name: p for p in model.get_parameters()})
    google.set_train(False)
    assert np.abs(google(*inputs(ref))[0].asnumpy() - ref["groups18_google_last_hidden"]).max() <= TOL


def test_google_checkpoint_with_embedding_size_equal_to_hidden_size(tmp_path, ref):
    """No embedding_hidden_mapping_in (E == H), L=18, G=14 with Google's formula, run_classifier head."""
    dst = str(tmp_path / "out")
    report = cv.convert(os.path.join(FIXTURES, "tiny_google_eh_tf"), dst)
    assert report["format"] == "tf" and report["heads"] == ["classifier"] and report["num_labels"] == 2
    assert report["synthesised"] == ["albert.encoder.embedding_hidden_mapping_in.weight",
                                     "albert.encoder.embedding_hidden_mapping_in.bias"]
    assert "added:" in cv.summary(report) and "group_mapping" in cv.summary(report)
    assert json.load(open(os.path.join(dst, "config.json")))["group_mapping"] == "google"
    model = AlbertForSequenceClassification.from_pretrained(dst)
    model.set_train(False)
    projection = model.albert.encoder.embedding_hidden_mapping_in
    assert np.array_equal(projection.weight.asnumpy(), np.eye(16)) and not projection.bias.asnumpy().any()
    logits = model(*inputs(ref)).asnumpy()
    assert np.abs(logits - ref["google_eh_logits"]).max() <= TOL
    # The identity is exact: the projected embeddings are the embeddings, bit for bit.
    embeddings = model.albert.embeddings(*inputs(ref)[:2])
    assert np.array_equal(projection(embeddings).asnumpy(), embeddings.asnumpy())


def test_identity_only_where_google_has_no_projection():
    config = AlbertConfig(vocab_size=10, embedding_size=8, hidden_size=16, num_attention_heads=2,
                          intermediate_size=8)
    assert cv.add_identity_projection({}, {}, config) == []                   # E != H: it must be there
    same = dataclasses.replace(config, embedding_size=16)
    present = {"albert.encoder.embedding_hidden_mapping_in.weight": np.ones((16, 16), np.float32)}
    assert cv.add_identity_projection(dict(present), {}, same) == []          # kept as the checkpoint has it


def test_google_group_that_never_runs_is_named():
    config = AlbertConfig(vocab_size=10, embedding_size=8, hidden_size=16, num_attention_heads=2,
                          intermediate_size=8, num_hidden_layers=22, num_hidden_groups=22)
    mapped = {f"albert.encoder.albert_layer_groups.{g}.albert_layers.0.ffn.weight": None
              for g in range(22) if g != 15}
    with pytest.raises(cv.ConversionError, match=r"never runs group\(s\) \[15\]"):
        cv.check_google_groups(mapped, config, "ckpt")


# ------------------------------------------------------------- config keys
# What transformers 2.x's PretrainedConfig.to_json_file wrote for an ALBERT classifier.
TRANSFORMERS_2_KEYS = {
    "output_attentions": False, "output_hidden_states": False, "output_past": True, "torchscript": False,
    "use_bfloat16": False, "pruned_heads": {}, "is_decoder": False, "max_length": 20, "do_sample": False,
    "num_beams": 1, "temperature": 1.0, "top_k": 50, "top_p": 1.0, "repetition_penalty": 1.0,
    "bos_token_id": 2, "pad_token_id": 0, "eos_token_ids": 3, "length_penalty": 1.0,
    "num_return_sequences": 1, "architectures": ["AlbertForSequenceClassification"], "finetuning_task": "sst-2",
    "num_labels": 2, "id2label": {"0": "LABEL_0", "1": "LABEL_1"}, "label2id": {"LABEL_0": 0, "LABEL_1": 1},
    "down_scale_factor": 1, "gap_size": 0, "net_structure_type": 0, "num_memory_blocks": 0,
}
# ... and what 4.x added (generation defaults, tokenizer and bookkeeping fields).
TRANSFORMERS_4_KEYS = {
    "return_dict": True, "chunk_size_feed_forward": 0, "is_encoder_decoder": False,
    "cross_attention_hidden_size": None, "add_cross_attention": False, "tie_encoder_decoder": False,
    "min_length": 0, "early_stopping": False, "num_beam_groups": 1, "diversity_penalty": 0.0,
    "no_repeat_ngram_size": 0, "encoder_no_repeat_ngram_size": 0, "bad_words_ids": None,
    "output_scores": False, "return_dict_in_generate": False, "forced_bos_token_id": None,
    "forced_eos_token_id": None, "remove_invalid_values": False, "exponential_decay_length_penalty": None,
    "suppress_tokens": None, "begin_suppress_tokens": None, "typical_p": 1.0, "tokenizer_class": None,
    "prefix": None, "sep_token_id": None, "decoder_start_token_id": None, "task_specific_params": None,
    "problem_type": None, "torch_dtype": "float32", "tf_legacy_loss": False, "use_cache": True,
    "gradient_checkpointing": False, "_name_or_path": "albert-base-v2", "position_embedding_type": "absolute",
    "_attn_implementation_autoset": True, "transformers_version": "4.46.0",
}


@pytest.mark.parametrize("extra", [TRANSFORMERS_2_KEYS, TRANSFORMERS_4_KEYS])
def test_configs_of_older_transformers_load(extra):
    base = json.load(open(os.path.join(FIXTURES, "tiny_pretraining", "config.json")))
    config = AlbertConfig.from_dict({**base, **extra})
    assert config == AlbertConfig.from_dict(base)            # none of them changes the network


@pytest.mark.parametrize("key, suggestion", [("hiden_size", "hidden_size"),
                                             ("num_hidden_layer", "num_hidden_layers"),
                                             ("embeding_size", "embedding_size")])
def test_misspelt_fields_are_refused_with_a_suggestion(key, suggestion):
    with pytest.raises(ConfigError, match=rf"unknown config keys \['{key}'\] \(did you mean '{suggestion}'"):
        AlbertConfig.from_dict({key: 32}, source="config.json")


def test_relative_positions_are_refused():
    with pytest.raises(ConfigError, match="position_embedding_type 'relative_key'"):
        AlbertConfig.from_dict({"position_embedding_type": "relative_key"})


def test_group_mapping_is_checked_and_round_trips(tmp_path):
    with pytest.raises(ConfigError, match="group_mapping 'tf'"):
        AlbertConfig(group_mapping="tf")
    config = AlbertConfig(group_mapping="google")
    config.to_json_file(str(tmp_path / "c.json"))
    assert AlbertConfig.from_json_file(str(tmp_path / "c.json")) == config
