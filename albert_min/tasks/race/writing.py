"""RACE's prediction file: ``{"high10024.txt": ["C", "A", ...]}``, one letter per question.
"""

from ..file_io import write_json
from .reading import LETTERS


def predictions_by_file(questions, predicted):
    """{"high10024.txt": ["C", "A", ...]}: one letter per question in file order."""
    out = {}
    for q, p in zip(questions, predicted, strict=True):
        out.setdefault(q.key, []).append(LETTERS[int(p)])
    return out


def write_predictions(path, questions, predicted):
    """The prediction file as JSON, written to a temporary file and renamed."""
    write_json(path, predictions_by_file(questions, predicted), record=True)
