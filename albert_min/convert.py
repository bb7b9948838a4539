"""Convert public ALBERT checkpoints into a model folder (config.json + model.ckpt).

    python -m albert_min.convert SRC DST [--config PATH] [--allow-missing-heads] [--force]

The files are read by ``albert_min.formats`` (one module per format, numpy only):
PyTorch ``pytorch_model.bin``, ``model.safetensors``, Hugging Face's sharded
``*.index.json`` checkpoints, and Google's TensorFlow checkpoints (``model.ckpt-N``).
This module maps their names to this package's names, which are Hugging Face's
(``albert.encoder.albert_layer_groups.0.albert_layers.0.attention.query.weight``),
transposes TF kernels ``[in, out]`` to ``[out, in]``, and checks every tensor
against the model the config describes (names, shapes, finite values) before
anything is written. The output folder is written atomically: on any error no
(partial) folder remains.

The readers need only numpy; mindspore is imported when models are built and saved.
"""

import argparse
import dataclasses
import os
import re
import shutil
import sys

import numpy as np

from .config import AlbertConfig, ConfigError, read_json_object
from .errors import AlbertMinError
from .formats import (ConversionError, find_weights, read_pytorch_bin, read_safetensors,  # noqa: F401
                      read_tf_checkpoint, read_weights)


# =============================================================== name mapping
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
            raise ConversionError(f"both {source[ours]} and {name} map to {ours}")
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


# ====================================================================== config
_CONFIG_NAMES = ("config.json", "albert_config.json")


def find_config(weights_path, fmt):
    """``config.json`` (HF) or ``albert_config.json`` (Google) next to the weights."""
    directory = os.path.dirname(os.path.abspath(weights_path))
    for name in (reversed(_CONFIG_NAMES) if fmt == "tf" else _CONFIG_NAMES):
        if os.path.isfile(os.path.join(directory, name)):
            return os.path.join(directory, name)
    raise FileNotFoundError(f"no config.json or albert_config.json next to {weights_path}; pass --config PATH")


def load_source_config(path, tf_source):
    """(AlbertConfig, whether the file fixes num_labels, its ``architectures`` list) from an HF or Google config.

    Google's ``albert_config.json`` has no ``model_type`` and its ``"gelu"`` is the
    tanh approximation (HF's ``gelu_new``); an HF ``config.json`` means what it says.
    A TF checkpoint was trained with Google's loop -> group formula, so its config
    gets ``group_mapping="google"`` (see ``modeling.loop_group``).
    """
    data = read_json_object(path)
    if tf_source and "model_type" not in data and data.get("hidden_act") == "gelu":
        data["hidden_act"] = "gelu_new"
    if tf_source:
        data["group_mapping"] = "google"
    if data.get("net_structure_type", 0) or data.get("layers_to_keep"):
        raise ConfigError(f"{path}: net_structure_type / layers_to_keep variants are not supported")
    labels_given = "num_labels" in data or isinstance(data.get("id2label"), dict)
    architectures = data.get("architectures") if isinstance(data.get("architectures"), list) else []
    return AlbertConfig.from_dict(data, source=path), labels_given, architectures


# ==================================================================== convert
# A checkpoint is converted by what it holds: the backbone, plus whichever heads are there.
HEADS = {"mlm": "predictions.", "sop": "sop_classifier.", "classifier": "classifier.", "qa": "qa_outputs."}
OPTIONAL_HEADS = ("predictions.", "sop_classifier.")     # a partial MLM/SOP head: --allow-missing-heads
POOLER = "albert.pooler."
PROJECTION = "albert.encoder.embedding_hidden_mapping_in."
# `classifier.*` is the same tensor pair for three HF classes; config.json's "architectures" says which.
CLASSIFIER_CLASSES = ("AlbertForSequenceClassification", "AlbertForTokenClassification", "AlbertForMultipleChoice")
SPIECE_NAMES = ("spiece.model", "30k-clean.model")
def classifier_class(architectures):
    """Which class a ``classifier.*`` head belongs to: config.json's "architectures", else sequence classification."""
    return next((a for a in architectures if a in CLASSIFIER_CLASSES), "AlbertForSequenceClassification")


