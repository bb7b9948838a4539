"""AlbertConfig: the hyper-parameters of an ALBERT model.

The JSON form uses the field names of Hugging Face's ``config.json`` so a
public checkpoint's config loads unchanged. Unknown keys are an error (a typo
such as ``hiden_size`` must not silently fall back to a default), except for
bookkeeping keys that HF writes and that do not change the model.

Layer: ``albert_min.model``, above ``common`` (the layers: ``albert_min/__init__.py``).
"""

import dataclasses
import difflib
import json
import math
import os
import sys
from typing import Optional
from ..common.errors import AlbertMinError
from ..common.json_files import load_json
from ..common.records import recorded_content

ACTIVATIONS = ("gelu", "gelu_new", "relu", "tanh")
GROUP_MAPPINGS = ("hf", "google")     # see modeling.loop_group
# What the L loops share (the paper's Table 4): everything (ALBERT), only the
# attention sub-block, only the feed-forward sub-block, or nothing (BERT's stack).
SHARING_STRATEGIES = ("all", "attention", "ffn", "none")
# What the classifier head's outputs mean (Hugging Face's ``problem_type`` values);
# multi_label_classification is kept on load/save but albert_min does not train it.
PROBLEM_TYPES = ("regression", "single_label_classification", "multi_label_classification")

# Keys HF writes into config.json that say nothing about the network itself.
_IGNORED_HF_KEYS = {
    "architectures", "model_type", "transformers_version", "torch_dtype", "dtype",
    "bos_token_id", "eos_token_id", "pad_token_id", "label2id", "finetuning_task", "output_past", "position_embedding_type",
    "down_scale_factor", "gap_size", "net_structure_type", "num_memory_blocks", "layers_to_keep",
    "initializer_range", "classifier_dropout_prob", "classifier_dropout",
    "tie_word_embeddings", "_name_or_path", "use_cache", "return_dict",
    "output_hidden_states", "output_attentions", "is_decoder", "add_cross_attention",
}
# Every attribute that a version of transformers' generic PretrainedConfig (2.x to 5.x)
# wrote into each config.json: run-time switches, generation defaults, tokenizer and
# bookkeeping fields. Early fine-tuned ALBERT checkpoints carry them all; none changes the network.
_IGNORED_HF_KEYS |= {
    # 2.x
    "torchscript", "use_bfloat16", "pruned_heads", "max_length", "do_sample", "num_beams", "temperature",
    "top_k", "top_p", "repetition_penalty", "eos_token_ids", "length_penalty", "num_return_sequences",
    "xla_device",
    # 3.x and 4.x
    "chunk_size_feed_forward", "is_encoder_decoder", "cross_attention_hidden_size", "tie_encoder_decoder",
    "min_length", "early_stopping", "num_beam_groups", "diversity_penalty", "no_repeat_ngram_size",
    "encoder_no_repeat_ngram_size", "bad_words_ids", "output_scores", "return_dict_in_generate",
    "forced_bos_token_id", "forced_eos_token_id", "remove_invalid_values", "exponential_decay_length_penalty",
    "suppress_tokens", "begin_suppress_tokens", "typical_p", "tokenizer_class", "prefix", "sep_token_id",
    "decoder_start_token_id", "task_specific_params", "gradient_checkpointing", "tf_legacy_loss",
    "_commit_hash", "_attn_implementation_autoset", "attn_implementation", "name_or_path",
    # 5.x
    "experts_implementation",
}


# Upper bounds far above any published ALBERT/BERT (xxlarge: H=4096, I=16384; vocab 30k,
# multilingual 250k), so that a corrupt or hostile config.json is an error naming the key
# instead of a model that tries to allocate terabytes.
_MAX_SIZES = {"vocab_size": 1 << 22, "embedding_size": 1 << 16, "hidden_size": 1 << 16,
              "num_hidden_layers": 1 << 10, "num_hidden_groups": 1 << 10, "inner_group_num": 1 << 8,
              "num_attention_heads": 1 << 12, "intermediate_size": 1 << 18,
              "max_position_embeddings": 1 << 20, "type_vocab_size": 1 << 10, "num_labels": 1 << 20}
MAX_PARAMETERS = 4_000_000_000   # 16 GB of float32 weights; xxlarge has 235M


class ConfigError(AlbertMinError):
    """A config file or value that cannot describe an ALBERT model."""


