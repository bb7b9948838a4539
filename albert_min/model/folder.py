"""The model folder format: ``config.json`` + weights (+ ``spiece.model``).

The weights are one file, in one of MindSpore's two checkpoint formats (``FORMATS``):
``model.ckpt`` (the default; protobuf, with a CRC32 that ``load_checkpoint`` checks) or
``model.safetensors`` (``save_checkpoint(format="safetensors")``: what MindSpore's
``load_checkpoint(format="safetensors")``, ``ckpt_to_safetensors`` and MindFormers read).
A folder holding both is refused: which one is the model would be a guess.

The folder's files must belong together: a ``model.ckpt`` of another model with the same shapes
(another vocabulary) passes every CRC and shape check and gives plausible, wrong numbers. So
albert_min records its fingerprint when it writes a folder: the sha256 of every file, and the
content of ``config.json``, in the folder's manifest (``safe_output``'s ``.albert_min.json``).
Every load checks it: weights (here, ``read_checkpoint``) or a ``spiece.model`` (the tokenizer)
that are not the ones written are a ``CheckpointError`` / ``TokenizerError`` naming the file and
the folder; a ``config.json`` edited since (id2label, more loops of the shared layer) loads, with
one note naming each changed key, old -> new (``model.config.load_config``). A folder without a
fingerprint (written before albert_min recorded them, or not by albert_min; e.g. a
``model.safetensors`` MindSpore saved) still loads, with one note saying so; its MindSpore CRC,
when it has one, is checked. ``record_model_dir`` (``python -m albert_min.fingerprint DIR``)
records a folder as it is now, after a change made on purpose.

Parameter names are Hugging Face's full names (``albert.encoder...``, ``predictions.*``,
``sop_classifier.*``, ``classifier.*``) whatever class wrote them, so one folder can be
loaded by every model class: ``AlbertModel`` takes the ``albert.*`` part, the heads take theirs.

Folders are written atomically through ``safe_output.atomic_directory``: an
interrupted save or conversion never leaves a half-written model behind.

Layer: ``albert_min.model``, above ``common`` (the layers: ``albert_min/__init__.py``). The folder
format sits in the model layer, below ``checkpoints``, because the models' ``from_pretrained``
(``modeling.PreTrainedMixin``) reads it: the piece moved down, so the model imports nothing above it.
"""

import logging
import os
import shutil
import sys

import numpy as np
import mindspore as ms
from ..common.errors import AlbertMinError
from ..common.json_files import Field, read_json
from ..common.checksums import sha256_of
from ..common.records import MANIFEST_FILE, check_recorded_sha256 as _check_sha256, read_manifest, recorded_sha256
from ..common.safe_output import STATE_KIND, atomic_directory, record_folder
from ..common.other_checkpoints import unconverted_checkpoint

CHECKPOINT_FILE = "model.ckpt"
SAFETENSORS_FILE = "model.safetensors"
WEIGHTS_FILES = {"ckpt": CHECKPOINT_FILE, "safetensors": SAFETENSORS_FILE}   # format -> the folder's weights file
FORMATS = tuple(WEIGHTS_FILES)
CONFIG_FILE = "config.json"
SPIECE_FILE = "spiece.model"
TRAIN_METRICS_FILE = "train_metrics.json"   # the metrics of the saved model (train.py's log record)
SETTINGS_FILE = "training_settings.json"    # how the model was trained: its task and truncation length
BACKBONE_PREFIX = "albert."
# The parts a checkpoint may lack (a published checkpoint holds only the heads it was trained with).
MODEL_PARTS = {"predictions.": "MLM head", "sop_classifier.": "SOP head", "classifier.": "classifier head",
               "qa_outputs.": "question-answering head", "albert.pooler.": "pooler"}
RECORDED_CONTENTS = (CONFIG_FILE,)          # JSON files whose content the fingerprint keeps, to name changed keys
_NOTED_UNRECORDED = set()   # folders already noted as having no fingerprint


class CheckpointError(AlbertMinError):
    """A checkpoint that does not fit the model: missing, extra or mis-shaped tensors."""


def full_name(model, name):
    """The name a parameter of ``model`` has in a model folder: the bare backbone
    (``AlbertModel``, whose ``checkpoint_prefix`` is ``albert.``) names its parameters
    without the prefix the heads' backbones carry."""
    return getattr(model, "checkpoint_prefix", "") + name


def checkpoint_format(path) -> str:
    """"safetensors" for a ``*.safetensors`` file, else "ckpt" (MindSpore's own test)."""
    return "safetensors" if path.endswith(".safetensors") else "ckpt"


