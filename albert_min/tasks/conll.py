"""CoNLL-2003 NER: the shared task's column files -> word-level features -> word tags.

Files hold one token a line, ``word POS chunk NER`` separated by spaces, a blank line
between sentences and a ``-DOCSTART-`` line opening each document (skipped). Tags stay in
the files' IOB1 scheme; ``conlleval`` scores them as they are.

Each word is tokenized on its own (as a word after a space, so its first piece carries
"▁"). Only the first piece of a word has a label; the others, [CLS], [SEP] and padding
have ``IGNORE`` and stay out of the loss. At prediction a word takes its first piece's tag.
A word that falls beyond ``max_length`` or has no piece at all (only characters that
preprocessing drops) is predicted ``O``; ``Features.dropped_words`` counts them.
"""

import dataclasses
import re

import numpy as np

from ..data import DataError, pad_batch, text_lines
from .conlleval import entities

IGNORE = -100          # label of pieces that are not the first of a word (the loss skips it)
DOCSTART = "-DOCSTART-"


@dataclasses.dataclass
class Sentence:
    words: list          # the tokens as written in the file
    tags: list           # their NER tags (IOB1 strings), one per word
    lines: list          # each word's line number in the file, for messages


def read_conll(path, columns=4):
    """Sentences of a CoNLL-2003 file. Every line must have ``columns`` space-separated fields,
    the NER tag last (``O`` or ``B-``/``I-`` and a type); errors name ``path:line``."""
    sentences, words, tags, lines = [], [], [], []
    for line_no, line in text_lines(path):
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


def batch(features, indices, pad_id, pad_multiple=8):
    """Rows ``indices`` -> (input_ids, token_type_ids, attention_mask, labels), int32 ``[B, S]``;
    labels are IGNORE on padding."""
    rows = [features.input_ids[i] for i in indices]
    input_ids, token_type_ids, attention_mask = pad_batch(rows, pad_id, pad_multiple)
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
