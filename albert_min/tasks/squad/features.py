"""SQuAD v1.1 / v2.0: examples (``reading``) -> sliding-window features -> batches.

Features are built as Google's ``run_squad`` and transformers' ``run_qa`` build them: the
question is cut to ``max_query_length`` pieces, and the context is cut into windows of
``max_length - len(question) - 3`` pieces, each starting ``doc_stride`` pieces after the
previous one, so that every piece of the context is in some window. One feature is
``[CLS] question [SEP] context window [SEP]`` (token types 0 up to the first [SEP], 1
after). Each context piece keeps its character span in the original context
(``AlbertTokenizer.tokenize_with_offsets``), so decoded answers are cut from the context
as written. For training, an answer not wholly inside a window (and every answer of an
unanswerable question) is labelled at [CLS]: start = end = 0; a question whose answer is
blank or not at its ``answer_start`` is left out (``unusable_answer``), as Google's
``run_squad`` leaves it out. Cutting windows takes time linear in the context's length.
"""

import bisect
import dataclasses
import unicodedata
from typing import Optional

import numpy as np

from ..batching import pad_with_types


def answer_span(example):
    """The characters ``(start, end)`` of the answer a training label points at: the first
    answer, when its text stands at its ``answer_start`` in the context and is not blank;
    None for an unanswerable question or an answer that is not there (``unusable_answer``)."""
    if example.is_impossible or not example.answers:
        return None
    text, start = example.answers[0]
    if not _visible(text) or example.context[start:start + len(text)] != text:
        return None
    return start, start + len(text)


def _visible(text):
    """Whether ``text`` has a character the tokenizer keeps: one that is not white space, a
    control or format character (zero-width ones) or a combining mark."""
    return any(unicodedata.category(ch)[0] not in "ZCM" for ch in text)


def unusable_answer(example):
    """Why training cannot label ``example`` (its first answer is blank, or its text is not at
    its ``answer_start``), or None when it can. Google's ``run_squad`` skips such a question
    in training ("Could not find answer"), and so does ``SquadTask``."""
    if example.is_impossible or not example.answers or answer_span(example) is not None:
        return None
    text, start = example.answers[0]
    if not _visible(text):
        return f"its answer {text[:40]!r} is blank (white space, control or zero-width characters only)"
    return (f"its answer {text[:40]!r} is not at answer_start {start} (the context has "
            f"{example.context[start:start + len(text)][:40]!r} there)")


@dataclasses.dataclass
class WindowConfig:
    max_length: int = 384         # pieces per feature, [CLS] question [SEP] window [SEP]
    doc_stride: int = 128         # pieces from one window's start to the next one's
    max_query_length: int = 64    # question pieces kept (its first ones)

    def window_size(self, question_pieces):
        """Context pieces per window, checked against the stride."""
        size = self.max_length - question_pieces - 3
        if size < 1:
            raise ValueError(f"max_length {self.max_length} leaves no room for the context after "
                             f"{question_pieces} question pieces")
        if not 1 <= self.doc_stride <= size:
            raise ValueError(f"doc_stride {self.doc_stride} must be between 1 and the window "
                             f"({size} context pieces with max_length {self.max_length}): a longer "
                             "stride skips context")
        return size


@dataclasses.dataclass
class SquadFeature:
    example_index: int            # which example (position in the list given)
    input_ids: list               # [CLS] question [SEP] window [SEP]
    token_type_ids: list
    context_start: int            # position of the window's first piece
    offsets: list                 # per window piece: (start, end) characters in the context
    is_max_context: list          # per window piece: this window gives it the most context
    start_position: int = 0       # training label; 0 ([CLS]) when the answer is not inside
    end_position: int = 0


def window_starts(num_pieces, size, stride):
    """Start of every window over ``num_pieces`` pieces: 0, stride, ... until one reaches the end."""
    starts = [0]
    while starts[-1] + size < num_pieces:
        starts.append(starts[-1] + stride)
    return starts


def max_context_flags(start, length, starts, size, num_pieces):
    """Google's ``_check_is_max_context`` for each piece of the window at ``start``: a piece in
    several windows belongs to the one where min(left context, right context) + 0.01 * window
    length is largest (the first such window on a tie). Only the windows overlapping this one
    are scored (found by bisection in the sorted ``starts``), so cutting a context of n pieces
    takes time linear in n."""
    if length < 1:   # the one window of an empty context
        return []
    first, last = bisect.bisect_left(starts, start - size + 1), bisect.bisect_right(starts, start + length - 1)
    near = np.asarray(starts[first:last])
    lengths = np.minimum(size, num_pieces - near)[:, None]          # (W, 1) the overlapping windows
    position = np.arange(start, start + length)[None, :]            # (1, L) this window's pieces
    left, right = position - near[:, None], near[:, None] + lengths - 1 - position   # (W, L)
    score = np.where((left >= 0) & (right >= 0), np.minimum(left, right) + 0.01 * lengths, -np.inf)
    return (near[score.argmax(0)] == start).tolist()                # argmax: the first window on a tie


