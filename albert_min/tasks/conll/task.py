"""CoNLL-2003 NER: the shared task's column files -> word-level features -> word tags.

Files hold one token a line (lines end in LF, CRLF or CR), ``word POS chunk NER`` separated
by spaces, a blank line between sentences and a ``-DOCSTART-`` line opening each document (skipped). Tags stay in
the files' IOB1 scheme; ``conlleval`` scores them as they are.

Each word is tokenized on its own (as a word after a space, so its first piece carries
"▁"). Only the first piece of a word has a label; the others, [CLS], [SEP] and padding
have ``IGNORE`` and stay out of the loss. At prediction a word takes its first piece's tag.
A word that falls beyond ``max_length`` or has no piece at all (only characters that
preprocessing drops) is predicted ``O``; ``Features.dropped_words`` counts them.

``ConllTask`` puts these on the task interface (``base.Task``) for train.py and evaluate.py.
"""

import dataclasses
import random
import re

import numpy as np

from .data import DataError, pad_batch, padding_limit, text_lines, train_length
from . import predicting
from .base import IGNORE, Prepared, Task, finite_or_worst, shuffled_batches
from .conlleval import COLUMNS_KIND, entities, evaluate, write_columns

DOCSTART = "-DOCSTART-"


@dataclasses.dataclass
class Sentence:
    words: list          # the tokens as written in the file
    tags: list           # their NER tags (IOB1 strings), one per word
    lines: list          # each word's line number in the file, for messages


def conll_lines(path):
    """``(line number, line)`` of a CoNLL file whose lines end in LF, CRLF or CR alone (old Mac
    files), numbered as an editor shows them."""
    number = 0
    for _, line in text_lines(path):
        for part in line.split("\r"):
            number += 1
            yield number, part


def read_conll(path, columns=4):
    """Sentences of a CoNLL-2003 file. Every line must have ``columns`` space-separated fields,
    the NER tag last (``O`` or ``B-``/``I-`` and a type); errors name ``path:line``."""
    sentences, words, tags, lines = [], [], [], []
    for line_no, line in conll_lines(path):
        fields = line.split()
        if not fields:
            if words:
                sentences.append(Sentence(words, tags, lines))
            words, tags, lines = [], [], []
            continue
        if fields[0] == DOCSTART:
            continue
        if len(fields) != columns:
            raise DataError(f"{path}:{line_no}: expected {columns} space-separated columns "
                            f"(word ... NER tag), found {len(fields)}")
        tag = fields[-1]
        prefix, dash, kind = tag.partition("-")
        if tag != "O" and not (dash and prefix in ("B", "I") and kind):
            raise DataError(f"{path}:{line_no}: NER tag {tag!r} is not O, B-TYPE or I-TYPE")
        lines.append(line_no)
        words.append(fields[0])
        tags.append(tag)
    if words:
        sentences.append(Sentence(words, tags, lines))
    if not sentences:
        raise DataError(f"{path}: no sentences")
    return sentences


def label_names_of(sentences):
    """Label names of a training set: "O" first, then the other tags sorted."""
    tags = {t for s in sentences for t in s.tags}
    return ("O",) + tuple(sorted(tags - {"O"}))


def check_tags(sentences, label_names, path):
    """A DataError naming ``path:line`` for the first tag the model has no label for."""
    known = set(label_names)
    for s in sentences:
        for tag, line_no in zip(s.tags, s.lines):
            if tag not in known:
                raise DataError(f"{path}:{line_no}: tag {tag!r} is not one of the model's labels "
                                f"{', '.join(label_names)}")


@dataclasses.dataclass
class Features:
    input_ids: list       # per sentence: [CLS] pieces [SEP] ids
    labels: list          # per sentence: label id at each word's first piece, IGNORE elsewhere
    first_piece: list     # per sentence: position of each word's first piece, -1 if it has none
    dropped_words: int    # words with no position (beyond max_length or no piece)