def model_classes(heads, architectures=()):
    """The model classes that can load a checkpoint with these heads (AlbertModel if it has none)."""
    from . import modeling
    names = []
    if "sop" in heads:
        names.append("AlbertForPreTraining")
    elif "mlm" in heads:
        names.append("AlbertForMaskedLM")          # the published albert-*-v2 checkpoints
    if "classifier" in heads:
        names.append(classifier_class(architectures))
    if "qa" in heads:
        names.append("AlbertForQuestionAnswering")
    return [getattr(modeling, n) for n in names or ["AlbertModel"]]


def expected_shapes(config, classes, with_pooler=True):
    """{our name: shape} of every parameter of the given model classes, built from ``config``.

    ``with_pooler``: the checkpoint has a pooler, so it has a place even when none of the classes uses it.
    """
    from mindspore.nn.utils import no_init_parameters
    from .checkpoint import full_name
    from .modeling import AlbertModel
    shapes = {}
    for cls in list(classes) + ([AlbertModel] if with_pooler else []):
        with no_init_parameters():        # shapes only: skip random init (7 s and 1x the weights for base)
            model = cls(config)
        shapes.update({full_name(model, p.name): tuple(p.shape) for p in model.get_parameters()})
    return shapes


def add_identity_projection(mapped, source, config):
    """Google builds ``embedding_hidden_mapping_in`` only when E != H; with E == H its
    embeddings go into the encoder as they are. An identity matrix and a zero bias
    compute exactly that (x @ I + 0 == x bit for bit), so the HF-shaped model runs
    unchanged. Returns the names it added."""
    if config.embedding_size != config.hidden_size or any(n.startswith(PROJECTION) for n in mapped):
        return []
    mapped[PROJECTION + "weight"] = np.eye(config.hidden_size, dtype=np.float32)
    mapped[PROJECTION + "bias"] = np.zeros(config.hidden_size, np.float32)
    source[PROJECTION + "weight"] = source[PROJECTION + "bias"] = "(identity: Google has no projection when E == H)"
    return [PROJECTION + "weight", PROJECTION + "bias"]


def check_google_groups(mapped, config, weights_path):
    """Google's formula int(i / L * G) skips a group for some shapes (e.g. L = G = 22 never runs
    group 15), and TF then creates no variables for it: name that instead of "missing tensors"."""
    from .modeling import loop_group
    L, G = config.num_hidden_layers, config.num_hidden_groups
    unused = sorted(set(range(G)) - {loop_group(i, L, G, "google") for i in range(L)})
    prefix = "albert.encoder.albert_layer_groups.{}."
    absent = [g for g in unused if not any(n.startswith(prefix.format(g)) for n in mapped)]
    if absent:
        raise ConversionError(f"{weights_path}: with L={L}, G={G} Google's loop -> group formula never runs "
                              f"group(s) {absent}, so the checkpoint has no weights for them; "
                              "such a model cannot be built with num_hidden_groups groups")


def _listing(names, limit=8):
    names = list(names)
    more = f" ... and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def check_tensors(mapped, source, unknown, expected, allow_missing_heads, weights_path):
    """Every tensor must have a place of the right shape; every parameter must be there.

    Missing MLM/SOP head tensors are tolerated with ``allow_missing_heads``.
    """
    problems = []
    unknown = unknown + [source[n] for n in mapped if n not in expected]
    if unknown:
        problems.append(f"tensors with no place in the model: {_listing(unknown)}")
    mismatched = [f"{n}{'' if source[n] == n else f' ({source[n]})'}: checkpoint {tuple(mapped[n].shape)} "
                  f"vs config {shape}"
                  for n, shape in expected.items() if n in mapped and tuple(mapped[n].shape) != shape]
    if mismatched:
        problems.append(f"shape mismatch (does the config fit these weights?): {_listing(mismatched, 4)}")
    missing = [n for n in expected if n not in mapped]
    optional = [n for n in missing if n.startswith(OPTIONAL_HEADS)]
    if allow_missing_heads:
        missing = [n for n in missing if n not in optional]
    if missing:
        hint = ""
        if optional and not allow_missing_heads:
            hint = " (MLM/SOP head tensors may be left out with --allow-missing-heads)"
        problems.append(f"missing tensors: {_listing(missing)}{hint}")
    if problems:
        raise ConversionError(f"{weights_path}: " + "; ".join(problems))


