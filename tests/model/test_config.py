"""AlbertConfig: HF field names, validation, presets, model folders."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from albert_min.model.folder import CheckpointError, save_model_dir
from albert_min.model.config import AlbertConfig, ConfigError, TABLE4_PARAMETERS, load_config
from albert_min.model.modeling import AlbertModel
from albert_min.model.heads import AlbertForPreTraining, AlbertForSequenceClassification
from helpers.paths import FIXTURES, ROOT


def test_reads_hf_config_json():
    config = load_config(os.path.join(FIXTURES, "tiny_classifier"))
    assert (config.vocab_size, config.embedding_size, config.hidden_size) == (120, 16, 32)
    assert config.num_labels == 3             # from id2label
    assert config.hidden_act == "gelu_new" and config.head_size == 8


def test_json_round_trip(tmp_path):
    config = AlbertConfig.preset("base", num_labels=2)
    path = str(tmp_path / "config.json")
    config.to_json_file(path)
    assert json.load(open(path))["model_type"] == "albert"
    assert AlbertConfig.from_json_file(path) == config


@pytest.mark.parametrize("change, message", [
    ({"hiden_size": 32}, "unknown config keys \\['hiden_size'\\]"),
    ({"hidden_size": 30, "num_attention_heads": 4}, "not divisible by num_attention_heads"),
    ({"hidden_act": "swish"}, "hidden_act 'swish'"),
    ({"num_hidden_groups": 5, "num_hidden_layers": 3}, "cannot exceed"),
    ({"vocab_size": 0}, "vocab_size must be a positive integer"),
    ({"hidden_dropout_prob": 1.5}, "must be in \\[0, 1\\)"),
])
def test_bad_configs_are_rejected_clearly(tmp_path, change, message):
    data = json.load(open(os.path.join(FIXTURES, "tiny_pretraining", "config.json")))
    data.update(change)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=message) as err:
        AlbertConfig.from_json_file(str(path))
    assert str(path) in str(err.value)


def test_missing_and_invalid_json(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing.json"):
        AlbertConfig.from_json_file(str(tmp_path / "nothing.json"))
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ConfigError, match=r"bad\.json:1: not JSON"):
        AlbertConfig.from_json_file(str(tmp_path / "bad.json"))
    with pytest.raises(ConfigError, match="unknown preset"):
        AlbertConfig.preset("huge")


def tiny_config(**kw):
    return AlbertConfig(vocab_size=50, embedding_size=8, hidden_size=16, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=24, max_position_embeddings=32, **kw)


def test_model_folder_round_trip_for_every_class(tmp_path):
    model = AlbertForPreTraining(tiny_config())
    save_model_dir(model, str(tmp_path / "m"))
    assert sorted(os.listdir(tmp_path / "m")) == [".albert_min.json", "config.json", "model.ckpt"]
    backbone = AlbertModel.from_pretrained(str(tmp_path / "m"))
    original = model.albert.embeddings.word_embeddings.weight.asnumpy()
    assert np.array_equal(backbone.embeddings.word_embeddings.weight.asnumpy(), original)
    reloaded = AlbertForPreTraining.from_pretrained(str(tmp_path / "m"))
    assert np.array_equal(reloaded.predictions.dense.weight.asnumpy(), model.predictions.dense.weight.asnumpy())
    # A pre-trained folder has no classifier: a clear error, or allowed explicitly for fine-tuning.
    with pytest.raises(CheckpointError, match="no sequence-classification head"):
        AlbertForSequenceClassification.from_pretrained(str(tmp_path / "m"))
    AlbertForSequenceClassification.from_pretrained(str(tmp_path / "m"), allow_missing=("classifier.",))


def test_save_is_atomic_and_refuses_to_overwrite(tmp_path):
    model = AlbertModel(tiny_config())
    target = str(tmp_path / "m")
    save_model_dir(model, target)
    with pytest.raises(FileExistsError, match="already exists"):
        save_model_dir(model, target)

    def failing_writer(path):
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        save_model_dir(model, str(tmp_path / "half"), extra_files={"x": failing_writer})
    assert sorted(os.listdir(tmp_path)) == ["m"]          # no half-written folder, no temp folder


def test_shape_mismatch_names_the_tensor(tmp_path):
    save_model_dir(AlbertModel(tiny_config()), str(tmp_path / "m"))
    bigger = tiny_config()
    bigger.intermediate_size = 30
    with pytest.raises(CheckpointError, match="ffn.weight: checkpoint \\(24, 16\\) vs model \\(30, 16\\)"):
        AlbertModel.from_pretrained(str(tmp_path / "m"), config=bigger)
    with pytest.raises(FileNotFoundError, match="model directory not found"):
        AlbertModel.from_pretrained(str(tmp_path / "nope"))
    (tmp_path / "m" / "model.ckpt").write_bytes(b"garbage")
    with pytest.raises(CheckpointError, match="model.ckpt: corrupted or replaced: its sha256 differs"):
        AlbertModel.from_pretrained(str(tmp_path / "m"))   # the folder's fingerprint tells first
    os.remove(tmp_path / "m" / ".albert_min.json")          # without one, MindSpore's reader does
    with pytest.raises(CheckpointError, match="not a readable MindSpore checkpoint"):
        AlbertModel.from_pretrained(str(tmp_path / "m"))


# ------------------------------------------------------- parameter count (one formula)
@pytest.mark.parametrize("E, sharing", sorted(TABLE4_PARAMETERS))
def test_parameter_count_follows_the_papers_table4(E, sharing):
    """Each sharing strategy has its own count (an older formula gave base 11.08M for all four).
    The paper prints rounded millions, and its not-shared rows are BERT-base's 108M, which
    the layout itself makes 109.7M: so within 1.7M of each printed figure, and the gaps the
    sharing makes (not shared - all shared: 77M, attention: 52M, FFN: 26M) to within 1M."""
    count = AlbertConfig.preset("base", embedding_size=E, cross_layer_sharing=sharing).parameter_count()
    assert count == pytest.approx(TABLE4_PARAMETERS[E, sharing], abs=1.7e6)
    all_shared = AlbertConfig.preset("base", embedding_size=E).parameter_count()
    paper_gap = TABLE4_PARAMETERS[E, sharing] - TABLE4_PARAMETERS[E, "all"]
    assert count - all_shared == pytest.approx(paper_gap, abs=1e6)


def test_parameter_count_needs_neither_numpy_nor_mindspore():
    """config.py alone gives the count (the paper's tables, a bound on hostile config.json)."""
    code = ("import sys; sys.modules['numpy'] = sys.modules['mindspore'] = None\n"
            "from albert_min.model.config import AlbertConfig\n"
            "print(AlbertConfig.preset('base', cross_layer_sharing='none').parameter_count())")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) == 89_650_176
