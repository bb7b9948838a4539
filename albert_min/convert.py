"""Convert public ALBERT checkpoints into a model folder (config.json + model.ckpt), or back.

    python -m albert_min.convert SRC DST [--config PATH] [--tokenizer spiece.model] [--allow-missing-heads] [--force]
    python -m albert_min.convert --to hf weights/DIR DST [--classifier-class NAME] [--force]

``--to hf`` writes an albert_min model folder in Hugging Face's layout
(``albert_min.checkpoints.hf_export``); the rest of this module reads the other way.

The files are read by ``albert_min.checkpoints.formats`` (one module per format, numpy only):
PyTorch ``pytorch_model.bin``, ``model.safetensors``, Hugging Face's sharded
``*.index.json`` checkpoints, and Google's TensorFlow checkpoints (``model.ckpt-N``).
``albert_min.checkpoints.names`` maps their names to this package's names, which are Hugging
Face's, and transposes TF kernels; this module checks every tensor
against the model the config describes (names, shapes, finite values) before
anything is written. The output folder is written atomically: on any error no
(partial) folder remains.

The readers need only numpy; mindspore is imported when models are built and saved.
"""

import argparse
import dataclasses
import os
import sys

import numpy as np

from .arguments import Help, use_device_flag
from .model.config import AlbertConfig, ConfigError, read_json_object
from .common.device import add_device_flag
from .common.errors import AlbertMinError, OutputExistsError, fail, reported_errors, returns_status
from .checkpoints.formats import (ConversionError, find_weights, read_pytorch_bin, read_safetensors,  # noqa: F401
                                  read_tf_checkpoint, read_weights)
from .checkpoints.formats.common import brief
from .checkpoints.names import hf_name, is_tf_bookkeeping, map_names, tf_name  # noqa: F401  (hf_name, tf_name: API)
# which model classes a checkpoint's heads fit: in checkpoints.names, as hf_export uses them too
from .checkpoints.names import CLASSIFIER_CLASSES, HEADS, classifier_class, model_classes
from .training.config import WEIGHTS_FORMATS


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
OPTIONAL_HEADS = ("predictions.", "sop_classifier.")     # a partial MLM/SOP head: --allow-missing-heads
POOLER = "albert.pooler."
PROJECTION = "albert.encoder.embedding_hidden_mapping_in."
SPIECE_NAMES = ("spiece.model", "30k-clean.model")


def expected_shapes(config, classes, with_pooler=True):
    """{our name: shape} of every parameter of the given model classes, built from ``config``.

    ``with_pooler``: the checkpoint has a pooler, so it has a place even when none of the classes uses it.
    """
    from mindspore.nn.utils import no_init_parameters
    from .model.folder import full_name
    from .model.modeling import AlbertModel
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
    from .model.modeling import loop_group
    L, G = config.num_hidden_layers, config.num_hidden_groups
    unused = sorted(set(range(G)) - {loop_group(i, L, G, "google") for i in range(L)})
    prefix = "albert.encoder.albert_layer_groups.{}."
    absent = [g for g in unused if not any(n.startswith(prefix.format(g)) for n in mapped)]
    if absent:
        raise ConversionError(f"{weights_path}: with L={L}, G={G} Google's loop -> group formula never runs "
                              f"group(s) {absent}, so the checkpoint has no weights for them; "
                              "such a model cannot be built with num_hidden_groups groups")


def _listing(names, limit=8, show=brief):
    """The first ``limit`` names, each shortened (names come from the file), and how many more."""
    names = list(names)
    more = f" ... and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(map(show, names[:limit])) + more


def check_tensors(mapped, source, unknown, expected, allow_missing_heads, weights_path):
    """Every tensor must have a place of the right shape; every parameter must be there.

    Missing MLM/SOP head tensors are tolerated with ``allow_missing_heads``.
    """
    problems = []
    unknown = unknown + [source[n] for n in mapped if n not in expected]
    if unknown:
        problems.append(f"tensors with no place in the model: {_listing(unknown)}")
    mismatched = [f"{n}{'' if source[n] == n else f' ({brief(source[n])})'}: checkpoint {tuple(mapped[n].shape)} "
                  f"vs config {shape}"
                  for n, shape in expected.items() if n in mapped and tuple(mapped[n].shape) != shape]
    if mismatched:
        problems.append(f"shape mismatch (does the config fit these weights?): {_listing(mismatched, 4, str)}")
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