def check_finite(arrays, weights_path):
    """NaN or Inf weights would convert "fine" and then give NaN outputs: refuse them, by name."""
    bad = [n for n, a in arrays.items() if a.dtype.kind in "fc" and not np.isfinite(a).all()]
    if bad:
        raise ConversionError(f"{weights_path}: tensors with NaN or Inf values: {_listing(bad)}")


def _with_num_labels(config, labels_given, mapped, config_path):
    rows = mapped["classifier.weight"].shape[0] if "classifier.weight" in mapped else config.num_labels
    if rows == config.num_labels:
        return config
    if labels_given:
        raise ConversionError(f"{config_path} says num_labels={config.num_labels} but classifier.weight "
                              f"has {rows} rows")
    return dataclasses.replace(config, num_labels=rows)


def convert(src, dst, config_path=None, allow_missing_heads=False, force=False) -> dict:
    """Convert ``src`` (a checkpoint file, TF prefix or folder) into the model folder ``dst``.

    Returns a report: source, format, dst, tensors, dropped, heads, classes, parameters.
    ``dst`` is locked for the whole conversion (``safe_output.output_lock``): a second
    conversion into it is refused at once, naming this process.
    """
    from .safe_output import check_replaceable, output_lock
    if os.path.isdir(src) and os.path.realpath(dst) == os.path.realpath(src):
        raise ConversionError(f"{dst}: the output folder must not be the source folder")
    check_replaceable(dst, overwrite=force, protect=(src,))   # before the long reading
    with output_lock(dst):
        return _convert(src, dst, config_path, allow_missing_heads, force)


def _convert(src, dst, config_path, allow_missing_heads, force):
    weights_path, fmt = find_weights(src)
    if os.path.abspath(dst) == os.path.dirname(os.path.abspath(weights_path)):
        raise ConversionError(f"{dst}: the output folder must not be the source folder")
    skipped = []                                  # TF optimizer slots: never loaded

    def keep(name):
        if fmt == "tf" and is_tf_bookkeeping(name):
            skipped.append(name)
            return False
        return True

    arrays = read_weights(weights_path, fmt, select=keep)
    check_finite(arrays, weights_path)
    try:
        mapped, source, dropped, unknown = map_names(arrays, fmt)
    except ConversionError as err:
        raise ConversionError(f"{weights_path}: {err}") from None
    dropped = skipped + dropped
    del arrays                                    # frees what was dropped (tied decoder...)
    config_path = config_path or find_config(weights_path, fmt)
    config, labels_given, architectures = load_source_config(config_path, fmt == "tf")
    heads = [h for h, prefix in HEADS.items() if any(n.startswith(prefix) for n in mapped)]
    classes = model_classes(heads, architectures)
    if "classifier" in heads and classifier_class(architectures) != "AlbertForMultipleChoice":
        config = _with_num_labels(config, labels_given, mapped, config_path)
    synthesised = []
    if fmt == "tf":
        synthesised = add_identity_projection(mapped, source, config)
        check_google_groups(mapped, config, weights_path)
    has_pooler = any(n.startswith(POOLER) for n in mapped)
    check_tensors(mapped, source, unknown, expected_shapes(config, classes, has_pooler),
                  allow_missing_heads, weights_path)

    from .checkpoint import CHECKPOINT_FILE, CONFIG_FILE, SPIECE_FILE, write_checkpoint
    from .safe_output import atomic_directory
    # One tensor at a time (TF kernels are transposed views): never two copies of the model.
    arrays = {n: np.ascontiguousarray(mapped.pop(n), dtype=np.float32) for n in list(mapped)}
    spiece = [os.path.join(os.path.dirname(os.path.abspath(weights_path)), n) for n in SPIECE_NAMES]
    spiece = next((p for p in spiece if os.path.isfile(p)), None)
    source_dir = os.path.dirname(os.path.abspath(weights_path))
    with atomic_directory(dst, overwrite=force, protect=(src, source_dir)) as tmp:
        config.to_json_file(os.path.join(tmp, CONFIG_FILE))
        write_checkpoint(arrays, os.path.join(tmp, CHECKPOINT_FILE))
        if spiece:
            shutil.copyfile(spiece, os.path.join(tmp, SPIECE_FILE))
    return {"source": weights_path, "format": fmt, "config": config_path, "dst": dst,
            "tensors": len(arrays), "dropped": dropped, "heads": heads, "pooler": has_pooler,
            "synthesised": synthesised, "classes": [c.__name__ for c in classes],
            "num_labels": config.num_labels if "classifier" in heads else None,
            "parameters": sum(a.size for a in arrays.values()), "spiece": spiece,
            "model_config": config}


