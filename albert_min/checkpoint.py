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
import json
import logging
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


MANIFEST_FILE = ".albert_min.json"    # marks a folder albert_min wrote, and lists its files
MODEL_KIND = "model"
STATE_KIND = "training-state"


def read_manifest(directory):
    """The manifest of a folder albert_min wrote (a dict), or None if it has none or it is unreadable."""
    try:
        with open(os.path.join(directory, MANIFEST_FILE), encoding="utf-8") as f:
            manifest = json.load(f)
    except (OSError, ValueError):
        return None
    ok = (isinstance(manifest, dict) and manifest.get("written_by") == "albert_min"
          and isinstance(manifest.get("files"), list) and all(isinstance(n, str) for n in manifest["files"]))
    return manifest if ok else None


def _write_manifest(directory, kind, complete):
    files = sorted(os.path.relpath(os.path.join(root, name), directory)
                   for root, _, names in os.walk(directory) for name in names if name != MANIFEST_FILE)
    manifest = {"written_by": "albert_min", "kind": kind, "complete": complete, "files": files}
    with open(os.path.join(directory, MANIFEST_FILE), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())


def _foreign_files(directory):
    """Files in ``directory`` that its manifest does not list (all of them without a manifest)."""
    manifest = read_manifest(directory)
    listed = set(manifest["files"]) if manifest else set()
    listed.add(MANIFEST_FILE)
    return sorted(os.path.relpath(os.path.join(root, name), directory)
                  for root, _, names in os.walk(directory) for name in names
                  if os.path.relpath(os.path.join(root, name), directory) not in listed)


def _is_inside(path, folder):
    """Whether ``path`` is ``folder`` or lies below it (real paths)."""
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def check_replaceable(target, overwrite=False, protect=()):
    """Raise unless writing the folder ``target`` can lose nothing albert_min did not write.

    Refused: a path that is or contains a ``protect`` path (e.g. the conversion
    source) or the current directory; a regular file; with ``overwrite``, a
    folder without albert_min's manifest or holding files the manifest does not
    list. Without ``overwrite`` any existing path is refused.
    """
    target = os.path.abspath(target)
    for path in protect:
        if _is_inside(path, target):
            raise CheckpointError(f"{target}: refusing to write here, it is or contains {os.path.abspath(path)}")
    if _is_inside(os.getcwd(), target):
        raise CheckpointError(f"{target}: refusing to write here, it is or contains the current directory")
    if not os.path.lexists(target):
        return
    if not os.path.isdir(target) or os.path.islink(target):
        raise CheckpointError(f"{target}: exists and is not a folder; refusing to replace it")
    if not overwrite:
        raise FileExistsError(f"{target} already exists (pass overwrite / --force to replace it)")
    if os.listdir(target) and read_manifest(target) is None:
        raise CheckpointError(f"{target}: not a folder written by albert_min (no {MANIFEST_FILE}); "
                              "refusing to replace it - remove it yourself or choose another path")
    foreign = _foreign_files(target)
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise CheckpointError(f"{target}: holds files albert_min did not write ({shown}); refusing to replace it")


def _leftovers(target, tag):
    """Our ``.NAME.tmp-*`` / ``.NAME.old-*`` siblings of ``target``: folders, empty or with our manifest."""
    parent, name = os.path.split(os.path.abspath(target))
    prefix = f".{name}.{tag}-"
    found = []
    for entry in os.listdir(parent) if os.path.isdir(parent) else ():
        path = os.path.join(parent, entry)
        if entry.startswith(prefix) and os.path.isdir(path) and not os.path.islink(path):
            if not os.listdir(path) or read_manifest(path) is not None:
                found.append(path)
    return found