def weights_file(directory) -> str:
    """The path of the folder's one weights file, ``model.ckpt`` or ``model.safetensors``."""
    found = [os.path.join(directory, n) for n in WEIGHTS_FILES.values() if os.path.isfile(os.path.join(directory, n))]
    if len(found) > 1:
        raise CheckpointError(f"{found[0]} and {found[1]}: a model folder holds one weights file, and this one holds "
                              "both; remove the one that is not the model")
    if not found:
        if unconverted_checkpoint(directory):
            raise CheckpointError(unconverted_checkpoint(directory))
        raise FileNotFoundError(f"checkpoint not found: {os.path.join(directory, CHECKPOINT_FILE)} "
                                f"(nor {SAFETENSORS_FILE})")
    return found[0]


def write_checkpoint(arrays: dict, path: str):
    """Write ``{name: np.ndarray}`` as a MindSpore checkpoint, in the format ``path``'s extension names."""
    # Tensor.from_numpy shares the arrays' memory (ms.Tensor would copy each one: one more model-sized copy).
    # crc_check: .ckpt gets a CRC32 per file; .safetensors a "crc_num" in its metadata, which MindSpore's
    # load_checkpoint(crc_check=True) checks (albert_min checks the sha256 save_model_dir records instead).
    ms.save_checkpoint([{"name": k, "data": ms.Tensor.from_numpy(np.ascontiguousarray(v))} for k, v in arrays.items()],
                       path, crc_check=True, format=checkpoint_format(path))


def model_arrays(model) -> dict:
    """``{full name: np.ndarray}`` for every parameter of a model."""
    return {full_name(model, p.name): p.asnumpy() for p in model.get_parameters()}


def write_model_dir(config, arrays, directory, weights_format="ckpt", spiece_model=None, overwrite=False,
                    extra_files=None, protect=()):
    """Write ``config`` + ``{full name: array}`` (+ tokenizer model and ``extra_files``: {name: writer(path)})
    into ``directory`` atomically; ``weights_format``: one of ``FORMATS``. The folder's manifest records its
    fingerprint: the sha256 of every file written, and the content of ``config.json``."""
    if weights_format not in FORMATS:
        raise CheckpointError(f"weights format {weights_format!r} is not one of {', '.join(FORMATS)}")
    weights = WEIGHTS_FILES[weights_format]
    checksums = (CONFIG_FILE, weights, *((SPIECE_FILE,) if spiece_model else ()), *(extra_files or {}))
    with atomic_directory(directory, overwrite=overwrite, protect=protect, checksums=checksums,
                          contents=RECORDED_CONTENTS) as tmp:
        config.to_json_file(os.path.join(tmp, CONFIG_FILE))
        write_checkpoint(arrays, os.path.join(tmp, weights))
        if spiece_model:
            shutil.copyfile(spiece_model, os.path.join(tmp, SPIECE_FILE))
        for name, writer in (extra_files or {}).items():
            writer(os.path.join(tmp, name))
    return directory


def save_model_dir(model, directory, spiece_model=None, overwrite=False, extra_files=None, protect=(),
                   weights_format="ckpt"):
    """Save ``model``'s config + weights (+ tokenizer model) into ``directory`` atomically."""
    return write_model_dir(model.config, model_arrays(model), directory, weights_format, spiece_model, overwrite,
                           extra_files, protect)


def check_recorded_sha256(path) -> bool:
    """True if the manifest of ``path``'s folder recorded a sha256 for it and the file still has it;
    False if none was recorded; CheckpointError naming the file and the folder if it differs."""
    return _check_sha256(path, CheckpointError)


def record_model_dir(directory) -> dict:
    """Record the model folder ``directory`` as it is now (after a change made on purpose: a weights file
    or tokenizer put in by hand, an edited config.json): the sha256 of its config.json, weights,
    spiece.model and train.py's records, and config.json's content. Returns ``{file: "recorded" |
    "unchanged" | "changed"}``, what each file is compared with the fingerprint before."""
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"model folder not found: {directory}")
    weights = os.path.basename(weights_file(directory))
    config = os.path.join(directory, CONFIG_FILE)
    if not os.path.isfile(config):
        raise CheckpointError(f"{config}: not found; a model folder holds config.json")
    read_json(config, {})   # JSON, or an error naming the file (AlbertConfig checks the rest on load)
    names = [CONFIG_FILE, weights] + [n for n in (SPIECE_FILE, SETTINGS_FILE, TRAIN_METRICS_FILE)
                                      if os.path.isfile(os.path.join(directory, n))]
    before = record_folder(directory, names, RECORDED_CONTENTS)
    after = (read_manifest(directory) or {}).get("sha256", {})
    return {n: "recorded" if n not in before else "unchanged" if before[n] == after.get(n) else "changed"
            for n in names}