# ======================================================================== CLI
def summary(report) -> str:
    c = report["model_config"]
    dropped = report["dropped"]
    lines = [
        f"converted {report['source']} ({report['format']}) -> {report['dst']}",
        f"  config:     {report['config']}",
        f"              L={c.num_hidden_layers} H={c.hidden_size} E={c.embedding_size} "
        f"heads={c.num_attention_heads} I={c.intermediate_size} groups={c.num_hidden_groups}x{c.inner_group_num} "
        f"vocab={c.vocab_size} act={c.hidden_act}",
        f"  tensors:    {report['tensors']} converted, {len(dropped)} dropped"
        + (f" ({_listing(dropped, 4)})" if dropped else ""),
        f"  heads:      {', '.join(report['heads']) or 'none (backbone only)'}"
        + (f"  num_labels={report['num_labels']}" if report["num_labels"] else "")
        + f"  (not in the checkpoint: {', '.join(h for h in HEADS if h not in report['heads']) or '-'}"
        + ("" if report["pooler"] else ", pooler") + ")",
        f"  load with:  {', '.join(report['classes'])}.from_pretrained({report['dst']!r})",
        *([f"  added:      {_listing(report['synthesised'])} (exact identity: Google has no E -> H "
           "projection when embedding_size == hidden_size)"] if report["synthesised"] else []),
        *(["  groups:     Google's loop -> group formula (config.json: group_mapping=\"google\")"]
          if c.group_mapping == "google" and c.num_hidden_groups > 1 else []),
        f"  parameters: {report['parameters']:,}",
        f"  tokenizer:  {report['spiece'] or 'none (no spiece.model / 30k-clean.model next to the weights)'}",
    ]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m albert_min.convert", description=__doc__.split("\n\n")[0])
    parser.add_argument("src", help="pytorch_model.bin, model.safetensors, a sharded *.index.json, "
                                    "a TF checkpoint (prefix or .index), or a folder holding one")
    parser.add_argument("dst", help="output model folder")
    parser.add_argument("--config", help="config file (default: config.json / albert_config.json next to SRC)")
    parser.add_argument("--allow-missing-heads", action="store_true",
                        help="accept a partial MLM/SOP head (heads absent altogether need no flag: "
                             "a checkpoint is converted with the heads it has)")
    parser.add_argument("--force", action="store_true", help="replace DST if it exists")
    args = parser.parse_args(argv)
    import mindspore as ms
    ms.set_device("CPU")
    try:
        report = convert(args.src, args.dst, args.config, args.allow_missing_heads, args.force)
    except (AlbertMinError, OSError) as err:          # user errors: one line, nothing written
        message = str(err) if not isinstance(err, OSError) or not err.filename else \
            f"{err.filename}: {err.strerror or err}"
        print(f"error: {message}", file=sys.stderr)
        return 1
    print(summary(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