def recover_directory(target):
    """Finish or undo a swap that a crash interrupted, then remove our leftovers.

    ``atomic_directory`` writes ``.NAME.tmp-*``, marks it complete in its
    manifest, renames ``NAME`` to ``.NAME.old-*``, renames the temporary folder to
    ``NAME`` and deletes the old one. If ``NAME`` is missing, the newest complete
    temporary folder becomes ``NAME`` (the swap is completed), else the old one
    comes back (rolled back). Incomplete temporary folders and old folders are
    then deleted. Returns a short description of what was done, or None.
    """
    target = os.path.abspath(target)
    done = None
    if not os.path.lexists(target):
        complete = [p for p in _leftovers(target, "tmp") if (read_manifest(p) or {}).get("complete")]
        old = [p for p in _leftovers(target, "old") if read_manifest(p) is not None]
        if complete:
            newest = max(complete, key=lambda p: os.path.getmtime(os.path.join(p, MANIFEST_FILE)))
            os.rename(newest, target)
            done = f"completed an interrupted save of {target}"
        elif old:
            os.rename(max(old, key=os.path.getmtime), target)
            done = f"rolled back an interrupted save of {target}"
    for path in _leftovers(target, "tmp") + _leftovers(target, "old"):
        shutil.rmtree(path, ignore_errors=True)
    return done


@contextlib.contextmanager
def atomic_directory(target, overwrite=False, protect=(), kind=MODEL_KIND):
    """Yield a temporary folder; on success it replaces ``target`` (two renames).

    Checks first that nothing but an albert_min folder would be replaced
    (``check_replaceable``; ``protect``: paths, e.g. the conversion source, that
    ``target`` must neither be nor contain). The finished folder gets a manifest
    (``MANIFEST_FILE``) listing its files and its ``kind``. On an exception the
    temporary folder is removed and ``target`` is untouched; after a crash,
    ``recover_directory`` (run here first) completes or rolls back the swap.
    """
    target = os.path.abspath(target)
    parent = os.path.dirname(target)
    os.makedirs(parent, exist_ok=True)
    recover_directory(target)
    check_replaceable(target, overwrite, protect)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(target)}.tmp-", dir=parent)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)   # mkdtemp makes it private; the result is an ordinary folder
        _write_manifest(tmp, kind, complete=False)   # ours from the start, so a crash leaves a folder we may clean
        yield tmp
        _write_manifest(tmp, kind, complete=True)
        old = None
        if os.path.exists(target):
            old = tempfile.mkdtemp(prefix=f".{os.path.basename(target)}.old-", dir=parent)
            os.rmdir(old)   # mkdtemp only reserved a unique name
            os.rename(target, old)
        try:
            os.rename(tmp, target)
        except BaseException:
            if old:
                os.rename(old, target)   # put the previous version back
            raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if old:
        shutil.rmtree(old, ignore_errors=True)


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


def training_max_length(model_dir, default=128):
    """The truncation length train.py used for this model (its ``train_metrics.json``),
    so evaluation and ``pipeline()`` see what training saw; ``default`` if it does not say."""
    import json
    path = os.path.join(model_dir, TRAIN_METRICS_FILE)
    if not os.path.isfile(path):
        return default
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f).get("max_length", default)
    except (UnicodeDecodeError, json.JSONDecodeError, AttributeError, RecursionError):
        raise CheckpointError(f"{path}: not a JSON object as train.py writes it") from None
    if not isinstance(value, int) or isinstance(value, bool) or value < 3:
        raise CheckpointError(f"{path}: max_length must be an integer >= 3, got {value!r}")
    return value


def tokenizer_file(model_dir, error=CheckpointError):
    """The folder's ``spiece.model``; when it has none (a converted TF checkpoint), an
    ``error`` (the caller's error class) naming the file and how to add it."""
    path = os.path.join(model_dir, SPIECE_FILE)
    if not os.path.isfile(path):
        raise error(f"{path}: not found; this model folder has no tokenizer (a converted TF checkpoint has "
                    f"none). Add it: python -m albert_min.convert SRC {model_dir} --tokenizer spiece.model --force, "
                    f"or copy the checkpoint's spiece.model (30k-clean.model in Google's releases) into {model_dir}")
    return path