@dataclasses.dataclass
class AlbertConfig:
    vocab_size: int = 30000
    embedding_size: int = 128            # E: the factorized embedding width
    hidden_size: int = 4096              # H: the transformer width
    num_hidden_layers: int = 12          # L: how many times the shared block is applied
    num_hidden_groups: int = 1           # parameter groups; ALBERT uses 1 (all layers shared)
    inner_group_num: int = 1             # distinct layers inside one group
    num_attention_heads: int = 64
    intermediate_size: int = 16384
    hidden_act: str = "gelu_new"
    hidden_dropout_prob: float = 0.0
    attention_probs_dropout_prob: float = 0.0
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    initializer_range: float = 0.02
    classifier_dropout_prob: float = 0.1
    num_labels: int = 2
    group_mapping: str = "hf"            # loop -> group formula of the checkpoint's origin: "hf" or "google"
    # albert_min only, written to config.json only when not "all": one of
    # SHARING_STRATEGIES. Anything but "all" gives every loop its own layer
    # (so num_hidden_groups must stay 1) and ties the shared sub-block across them.
    cross_layer_sharing: str = "all"
    # The classifier head, as HF's config.json has it: "regression" means num_labels = 1
    # scores trained with MSE (STS-B); None means HF's inference: regression when
    # num_labels == 1, else single-label classification (cross-entropy). Written only when set.
    problem_type: Optional[str] = None
    # Class id -> label name, e.g. {0: "entailment", 1: "not_entailment"}; None means
    # HF's default names LABEL_0, LABEL_1, ... (config.json always has id2label and label2id).
    id2label: Optional[dict] = None

    def __post_init__(self):
        self.validate()

    # ------------------------------------------------------------------ checks
    def validate(self):
        positive = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers",
                    "num_hidden_groups", "inner_group_num", "num_attention_heads",
                    "intermediate_size", "max_position_embeddings", "type_vocab_size",
                    "num_labels")
        for name in positive:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
            if value > _MAX_SIZES[name]:
                raise ConfigError(f"{name} = {value} is implausibly large (at most {_MAX_SIZES[name]})")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout_prob",
                     "layer_norm_eps", "initializer_range"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
                raise ConfigError(f"{name} must be a finite number, got {value!r}")
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError(
                f"hidden_size ({self.hidden_size}) is not divisible by "
                f"num_attention_heads ({self.num_attention_heads})")
        if self.num_hidden_groups > self.num_hidden_layers:
            raise ConfigError(
                f"num_hidden_groups ({self.num_hidden_groups}) cannot exceed "
                f"num_hidden_layers ({self.num_hidden_layers})")
        if self.cross_layer_sharing not in SHARING_STRATEGIES:
            raise ConfigError(f"cross_layer_sharing {self.cross_layer_sharing!r} is not one of {SHARING_STRATEGIES}")
        if self.cross_layer_sharing != "all" and (self.num_hidden_groups, self.inner_group_num) != (1, 1):
            raise ConfigError(f"cross_layer_sharing {self.cross_layer_sharing!r} gives every loop its own layer; "
                              f"it needs num_hidden_groups = inner_group_num = 1")
        if not isinstance(self.hidden_act, str) or self.hidden_act not in ACTIVATIONS:
            raise ConfigError(f"hidden_act {self.hidden_act!r} is not one of {ACTIVATIONS}")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout_prob"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ConfigError(f"{name} must be in [0, 1), got {value!r}")
        if self.layer_norm_eps <= 0:
            raise ConfigError(f"layer_norm_eps must be > 0, got {self.layer_norm_eps!r}")
        if self.group_mapping not in GROUP_MAPPINGS:
            raise ConfigError(f"group_mapping {self.group_mapping!r} is not one of {GROUP_MAPPINGS}")
        if self.initializer_range < 0:
            raise ConfigError(f"initializer_range must be >= 0, got {self.initializer_range!r}")
        if self.parameter_count() > MAX_PARAMETERS:
            raise ConfigError(f"these sizes make a model of about {self.parameter_count():.3g} parameters, "
                              f"more than {MAX_PARAMETERS:.3g}; check vocab_size, hidden_size, "
                              "intermediate_size and num_hidden_groups")
        if self.problem_type is not None and self.problem_type not in PROBLEM_TYPES:
            raise ConfigError(f"problem_type {self.problem_type!r} is not one of {PROBLEM_TYPES}")
        if self.problem_type == "regression" and self.num_labels != 1:
            raise ConfigError(f"problem_type 'regression' needs num_labels 1, got {self.num_labels}")
        if self.id2label is not None and (not isinstance(self.id2label, dict)
                                          or set(self.id2label) != set(range(self.num_labels))):
            raise ConfigError(f"id2label must name the ids 0..{self.num_labels - 1}, got {self.id2label!r}")

    @property
    def is_regression(self) -> bool:
        """One score per example with MSE loss, as HF decides it."""
        return self.problem_type == "regression" or (self.problem_type is None and self.num_labels == 1)

    def parameter_count(self) -> int:
        """Parameters of ``AlbertModel`` (embeddings, E->H projection, the distinct layers,
        pooler; no task head) for this config, computed without building it: the paper's
        Table 1 and Table 4, and a bound on hostile configs before any memory is taken.

        ``cross_layer_sharing`` decides how many attention and feed-forward sub-blocks
        exist: one of each for "all" times the group layers (``num_hidden_groups *
        inner_group_num``), one per loop for "none", one shared attention with a
        feed-forward per loop for "attention", and the other way round for "ffn".
        """
        V, E, H, I = self.vocab_size, self.embedding_size, self.hidden_size, self.intermediate_size
        embeddings = (V + self.max_position_embeddings + self.type_vocab_size) * E + 2 * E   # + LayerNorm
        projection = E * H + H
        attention = 4 * (H * H + H) + 2 * H                  # query, key, value, output dense + LayerNorm
        ffn = (H * I + I) + (I * H + H) + 2 * H              # two dense + LayerNorm
        sharing = self.cross_layer_sharing
        layers = self.num_hidden_groups * self.inner_group_num if sharing == "all" else self.num_hidden_layers
        distinct_attention = 1 if sharing == "attention" else layers
        distinct_ffn = 1 if sharing == "ffn" else layers
        pooler = H * H + H
        return embeddings + projection + distinct_attention * attention + distinct_ffn * ffn + pooler

    @property
    def label_names(self) -> list:
        """Names of the outputs 0..num_labels-1: ``id2label``'s, else Hugging Face's LABEL_0, LABEL_1, ..."""
        return [(self.id2label or {}).get(i, f"LABEL_{i}") for i in range(self.num_labels)]

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads

    # ---------------------------------------------------------------- JSON I/O
    @classmethod
    def from_dict(cls, data: dict, source: str = "config") -> "AlbertConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(k for k in data if k not in known and k not in _IGNORED_HF_KEYS)
        if unknown:
            hints = [f"{close[0]!r} for {k!r}" for k in unknown   # a misspelt field must not fall back silently
                     for close in [difflib.get_close_matches(k, known | _IGNORED_HF_KEYS, n=1, cutoff=0.75)] if close]
            hint = f" (did you mean {', '.join(hints)}?)" if hints else ""
            raise ConfigError(f"{source}: unknown config keys {unknown}{hint}; known keys are {sorted(known)}")
        if data.get("position_embedding_type", "absolute") != "absolute":
            raise ConfigError(f"{source}: position_embedding_type {data['position_embedding_type']!r} is not "
                              "supported (ALBERT uses 'absolute' position embeddings)")
        values = {k: v for k, v in data.items() if k in known}
        # HF stores the label count only implicitly, through id2label.
        if "num_labels" not in values and isinstance(data.get("id2label"), dict):
            values["num_labels"] = len(data["id2label"])
        if values.get("classifier_dropout_prob") is None:
            values.pop("classifier_dropout_prob", None)
        if isinstance(values.get("id2label"), dict):
            values["id2label"] = _label_names(values["id2label"], source)
        try:
            return cls(**values)
        except ConfigError as err:
            raise ConfigError(f"{source}: {err}") from None

    @classmethod
    def from_json_file(cls, path: str) -> "AlbertConfig":
        return cls.from_dict(read_json_object(path), source=path)

    def to_dict(self) -> dict:
        data = dataclasses.asdict(self)
        if data["group_mapping"] == "hf":      # albert_min's own field: written only when it matters
            del data["group_mapping"]
        if data["cross_layer_sharing"] == "all":   # HF-shaped config.json for ALBERT's default
            del data["cross_layer_sharing"]
        data["model_type"] = "albert"
        names = self.id2label or {i: f"LABEL_{i}" for i in range(self.num_labels)}
        data["id2label"] = {str(i): names[i] for i in range(self.num_labels)}
        data["label2id"] = {names[i]: i for i in range(self.num_labels)}
        if self.problem_type is None:
            del data["problem_type"]
        return data

    def to_json_file(self, path: str):
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_dict(), f, indent=2, sort_keys=True)
            f.write("\n")

    @classmethod
    def preset(cls, name: str, **overrides) -> "AlbertConfig":
        """A named size from the paper: base, large, xlarge, xxlarge (v2 settings)."""
        if name not in PRESETS:
            raise ConfigError(f"unknown preset {name!r}; choose from {sorted(PRESETS)}")
        return cls(**{**PRESETS[name], **overrides})


