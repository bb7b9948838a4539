"""Another library's checkpoint where an albert_min model folder is expected (a Hugging Face download,
a Google TF release): known by its file names alone, so the error says how to convert it rather
than only that model.ckpt is missing. Needs nothing but ``os``: the commands check before MindSpore loads.

Layer: ``albert_min.common``, the bottom one (the layers: ``albert_min/__init__.py``).
"""

import os

# Files by which another library's checkpoint is known (what albert_min.convert reads): a folder
# holding one is a checkpoint to convert, not a model folder, and the error says so.
OTHER_LIBRARIES = {"pytorch_model.bin": "PyTorch (Hugging Face)",
                   "pytorch_model.bin.index.json": "PyTorch (Hugging Face)",
                   "model.safetensors.index.json": "Hugging Face safetensors",
                   "tf_model.h5": "Keras (Hugging Face)",
                   "albert_config.json": "TensorFlow (Google)"}


def unconverted_checkpoint(directory):
    """How to convert the other library's checkpoint ``directory`` holds (see ``OTHER_LIBRARIES``; a TF
    checkpoint by its ``*.index``), or None when it holds none or is already an albert_min model folder."""
    if any(os.path.isfile(os.path.join(directory, n)) for n in ("model.ckpt", "model.safetensors")):
        return None
    names = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
    found = [(n, OTHER_LIBRARIES[n]) for n in names if n in OTHER_LIBRARIES]
    found += [(n, "TensorFlow (Google)") for n in names if n.endswith(".index") and n.startswith("model.ckpt")]
    if not found:
        return None
    name, library = found[0]
    target = os.path.normpath(directory) + "-albert_min"
    return (f"{directory} holds {name}, a {library} checkpoint, not an albert_min model folder: convert it first, "
            f"without torch or tensorflow: python -m albert_min.convert {directory} {target} (then use {target})")
