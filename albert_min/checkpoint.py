"""The model folder format: ``config.json`` + ``model.ckpt`` (+ ``spiece.model``).

Parameter names in ``model.ckpt`` are Hugging Face's full names
(``albert.encoder...``, ``predictions.*``, ``sop_classifier.*``, ``classifier.*``)
whatever class wrote them, so one folder can be loaded by every model class:
``AlbertModel`` takes the ``albert.*`` part, the heads take theirs.

Folders are written atomically through ``safe_output.atomic_directory``: an
interrupted save or conversion never leaves a half-written model behind.
"""

import logging
import os
import shutil

import numpy as np
import mindspore as ms
from .errors import AlbertMinError
from .json_files import Field, read_json
from .safe_output import atomic_directory

CHECKPOINT_FILE = "model.ckpt"
CONFIG_FILE = "config.json"
SPIECE_FILE = "spiece.model"
TRAIN_METRICS_FILE = "train_metrics.json"   # the metrics of the saved model (train.py's log record)
SETTINGS_FILE = "training_settings.json"    # how the model was trained: its task and truncation length
BACKBONE_PREFIX = "albert."
# The parts a checkpoint may lack (a published checkpoint holds only the heads it was trained with).
MODEL_PARTS = {"predictions.": "MLM head", "sop_classifier.": "SOP head", "classifier.": "classifier head",
               "qa_outputs.": "question-answering head", "albert.pooler.": "pooler"}


class CheckpointError(AlbertMinError):
    """A checkpoint that does not fit the model: missing, extra or mis-shaped tensors."""


def full_name(model, name):
    """The name a parameter of ``model`` has in a model folder: the bare backbone
    (``AlbertModel``, whose ``checkpoint_prefix`` is ``albert.``) names its parameters
    without the prefix the heads' backbones carry."""
    return getattr(model, "checkpoint_prefix", "") + name


def write_checkpoint(arrays: dict, path: str):
    """Write ``{name: np.ndarray}`` as a MindSpore ``.ckpt``."""
    # Tensor.from_numpy shares the arrays' memory (ms.Tensor would copy each one: one more model-sized copy).
    ms.save_checkpoint([{"name": k, "data": ms.Tensor.from_numpy(np.ascontiguousarray(v))} for k, v in arrays.items()],
                       path, crc_check=True)   # a CRC32 per file: load_checkpoint(crc_check=True) catches flipped bytes


def model_arrays(model) -> dict:
    """``{full name: np.ndarray}`` for every parameter of a model."""
    return {full_name(model, p.name): p.asnumpy() for p in model.get_parameters()}


def save_model_dir(model, directory, spiece_model=None, overwrite=False, extra_files=None, protect=()):
    """Save config + weights (+ tokenizer model) into ``directory`` atomically."""
    with atomic_directory(directory, overwrite=overwrite, protect=protect) as tmp:
        model.config.to_json_file(os.path.join(tmp, CONFIG_FILE))
        write_checkpoint(model_arrays(model), os.path.join(tmp, CHECKPOINT_FILE))
        if spiece_model:
            shutil.copyfile(spiece_model, os.path.join(tmp, SPIECE_FILE))
        for name, writer in (extra_files or {}).items():
            writer(os.path.join(tmp, name))
    return directory


def read_checkpoint(path) -> dict:
    """``{name: np.ndarray}`` from a MindSpore ``.ckpt``, with a clear error if unreadable."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"checkpoint not found: {path}")
    # MindSpore logs its own (misleading: "may not have permission") error line before raising.
    from mindspore import log as ms_log
    ms_logger = ms_log._get_logger()   # pylint: disable=protected-access
    level = ms_logger.level
    ms_logger.setLevel(logging.CRITICAL)
    try:
        # Files written with a CRC (all since albert_min wrote them with one) are checked;
        # older files without one still load.
        params = ms.load_checkpoint(path, crc_check=True)
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
    load_arrays(model, read_checkpoint(os.path.join(directory, CHECKPOINT_FILE)),
                os.path.join(directory, CHECKPOINT_FILE), allow_missing)
    return model


SETTINGS_SCHEMA = {"task": Field(str, required=False), "max_length": Field(int, low=3, high=1 << 20),
                   # a SQuAD model's windows and decoding (tasks.squad_task.OPTION_DEFAULTS)
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
    if not os.path.isfile(path):
        raise error(f"{path}: not found; this model folder has no tokenizer (a converted TF checkpoint has "
                    f"none). Add it: python -m albert_min.convert SRC {model_dir} --tokenizer spiece.model --force, "
                    f"or copy the checkpoint's spiece.model (30k-clean.model in Google's releases) into {model_dir}")
    return path
