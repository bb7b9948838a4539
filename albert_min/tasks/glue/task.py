"""GLUE classification and regression (and albert_min's generic sentence<TAB>label TSV) as a
task: one sentence or a pair, cross-entropy (MSE on one score for STS-B), GLUE's metric.
The file layouts and label orders themselves are ``reading`` (GLUE's table), the metrics ``metric``.
"""

import random

import numpy as np

from ...common.safe_output import FileKind, starts_with
from ..batching import encode_examples, pad_for_training, padding_limit
from ..errors import DataError
from ..file_io import PREDICTIONS, write_text
from .. import prediction_steps
from ..task_base import Prepared, Task, finite_or_worst, shuffled_batches
from ..text_files import HeaderError, check_labels
from . import metric, reading


PREDICTIONS_HEADER = "index\tprediction\n"   # GLUE's submission layout: index<TAB>prediction rows


class GlueTask(Task):
    """A task of the GLUE table in ``reading.TASKS`` (``spec``: its layout, labels and metrics)."""
    model_class = "AlbertForSequenceClassification"
    head_prefixes = ("classifier.",)
    # it starts with the header, and its record beside it holds its sha256
    prediction_kind = FileKind(PREDICTIONS, starts_with(PREDICTIONS_HEADER.encode()), recorded=True)

    def __init__(self, name: str):
        self.spec = reading.get_task(name)
        self.name = name

    def read(self, path):
        try:
            return reading.read_examples(path, self.spec)
        except HeaderError as err:
            raise DataError(self._layout_hint(path, err.header)) from None

    def _layout_hint(self, path, header):
        """A header that lacks the task's columns: say what the file looks like instead (its
        ``header`` as the reader read it)."""
        guessed = reading.infer_task(path)
        looks = f"; its folder suggests --task {guessed}" if guessed not in ("sentence_label", self.name) else ""
        comma_separated = len(header) == 1 and "," in header[0]
        looks += "; the file must be tab-separated (a TSV), and this one has commas instead" if comma_separated else ""
        return (f"{path}:1: does not match task {self.name}'s layout (columns "
                f"{', '.join(c for c in (*self.spec.text_columns, self.spec.label_column) if c)}); "
                f"its header is {header}{looks}")

    def tokenizer_text(self, examples):
        return examples.texts + (examples.text_pairs or [])

    def configure_model(self, config, examples):
        if examples.labels is None:
            raise DataError(f"{examples.path}: has no {self.spec.label_column!r} column; training needs labels")
        config.num_labels = self.spec.num_labels or max(examples.labels) + 1
        config.problem_type = "regression" if self.spec.is_regression else None
        config.id2label = dict(enumerate(self.spec.label_names)) if self.spec.label_names else None

    def check_model(self, config, examples, where):
        spec = self.spec
        if spec.is_regression != config.is_regression:
            kind = ("a regression model (one score)" if config.is_regression
                    else f"a {config.num_labels}-label classifier")
            need = "a regression model (num_labels 1)" if spec.is_regression else "a classifier"
            raise DataError(f"{where} is {kind}; task {spec.name} ({examples.path}) needs {need}")
        if spec.num_labels is not None and not spec.is_regression and config.num_labels != spec.num_labels:
            raise DataError(f"{where} has {config.num_labels} labels; task {spec.name} has {spec.num_labels} "
                            f"({', '.join(spec.label_names)})")
        if examples.labels is not None and not spec.is_regression:
            check_labels(examples.labels, config.num_labels, examples.path)

    def training_sets(self, train_examples, dev_examples, tokenizer, max_length, *, seed, batch_size):
        if dev_examples is not None and dev_examples.labels is None:
            raise DataError(f"{dev_examples.path}: has no {self.spec.label_column!r} column; a dev set needs labels")
        return super().training_sets(train_examples, dev_examples, tokenizer, max_length, seed=seed,
                                     batch_size=batch_size)

    def prepare(self, examples, tokenizer, max_length):
        ids, types = encode_examples(tokenizer, examples.texts, examples.text_pairs, max_length)
        return Prepared(examples, {"ids": ids, "types": types, "tokenizer": tokenizer}, max_length)

    def train_batches(self, train, epoch, batch_size, seed, parallel):
        ids, types = train.features["ids"], train.features["types"]
        pad_id = train.features["tokenizer"].pad_token_id
        labels = train.examples.labels
        dtype = np.float32 if self.spec.is_regression else np.int32
        lengths = [len(r) for r in ids]
        limit = padding_limit(lengths, train.max_length)   # the data's longest row, if shorter than --max-length
        for idx in shuffled_batches(lengths, batch_size, random.Random(seed + epoch), parallel):
            batch = pad_for_training([ids[i] for i in idx], [types[i] for i in idx], pad_id, limit,
                                     train.train_lengths)
            yield (*batch, np.array([labels[i] for i in idx], dtype))

    def loss_fn(self, model):
        from mindspore import ops
        if self.spec.is_regression:
            def loss(input_ids, token_type_ids, attention_mask, y):
                scores = model(input_ids, token_type_ids, attention_mask)[:, 0]   # (B,)
                return ((scores - y) ** 2).mean()
        else:
            def loss(input_ids, token_type_ids, attention_mask, y):
                return ops.cross_entropy(model(input_ids, token_type_ids, attention_mask), y)
        return loss

    def predict(self, model, prepared, *, batch_size=64, use_jit=True, progress=False, cache_dir=None):
        """One item: the logits ``(N, num_labels)`` of every example, in file order, columns in the
        task's label order (a model whose ``id2label`` names the labels in another order is
        reordered, ``reading.model_label_order``); readable again (``prediction_steps.Replay``), so
        that one pass serves ``score`` and ``write_predictions``. One dynamic-shape graph
        (``prediction_engine.predict_encoded_logits``), kept in ``cache_dir`` for the next process."""
        return prediction_steps.Replay(self._logits(model, prepared, batch_size, use_jit, progress, cache_dir))

    def _logits(self, model, prepared, batch_size, use_jit, progress, cache_dir):
        from ..prediction_engine import predict_encoded_logits
        features = prepared.features
        pad_id = features["tokenizer"].pad_token_id
        logits, _ = predict_encoded_logits(model, features["ids"], features["types"], pad_id, batch_size,
                                           use_jit=use_jit, progress=progress, cache_dir=cache_dir)
        prediction_steps.check_finite(logits, prepared.examples.path)
        order = reading.model_label_order(self.spec, model.config.id2label)
        if order is not None:   # the model's output columns -> the task's label ids
            logits = logits[:, [order.index(j) for j in range(len(order))]]
        yield logits

    def score(self, prepared, outputs):
        return {k: v for k, v in self.report(prepared, outputs).items() if k != "confusion"}

    def report(self, prepared, outputs):
        """``score``'s metrics plus, for a binary task, the confusion matrix (evaluate.py's table)."""
        logits = np.concatenate(list(outputs))
        return metric.evaluation_metrics(self.spec, prepared.examples.labels, logits)

    def selection_score(self, metrics):
        return finite_or_worst(metrics.get("dev_" + self.spec.metrics[0]))

    def write_predictions(self, path, prepared, outputs):
        logits = np.concatenate(list(outputs))
        if self.spec.is_regression:
            shown = [f"{x:.3f}" for x in logits[:, 0]]
        else:
            names = reading.label_strings(self.spec, logits.shape[1])
            shown = [names[i] for i in logits.argmax(-1)]
        write_text(path, PREDICTIONS_HEADER + "".join(f"{i}\t{p}\n" for i, p in zip(prepared.examples.index, shown)),
                   record=True)
