"""Classify text in two lines.

    from albert_min import pipeline
    clf = pipeline("weights/sst2-small")
    clf(["a gorgeous film", "a mess"])
    # [{'label': 'LABEL_1', 'score': 0.98}, {'label': 'LABEL_0', 'score': 0.91}]
    clf("a gorgeous film")                          # one text -> one dict
    clf(("A man plays a guitar.", "A man plays."))  # a pair -> [CLS] a [SEP] b [SEP]

Everything comes from the model folder: the weights, the tokenizer
(``spiece.model``), the label names (``config.json``'s ``id2label``) and the
truncation length training used (``train_metrics.json``'s ``max_length``,
else 128, never past ``max_position_embeddings``). ``score`` is the
probability of the predicted label; a regression model (one output) returns
``{"score": value}`` instead.

This module imports MindSpore only when a pipeline is built, so that
``albert_min/__init__.py`` can bind ``pipeline`` eagerly (see there why).
"""

import os

from .config import read_json_object
from .errors import AlbertMinError



class PipelineError(AlbertMinError):
    """Input the pipeline cannot classify: the message names the item."""


# ------------------------------------------------------- the model folder's settings
def label_names(model_dir, num_labels):
    """``[name of label 0, ...]`` from config.json's ``id2label`` when it names every
    label 0..num_labels-1, else Hugging Face's defaults ``LABEL_0, LABEL_1, ...``."""
    id2label = read_json_object(os.path.join(model_dir, "config.json")).get("id2label")
    default = [f"LABEL_{i}" for i in range(num_labels)]
    if not isinstance(id2label, dict) or set(id2label) != {str(i) for i in range(num_labels)}:
        return default
    names = [id2label[str(i)] for i in range(num_labels)]
    return names if all(isinstance(n, str) and n for n in names) else default


def is_regression(model_dir, config):
    """One output, or ``problem_type: regression`` in config.json (STS-B style)."""
    problem_type = getattr(config, "problem_type", None)
    if problem_type is None:
        problem_type = read_json_object(os.path.join(model_dir, "config.json")).get("problem_type")
    return config.num_labels == 1 or problem_type == "regression"


# ------------------------------------------------------------------ the pipeline
class TextClassificationPipeline:
    """A model folder as a function: texts or (text, text_pair) tuples -> labels and scores.

    ``batch_size`` texts go through the model at once (sorted by length, so
    little padding); ``max_length`` overrides the folder's truncation length.
    """

    def __init__(self, model_dir, batch_size=64, max_length=None, use_jit=True):
        from .modeling import AlbertForSequenceClassification
        from tokenizer import AlbertTokenizer
        if not os.path.isdir(model_dir):
            raise FileNotFoundError(f"model folder not found: {model_dir}")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise PipelineError(f"batch_size must be a positive integer, got {batch_size!r}")
        from .checkpoint import tokenizer_file
        tokenizer_file(model_dir, PipelineError)    # before the model: a converted TF checkpoint has none
        self.model = AlbertForSequenceClassification.from_pretrained(model_dir)
        self.model.set_train(False)
        self.tokenizer = AlbertTokenizer.from_pretrained(model_dir)
        config = self.model.config
        from .checkpoint import training_max_length
        self.max_length = min(max_length or training_max_length(model_dir), config.max_position_embeddings)
        self.batch_size = batch_size
        self.use_jit = use_jit
        self.regression = is_regression(model_dir, config)
        if self.regression and config.num_labels != 1:
            raise PipelineError(f"{model_dir}: regression with {config.num_labels} outputs is not supported")
        self.labels = None if self.regression else label_names(model_dir, config.num_labels)

    def __call__(self, inputs):
        """A text or a (text, text_pair) tuple -> one dict; a list of them -> a list of dicts."""
        single = isinstance(inputs, (str, tuple))
        items = [inputs] if single else inputs
        if not isinstance(items, list):
            raise PipelineError(f"expected a text, a (text, text_pair) tuple or a list of them, "
                                f"got {type(inputs).__name__}")
        for i, item in enumerate(items):
            check_item(item, None if single else i)
        if not items:
            return []
        if self.regression or any(isinstance(item, tuple) for item in items):
            outputs = self._outputs(items)
        else:
            from .classify import predict
            outputs, _ = predict(self.model, self.tokenizer, items, self.batch_size, self.max_length,
                                 use_jit=self.use_jit, progress=False)
        results = [self._result(row) for row in outputs]
        return results[0] if single else results

    def _result(self, row):
        if self.regression:
            return {"score": float(row[0])}
        best = int(row.argmax())
        return {"label": self.labels[best], "score": float(row[best])}

    def _outputs(self, items):
        """Probabilities (classification) or raw values (regression), ``[N, num_labels]``.

        Pairs need token type ids, which ``classify.predict`` (single sentences)
        does not make, and regression needs the values before softmax.
        """
        import numpy as np
        import mindspore as ms
        from .classify import compiled
        from .data import eval_batches, pad_batch
        encodings = [self.tokenizer.encode(*item, max_length=self.max_length) if isinstance(item, tuple)
                     else self.tokenizer.encode(item, max_length=self.max_length) for item in items]
        forward = compiled(self.model, self.use_jit)
        out = np.zeros((len(items), self.model.config.num_labels), np.float32)
        for idx, rows in eval_batches([e["input_ids"] for e in encodings], self.batch_size):
            input_ids, token_type_ids, attention_mask = pad_batch(rows, self.tokenizer.pad_token_id)
            for row, i in enumerate(idx):
                types = encodings[i]["token_type_ids"]
                token_type_ids[row, :len(types)] = types
            logits = forward(ms.Tensor(input_ids), ms.Tensor(token_type_ids), ms.Tensor(attention_mask)).asnumpy()
            if not self.regression:
                e = np.exp(logits - logits.max(-1, keepdims=True))
                logits = e / e.sum(-1, keepdims=True)
            out[idx] = logits
        return out


def check_item(item, index):
    """A non-empty text, or a tuple of two; anything else is an error naming the item."""
    where = "input" if index is None else f"input {index}"
    if isinstance(item, tuple):
        if len(item) != 2:
            raise PipelineError(f"{where}: a sentence pair is a tuple of 2 texts, got {len(item)} items")
        for part, name in zip(item, ("text", "text_pair")):
            check_text(part, f"{where} ({name})")
    else:
        check_text(item, where)


def check_text(text, where):
    if not isinstance(text, str):
        raise PipelineError(f"{where}: expected a string or a (text, text_pair) tuple, got {type(text).__name__}")
    if not text.strip():
        raise PipelineError(f"{where}: empty text")


def pipeline(model_dir, batch_size=64, max_length=None, use_jit=True, **options):
    """The model in ``model_dir`` (a folder with config.json, model.ckpt, spiece.model) as a
    function: a classifier (see :class:`TextClassificationPipeline`), or a question-answering
    or token-classification model (``albert_min.task_pipelines``; ``options`` for QA windows)."""
    from .task_pipelines import task_pipeline
    found = task_pipeline(model_dir, batch_size, max_length, use_jit, **options)
    return found or TextClassificationPipeline(model_dir, batch_size, max_length, use_jit)
