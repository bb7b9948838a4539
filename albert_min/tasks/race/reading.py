"""RACE's files: a split folder (``middle/`` and/or ``high/``) or one level's folder -> questions.

A RACE file (``RACE/{train,dev,test}/{middle,high}/N.txt``) is one JSON object with the
passage ``article`` and parallel lists ``questions``, ``options`` (4 each) and ``answers``
("A".."D"). Files are read in numeric order of their names. A question is known by its
file's key, level + file name (``high10024.txt``), and its position in the file.
"""

import dataclasses
import os
import re

from ..errors import DataError
from ..file_io import check_utf8_text, read_json_data


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
    """[(level, file path)] of a split folder or a level folder, levels middle then high: its
    regular ``*.txt`` files (a FIFO or a folder so named is not read); a file name that is not
    UTF-8 cannot be a key of the prediction file, and is an error."""
    if not os.path.isdir(path):
        raise DataError(f"{path}: not a folder (give a RACE split folder such as RACE/dev, or RACE/dev/high)")
    levels = [(level, os.path.join(path, level)) for level in LEVELS if os.path.isdir(os.path.join(path, level))]
    if not levels:
        name = os.path.basename(os.path.normpath(path))
        if name not in LEVELS:
            raise DataError(f"{path}: holds no middle/ or high/ folder, and is not one itself")
        levels = [(name, path)]
    files = []
    for level, folder in levels:
        for name in sorted(os.listdir(folder), key=_numeric_order):
            if name.endswith(".txt") and os.path.isfile(os.path.join(folder, name)):
                try:
                    name.encode("utf-8")
                except UnicodeEncodeError:   # os.listdir's surrogate escapes of bytes that are not UTF-8
                    raise DataError(f"{folder}: the file name {os.fsencode(name)!r} is not UTF-8 (it names the "
                                    "file's questions in the prediction file); rename it") from None
                files.append((level, os.path.join(folder, name)))
    if not files:
        raise DataError(f"{path}: no RACE .txt files")
    return files


def read_race_file(path, level):
    """The questions of one RACE file; errors name the file (and the question number). Every
    text must be text UTF-8 can write (``files.check_utf8_text``)."""
    data = read_json_data(path)
    if not isinstance(data, dict):
        raise DataError(f"{path}: not a RACE object")
    article = data.get("article")
    if not isinstance(article, str) or not article.strip():
        raise DataError(f"{path}: no \"article\" text")
    check_utf8_text(article, f"{path}: the article")
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
        check_utf8_text(question, f"{path}: question {n}")
        if not (isinstance(options, list) and len(options) == 4 and all(isinstance(o, str) for o in options)):
            raise DataError(f"{path}: question {n} does not have 4 option strings")
        for letter, option in zip(LETTERS, options):
            check_utf8_text(option, f"{path}: question {n} option {letter}")
        if answer not in tuple(LETTERS):
            raise DataError(f"{path}: question {n} has answer {answer!r}, not one of A, B, C, D")
        out.append(RaceQuestion(key, level, article, question, options, LETTERS.index(answer)))
    return out


def read_race(path):
    """All questions of a split or level folder, file after file; a folder without any
    question is an error (nothing to train on or score)."""
    files = race_files(path)
    questions = [q for level, file in files for q in read_race_file(file, level)]
    if not questions:
        raise DataError(f"{path}: no questions (its {len(files)} RACE file{'s' if len(files) > 1 else ''} "
                        "hold empty \"questions\" lists)")
    return questions
