"""The GLUE tasks: which file layout, which labels, which metric.

Each task reads its files in the layout of the official GLUE release (as
``download_glue_data.py`` writes it) and is scored with the metric GLUE
reports for it:

| task  | text columns               | labels                                  | metric              |
| ----- | -------------------------- | --------------------------------------- | ------------------- |
| cola  | sentence (4th, no header)  | 0 / 1                                   | Matthews corr.      |
| sst2  | sentence                   | 0 / 1                                   | accuracy            |
| mrpc  | #1 String, #2 String       | 0 / 1 (column Quality)                  | F1, accuracy        |
| stsb  | sentence1, sentence2       | similarity score 0-5 (regression)       | Pearson, Spearman   |
| qqp   | question1, question2       | 0 / 1 (column is_duplicate)             | F1, accuracy        |
| mnli  | sentence1, sentence2       | contradiction / entailment / neutral    | accuracy            |
| qnli  | question, sentence         | entailment / not_entailment             | accuracy            |
| rte   | sentence1, sentence2       | entailment / not_entailment             | accuracy            |
| wnli  | sentence1, sentence2       | 0 / 1                                   | accuracy            |
| sentence_label | sentence          | integers 0..K-1 (albert_min's own)      | accuracy            |

Label ids follow the order of the GLUE processors of Google's
``run_classifier.py`` and Hugging Face (``label_names`` below). Columns are
found by their header name, so MNLI's train file (12 columns) and dev files
(16 columns, ``dev_matched.tsv`` / ``dev_mismatched.tsv``) and the test files
(no label column) all read with one reader. Fields are tab-separated and
never quoted (MRPC and STS-B sentences contain bare double quotes).

Layer: ``albert_min.tasks``, above ``checkpoints`` (the layers: ``albert_min/__init__.py``).
"""

import dataclasses
import math
import os
from typing import Optional

from ..errors import DataError
from ..text_files import HeaderError, TextColumn, read_tsv, tsv_rows


@dataclasses.dataclass(frozen=True)
class Task:
    name: str
    folder: str                          # the GLUE release's folder name, e.g. "STS-B"
    text_columns: tuple                  # header names of the one or two text columns
    label_column: Optional[str]          # header name of the label; None for cola (positional)
    label_names: Optional[tuple]         # label strings in id order; None: stsb (regression), sentence_label
    metrics: tuple                       # GLUE's metrics; the first one picks the best model in train.py
    index_column: Optional[str] = "index"
    # Whether label 1 is a "positive" class whose precision, recall and F1 mean something (sst2:
    # positive sentiment, cola: acceptable, mrpc/qqp: paraphrase). Not for the inference tasks:
    # there label 1 is not_entailment (wnli: entailment), and GLUE reports accuracy alone.
    positive_class: bool = True

    @property
    def is_pair(self) -> bool:
        return len(self.text_columns) == 2

    @property
    def is_regression(self) -> bool:
        return self.name == "stsb"

    @property
    def num_labels(self) -> Optional[int]:
        """1 for regression, the label count, or None when the data decides (sentence_label)."""
        return 1 if self.is_regression else (len(self.label_names) if self.label_names else None)


_BINARY = ("0", "1")
_NLI2 = ("entailment", "not_entailment")
TASKS = {t.name: t for t in (
    Task("cola", "CoLA", ("sentence",), None, _BINARY, ("matthews",)),
    Task("sst2", "SST-2", ("sentence",), "label", _BINARY, ("accuracy",)),
    Task("mrpc", "MRPC", ("#1 String", "#2 String"), "Quality", _BINARY, ("f1", "accuracy"), index_column=None),
    Task("stsb", "STS-B", ("sentence1", "sentence2"), "score", None, ("pearson", "spearman")),
    Task("qqp", "QQP", ("question1", "question2"), "is_duplicate", _BINARY, ("f1", "accuracy"), index_column="id"),
    Task("mnli", "MNLI", ("sentence1", "sentence2"), "gold_label", ("contradiction", "entailment", "neutral"),
         ("accuracy",), positive_class=False),
    Task("qnli", "QNLI", ("question", "sentence"), "label", _NLI2, ("accuracy",), positive_class=False),
    Task("rte", "RTE", ("sentence1", "sentence2"), "label", _NLI2, ("accuracy",), positive_class=False),
    Task("wnli", "WNLI", ("sentence1", "sentence2"), "label", _BINARY, ("accuracy",), positive_class=False),
    # albert_min's generic single-sentence TSV: header sentence<TAB>label, integer labels (once named cls).
    Task("sentence_label", "", ("sentence",), "label", None, ("accuracy",), index_column=None),
)}
TASK_NAMES = tuple(TASKS)

# Folder spellings seen in the wild ("SST-2", "sst2", "STS-B", "stsb", "MNLI", ...).
_FOLDERS = {t.folder.lower().replace("-", ""): name for name, t in TASKS.items() if t.folder}