# The four ALBERT sizes of the paper's Table 1, with the v2 release settings
# (no dropout, gelu_new). "bert-base"/"bert-large" are the same shapes with
# E = H and one group per layer: BERT's unshared, unfactorized parameters.
_V2 = dict(vocab_size=30000, embedding_size=128, hidden_act="gelu_new",
           hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
PRESETS = {
    "base": dict(_V2, hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
    "large": dict(_V2, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096),
    "xlarge": dict(_V2, hidden_size=2048, num_hidden_layers=24, num_attention_heads=16, intermediate_size=8192),
    "xxlarge": dict(_V2, hidden_size=4096, num_hidden_layers=12, num_attention_heads=64, intermediate_size=16384),
    "bert-base": dict(vocab_size=30000, embedding_size=768, hidden_size=768, num_hidden_layers=12,
                      num_hidden_groups=12, num_attention_heads=12, intermediate_size=3072, hidden_act="gelu"),
    "bert-large": dict(vocab_size=30000, embedding_size=1024, hidden_size=1024, num_hidden_layers=24,
                       num_hidden_groups=24, num_attention_heads=16, intermediate_size=4096, hidden_act="gelu"),
}

# The paper's Table 4: ALBERT-base (L=12, H=768) parameters by E and cross_layer_sharing, as printed
# (millions, rounded). AlbertConfig.parameter_count gives 12 / 64 / 38 / 90 and 32 / 84 / 58 / 110:
# within 1.7M of each (the not-shared rows are BERT-base's 108M, which the paper's Table 1 also prints).
TABLE4_PARAMETERS = {(768, "all"): 31e6, (768, "attention"): 83e6, (768, "ffn"): 57e6, (768, "none"): 108e6,
                     (128, "all"): 12e6, (128, "attention"): 64e6, (128, "ffn"): 38e6, (128, "none"): 89e6}


MAX_JSON_BYTES = 16 << 20   # a config.json is a few hundred bytes; HF's largest id2label maps are ~1 MB


def _label_names(id2label: dict, source: str):
    """JSON's {"0": "name"} -> {0: "name"}; None for HF's default LABEL_i names."""
    try:
        names = {int(k): str(v) for k, v in id2label.items()}
    except (TypeError, ValueError):
        raise ConfigError(f"{source}: id2label keys must be class ids 0, 1, ..., got {sorted(id2label)}") from None
    return None if names == {i: f"LABEL_{i}" for i in range(len(names))} else names


def read_json_object(path: str) -> dict:
    """A JSON file that must hold an object, with errors that name the file."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"config file not found: {path}")
    data = load_json(path, ConfigError, MAX_JSON_BYTES, kind="a config file", constants=True)   # NaN: named by key
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object")
    return data


def load_config(path_or_dir: str) -> AlbertConfig:
    """Load ``config.json`` from a file path or a model directory; if it changed since albert_min
    wrote it (its folder's fingerprint keeps what was written), one note names each changed key."""
    path = os.path.join(path_or_dir, "config.json") if os.path.isdir(path_or_dir) else path_or_dir
    data = read_json_object(path)
    note_changes(path, data)
    return AlbertConfig.from_dict(data, source=path)


_NOTED_CHANGES = set()   # (config file, its content) already noted


def _brief(value, limit=60):
    text = "(absent)" if value is _ABSENT else json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= limit else text[:limit - 3] + "..."


_ABSENT = object()


def config_changes(recorded: dict, data: dict) -> list:
    """``["key old -> new", ...]``: each top-level key whose value differs between the two configs."""
    return [f"{key} {_brief(recorded.get(key, _ABSENT))} -> {_brief(data.get(key, _ABSENT))}"
            for key in dict.fromkeys([*recorded, *data]) if recorded.get(key, _ABSENT) != data.get(key, _ABSENT)]


def note_changes(path, data: dict):
    """A config.json edited after albert_min wrote it is allowed (id2label renamed, the shared layer
    looped more times: a real ALBERT experiment), but said, once per content: one note on stderr
    naming each changed key, old -> new."""
    recorded = recorded_content(path)
    if not isinstance(recorded, dict) or recorded == data:
        return
    key = (os.path.realpath(path), json.dumps(data, sort_keys=True, default=str))
    if key in _NOTED_CHANGES:
        return
    _NOTED_CHANGES.add(key)
    changes = config_changes(recorded, data)
    if changes:
        print(f"note: {path}: changed since albert_min wrote it: {'; '.join(changes)} (the model is built as it "
              f"says now; python -m albert_min.fingerprint {os.path.dirname(os.path.abspath(path))} records "
              "it as it is)", file=sys.stderr, flush=True)