def find_tokenizer(weights_path, tokenizer):
    """The SentencePiece model to copy: ``tokenizer`` if given, else one next to the weights, else None."""
    if tokenizer:
        return tokenizer
    candidates = [os.path.join(os.path.dirname(os.path.abspath(weights_path)), n) for n in SPIECE_NAMES]
    return next((p for p in candidates if os.path.isfile(p)), None)


def check_tokenizer(path, config):
    """The SentencePiece model must load as an ALBERT tokenizer and its ids fit the embeddings."""
    from tokenizer import AlbertTokenizer
    try:
        pieces = AlbertTokenizer(path).vocab_size
    except FileNotFoundError:
        raise ConversionError(f"{path}: tokenizer not found") from None
    except AlbertMinError as err:
        raise ConversionError(f"tokenizer {brief(str(err))}") from None
    if pieces > config.vocab_size:
        raise ConversionError(f"{path}: {pieces} pieces, more than the model's vocab_size {config.vocab_size}: "
                              "not this checkpoint's tokenizer")


def read_source_weights(weights_path, fmt, select):
    """``{name: np.ndarray}`` from the source. A ``model.safetensors`` that MindSpore wrote (an
    albert_min model folder's: albert_min recorded its sha256, or it carries MindSpore's CRC) is
    read as every albert_min loader reads it (``checkpoint.read_checkpoint``: the recorded sha256,
    else the CRC, is checked), so a corrupted model folder is refused, never converted into a
    fresh, valid-looking one; every other file is a public checkpoint, read by ``formats``."""
    if fmt == "safetensors" and not weights_path.endswith(".index.json"):
        from .model.folder import read_checkpoint, written_by_mindspore
        if written_by_mindspore(weights_path):
            return read_checkpoint(weights_path)
    return read_weights(weights_path, fmt, select=select)


def convert(src, dst, config_path=None, allow_missing_heads=False, force=False, tokenizer=None,
            weights_format="ckpt") -> dict:
    """Convert ``src`` (a checkpoint file, TF prefix or folder) into the model folder ``dst``.

    ``tokenizer``: a SentencePiece model to copy in as ``spiece.model`` (default:
    ``spiece.model`` / ``30k-clean.model`` next to the weights, if there is one).
    ``weights_format``: ``ckpt`` (``model.ckpt``) or ``safetensors`` (MindSpore's ``model.safetensors``).
    Returns a report: source, format, dst, tensors, dropped, heads, classes, parameters.
    ``dst`` is locked for the whole conversion (``safe_output.output_lock``): a second
    conversion into it is refused at once, naming this process.
    """
    from .common.safe_output import check_replaceable, output_lock
    if os.path.exists(dst) and not force:
        raise OutputExistsError(dst)
    if os.path.isdir(src) and os.path.realpath(dst) == os.path.realpath(src):
        raise ConversionError(f"{dst}: the output folder must not be the source folder")
    check_replaceable(dst, overwrite=force, protect=(src,))   # before the long reading
    with output_lock(dst):
        return _convert(src, dst, config_path, allow_missing_heads, force, tokenizer, weights_format)


def _convert(src, dst, config_path, allow_missing_heads, force, tokenizer, weights_format):
    weights_path, fmt = find_weights(src)
    if os.path.abspath(dst) == os.path.dirname(os.path.abspath(weights_path)):
        raise ConversionError(f"{dst}: the output folder must not be the source folder")
    skipped = []                                  # TF optimizer slots: never loaded

    def keep(name):
        if fmt == "tf" and is_tf_bookkeeping(name):
            skipped.append(name)
            return False
        return True

    arrays = read_source_weights(weights_path, fmt, keep)
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
    spiece = find_tokenizer(weights_path, tokenizer)
    if spiece:
        check_tokenizer(spiece, config)

    from .model.folder import write_model_dir
    # One tensor at a time (TF kernels are transposed views): never two copies of the model.
    arrays = {n: np.ascontiguousarray(mapped.pop(n), dtype=np.float32) for n in list(mapped)}
    source_dir = os.path.dirname(os.path.abspath(weights_path))
    write_model_dir(config, arrays, dst, weights_format, spiece, overwrite=force, protect=(src, source_dir))
    return {"source": weights_path, "format": fmt, "config": config_path, "dst": dst, "weights_format": weights_format,
            "tensors": len(arrays), "dropped": dropped, "heads": heads, "pooler": has_pooler,
            "synthesised": synthesised, "classes": [c.__name__ for c in classes],
            "num_labels": config.num_labels if "classifier" in heads else None,
            "parameters": sum(a.size for a in arrays.values()), "spiece": spiece,
            "model_config": config}