def encode_sentences(tokenizer, sentences, label_names, max_length):
    """Word-level features, truncated to ``max_length`` pieces with [CLS] and [SEP]."""
    if max_length < 3:
        raise ValueError(f"max_length={max_length} leaves no room for a word")
    label_id = {name: i for i, name in enumerate(label_names)}
    feats = Features([], [], [], 0)
    for s in sentences:
        ids, labels, first = [tokenizer.cls_token_id], [IGNORE], []
        full = False
        for word, tag in zip(s.words, s.tags):
            pieces = tokenizer.encode_ids(word)
            full = full or len(ids) + len(pieces) > max_length - 1   # the rest of the sentence is cut
            if not pieces or full:
                first.append(-1)
                feats.dropped_words += 1
                continue
            first.append(len(ids))
            ids += pieces
            labels += [label_id[tag]] + [IGNORE] * (len(pieces) - 1)
        feats.input_ids.append(ids + [tokenizer.sep_token_id])
        feats.labels.append(labels + [IGNORE])
        feats.first_piece.append(first)
    return feats


def batch(features, indices, pad_id, max_length=None):
    """Rows ``indices`` -> (input_ids, token_type_ids, attention_mask, labels), int32 ``[B, S]``;
    labels are IGNORE on padding. S is the longest row rounded up to ``data.train_length`` of
    ``max_length`` (None: to a multiple of 8)."""
    rows = [features.input_ids[i] for i in indices]
    length = train_length(max(len(r) for r in rows), max_length) if max_length else None
    input_ids, token_type_ids, attention_mask = pad_batch(rows, pad_id, length=length)
    labels = np.full(input_ids.shape, IGNORE, np.int32)
    for r, i in enumerate(indices):
        labels[r, :len(features.labels[i])] = features.labels[i]
    return input_ids, token_type_ids, attention_mask, labels


def word_tags(logits, first_piece, label_names):
    """One sentence's word tags from its logits ``[S, num_labels]``: each word takes the tag of
    its first piece; a word without one gets "O"."""
    best = np.asarray(logits).argmax(-1)
    return [label_names[int(best[p])] if p >= 0 else "O" for p in first_piece]


def split_words(text):
    """Raw text -> (words, their (start, end) character spans): white-space separated, as the
    CoNLL files hold them (a pipeline's input has no tokenization of its own)."""
    matches = list(re.finditer(r"\S+", text))
    return [m.group() for m in matches], [m.span() for m in matches]


def entity_spans(text, spans, tags):
    """Entities of one tagged text as dicts {"type", "text", "start", "end"} (characters of
    ``text``), chunks read as conlleval reads them; ``spans`` from ``split_words``."""
    return [{"type": kind, "text": text[spans[first][0]:spans[last][1]], "start": spans[first][0],
             "end": spans[last][1]} for kind, first, last in entities(tags)]


def majority_tagger(sentences):
    """The per-word majority baseline: each training word's most frequent tag (ties: the tag
    seen first); returns a function words -> tags, "O" for an unseen word."""
    counts = {}
    for s in sentences:
        for word, tag in zip(s.words, s.tags):
            by_tag = counts.setdefault(word, {})
            by_tag[tag] = by_tag.get(tag, 0) + 1
    best = {word: max(by_tag, key=by_tag.get) for word, by_tag in counts.items()}
    return lambda words: [best.get(w, "O") for w in words]


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
            yield batch(features, list(idx), pad_id, limit)

    def loss_fn(self, model):
        from .losses import make_token_loss_fn
        return make_token_loss_fn(model)

    # -------------------------------------------------------------- evaluation
    def predict(self, model, prepared, *, batch_size=64, use_jit=True, progress=False):
        """Per batch of sentences in file order: each sentence's word tags (its words' first
        pieces' tags; "O" for a word cut by max_length); readable again (``predicting.Replay``)."""
        return predicting.Replay(self._batches(model, prepared, batch_size, use_jit, progress))

    def _batches(self, model, prepared, batch_size, use_jit, progress):
        features, names = prepared.features["features"], prepared.features["label_names"]
        forward, pad_id = predicting.forward_fn(model, use_jit), prepared.features["tokenizer"].pad_token_id
        with predicting.progress_bar(len(prepared.examples), "sentence", progress) as bar:
            for idx in predicting.chunks(range(len(prepared.examples)), batch_size):
                rows = [features.input_ids[i] for i in idx]
                arrays = predicting.padded(rows, [[0] * len(r) for r in rows], pad_id, prepared.max_length,
                                           batch_size, use_jit)
                logits = predicting.run(forward, arrays)[:len(idx)]                 # (B, S, labels)
                predicting.check_finite(logits, getattr(prepared.examples, "path", "the sentences"))
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
