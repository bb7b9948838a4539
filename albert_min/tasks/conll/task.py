"""CoNLL-2003 NER as a task: the shared task's column files (``reading``) -> word-level features
(``features``) -> word tags, scored as conlleval scores them (``metric``), written in its
columns (``writing``).

``ConllTask`` puts these on the task interface (``task_base.Task``) for train.py and evaluate.py.
"""

import random

from .. import prediction_steps
from ..batching import padding_limit
from ..errors import DataError
from ..task_base import Prepared, Task, finite_or_worst, shuffled_batches
from .features import batch, encode_sentences, word_tags
from .metric import evaluate
from .reading import check_tags, label_names_of, read_conll
from .writing import COLUMNS_KIND, write_columns


# ---------------------------------------------------------------- the task
class ConllFile(list):
    """``ConllTask.read``'s examples: a file's sentences, with its path for messages."""

    def __init__(self, path, sentences):
        super().__init__(sentences)
        self.path = path


class ConllTask(Task):
    """CoNLL-2003 NER through AlbertForTokenClassification, scored as conlleval scores.

    The tag names are the model's: ``configure_model`` writes the training file's tags ("O"
    first, the rest sorted) into the config's ``id2label``; ``check_model`` takes them from a
    model's ``id2label`` (a converted checkpoint's config.json) and checks every tag of the
    file is one of them. ``prepare`` and ``predict`` use the names the last of these two set.
    """
    name = "conll"
    model_class = "AlbertForTokenClassification"
    head_prefixes = ("classifier.",)
    default_max_length = 128
    prediction_kind = COLUMNS_KIND

    def __init__(self, name="conll"):
        self.name = name
        self.label_names = None      # tag of each output column, from configure_model / check_model

    def read(self, path):
        return ConllFile(path, read_conll(path))

    def tokenizer_text(self, sentences):
        return [" ".join(s.words) for s in sentences]

    def write_predictions(self, path, prepared, outputs):
        """conlleval's input: ``word gold predicted`` lines, a blank line after each sentence."""
        predicted = [tags for batch_tags in outputs for tags in batch_tags]
        write_columns(path, ((s.words, s.tags, p) for s, p in zip(prepared.examples, predicted, strict=True)))

    # ---------------------------------------------------------------- the model
    def configure_model(self, config, sentences):
        self.label_names = label_names_of(sentences)
        config.num_labels = len(self.label_names)
        config.id2label = dict(enumerate(self.label_names))
        config.problem_type = None

    def check_model(self, config, sentences, where):
        if config.id2label is None:
            raise DataError(f"{where}: config.json's id2label has no tag names (only LABEL_0..LABEL_"
                            f"{config.num_labels - 1}); a NER model needs its tags there (O, B-PER, I-PER, ...)")
        names = tuple(config.id2label[i] for i in range(config.num_labels))
        check_tags(sentences, names, getattr(sentences, "path", where))
        self.label_names = names

    # ----------------------------------------------------------------- features
    def prepare(self, sentences, tokenizer, max_length):
        if self.label_names is None:
            raise DataError("the NER tag names are not known yet: configure_model (training) or check_model "
                            "(a model's id2label) sets them before prepare")
        check_tags(sentences, self.label_names, getattr(sentences, "path", "the sentences"))
        if max_length < 3:
            raise DataError(f"max_length {max_length} leaves no room for a word (at least 3)")
        features = encode_sentences(tokenizer, sentences, self.label_names, max_length)
        return Prepared(sentences, {"features": features, "tokenizer": tokenizer, "label_names": self.label_names},
                        max_length)

    # ---------------------------------------------------------------- training
    def train_batches(self, train, epoch, batch_size, seed, parallel):
        """(input_ids, token_type_ids, attention_mask, labels), all ``(B, S)``; labels IGNORE
        except on each word's first piece."""
        features, pad_id = train.features["features"], train.features["tokenizer"].pad_token_id
        lengths = [len(r) for r in features.input_ids]
        limit = padding_limit(lengths, train.max_length)   # the data's longest row, if shorter than --max-length
        for idx in shuffled_batches(lengths, batch_size, random.Random(seed + epoch), parallel):
            yield batch(features, list(idx), pad_id, limit, train.train_lengths)

    def loss_fn(self, model):
        from .loss import make_token_loss_fn
        return make_token_loss_fn(model)

    # -------------------------------------------------------------- evaluation
    def predict(self, model, prepared, *, batch_size=64, use_jit=True, progress=False, cache_dir=None):
        """Per batch of sentences in file order: each sentence's word tags (its words' first
        pieces' tags; "O" for a word cut by max_length); readable again (``prediction_steps.Replay``)."""
        return prediction_steps.Replay(self._batches(model, prepared, batch_size, use_jit, progress))

    def _batches(self, model, prepared, batch_size, use_jit, progress):
        features, names = prepared.features["features"], prepared.features["label_names"]
        forward, pad_id = prediction_steps.forward_fn(model, use_jit), prepared.features["tokenizer"].pad_token_id
        with prediction_steps.progress_bar(len(prepared.examples), "sentence", progress) as bar:
            for idx in prediction_steps.chunks(range(len(prepared.examples)), batch_size):
                rows = [features.input_ids[i] for i in idx]
                arrays = prediction_steps.padded(rows, [[0] * len(r) for r in rows], pad_id, prepared.max_length,
                                                 batch_size, use_jit)
                logits = prediction_steps.run(forward, arrays)[:len(idx)]                 # (B, S, labels)
                prediction_steps.check_finite(logits, getattr(prepared.examples, "path", "the sentences"))
                yield [word_tags(logits[r], features.first_piece[i], names) for r, i in enumerate(idx)]
                bar.update(len(idx))

    def score(self, prepared, outputs):
        """conlleval's numbers as fractions: f1, precision, recall and tag accuracy overall, then
        TYPE_f1 / TYPE_precision / TYPE_recall per entity type; ``examples`` (sentences) and
        ``words_dropped`` (words beyond max_length or without a piece, predicted O)."""
        predicted = [tags for batch_tags in outputs for tags in batch_tags]
        report = evaluate((s.tags, p) for s, p in zip(prepared.examples, predicted, strict=True))
        metrics = {k: report[k] / 100 for k in ("f1", "precision", "recall", "accuracy")}
        for kind, scores in report["per_type"].items():
            metrics.update({f"{kind}_{k}": scores[k] / 100 for k in ("f1", "precision", "recall")})
        return {**metrics, "examples": len(prepared.examples),
                "words_dropped": prepared.features["features"].dropped_words}

    def selection_score(self, metrics):
        return finite_or_worst(metrics.get("dev_f1"))