CONTEXT_CHUNK = 1 << 16     # characters tokenized at a time (see context_pieces)


def context_pieces(tokenizer, context, chunk=CONTEXT_CHUNK):
    """(piece ids, character offsets) of a context.

    Tokenized ``chunk`` characters at a time, each cut just before a space between two letters or
    digits (``_chunk_end``): pieces never span white space, and a piece after it starts with "▁"
    whether or not the text before it is in the same call, so the pieces are those of the whole
    context (tests/tasks/squad/test_squad_streaming.py). ``tokenize_with_offsets`` keeps a few hundred
    bytes per character while it works: whole, a 4 MB context took some 1.7 GB, by chunks 30 MB.
    """
    ids, offsets, lo = [], [], 0
    while lo < len(context):
        hi = _chunk_end(context, lo, chunk)
        pieces, spans = tokenizer.tokenize_with_offsets(context[lo:hi])
        ids += tokenizer.convert_tokens_to_ids(pieces)
        offsets += [(s + lo, e + lo) for s, e in spans] if lo else spans
        lo = hi
    return ids, offsets


def _chunk_end(text, lo, chunk):
    """Where the chunk of ``text`` from ``lo`` ends: at the first space between two letters or
    digits from ``lo + chunk`` on (never beside a character the tokenizer drops or joins to its
    neighbour: a zero-width or combining one), else at the end of the text."""
    for hi in range(lo + chunk, len(text) - 1):
        if text[hi] == " " and text[hi - 1].isalnum() and text[hi + 1].isalnum():
            return hi
    return len(text)


def example_features(tokenizer, example, example_index, config: WindowConfig, with_labels=False, context=None):
    """Every window of one example as a list of SquadFeature (``iter_example_features``)."""
    return list(iter_example_features(tokenizer, example, example_index, config, with_labels, context))


def iter_example_features(tokenizer, example, example_index, config: WindowConfig, with_labels=False,
                          context=None):
    """Every window of one example as a SquadFeature, one at a time: a long context's windows are
    never all held (a 4 MB context is some 130,000 windows of 64 pieces). ``context``: its
    ``context_pieces``, if already made (the questions of a paragraph share them)."""
    question = tokenizer.encode_ids(example.question)[:config.max_query_length]
    size = config.window_size(len(question))
    ids, offsets = context or context_pieces(tokenizer, example.context)
    starts = window_starts(len(ids), size, config.doc_stride)
    answer = answer_span(example) if with_labels else None
    head = [tokenizer.cls_token_id] + question + [tokenizer.sep_token_id]
    for start in starts:
        length = min(size, len(ids) - start)
        feature = SquadFeature(
            example_index, head + ids[start:start + length] + [tokenizer.sep_token_id],
            [0] * len(head) + [1] * (length + 1), len(head), offsets[start:start + length],
            max_context_flags(start, length, starts, size, len(ids)))
        if answer is not None:
            feature.start_position, feature.end_position = answer_positions(feature, *answer)
        yield feature


def answer_positions(feature, char_start, char_end):
    """Positions of the first and last piece of the answer [char_start, char_end) in the
    feature, or (0, 0) ([CLS]) when the window does not hold all of it."""
    spans = feature.offsets
    nonempty = [i for i, (s, e) in enumerate(spans) if e > s]
    if not nonempty or spans[nonempty[0]][0] > char_start or spans[nonempty[-1]][1] < char_end:
        return 0, 0
    first = next(i for i in nonempty if spans[i][1] > char_start)
    last = max(i for i in nonempty if spans[i][0] < char_end)
    if first > last:   # no piece inside the answer (only characters the tokenizer drops)
        return 0, 0
    return feature.context_start + first, feature.context_start + last


def iter_features(tokenizer, examples, config: WindowConfig, with_labels=False):
    """All features, example after example (a generator: nothing is held beyond one example).
    A paragraph's questions follow each other in SQuAD files, so its context is tokenized once."""
    last_context, context = None, None
    for index, example in enumerate(examples):
        if example.context != last_context:
            last_context, context = example.context, context_pieces(tokenizer, example.context)
        yield from iter_example_features(tokenizer, example, index, config, with_labels, context)


def batch(features, pad_id, length: Optional[int] = None):
    """Features -> dict of int32 arrays: input_ids, token_type_ids, attention_mask ``[B, S]``
    and start_positions, end_positions ``[B]``."""
    input_ids, token_type_ids, attention_mask = pad_with_types(
        [f.input_ids for f in features], [f.token_type_ids for f in features], pad_id, length=length)
    return {"input_ids": input_ids, "token_type_ids": token_type_ids, "attention_mask": attention_mask,
            "start_positions": np.array([f.start_position for f in features], np.int32),
            "end_positions": np.array([f.end_position for f in features], np.int32)}
