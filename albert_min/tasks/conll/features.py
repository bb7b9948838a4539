"""CoNLL-2003's model inputs: word-level features -> pieces with labels, and back to word tags.

Each word is tokenized on its own (as a word after a space, so its first piece carries
"▁"). Only the first piece of a word has a label; the others, [CLS], [SEP] and padding
have ``IGNORE`` and stay out of the loss. At prediction a word takes its first piece's tag.
A word that falls beyond ``max_length`` or has no piece at all (only characters that
preprocessing drops) is predicted ``O``; ``Features.dropped_words`` counts them.
"""

import dataclasses
import re

import numpy as np

from ..batching import MAX_TRAIN_LENGTHS, pad_batch, train_length
from .metric import entities


IGNORE = -100          # label of pieces that are not the first of a word (the loss skips it)


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


def batch(features, indices, pad_id, max_length=None, lengths=MAX_TRAIN_LENGTHS):
    """Rows ``indices`` -> (input_ids, token_type_ids, attention_mask, labels), int32 ``[B, S]``;
    labels are IGNORE on padding. S is the longest row rounded up to ``batching.train_length`` of
    ``max_length`` and ``lengths`` (``max_length`` None: to a multiple of 8)."""
    rows = [features.input_ids[i] for i in indices]
    length = train_length(max(len(r) for r in rows), max_length, lengths) if max_length else None
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
