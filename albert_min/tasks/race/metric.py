"""RACE's score: accuracy on all questions, middle and high; the majority-letter baseline.
"""

import numpy as np


def accuracy(questions, predicted):
    """Accuracy (%) on all, middle and high: {"all": .., "middle": .., "high": ..} for the levels present."""
    right = {"all": [0, 0]}
    for q, p in zip(questions, predicted, strict=True):
        for group in ("all", q.level):
            counts = right.setdefault(group, [0, 0])
            counts[0] += int(p) == q.label
            counts[1] += 1
    return {g: 100.0 * r / n for g, (r, n) in right.items()}


def majority_option(questions):
    """The answer letter index most frequent in ``questions`` (ties: the earliest letter)."""
    counts = np.bincount([q.label for q in questions], minlength=4)
    return int(counts.argmax())
