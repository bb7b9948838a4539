"""Property tests: whatever a config.json or a TSV file holds, the reader returns a
result or raises its module's own error class (ConfigError / DataError), never
another exception (TypeError, UnicodeDecodeError, RecursionError, ...)."""

import json
import os
import tempfile

from hypothesis import HealthCheck, given, settings, strategies as st

from albert_min.model.config import AlbertConfig, ConfigError, load_config
from albert_min.tasks.errors import DataError
from albert_min.tasks.text_files import read_tsv

FIELDS = [f for f in AlbertConfig.__dataclass_fields__]
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(1 << 70), max_value=1 << 70),
                         st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8),
                         st.sampled_from(["gelu", "relu", "gelu_new", "1e-12", "NaN", "32"]))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                                 st.dictionaries(st.text(max_size=5), inner,
                                                                                 max_size=3)), max_leaves=6)
small_valid = dict(vocab_size=40, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                   num_attention_heads=2, intermediate_size=48)


def write(data: bytes, suffix):
    handle, path = tempfile.mkstemp(suffix=suffix)
    with os.fdopen(handle, "wb") as f:
        f.write(data)
    return path


@FUZZ
@given(st.dictionaries(st.sampled_from(FIELDS + ["id2label", "model_type", "hiden_size"]), json_values,
                       max_size=6))
def test_config_from_any_values_is_a_config_or_a_config_error(overrides):
    try:
        config = AlbertConfig.from_dict({**small_valid, **overrides})
    except ConfigError:
        return
    config.validate()
    assert config.parameter_count() > 0
    for name in ("layer_norm_eps", "initializer_range", "hidden_dropout_prob", "attention_probs_dropout_prob"):
        value = getattr(config, name)
        assert type(value) in (int, float) and value == value and abs(value) != float("inf")


@FUZZ
@given(st.one_of(st.binary(max_size=300),
                 json_values.map(lambda v: json.dumps(v).encode()),
                 st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=5).map(
                     lambda d: json.dumps({**small_valid, **d}).encode())))
def test_config_file_with_any_bytes_is_a_config_or_a_config_error(content):
    path = write(content, ".json")
    try:
        load_config(path)
    except ConfigError as err:
        assert path in str(err)
    finally:
        os.remove(path)


tsv_text = st.lists(st.lists(st.text(alphabet=st.characters(codec="utf-8"), max_size=6), max_size=3).map(
    "\t".join), max_size=5).map("\n".join)


@FUZZ
@given(st.one_of(st.binary(max_size=200),
                 tsv_text.map(lambda t: ("sentence\tlabel\n" + t).encode("utf-8", "surrogatepass")),
                 st.tuples(st.sampled_from([b"", b"\xef\xbb\xbf"]), st.binary(max_size=60)).map(
                     lambda p: p[0] + b"sentence\tlabel\n" + p[1])))
def test_tsv_with_any_bytes_is_data_or_a_data_error(content):
    path = write(content, ".tsv")
    try:
        sentences, labels = read_tsv(path)
    except DataError as err:
        assert str(err).startswith(path)
    else:
        assert len(sentences) == len(labels) > 0
        assert all(isinstance(s, str) and s.strip() for s in sentences)
        assert all(isinstance(y, int) for y in labels)
    finally:
        os.remove(path)
