"""The task interface: what a task family gives the Trainer, train.py and evaluate.py.

A task family is one folder under ``albert_min/tasks/`` whose ``task.py`` holds a ``Task`` subclass, and
one line in the registry (``albert_min/tasks/__init__.py``). The Trainer knows nothing
else about a task: what a batch holds, how a loss or a score is computed, and how a data
file is laid out all live here.

Data flows through the task in four forms, each made by the method named:

    path --read--> examples --prepare--> Prepared --train_batches--> batches (tuples of numpy arrays)
                                             \\--predict--> outputs --score--> metrics / --write_predictions--> file

- **examples** (``read(path)``): the file's rows as the task's own type (a ``glue.reading.Examples``,
  a list of documents, SQuAD articles...). ``len(examples)`` is the number of rows. Every
  malformed row is a ``DataError`` naming ``path:line``.
- **Prepared** (``prepare(examples, tokenizer, max_length)``): the examples turned into
  model inputs at one truncation length (``Prepared.features`` is opaque outside the task).
  A task whose inputs are cut into several windows per example (question answering over long
  contexts) keeps the window -> example map in its features.
- **batches** (``train_batches``): tuples of numpy arrays, the positional arguments of the
  function ``loss_fn(model)`` returns. ``split_batch`` cuts one into a share of its rows (a
  data-parallel worker's shard, a gradient-accumulation micro-batch).
- **outputs** (``predict``): an iterator over per-batch predictions in any form the task
  likes (logits with their example rows; start/end logits per window), so that
  ``score`` and ``write_predictions`` can postprocess them as they stream in (e.g. collect
  the best answer span per question) without holding every window's logits.

The Trainer calls ``steps_per_epoch``, ``train_batches``, ``split_batch``, ``loss_fn``,
``evaluate`` and ``selection_score``; train.py (albert_min.training.run) also ``read``,
``files_read``, ``training_notes``, ``tokenizer_text``, ``configure_model``, ``check_model``
and ``training_sets``; evaluate.py ``read`` and ``check_model``, then ``prepare``, ``predict``,
``report`` and ``write_predictions``: the evaluation path of every family (GLUE's table shows
``GlueTask.report``'s confusion matrix).
"""

import dataclasses
import math
from typing import Iterator, Optional

import numpy as np

from .batching import MAX_TRAIN_LENGTHS
from .errors import DataError


@dataclasses.dataclass
class Prepared:
    """A data file turned into what the model reads (``Task.prepare``'s result)."""
    examples: object          # what Task.read returned: the rows, with their labels if the file has them
    features: object          # the task's model inputs for them (opaque outside the task)
    max_length: int           # the truncation length the features were made with (recorded in the model folder)
    train_lengths: int = MAX_TRAIN_LENGTHS   # the most padded lengths its training batches use (the Trainer
    #                                          sets it from the run's steps: batching.train_lengths_for)

    def __len__(self):
        return len(self.examples)


