"""Checkpoint tensor names: Hugging Face's and Google TF's, mapped to albert_min's.

albert_min's names are Hugging Face's full names
(``albert.encoder.albert_layer_groups.0.albert_layers.0.attention.query.weight``), so an
HF name maps to itself (a bare ``AlbertModel``'s get the ``albert.`` prefix); the tied
MLM decoder and non-persistent buffers are dropped. A Google TF variable maps through
the tables below, and its dense kernels ``[in, out]`` are transposed to ``[out, in]``.
``HEADS`` and ``model_classes`` say which model classes a checkpoint's tensors fit; they moved
down from ``albert_min.convert`` so that ``hf_export``, which needs them too, imports nothing
from the command above this layer (that was an import circle).

Layer: ``albert_min.checkpoints``, above ``model`` (the layers: ``albert_min/__init__.py``).
"""

import re

import numpy as np

from .formats import ConversionError
from .formats.common import brief

# Hugging Face names are ours. Dropped: the MLM decoder, which is tied to the word
# embeddings (weight) and to predictions.bias (bias), and non-persistent buffers.
_HF_TIED = {"predictions.decoder.weight": "albert.embeddings.word_embeddings.weight",
            "predictions.decoder.bias": "predictions.bias"}
_HF_BUFFERS = ("embeddings.position_ids", "embeddings.token_type_ids")
_HF_BACKBONE = ("embeddings.", "encoder.", "pooler.")

# Google's TF names. Whole names first, then scopes whose leaves are kernel/bias
# (dense, kernel [in, out] is transposed) or gamma/beta (LayerNorm).
_TF_NAMES = {
    "bert/embeddings/word_embeddings": "albert.embeddings.word_embeddings.weight",
    "bert/embeddings/position_embeddings": "albert.embeddings.position_embeddings.weight",
    "bert/embeddings/token_type_embeddings": "albert.embeddings.token_type_embeddings.weight",
    "cls/predictions/output_bias": "predictions.bias",
    "cls/seq_relationship/output_weights": "sop_classifier.classifier.weight",   # already [2, H]
    "cls/seq_relationship/output_bias": "sop_classifier.classifier.bias",
    "output_weights": "classifier.weight",                                     # run_classifier.py, [labels, H]
    "output_bias": "classifier.bias",
}
_TF_SCOPES = {
    "bert/embeddings/LayerNorm": "albert.embeddings.LayerNorm",
    "bert/encoder/embedding_hidden_mapping_in": "albert.encoder.embedding_hidden_mapping_in",
    "bert/pooler/dense": "albert.pooler",
    "cls/predictions/transform/dense": "predictions.dense",
    "cls/predictions/transform/LayerNorm": "predictions.LayerNorm",
}
_TF_LAYER_SCOPES = {   # inside bert/encoder/transformer/group_{g}/inner_group_{i}/
    "attention_1/self/query": "attention.query",
    "attention_1/self/key": "attention.key",
    "attention_1/self/value": "attention.value",
    "attention_1/output/dense": "attention.dense",
    "LayerNorm": "attention.LayerNorm",                 # after attention + residual
    "ffn_1/intermediate/dense": "ffn",
    "ffn_1/intermediate/output/dense": "ffn_output",
    "LayerNorm_1": "full_layer_layer_norm",             # after the feed-forward + residual
}
_TF_LAYER = re.compile(r"bert/encoder/transformer/group_(\d+)/inner_group_(\d+)/(.+)")
_TF_DENSE_LEAVES = {"kernel": "weight", "bias": "bias"}
_TF_NORM_LEAVES = {"gamma": "weight", "beta": "bias"}
_TF_BOOKKEEPING = ("adam_m", "adam_v", "/Adam", "_power", "global_step")


def hf_name(name):
    """Our name for a Hugging Face tensor, or None to drop it (tied decoder, buffers)."""
    if name in _HF_TIED or name.endswith(_HF_BUFFERS):
        return None
    return "albert." + name if name.startswith(_HF_BACKBONE) else name