def get_task(name: str) -> Task:
    if name not in TASKS:
        raise DataError(f"unknown task {name!r}; choose from {', '.join(TASK_NAMES)}")
    return TASKS[name]


def infer_task(path: str) -> str:
    """The task a data file belongs to, from its folder name (``glue/RTE/dev.tsv`` -> rte,
    ``sst2/dev.tsv`` -> sst2); ``sentence_label`` (generic sentence<TAB>label) for any other folder."""
    folder = os.path.basename(os.path.dirname(os.path.abspath(path)))
    return _FOLDERS.get(folder.lower().replace("-", "").replace("_", ""), "sentence_label")


@dataclasses.dataclass
class Examples:
    """One data file of a task, row by row."""
    task: Task
    path: str
    texts: list                          # first (or only) text of each row; a TextColumn (knows each path:line)
    text_pairs: Optional[list]           # second text, for pair tasks
    labels: Optional[list]               # label ids (int) or scores (float); None for a test file
    index: list                          # the file's index column, else the row number from 0

    def __len__(self):
        return len(self.texts)


# ---------------------------------------------------------------------- readers
def read_examples(path: str, task: Task) -> Examples:
    """Read ``path`` in ``task``'s layout; every malformed row is a DataError naming ``path:line``.
    Every task reads its file through ``text_files.tsv_rows`` (UTF-8, a byte-order mark skipped, lines
    ending at LF or CR LF, no other CR and no NUL)."""
    if task.name == "sentence_label":
        sentences, labels = read_tsv(path)
        return Examples(task, path, sentences, None, labels, [str(i) for i in range(len(sentences))])
    if task.name == "cola":
        header, rows = tsv_rows(path, lambda first: _cola_layout(path, first))
        text_at, label_at, index_at = ([1], None, 0) if header == COLA_TEST_HEADER else ([3], 1, None)
    else:
        header, rows = tsv_rows(path)
        missing = [c for c in task.text_columns if c not in header]
        if missing:
            raise HeaderError(f"{path}:1: header {header} has no {missing[0]!r} column; is this a "
                              f"{task.folder} file? (pass --task to choose the layout)", header)
        text_at = [header.index(c) for c in task.text_columns]
        label_at = header.index(task.label_column) if task.label_column in header else None
        index_at = header.index(task.index_column) if task.index_column in header else None
    texts, pairs, labels, index, sources = [], [], [], [], []
    for line_no, fields in rows:
        row = [fields[i].strip() for i in text_at]
        if not any(row):
            raise DataError(f"{path}:{line_no}: empty text")
        texts.append(row[0])
        sources.append(f"{path}:{line_no}")
        if task.is_pair:
            pairs.append(row[1])
        if label_at is not None:
            labels.append(_parse_label(task, fields[label_at].strip(), f"{path}:{line_no}"))
        index.append(fields[index_at].strip() if index_at is not None else str(len(index)))
    if not texts:
        raise DataError(f"{path}: no examples")
    return Examples(task, path, TextColumn(texts, sources), pairs if task.is_pair else None,
                    labels if label_at is not None else None, index)


COLA_TEST_HEADER = ["index", "sentence"]


def _cola_layout(path, first):
    """CoLA's train/dev files have no header: source, label, original mark, sentence.
    Its test file has the header ``index<TAB>sentence``. From the first line's fields:
    (column names, whether that line is a row), as ``text_files.tsv_rows`` asks."""
    if first == COLA_TEST_HEADER:
        return COLA_TEST_HEADER, False
    if first[1:2] == ["label"]:
        line = "\t".join(first)
        raise DataError(f"{path}:1: CoLA files have no header row (source, label, mark, sentence); "
                        f"this one starts with {line!r}")
    return ["source", "label", "original mark", "sentence"], True


def _parse_label(task, value, where):
    if task.is_regression:
        try:
            score = float(value)
        except ValueError:
            score = math.nan
        if not math.isfinite(score):
            raise DataError(f"{where}: score {value!r} is not a finite number")
        return score
    if value not in task.label_names:
        raise DataError(f"{where}: label {value!r} is not one of {', '.join(task.label_names)}")
    return task.label_names.index(value)


def label_strings(task: Task, num_labels: int) -> list:
    """The names of label ids 0..num_labels-1 as the data files (and GLUE submissions) write them."""
    return list(task.label_names) if task.label_names else [str(i) for i in range(num_labels)]


def model_label_order(task: Task, id2label: Optional[dict]) -> Optional[list]:
    """Task label id for each of the model's output ids, when the model's ``id2label``
    names the task's labels in another order (e.g. an MNLI model fine-tuned with
    Hugging Face ``datasets``: entailment, neutral, contradiction). None: same order."""
    if not task.label_names or not id2label:
        return None
    names = [str(id2label[i]) for i in range(len(id2label))]
    if sorted(names) != sorted(task.label_names) or names == list(task.label_names):
        return None
    return [task.label_names.index(n) for n in names]