def _note_unrecorded(path):
    """One note per folder without a fingerprint (a training state's own folder: none): what is and is
    not checked, and how to record it."""
    folder = os.path.dirname(os.path.abspath(path))
    manifest = read_manifest(folder)
    if manifest is not None and (manifest.get("kind") == STATE_KIND or isinstance(manifest.get("contents"), dict)):
        return
    if folder in _NOTED_UNRECORDED:
        return
    _NOTED_UNRECORDED.add(folder)
    why = ("albert_min did not write it, or the folder lost its " + MANIFEST_FILE if manifest is None else
           "its folder was written before albert_min recorded fingerprints")
    if recorded_sha256(path) is not None:   # a model.safetensors albert_min wrote before fingerprints
        what = f"its sha256 is checked, but its folder records none of its other files ({why})"
    else:
        what = f"no sha256 recorded for it or its folder's files ({why}), so only " + (
            "its MindSpore CRC is checked" if path.endswith(".ckpt") or has_mindspore_crc(path) else
            "its structure is checked: it has no MindSpore CRC, and a changed byte in a tensor would go unseen")
    print(f"note: {path}: {what}, and not that {CONFIG_FILE}, {os.path.basename(path)} and {SPIECE_FILE} belong "
          f"together; if they do, record them: python -m albert_min.fingerprint {folder}", file=sys.stderr, flush=True)


def has_mindspore_crc(path) -> bool:
    """Whether a ``.safetensors`` file carries MindSpore's CRC (``crc_num`` in its metadata): MindSpore
    (and so albert_min) wrote it; Hugging Face's files have none."""
    from safetensors import safe_open
    try:
        with safe_open(path, framework="np") as f:
            return "crc_num" in (f.metadata() or {})
    except Exception:   # noqa: BLE001 - unreadable: the reader says so
        return False


def written_by_mindspore(path) -> bool:
    """Whether a ``.safetensors`` file is a MindSpore checkpoint to read with ``read_checkpoint`` (its
    recorded sha256 or its CRC checked), rather than a public checkpoint: albert_min recorded its
    sha256, or it carries MindSpore's CRC (a model folder that lost its manifest)."""
    return recorded_sha256(path) is not None or has_mindspore_crc(path)


def _checked_against_manifest(path) -> bool:
    """True if its folder's manifest recorded the sha256 of the weights file ``path`` and the file
    still has it; False if none was recorded; CheckpointError if it differs. A folder without a
    fingerprint is noted, once."""
    checked = check_recorded_sha256(path)
    _note_unrecorded(path)
    return checked


def read_checkpoint(path) -> dict:
    """``{name: np.ndarray}`` from a MindSpore ``.ckpt`` or ``.safetensors``, with a clear error if
    unreadable, corrupted or replaced (the sha256 its folder recorded, else MindSpore's CRC) or not finite."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"checkpoint not found: {path}")
    fmt = checkpoint_format(path)
    # The recorded sha256 first (it also tells another model's weights); then .ckpt: its CRC (files written
    # without one, before albert_min wrote one, still load); .safetensors: MindSpore's CRC if it has one.
    crc_check = not _checked_against_manifest(path) or fmt == "ckpt"
    # MindSpore logs its own (misleading: "may not have permission") error line before raising.
    from mindspore import log as ms_log
    ms_logger = ms_log._get_logger()   # pylint: disable=protected-access
    level = ms_logger.level
    ms_logger.setLevel(logging.CRITICAL)
    try:
        params = ms.load_checkpoint(path, crc_check=crc_check, format=fmt)
    except Exception:   # MindSpore raises ValueError/RuntimeError with long C++ traces
        raise CheckpointError(f"{path}: not a readable MindSpore checkpoint "
                              "(corrupted: failed its CRC check, or could not be parsed)") from None
    finally:
        ms_logger.setLevel(level)
    arrays = {name: p.asnumpy() for name, p in params.items()}
    bad = [name for name, a in arrays.items() if a.dtype.kind == "f" and not np.isfinite(a).all()]
    if bad:
        raise CheckpointError(f"{path}: non-finite values (NaN/Inf) in {bad[:5]}")
    return arrays


def load_arrays(model, arrays: dict, source: str, allow_missing=()):
    """Copy ``{full name: array}`` into ``model``'s parameters, checking names and shapes.

    ``allow_missing``: name prefixes that may be absent (left at their initial
    values), e.g. ``("classifier.",)`` when fine-tuning from a pre-trained backbone.
    Arrays the model has no parameter for (e.g. the MLM head when loading a
    classifier) are ignored: a model folder may carry more heads than a class uses.
    """
    missing, mismatched = [], []
    for p in model.get_parameters():
        name = full_name(model, p.name)
        if name not in arrays:
            if not name.startswith(tuple(allow_missing)):
                missing.append(name)
            continue
        value = arrays[name]
        if tuple(value.shape) != tuple(p.shape):
            mismatched.append(f"{name}: checkpoint {tuple(value.shape)} vs model {tuple(p.shape)}")
            continue
        p.set_data(ms.Tensor(value.astype(np.float32, copy=False)))
    if mismatched:
        raise CheckpointError(f"{source}: shape mismatch for " + "; ".join(mismatched))
    if missing:
        hint = ""
        if all(n.startswith("classifier.") for n in missing):
            hint = (" (this folder has no sequence-classification head: it is a pre-trained backbone; "
                    "fine-tune it with train.py --init first)")
        parts = sorted({f"{label} ({prefix}*)" for n in missing for prefix, label in MODEL_PARTS.items()
                        if n.startswith(prefix)})
        if parts:
            raise CheckpointError(f"{source}: {type(model).__name__} needs the {' and the '.join(parts)}, "
                                  f"which this folder does not have: missing tensors {missing}{hint}")
        raise CheckpointError(f"{source}: missing tensors {missing}{hint}")


def load_model_dir(model, directory, allow_missing=()):
    """Load the folder's weights (``model.ckpt`` or ``model.safetensors``) into ``model``."""
    path = weights_file(directory)
    load_arrays(model, read_checkpoint(path), path, allow_missing)
    return model