def tf_name(name):
    """(our name, transpose?) for a Google TF variable, or None if it has no place in ALBERT."""
    if name.startswith("module/"):            # TF-Hub exports
        name = name[len("module/"):]
    if name in _TF_NAMES:
        return _TF_NAMES[name], False
    scope, _, leaf = name.rpartition("/")
    layer = _TF_LAYER.fullmatch(scope)
    if layer:
        group, inner, sub = layer.groups()
        module = _TF_LAYER_SCOPES.get(sub)
        module = module and f"albert.encoder.albert_layer_groups.{group}.albert_layers.{inner}.{module}"
    else:
        module = _TF_SCOPES.get(scope)
    if module is None:
        return None
    leaves = _TF_NORM_LEAVES if module.endswith(("LayerNorm", "layer_norm")) else _TF_DENSE_LEAVES
    if leaf not in leaves:
        return None
    return f"{module}.{leaves[leaf]}", leaf == "kernel"


def is_tf_bookkeeping(name):
    """Optimizer slots and step counters that TF checkpoints carry next to the weights."""
    return any(marker in name for marker in _TF_BOOKKEEPING)


def map_names(arrays, fmt):
    """Rename source tensors to ours.

    Returns (mapped {our name: array}, source {our name: source name},
    dropped [source names deliberately left out], unknown [source names with no place]).
    """
    mapped, source, dropped, unknown = {}, {}, [], []
    for name, array in arrays.items():
        if fmt == "tf":
            if is_tf_bookkeeping(name):
                dropped.append(name)
                continue
            target = tf_name(name)
            if target is None:
                unknown.append(name)
                continue
            ours, transpose = target
            if transpose:
                array = array.T
        else:
            ours = hf_name(name)
            if ours is None:
                dropped.append(name)
                continue
        if ours in mapped:
            raise ConversionError(f"both {brief(source[ours])} and {brief(name)} map to {ours}")
        mapped[ours], source[ours] = array, name
    if fmt != "tf":
        if "predictions.bias" not in mapped and "predictions.decoder.bias" in arrays:   # older HF files
            mapped["predictions.bias"] = arrays["predictions.decoder.bias"]
            source["predictions.bias"] = "predictions.decoder.bias"
            dropped.remove("predictions.decoder.bias")
        _check_tied(arrays, mapped)
    return mapped, source, dropped, unknown


def _check_tied(arrays, mapped):
    """The dropped HF decoder must really equal what our model ties it to."""
    for dropped, tied in _HF_TIED.items():
        if dropped in arrays and tied in mapped and not np.array_equal(arrays[dropped], mapped[tied]):
            raise ConversionError(f"{dropped} differs from {tied}: untied MLM decoders are not supported")


# ------------------------------------------------ which model classes a checkpoint fits
# A checkpoint is converted by what it holds: the backbone, plus whichever heads are there.
HEADS = {"mlm": "predictions.", "sop": "sop_classifier.", "classifier": "classifier.", "qa": "qa_outputs."}
# `classifier.*` is the same tensor pair for three HF classes; config.json's "architectures" says which.
CLASSIFIER_CLASSES = ("AlbertForSequenceClassification", "AlbertForTokenClassification", "AlbertForMultipleChoice")


def classifier_class(architectures):
    """Which class a ``classifier.*`` head belongs to: config.json's "architectures", else sequence classification."""
    return next((a for a in architectures if a in CLASSIFIER_CLASSES), "AlbertForSequenceClassification")


def model_classes(heads, architectures=()):
    """The model classes that can load a checkpoint with these heads (AlbertModel if it has none)."""
    from ..model import heads as model_heads   # (``heads``, the argument, names the checkpoint's heads)
    names = []
    if "sop" in heads:
        names.append("AlbertForPreTraining")
    elif "mlm" in heads:
        names.append("AlbertForMaskedLM")          # the published albert-*-v2 checkpoints
    if "classifier" in heads:
        names.append(classifier_class(architectures))
    if "qa" in heads:
        names.append("AlbertForQuestionAnswering")
    return [getattr(model_heads, n) for n in names or ["AlbertModel"]]