# ======================================================================== CLI
NO_TOKENIZER = ("none (no spiece.model / 30k-clean.model next to the weights): pipeline() and evaluate.py "
                "need one; add it with --tokenizer spiece.model")


def summary(report) -> str:
    from .model.folder import WEIGHTS_FILES
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
        f"  weights:    {WEIGHTS_FILES[report['weights_format']]}"
        + (" (MindSpore safetensors; its sha256 is recorded in the folder's manifest)"
           if report["weights_format"] == "safetensors" else ""),
        f"  tokenizer:  {report['spiece'] or NO_TOKENIZER}",
    ]
    return "\n".join(lines)


def missing_input(args):
    """What makes the command fail at once, worded as its reader would, else None: SRC not there or
    not readable (a folder holding no checkpoint, a file the OS will not open), --config or
    --tokenizer not there, DST there without --force. Checked before MindSpore is imported (seconds),
    as a flag is; what the files hold is checked when they are read."""
    from .common.errors import os_error_text
    if args.to == "hf":
        if not os.path.isdir(args.src):
            return f"model folder not found: {args.src}"
    else:
        try:
            weights_path, fmt = find_weights(args.src)
            with open(weights_path + ".index" if fmt == "tf" else weights_path, "rb") as f:
                f.read(1)
            config = args.config or find_config(weights_path, fmt)
        except (AlbertMinError, OSError) as err:
            return os_error_text(err)
        if not os.path.isfile(config):
            return f"config file not found: {config}"
        if args.tokenizer and not os.path.isfile(args.tokenizer):
            return f"SentencePiece model not found: {args.tokenizer}"
    if os.path.exists(args.dst) and not args.force:
        return f"{args.dst} already exists (pass --force to replace it)"
    return None


@returns_status
def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m albert_min.convert", description=__doc__.split("\n\n")[0],
                                     formatter_class=Help)
    parser.add_argument("src", help="pytorch_model.bin, model.safetensors, a sharded *.index.json, "
                                    "a TF checkpoint (prefix or .index), or a folder holding one")
    parser.add_argument("dst", help="output model folder")
    parser.add_argument("--config", help="config file (default: config.json / albert_config.json next to SRC)")
    parser.add_argument("--allow-missing-heads", action="store_true",
                        help="accept a partial MLM/SOP head (heads absent altogether need no flag: "
                             "a checkpoint is converted with the heads it has)")
    parser.add_argument("--tokenizer", metavar="SPIECE_MODEL",
                        help="SentencePiece model to copy into DST as spiece.model (default: spiece.model or "
                             "30k-clean.model next to SRC; Google's TF releases keep it apart, as 30k-clean.model)")
    parser.add_argument("--to", choices=("albert_min", "hf"), default="albert_min",
                        help="albert_min: convert a public checkpoint SRC into a model folder; hf: write the "
                             "model folder SRC in Hugging Face's layout, for transformers (default: %(default)s)")
    parser.add_argument("--classifier-class", choices=CLASSIFIER_CLASSES, metavar="CLASS",
                        help=f"with --to hf: the transformers class of a classifier.* head, one of "
                             f"{', '.join(CLASSIFIER_CLASSES)} (its tensors look the same for all three; "
                             "default AlbertForSequenceClassification)")
    parser.add_argument("--format", choices=WEIGHTS_FORMATS, default="ckpt",
                        help="the weights file DST gets: model.ckpt, or MindSpore's model.safetensors "
                             "(save_checkpoint(format='safetensors'); its sha256 is recorded and checked on load) "
                             "(default: %(default)s)")
    parser.add_argument("--force", action="store_true", help="replace DST if it exists")
    add_device_flag(parser)
    args = parser.parse_args(argv)
    import_only = [f for f, v in (("--config", args.config), ("--tokenizer", args.tokenizer),
                                  ("--allow-missing-heads", args.allow_missing_heads),
                                  ("--format", args.format != "ckpt")) if v]
    if args.to == "hf" and import_only:
        parser.error(f"{', '.join(import_only)}: only when reading a public checkpoint, not with --to hf")
    if args.to != "hf" and args.classifier_class:
        parser.error("--classifier-class: only with --to hf")
    problem = missing_input(args)
    if problem:
        fail(problem)
    use_device_flag(args.device)
    with reported_errors():          # user errors: one line, nothing written
        if args.to == "hf":
            from .checkpoints.hf_export import export_hf, summary as export_summary
            print(export_summary(export_hf(args.src, args.dst, args.force, args.classifier_class)))
            return 0
        report = convert(args.src, args.dst, args.config, args.allow_missing_heads, args.force, args.tokenizer,
                         args.format)
    print(summary(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
