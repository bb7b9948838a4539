"""Readers for the checkpoint formats public ALBERT weights come in; numpy only.

Each module reads one format and can be read alone:

* ``torch_zip``   -- PyTorch ``pytorch_model.bin`` (a zip archive holding a pickle), no torch;
* ``safetensors`` -- Hugging Face ``model.safetensors``, with the ``safetensors`` package;
* ``tf_bundle``   -- TensorFlow ``model.ckpt-N.index`` + ``.data-*`` (Google's releases), no TF;
* ``crc32c``      -- the checksum TF bundles carry.

Here: finding the weights in a folder (``find_weights``) and reading them,
single files or Hugging Face's sharded checkpoints (``*.index.json`` naming
several shard files), as ``{source name: np.ndarray}``. Every reader treats
its input as untrusted: a malformed file ends in a ``ConversionError`` that
names it, and declared sizes are checked before anything is allocated.

Layer: ``albert_min.checkpoints``, above ``model`` (the layers: ``albert_min/__init__.py``).
"""

import json
import os
import re

from .common import ConversionError, brief
from .safetensors import read_safetensors
from .tf_bundle import read_tf_checkpoint, tf_checkpoint_prefix
from .torch_zip import read_pytorch_bin

__all__ = ["ConversionError", "find_weights", "read_weights", "read_pytorch_bin", "read_safetensors",
           "read_tf_checkpoint", "read_sharded", "tf_checkpoint_prefix"]

# In a folder, the first of these that exists is used.
_FOLDER_FILES = (("model.safetensors", "safetensors"), ("model.safetensors.index.json", "safetensors"),
                 ("pytorch_model.bin", "pytorch"), ("pytorch_model.bin.index.json", "pytorch"))
_INDEX_LIMIT = 64 << 20        # a shard index is ~100 bytes per tensor


def find_weights(src):
    """(weights path, format) for a file, a TF prefix, or a folder holding one of them.

    The format is ``"pytorch"``, ``"safetensors"`` or ``"tf"``; a path ending in
    ``.index.json`` is a sharded checkpoint of the first two.
    """
    if os.path.isdir(src):
        for name, fmt in _FOLDER_FILES:
            if os.path.isfile(os.path.join(src, name)):
                return os.path.join(src, name), fmt
        return tf_checkpoint_prefix(src), "tf"
    if os.path.isfile(src):
        if src.endswith(".index.json"):
            return src, "safetensors" if src.endswith(".safetensors.index.json") else "pytorch"
        if src.endswith(".safetensors"):
            return src, "safetensors"
        if src.endswith(".index") or re.search(r"\.data-\d{5}-of-\d{5}$", src):
            return tf_checkpoint_prefix(src), "tf"
        return src, "pytorch"
    if os.path.isfile(src + ".index"):
        return src, "tf"
    raise FileNotFoundError(f"no such file or folder: {src}")


def read_weights(path, fmt, select=None) -> dict:
    """``{name: np.ndarray}`` from what ``find_weights`` found.

    ``select(name)``, if given, says which tensors to keep; the TF reader then
    never loads the others (optimizer slots are 2/3 of a training checkpoint).
    """
    if path.endswith(".index.json"):
        return read_sharded(path, fmt, select)
    if fmt == "tf":
        return read_tf_checkpoint(path, select)
    arrays = read_safetensors(path, select) if fmt == "safetensors" else read_pytorch_bin(path)
    return arrays if select is None else {n: a for n, a in arrays.items() if select(n)}


def read_sharded(index_path, fmt, select=None) -> dict:
    """A Hugging Face sharded checkpoint: ``{"weight_map": {tensor: shard file}}`` + the shards.

    Every shard must exist next to the index, and each must hold exactly the
    tensors the index assigns to it.
    """
    weight_map = _read_weight_map(index_path)
    folder = os.path.dirname(os.path.abspath(index_path))
    shards = {}
    for name, shard in weight_map.items():
        shards.setdefault(shard, set()).add(name)
    missing = [s for s in shards if not os.path.isfile(os.path.join(folder, s))]
    if missing:
        raise ConversionError(f"{index_path}: shard files not found next to it: {', '.join(brief(m) for m in sorted(missing))}")
    arrays = {}
    for shard in sorted(shards):
        path = os.path.join(folder, shard)
        part = read_safetensors(path) if fmt == "safetensors" else read_pytorch_bin(path)
        absent, extra = sorted(shards[shard] - part.keys()), sorted(part.keys() - shards[shard])
        if absent or extra:
            raise ConversionError(
                f"{path}: does not match {os.path.basename(index_path)}: "
                + "; ".join(p for p in (absent and f"missing {', '.join(map(brief, absent[:5]))}",
                                        extra and f"not in the index {', '.join(map(brief, extra[:5]))}") if p))
        arrays.update((n, a) for n, a in part.items() if select is None or select(n))
    return arrays


def _read_weight_map(index_path):
    try:
        if os.path.getsize(index_path) > _INDEX_LIMIT:
            raise ConversionError(f"{index_path}: far too large for a shard index")
        with open(index_path, "rb") as f:
            index = json.loads(f.read())
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise ConversionError(f"{index_path}: not valid JSON ({brief(str(err))})") from None
    except OSError as err:
        raise ConversionError(f"{index_path}: cannot read ({err.strerror or err})") from None
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise ConversionError(f"{index_path}: expected {{\"weight_map\": {{tensor name: shard file}}}}")
    for name, shard in weight_map.items():
        # A shard is a plain file name next to the index: never a path elsewhere.
        if not isinstance(shard, str) or not shard or os.path.basename(shard) != shard or shard in (".", ".."):
            raise ConversionError(f"{index_path}: tensor {brief(name)}: bad shard file name {brief(shard)!r}")
    return weight_map
