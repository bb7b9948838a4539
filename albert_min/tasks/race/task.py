"""RACE: the official release's files -> one sequence per option -> letters and accuracy.

The files are ``reading``'s, the sequences ``features``' (as Google's ``run_race``), the score
``metric``'s and the letters file ``writing``'s. ``RaceTask`` puts these on the task interface
(``task_base.Task``) for train.py and evaluate.py.
"""

import random

import numpy as np

from .. import prediction_steps
from ..errors import DataError
from ..file_io import json_kind
from ..task_base import Prepared, Task, finite_or_worst, shuffled_batches
from .features import batch, encode_questions, question_with_option
from .metric import accuracy
from .reading import LETTERS, LEVELS, race_files, read_race
from .writing import write_predictions


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
        return encode_questions(prepared.features, questions, prepared.max_length, self.max_qa_length)

    def train_batches(self, train, epoch, batch_size, seed, parallel):
        """(input_ids, token_type_ids, attention_mask ``(B, 4, S)``, labels ``(B,)``); batches
        grouped by article length (characters) so that little is padded."""
        questions, pad_id = train.examples, train.features.pad_token_id
        lengths = [len(q.article) for q in questions]
        for idx in shuffled_batches(lengths, batch_size, random.Random(seed + epoch), parallel):
            chosen = [questions[i] for i in idx]
            yield batch(self._encode(train, chosen), [q.label for q in chosen], pad_id, train.max_length,
                        train.train_lengths)

    def loss_fn(self, model):
        from .loss import make_choice_loss_fn
        return make_choice_loss_fn(model)

    def predict(self, model, prepared, *, batch_size=64, use_jit=True, progress=False, cache_dir=None):
        """Per batch of questions in file order: the options' logits ``(B, 4)``; readable again
        (``prediction_steps.Replay``), so one pass serves ``score`` and ``write_predictions``."""
        return prediction_steps.Replay(self._batches(model, prepared, batch_size, use_jit, progress))

    def _batches(self, model, prepared, batch_size, use_jit, progress):
        forward, pad_id = prediction_steps.forward_fn(model, use_jit), prepared.features.pad_token_id
        with prediction_steps.progress_bar(len(prepared.examples), "question", progress) as bar:
            for chunk in prediction_steps.chunks(prepared.examples, batch_size):
                encoded = self._encode(prepared, chunk)
                rows = [r for rs, _ in encoded for r in rs]
                types = [t for _, ts in encoded for t in ts]
                arrays = prediction_steps.padded(rows, types, pad_id, prepared.max_length, 4 * batch_size, use_jit)
                B = len(arrays[0]) // 4
                logits = prediction_steps.run(forward, [a.reshape(B, 4, -1) for a in arrays])[:len(chunk)]   # (B, 4)
                prediction_steps.check_finite(logits, prepared.examples.path)
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
