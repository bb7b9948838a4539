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

``RaceTask`` puts these on the task interface (``base.Task``) for train.py and evaluate.py.
"""

import dataclasses
import os
import random
import re

import numpy as np

from .data import DataError, pad_with_types, train_length
from . import predicting
from .base import Prepared, Task, finite_or_worst, shuffled_batches
from .files import check_text, json_kind, read_json, write_json

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
    text must be text UTF-8 can write (``files.check_text``)."""
    data = read_json(path)
    if not isinstance(data, dict):
        raise DataError(f"{path}: not a RACE object")
    article = data.get("article")
    if not isinstance(article, str) or not article.strip():
        raise DataError(f"{path}: no \"article\" text")
    check_text(article, f"{path}: the article")
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
        check_text(question, f"{path}: question {n}")
        if not (isinstance(options, list) and len(options) == 4 and all(isinstance(o, str) for o in options)):
            raise DataError(f"{path}: question {n} does not have 4 option strings")
        for letter, option in zip(LETTERS, options):
            check_text(option, f"{path}: question {n} option {letter}")
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


def batch(encoded, labels, pad_id, max_length=None):
    """Questions -> input_ids, token_type_ids, attention_mask int32 ``[B, 4, S]`` and labels ``[B]``;
    S is the longest sequence rounded up to ``data.train_length`` of ``max_length`` (None: to a multiple of 8)."""
    rows = [r for rs, _ in encoded for r in rs]
    types = [t for _, ts in encoded for t in ts]
    longest = max(len(r) for r in rows)
    length = train_length(longest, max_length) if max_length else -(-longest // 8) * 8
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
    write_json(path, predictions_by_file(questions, predicted), record=True)


def majority_option(questions):
    """The answer letter index most frequent in ``questions`` (ties: the earliest letter)."""
    counts = np.bincount([q.label for q in questions], minlength=4)
    return int(counts.argmax())


# ---------------------------------------------------------------- the task
class RaceFile(list):
    """``RaceTask.read``'s examples: the questions of a split or level folder, with its path."""

    def __init__(self, path, questions):
        super().__init__(questions)
        self.path = path


class RaceTask(Task):
    """RACE through AlbertForMultipleChoice: one ``[CLS] article [SEP] question+option [SEP]``
    row per option, cross-entropy over the 4 options, accuracy on middle, high and all.

    ``max_qa_length`` (128, Google's run_race): question+option pieces kept (its last ones);
    the article fills the rest of ``max_length`` (512 by default). Rows are tokenized batch
    by batch (an article once per question), so nothing of the 88k-question train set is
    held but its text.
    """
    name = "race"
    model_class = "AlbertForMultipleChoice"
    head_prefixes = ("classifier.",)
    default_max_length = 512
    prediction_kind = json_kind(lambda v: isinstance(v, dict) and all(   # {"high10024.txt": ["C", ...]}
        isinstance(letters, list) and all(isinstance(x, str) and len(x) == 1 and x in LETTERS for x in letters)
        for letters in v.values()))

    def __init__(self, name="race", max_qa_length=128):
        if not isinstance(max_qa_length, int) or isinstance(max_qa_length, bool) or max_qa_length < 1:
            raise DataError(f"max_qa_length must be an integer >= 1, got {max_qa_length!r}")
        self.name, self.max_qa_length = name, max_qa_length

    def read(self, path):
        return RaceFile(path, read_race(path))

    def files_read(self, path):
        """Every RACE file of the folder (``race_files``)."""
        return [file for _, file in race_files(path)]

    def tokenizer_text(self, questions):
        articles = list(dict.fromkeys(q.article for q in questions))
        return articles + [question_with_option(q.question, o) for q in questions for o in q.options]

    def write_predictions(self, path, prepared, outputs):
        """``{"high10024.txt": ["C", "A", ...]}``, one letter per question in file order."""
        write_predictions(path, prepared.examples, np.concatenate(list(outputs)).argmax(-1))

    def prepare(self, questions, tokenizer, max_length):
        if max_length < 5:
            raise DataError(f"max_length {max_length} leaves no room for an article and an option (at least 5)")
        return Prepared(questions, tokenizer, max_length)

    def _encode(self, prepared, questions):
        return encode_all(prepared.features, questions, prepared.max_length, self.max_qa_length)

    def train_batches(self, train, epoch, batch_size, seed, parallel):
        """(input_ids, token_type_ids, attention_mask ``(B, 4, S)``, labels ``(B,)``); batches
        grouped by article length (characters) so that little is padded."""
        questions, pad_id = train.examples, train.features.pad_token_id
        lengths = [len(q.article) for q in questions]
        for idx in shuffled_batches(lengths, batch_size, random.Random(seed + epoch), parallel):
            chosen = [questions[i] for i in idx]
            yield batch(self._encode(train, chosen), [q.label for q in chosen], pad_id, train.max_length)

    def loss_fn(self, model):
        from .losses import make_choice_loss_fn
        return make_choice_loss_fn(model)

    def predict(self, model, prepared, *, batch_size=64, use_jit=True, progress=False):
        """Per batch of questions in file order: the options' logits ``(B, 4)``; readable again
        (``predicting.Replay``), so one pass serves ``score`` and ``write_predictions``."""
        return predicting.Replay(self._batches(model, prepared, batch_size, use_jit, progress))

    def _batches(self, model, prepared, batch_size, use_jit, progress):
        forward, pad_id = predicting.forward_fn(model, use_jit), prepared.features.pad_token_id
        with predicting.progress_bar(len(prepared.examples), "question", progress) as bar:
            for chunk in predicting.chunks(prepared.examples, batch_size):
                encoded = self._encode(prepared, chunk)
                rows = [r for rs, _ in encoded for r in rs]
                types = [t for _, ts in encoded for t in ts]
                arrays = predicting.padded(rows, types, pad_id, prepared.max_length, 4 * batch_size, use_jit)
                B = len(arrays[0]) // 4
                logits = predicting.run(forward, [a.reshape(B, 4, -1) for a in arrays])[:len(chunk)]   # (B, 4)
                predicting.check_finite(logits, prepared.examples.path)
                yield logits
                bar.update(len(chunk))

    def score(self, prepared, outputs):
        """Accuracy (fraction) on all questions, then on middle and high where present."""
        right = accuracy(prepared.examples, np.concatenate(list(outputs)).argmax(-1))
        metrics = {"accuracy": right["all"] / 100}
        metrics.update({f"accuracy_{level}": right[level] / 100 for level in LEVELS if level in right})
        return {**metrics, "examples": len(prepared.examples)}

    def selection_score(self, metrics):
        return finite_or_worst(metrics.get("dev_accuracy"))
