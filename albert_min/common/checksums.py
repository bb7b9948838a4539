"""The sha256 of a file: what albert_min records for the files it writes without a checksum of
their own (a model folder's ``model.safetensors``, the compiled kernels' library) and checks
before reading them again.

Layer: ``albert_min.common``, the bottom one (the layers: ``albert_min/__init__.py``).
"""

import hashlib
import os


def sha256_of(path) -> str:
    """The hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_fingerprint(path) -> dict:
    """``{"size", "sha256"}`` of a file: what a resume compares to tell that an input changed."""
    return {"size": os.path.getsize(path), "sha256": sha256_of(path)}