SETTINGS_SCHEMA = {"task": Field(str, required=False), "max_length": Field(int, low=3, high=1 << 20),
                   # a SQuAD model's windows and decoding (tasks.squad.task.OPTION_DEFAULTS)
                   **{name: Field(int, low=1, high=1 << 20, required=False)
                      for name in ("doc_stride", "max_query_length", "max_answer_length")},
                   "null_score_diff_threshold": Field(float, required=False)}
# Folders written before training_settings.json kept max_length in train_metrics.json.
OLD_METRICS_SCHEMA = {"max_length": Field(int, low=3, high=1 << 20, required=False)}


def training_settings(model_dir) -> dict:
    """How train.py trained the model in ``model_dir``: ``{"task", "max_length"}`` (and a SQuAD
    model's window and decoding options) from its
    ``training_settings.json``, or from an older folder's ``train_metrics.json``; {} if neither says.
    A file that is not what train.py writes is a JSONFileError naming the file and key."""
    path = os.path.join(model_dir, SETTINGS_FILE)
    if os.path.isfile(path):
        return read_json(path, SETTINGS_SCHEMA)
    path = os.path.join(model_dir, TRAIN_METRICS_FILE)
    if os.path.isfile(path):
        old = read_json(path, OLD_METRICS_SCHEMA)
        return {"max_length": old["max_length"]} if "max_length" in old else {}
    return {}


def training_max_length(model_dir, default=128):
    """The truncation length train.py used for this model, so evaluation and ``pipeline()``
    see what training saw; ``default`` if the folder does not say."""
    return training_settings(model_dir).get("max_length", default)


def tokenizer_file(model_dir, error=CheckpointError):
    """The folder's ``spiece.model``; when it has none (a converted TF checkpoint), an
    ``error`` (the caller's error class) naming the file and how to add it."""
    path = os.path.join(model_dir, SPIECE_FILE)
    if not os.path.isfile(path) and unconverted_checkpoint(model_dir):
        raise error(unconverted_checkpoint(model_dir))
    if not os.path.isfile(path):
        raise error(f"{path}: not found; this model folder has no tokenizer (a converted TF checkpoint has "
                    f"none). Add it: python -m albert_min.convert SRC {model_dir} --tokenizer spiece.model --force, "
                    f"or copy the checkpoint's spiece.model (30k-clean.model in Google's releases) into {model_dir}")
    return path


def folder_tokenizer(model_dir, vocab_size, error=CheckpointError):
    """The folder's tokenizer (its ``spiece.model``; None when it has none), checked against the
    ``vocab_size`` of the model it goes with: a tokenizer with more pieces gives ids past the embedding
    table, and MindSpore's gather then fails deep inside a graph. Every loader of a model folder checks it
    here (``from_pretrained``, ``export.make_inputs``, ``--to hf``): an ``error`` (the caller's class)
    naming the folder, both numbers and what to do."""
    from tokenizer import AlbertTokenizer
    path = os.path.join(model_dir, SPIECE_FILE)
    if not os.path.isfile(path):
        return None
    tokenizer = AlbertTokenizer(path)
    if tokenizer.vocab_size > vocab_size:
        raise error(too_many_pieces(model_dir, tokenizer.vocab_size, vocab_size))
    return tokenizer


def too_many_pieces(model_dir, pieces, vocab_size):
    """The message for a folder whose spiece.model has more ``pieces`` than its model's ``vocab_size``."""
    return (f"{model_dir}: its spiece.model has {pieces} pieces, more than the model's vocab_size {vocab_size}: "
            f"ids from {vocab_size} on have no embedding, so this tokenizer does not belong to this model; put back "
            "the spiece.model it was trained or converted with (a folder changed by hand: python -m "
            "albert_min.fingerprint DIR records it as it is, once it is right)")
