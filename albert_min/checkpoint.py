"""The model folder format: ``config.json`` + ``model.ckpt`` (+ ``spiece.model``).

Parameter names in ``model.ckpt`` are Hugging Face's full names
(``albert.encoder...``, ``predictions.*``, ``sop_classifier.*``, ``classifier.*``)
whatever class wrote them, so one folder can be loaded by every model class:
``AlbertModel`` takes the ``albert.*`` part, the heads take theirs.

Folders are written atomically: everything goes into a temporary sibling
folder which is renamed into place only once complete, so an interrupted
save or conversion never leaves a half-written model behind.
"""

import contextlib
import os
import shutil
import tempfile

import numpy as np
import mindspore as ms
from .errors import AlbertMinError

CHECKPOINT_FILE = "model.ckpt"
CONFIG_FILE = "config.json"
SPIECE_FILE = "spiece.model"
TRAIN_METRICS_FILE = "train_metrics.json"   # written by train.py beside the best model
BACKBONE_PREFIX = "albert."
# The parts a checkpoint may lack (a published checkpoint holds only the heads it was trained with).
MODEL_PARTS = {"predictions.": "MLM head", "sop_classifier.": "SOP head", "classifier.": "classifier head",
               "qa_outputs.": "question-answering head", "albert.pooler.": "pooler"}


class CheckpointError(AlbertMinError):
    """A checkpoint that does not fit the model: missing, extra or mis-shaped tensors."""


def full_name(model, name):
    """The name a parameter of ``model`` has in a model folder."""
    from .modeling import AlbertModel
    return BACKBONE_PREFIX + name if isinstance(model, AlbertModel) else name


@contextlib.contextmanager
def atomic_directory(target, overwrite=False, protect=()):
    """Yield a temporary folder; on success it replaces ``target`` in one rename.

    On any exception the temporary folder is removed and ``target`` is untouched.
    ``protect``: paths (e.g. the conversion source) that ``target`` must neither
    be nor contain.
    """
    target = os.path.abspath(target)
    for path in protect:
        path = os.path.realpath(path)
        real = os.path.realpath(target)
        if path == real or path.startswith(real.rstrip(os.sep) + os.sep):
            raise CheckpointError(f"{target}: refusing to write here, it is or contains {path}")
    if os.path.exists(target) and not overwrite:
        raise FileExistsError(f"{target} already exists (pass overwrite / --force to replace it)")
    parent = os.path.dirname(target)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(target)}.tmp-", dir=parent)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)   # mkdtemp makes it private; the result is an ordinary folder
    try:
        yield tmp
        if os.path.exists(target):
            old = tempfile.mkdtemp(prefix=f".{os.path.basename(target)}.old-", dir=parent)
            os.rename(target, os.path.join(old, "x"))
            os.rename(tmp, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_checkpoint(arrays: dict, path: str):
    """Write ``{name: np.ndarray}`` as a MindSpore ``.ckpt``."""
    ms.save_checkpoint([{"name": k, "data": ms.Tensor(np.ascontiguousarray(v))} for k, v in arrays.items()], path)


def model_arrays(model) -> dict:
    """``{full name: np.ndarray}`` for every parameter of a model."""
    return {full_name(model, p.name): p.asnumpy() for p in model.get_parameters()}


def save_model_dir(model, directory, spiece_model=None, overwrite=False, extra_files=None):
    """Save config + weights (+ tokenizer model) into ``directory`` atomically."""
    with atomic_directory(directory, overwrite=overwrite) as tmp:
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
    try:
        params = ms.load_checkpoint(path)
    except Exception as err:   # MindSpore raises ValueError/RuntimeError with long C++ traces
        raise CheckpointError(f"{path}: not a readable MindSpore checkpoint ({str(err).splitlines()[0]})") from None
    return {name: p.asnumpy() for name, p in params.items()}


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
