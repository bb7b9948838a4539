"""Pre-training's raw text: one sentence per line, blank lines between documents, and the
held-out split (whole documents).
"""

import os
import random

from ..errors import DataError
from ..text_files import text_lines


# ------------------------------------------------------------------ text
def read_documents(path):
    """Raw text: one sentence (or paragraph) per line, blank lines between documents."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"text file not found: {path}")
    documents, current = [], []
    for _, line in text_lines(path):
        line = line.strip()
        if line:
            current.append(line)
        elif current:
            documents.append(current)
            current = []
    if current:
        documents.append(current)
    if not documents:
        raise DataError(f"{path}: no text")
    return documents


# ------------------------------------------------------------ held-out split
def split_documents(documents, heldout_fraction, rng: random.Random, max_heldout=100):
    """(train documents, held-out documents): whole documents, never split between the two."""
    order = list(range(len(documents)))
    rng.shuffle(order)
    n_heldout = min(max_heldout, max(1, round(len(documents) * heldout_fraction)))
    if len(documents) < 2:
        raise ValueError(f"need 2+ documents to hold some out, got {len(documents)}")
    heldout = set(order[:n_heldout])
    return ([d for i, d in enumerate(documents) if i not in heldout],
            [d for i, d in enumerate(documents) if i in heldout])
