"""RACE: the official release's files -> one sequence per option -> letters and accuracy.

A RACE file (``RACE/{train,dev,test}/{middle,high}/N.txt``) is one JSON object with the
passage ``article`` and parallel lists ``questions``, ``options`` (4 each) and ``answers``
("A".."D"). ``read_race`` takes a split folder (holding ``middle/`` and/or ``high/``) or one
level's folder; files are read in numeric order of their names. A question is known by its
file's key, level + file name (``high10024.txt``), and its position in the file.

Encoding follows Google's ``run_race``: a question with a ``_`` blank has the option put
into the blank, any other is followed by " " and the option; per option one sequence
``[CLS] article [SEP] question+option [SEP]``, the question+option kept to its last
``max_qa_length`` pieces and the article truncated to fill the rest.
"""

import dataclasses
import os
import re

import numpy as np

from ..data import DataError, pad_with_types
from .files import read_json, write_json

LEVELS = ("middle", "high")
LETTERS = "ABCD"


@dataclasses.dataclass
class RaceQuestion:
    key: str              # level + file name, e.g. "high10024.txt" (the prediction file's key)
    level: str            # "middle" or "high"
    article: str
    question: str
    options: list         # 4 option texts
    label: int            # 0..3 (A..D)


def _numeric_order(name):
    digits = re.sub(r"\D", "", name)
    return (int(digits) if digits else -1, name)


def race_files(path):
    """[(level, file path)] of a split folder or a level folder, levels middle then high."""
    if not os.path.isdir(path):
        raise DataError(f"{path}: not a folder (give a RACE split folder such as RACE/dev, or RACE/dev/high)")
    levels = [(level, os.path.join(path, level)) for level in LEVELS if os.path.isdir(os.path.join(path, level))]
    if not levels:
        name = os.path.basename(os.path.normpath(path))
        if name not in LEVELS:
            raise DataError(f"{path}: holds no middle/ or high/ folder, and is not one itself")
        levels = [(name, path)]
    files = [(level, os.path.join(folder, f)) for level, folder in levels
             for f in sorted(os.listdir(folder), key=_numeric_order) if f.endswith(".txt")]
    if not files:
        raise DataError(f"{path}: no RACE .txt files")
    return files


def read_race_file(path, level):
    """The questions of one RACE file; errors name the file (and the question number)."""
    data = read_json(path)
    if not isinstance(data, dict):
        raise DataError(f"{path}: not a RACE object")
    article = data.get("article")
    if not isinstance(article, str) or not article.strip():
        raise DataError(f"{path}: no \"article\" text")
    fields = {k: data.get(k) for k in ("questions", "options", "answers")}
    for k, v in fields.items():
        if not isinstance(v, list):
            raise DataError(f"{path}: no \"{k}\" list")
    if not len(fields["questions"]) == len(fields["options"]) == len(fields["answers"]):
        raise DataError(f"{path}: {len(fields['questions'])} questions, {len(fields['options'])} option "
                        f"lists and {len(fields['answers'])} answers; they must match")
    key = level + os.path.basename(path)
    out = []
    for n, (question, options, answer) in enumerate(zip(*fields.values()), start=1):
        if not isinstance(question, str):
            raise DataError(f"{path}: question {n} is not a string")
        if not (isinstance(options, list) and len(options) == 4 and all(isinstance(o, str) for o in options)):
            raise DataError(f"{path}: question {n} does not have 4 option strings")
        if answer not in tuple(LETTERS):
            raise DataError(f"{path}: question {n} has answer {answer!r}, not one of A, B, C, D")
        out.append(RaceQuestion(key, level, article, question, options, LETTERS.index(answer)))
    return out


def read_race(path):
    """All questions of a split or level folder, file after file."""
    return [q for level, file in race_files(path) for q in read_race_file(file, level)]


def question_with_option(question, option):
    """Google's run_race: the option fills the ``_`` blank, or follows the question after a space."""
    return question.replace("_", option) if "_" in question else question + " " + option


def encode_question(tokenizer, q, max_length, max_qa_length=128, article_ids=None):
    """One question's 4 sequences: (input_ids, token_type_ids), two lists of 4 int lists.
    ``article_ids`` saves re-tokenizing an article shared by several questions."""
    if max_length < 5:
        raise ValueError(f"max_length={max_length} leaves no room for an article and an option")
    article = tokenizer.encode_ids(q.article) if article_ids is None else article_ids
    rows, types = [], []
    for option in q.options:
        qa = tokenizer.encode_ids(question_with_option(q.question, option))
        qa = qa[-min(max_qa_length, max_length - 4):]   # keep at least one article piece
        context = article[:max_length - 3 - len(qa)]
        rows.append([tokenizer.cls_token_id] + context + [tokenizer.sep_token_id] + qa + [tokenizer.sep_token_id])
        types.append([0] * (len(context) + 2) + [1] * (len(qa) + 1))
    return rows, types


def encode_all(tokenizer, questions, max_length, max_qa_length=128):
    """Every question's 4 sequences, each article tokenized once."""
    out, cache = [], {}
    for q in questions:
        if q.key not in cache:
            cache = {q.key: tokenizer.encode_ids(q.article)}   # questions of a file are consecutive
        out.append(encode_question(tokenizer, q, max_length, max_qa_length, cache[q.key]))
    return out


def batch(encoded, labels, pad_id, pad_multiple=8):
    """Questions -> input_ids, token_type_ids, attention_mask int32 ``[B, 4, S]`` and labels ``[B]``."""
    rows = [r for rs, _ in encoded for r in rs]
    types = [t for _, ts in encoded for t in ts]
    longest = max(len(r) for r in rows)
    length = -(-longest // pad_multiple) * pad_multiple
    arrays = pad_with_types(rows, types, pad_id, length=length)
    B = len(encoded)
    input_ids, token_type_ids, attention_mask = (a.reshape(B, 4, length) for a in arrays)
    return input_ids, token_type_ids, attention_mask, np.asarray(labels, np.int32)


def accuracy(questions, predicted):
    """Accuracy (%) on all, middle and high: {"all": .., "middle": .., "high": ..} for the levels present."""
    right = {"all": [0, 0]}
    for q, p in zip(questions, predicted, strict=True):
        for group in ("all", q.level):
            counts = right.setdefault(group, [0, 0])
            counts[0] += int(p) == q.label
            counts[1] += 1
    return {g: 100.0 * r / n for g, (r, n) in right.items()}


def predictions_by_file(questions, predicted):
    """{"high10024.txt": ["C", "A", ...]}: one letter per question in file order."""
    out = {}
    for q, p in zip(questions, predicted, strict=True):
        out.setdefault(q.key, []).append(LETTERS[int(p)])
    return out


def write_predictions(path, questions, predicted):
    """The prediction file as JSON, written to a temporary file and renamed."""
    write_json(path, predictions_by_file(questions, predicted))


def majority_option(questions):
    """The answer letter index most frequent in ``questions`` (ties: the earliest letter)."""
    counts = np.bincount([q.label for q in questions], minlength=4)
    return int(counts.argmax())