class Task:
    """One task family. Subclasses set the class attributes and implement the methods that
    raise NotImplementedError; the rest have defaults that fit most tasks.

    Class attributes:
        name: the registry name (``--task NAME``).
        model_class: the ``albert_min.model.heads`` class the task trains (its head).
        head_prefixes: parameter-name prefixes of that head; a model folder given as the
            starting point (``--init``) may lack them, and they then start from random values.
        inputs: which of train.py's data flags the task reads: ("train", "dev") or ("text",).
        pretraining: True for objectives trained from random weights (train.py then turns on
            Adam's bias correction in the schedule, see ``training.step.with_adam_bias_correction``).
        prediction_kind: the ``safe_output.FileKind`` of what ``write_predictions`` writes: how
            ``evaluate.py --force`` recognises a file it wrote (None: the task writes none).
    """
    name = ""
    model_class = "AlbertModel"
    head_prefixes = ()
    inputs = ("train", "dev")
    pretraining = False
    prediction_kind = None

    def options(self) -> dict:
        """The task's own settings (``get_task``'s keyword arguments) that a model folder records
        beside its task and max_length (training_settings.json), for those that evaluation must
        repeat (SQuAD's windows); {} by default."""
        return {}

    # ------------------------------------------------------------------ files
    def read(self, path: str):
        """The examples of the data file ``path``; DataError naming ``path:line`` on a bad row,
        FileNotFoundError if it is missing."""
        raise NotImplementedError

    def files_read(self, path: str) -> list:
        """The files ``read(path)`` reads (a resume checks each is unchanged): ``[path]`` by default;
        every file of a folder, or the whole file of a part of it."""
        return [path]

    def training_notes(self, examples) -> list:
        """Lines train.py prints about a training file before it trains on it (the questions a
        task leaves out, and why); [] by default."""
        return []

    def tokenizer_text(self, examples) -> list:
        """The sentences a new SentencePiece model is trained on (the training file's text)."""
        raise NotImplementedError

    def write_predictions(self, path: str, prepared: Prepared, outputs) -> None:
        """Write ``predict``'s outputs to ``path`` in the task's official submission layout
        (e.g. GLUE's index<TAB>prediction, SQuAD's predictions.json). The caller has checked
        that ``path`` may be written; writing should be atomic (temporary file, then rename)."""
        raise NotImplementedError

    def prediction_files(self, path: str) -> dict:
        """``{file: FileKind}``: every file ``write_predictions(path, ...)`` writes (``path``, and
        SQuAD v2.0's null_odds.json beside it), each with how ``--force`` recognises one
        albert_min wrote (``safe_output.check_file_target``)."""
        return {path: self.prediction_kind}

    # ---------------------------------------------------------------- the model
    def configure_model(self, config, examples) -> None:
        """Set what the task decides in a model config (``AlbertConfig``) before training: the
        number of labels, their names, the problem type. ``examples``: the training file's."""

    def check_model(self, config, examples, where: str) -> None:
        """Raise DataError (naming ``where``, the model folder) unless a model of ``config`` can do
        the task on ``examples`` (e.g. a regression model for STS-B, the task's label count)."""

    # ----------------------------------------------------------------- features
    def prepare(self, examples, tokenizer, max_length: int) -> Prepared:
        """Token ids (and whatever else the model reads) of every example, truncated to
        ``max_length`` pieces including the special ones."""
        raise NotImplementedError

    def training_sets(self, train_examples, dev_examples, tokenizer, max_length: int, *, seed: int,
                      batch_size: int):
        """(train Prepared, dev Prepared or None) for the Trainer. The default prepares each file;
        pre-training overrides it to hold out part of its one text file."""
        dev = self.prepare(dev_examples, tokenizer, max_length) if dev_examples is not None else None
        return self.prepare(train_examples, tokenizer, max_length), dev

    # --------------------------------------------------------------- training
    def steps_per_epoch(self, train: Prepared, batch_size: int, seed: int, parallel) -> int:
        """Optimizer steps in one epoch of ``train_batches`` (``parallel``: albert_min.common.parallel)."""
        return parallel.steps(len(train), batch_size)

    def train_batches(self, train: Prepared, epoch: int, batch_size: int, seed: int, parallel) -> Iterator[tuple]:
        """One epoch of shuffled batches of ``batch_size`` examples (the global batch), each cut
        to this worker's rows (``parallel.shard``); the same ``(seed, epoch)`` gives the same batches."""
        raise NotImplementedError

    def split_batch(self, batch: tuple, rows: slice) -> tuple:
        """The rows ``rows`` of ``batch``. The default slices every array on its first axis; a
        task whose arrays are not all per-row (flat MLM positions) overrides it."""
        return tuple(array[rows] for array in batch)

    def loss_fn(self, model):
        """A function ``loss(*batch) -> scalar Tensor``, the mean over the batch's rows (so that
        micro-batches weighted by their rows add up to the batch's loss)."""
        raise NotImplementedError

    # -------------------------------------------------------------- evaluation
    def predict(self, model, prepared: Prepared, *, batch_size: int = 64, use_jit: bool = True,
                progress: bool = False, cache_dir: Optional[str] = None) -> Iterator:
        """Eval-mode outputs for ``prepared``, batch by batch (see the module docstring).
        ``cache_dir``: where a task whose forward is one dynamic-shape graph (GLUE's) keeps it
        for the next process (``prediction_engine.compile_cache``); the others compile per shape
        and ignore it."""
        raise NotImplementedError

    def score(self, prepared: Prepared, outputs) -> dict:
        """The task's official metrics ({name: float}, fractions) from ``predict``'s outputs,
        the official one first, plus ``examples``."""
        raise NotImplementedError

    def report(self, prepared: Prepared, outputs) -> dict:
        """What evaluate.py prints: ``score``'s metrics by default (GLUE adds its confusion matrix)."""
        return self.score(prepared, outputs)

    def evaluate(self, model, dev: Prepared, *, batch_size: int = 64, use_jit: bool = True,
                 progress: bool = False, parallel=None) -> dict:
        """Metrics on the dev set as the Trainer logs them (keys prefixed, e.g. ``dev_accuracy``)."""
        outputs = self.predict(model, dev, batch_size=batch_size, use_jit=use_jit, progress=progress)
        return {f"dev_{k}": v for k, v in self.score(dev, outputs).items()}

    def selection_score(self, metrics: dict) -> float:
        """The number the Trainer keeps the best model by, from ``evaluate``'s metrics; an
        undefined one (NaN) ranks as the worst."""
        raise NotImplementedError


def rows_of(batch: tuple) -> int:
    """Examples in a batch: the first array's first dimension."""
    return int(np.shape(batch[0])[0])


def finite_or_worst(score: Optional[float], worst: float = -1.0) -> float:
    return score if score is not None and math.isfinite(score) else worst


def shuffled_batches(lengths, batch_size: int, rng, parallel):
    """Index arrays of one epoch's length-bucketed batches (``data.train_batch_indices``), each
    cut to this worker's share; batches a worker has no rows of are skipped."""
    from .batching import train_batch_indices
    for idx in train_batch_indices(lengths, batch_size, rng):
        rows = parallel.shard(len(idx))
        if rows is not None:
            yield np.asarray(idx)[rows]


__all__ = ["DataError", "Prepared", "Task", "rows_of", "finite_or_worst", "shuffled_batches"]
