"""Classify text in two lines.

    from albert_min import pipeline
    clf = pipeline("weights/sst2-small")
    clf(["a gorgeous film", "a mess"])
    # [{'label': 'LABEL_1', 'score': 0.98}, {'label': 'LABEL_0', 'score': 0.91}]
    clf("a gorgeous film")                          # one text -> one dict
    clf(("A man plays a guitar.", "A man plays."))  # a pair -> [CLS] a [SEP] b [SEP]

Everything comes from the model folder: the weights, the tokenizer
(``spiece.model``), the label names and problem type (``config.json``, as
``AlbertConfig`` reads them: ``id2label``, else ``LABEL_0, LABEL_1, ...``) and the
truncation length training used (``train_metrics.json``'s ``max_length``,
else 128, never past ``max_position_embeddings``). Prediction is
``prediction_engine.predict_logits``, evaluate.py's path; ``score`` is the
probability of the predicted label; a regression model (one output) returns
``{"score": value}`` instead.

This module imports MindSpore only when a pipeline is built, so that
``albert_min/__init__.py`` can bind ``pipeline`` eagerly (see there why).

Layer: ``albert_min.predict``, above ``tasks`` (the layers: ``albert_min/__init__.py``).
"""

import os

from ..common.errors import AlbertMinError


class PipelineError(AlbertMinError):
    """Input the pipeline cannot classify: the message names the item."""


def label_names(model_dir, num_labels):
    """``[name of label 0, ...]`` of the model in ``model_dir`` (``AlbertConfig.label_names``),
    for callers that have the folder but not its config (export.py)."""
    from ..model.config import load_config
    names = load_config(model_dir).label_names
    return names if len(names) == num_labels else [f"LABEL_{i}" for i in range(num_labels)]


# ------------------------------------------------------------------ the pipeline
class TextClassificationPipeline:
    """A model folder as a function: texts or (text, text_pair) tuples -> labels and scores.

    ``batch_size`` texts go through the model at once (sorted by length, so
    little padding); ``max_length`` overrides the folder's truncation length.
    """

    def __init__(self, model_dir, batch_size=64, max_length=None, use_jit=True):
        from ..model.heads import AlbertForSequenceClassification
        from tokenizer import AlbertTokenizer
        if not os.path.isdir(model_dir):
            raise FileNotFoundError(f"model folder not found: {model_dir}")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise PipelineError(f"batch_size must be a positive integer, got {batch_size!r}")
        from ..model.folder import tokenizer_file
        tokenizer_file(model_dir, PipelineError)    # before the model: a converted TF checkpoint has none
        from ..model import kernels
        self.model = kernels.accelerate(AlbertForSequenceClassification.from_pretrained(model_dir))   # on CPU
        self.model.set_train(False)
        self.tokenizer = AlbertTokenizer.from_pretrained(model_dir)
        config = self.model.config
        from ..model.folder import training_max_length
        self.max_length = min(max_length or training_max_length(model_dir), config.max_position_embeddings)
        self.batch_size = batch_size
        self.use_jit = use_jit
        self.regression = config.is_regression
        if self.regression and config.num_labels != 1:
            raise PipelineError(f"{model_dir}: regression with {config.num_labels} outputs is not supported")
        self.labels = None if self.regression else config.label_names

    def __call__(self, inputs):
        """A text or a (text, text_pair) tuple -> one dict; a list of them -> a list of dicts."""
        single = isinstance(inputs, (str, tuple))
        items = [inputs] if single else inputs
        if not isinstance(items, list):
            raise PipelineError(f"expected a text, a (text, text_pair) tuple or a list of them, "
                                f"got {type(inputs).__name__}")
        for i, item in enumerate(items):
            check_item(item, None if single else i, self.tokenizer)
        if not items:
            return []
        from ..tasks.prediction_engine import predict_logits, softmax
        from ..tasks.errors import DataError
        from ..tasks.text_files import TextColumn
        # Each text names its item, so text that only the tokenizer finds empty
        # ("\u200b", control characters, a lone accent) or invalid is refused by name.
        texts = TextColumn([item[0] if isinstance(item, tuple) else item for item in items],
                           ["input"] if single else [f"input {i}" for i in range(len(items))])
        pairs = [item[1] if isinstance(item, tuple) else None for item in items]
        try:
            logits, _ = predict_logits(self.model, self.tokenizer, texts, pairs, self.batch_size, self.max_length,
                                       use_jit=self.use_jit, progress=False)
        except DataError as err:
            raise PipelineError(str(err)) from None
        outputs = logits if self.regression else softmax(logits)
        results = [self._result(row) for row in outputs]
        return results[0] if single else results

    def _result(self, row):
        if self.regression:
            return {"score": float(row[0])}
        best = int(row.argmax())
        return {"label": self.labels[best], "score": float(row[best])}


def check_item(item, index, tokenizer):
    """A non-empty text, or a tuple of two; anything else is an error naming the item.

    Either text of a pair must keep a piece once normalised, as it must not be "";
    a single text is checked where it is encoded (``batching.encode_examples``).
    """
    where = "input" if index is None else f"input {index}"
    if isinstance(item, tuple):
        if len(item) != 2:
            raise PipelineError(f"{where}: a sentence pair is a tuple of 2 texts, got {len(item)} items")
        for part, name in zip(item, ("text", "text_pair")):
            check_pipeline_text(part, f"{where} ({name})")
            try:
                pieces = tokenizer.tokenize(part)
            except AlbertMinError as err:   # the tokenizer's TokenizerError: a lone surrogate
                raise PipelineError(f"{where} ({name}): {err}") from None
            if not pieces:
                raise PipelineError(f"{where} ({name}): empty text once normalised ({part[:40]!r}: only white "
                                    "space, control, zero-width or combining characters)")
    else:
        check_pipeline_text(item, where)


def check_pipeline_text(text, where):
    """A non-empty string of valid Unicode, else a PipelineError naming ``where`` (the item)."""
    from tokenizer.albert_tokenizer import TokenizerError, check_unicode
    if not isinstance(text, str):
        raise PipelineError(f"{where}: expected a string or a (text, text_pair) tuple, got {type(text).__name__}")
    if not text.strip():
        raise PipelineError(f"{where}: empty text")
    try:
        check_unicode(text)    # a lone surrogate: the tokenizer's TokenizerError, as the item's PipelineError
    except TokenizerError as err:
        raise PipelineError(f"{where}: {err}") from None
