"""Token ids -> padded batches, for training and prediction (every family's features use these).

Batches are length-bucketed: examples of similar length go together and each
batch is padded only to its own longest row, rounded up to one of a few lengths
(``train_length``, ``bucket_length``) so that a compiled graph sees few distinct shapes.

Layer: ``albert_min.tasks``, above ``checkpoints`` (the layers: ``albert_min/__init__.py``).
"""

import random

import numpy as np

from ..common.errors import AlbertMinError
from .errors import DataError


# --------------------------------------------------------------------- batches
def encode_single_sentences(tokenizer, sentences, max_length):
    """Token ids per sentence: ``[CLS] ids [SEP]`` truncated to max_length."""
    return [tokenizer.encode(s, max_length=max_length)["input_ids"] for s in sentences]


def pad_batch(rows, pad_id, pad_multiple=8, length=None, num_rows=None):
    """List of id lists -> (input_ids, token_type_ids, attention_mask), int32 ``[B, S]``.

    S = ``length`` if given, else the longest row rounded up to ``pad_multiple``.
    ``num_rows`` > len(rows) appends filler rows (all padding, attention on
    position 0 only) so every batch of a bucket has one shape; callers drop
    their outputs. Single segments only, so token types are all 0.
    """
    longest = max(len(r) for r in rows)
    seq = length or -(-longest // pad_multiple) * pad_multiple
    if longest > seq:
        raise ValueError(f"a row of {longest} tokens does not fit length {seq}")
    B = max(num_rows or 0, len(rows))
    input_ids = np.full((B, seq), pad_id, np.int32)
    attention_mask = np.zeros((B, seq), np.int32)
    attention_mask[len(rows):, 0] = 1          # filler rows: one visible position, no all-masked softmax
    for i, r in enumerate(rows):
        input_ids[i, :len(r)] = r
        attention_mask[i, :len(r)] = 1
    return input_ids, np.zeros_like(input_ids), attention_mask


def eval_batches(encoded, batch_size):
    """Yield (indices, rows) sorted by length (less padding); callers scatter results back."""
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
    for start in range(0, len(order), batch_size):
        idx = order[start:start + batch_size]
        yield idx, [encoded[i] for i in idx]


def bucket_length(n, max_length, smallest=16):
    """Padded length for a row of ``n`` tokens: the next power of two from 16 (16, 32, 64, 128...),
    or ``max_length`` when that is shorter."""
    length = smallest
    while length < n:
        length *= 2
    return min(length, max(max_length, n))


def bucketed_eval_batches(encoded, batch_size, max_length, smallest=16):
    """Batches with few distinct shapes, for compiled graphs: yields (indices, rows, num_rows, length).

    Rows sorted by length are padded to ``bucket_length`` (16/32/64/128..., from
    ``smallest``), so a graph mode run compiles 3-4 shapes instead of one per
    multiple of 8 (fewer, larger buckets measured slower: docs/speed.md).
    Short buckets take more rows (``batch_size * 64 // length``), keeping
    about the same tokens per batch. Every batch of a bucket has ``num_rows``
    rows: the last one is topped up with filler rows (``pad_batch(num_rows=)``),
    fewer on small inputs (the bucket's row count rounded up to 8).
    """
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
    buckets = {}
    for i in order:
        buckets.setdefault(bucket_length(len(encoded[i]), max_length, smallest), []).append(i)
    for length, members in buckets.items():          # ascending: dicts keep insertion order
        full = batch_size * max(1, 64 // length)
        num_rows = min(full, -(-len(members) // 8) * 8)
        for start in range(0, len(members), num_rows):
            idx = members[start:start + num_rows]
            yield idx, [encoded[i] for i in idx], num_rows, length


MAX_TRAIN_LENGTHS = 8          # the most padded lengths a run's training batches use
STEPS_PER_TRAIN_LENGTH = 100   # a run uses one more length per this many steps (``train_lengths_for``)


def train_length(n, max_length, lengths=MAX_TRAIN_LENGTHS):
    """Padded length of a training batch whose longest row has ``n`` tokens: ``n`` rounded up
    to a multiple of ``8 * ceil(max_length / (8 * lengths))``, at most ``max_length`` (unless ``n``
    is longer).

    That is at most ``lengths`` lengths per run; with the default 8: multiples of 8 up to max_length
    64, of 16 up to 128, 48 at 384, 64 at 512; with 1: every batch ``max_length``. A compiled train
    step is one graph per input shape, and MindSpore keeps every graph, with its memory, for the
    life of the process: padded only to a multiple of 8, a SQuAD run at max_length 384 met a new
    shape nearly every step and grew by ~1 GB per step (docs/training.md, "Memory and batch shapes").
    """
    step = 8 * -(-max_length // (8 * lengths))
    return min(-(-n // step) * step, max(n, max_length))


def train_lengths_for(total_steps):
    """How many padded lengths (``train_length``'s ``lengths``) a run of ``total_steps`` steps uses:
    one per ``STEPS_PER_TRAIN_LENGTH`` steps, from 1 to 8. Each length costs one compile of the train
    step (2-3 s for the small model on 2 cores, as long as 20-40 of its steps), which a short run
    cannot win back by padding less: a 20-step run pads every batch to one length and compiles once
    (it compiled five times before); a run of 800 steps or more uses 8 lengths, as every run did."""
    return max(1, min(MAX_TRAIN_LENGTHS, total_steps // STEPS_PER_TRAIN_LENGTH))


def padding_limit(lengths, max_length):
    """The ``max_length`` to give ``train_length`` for a training set whose rows have ``lengths``:
    the run's ``max_length``, or the longest row where the data is shorter, so that rows of 20
    pieces are not padded to 64 for a --max-length of 512 (still at most 8 lengths a run)."""
    return min(max_length, max(lengths, default=max_length))


def pad_for_training(rows, types, pad_id, max_length, lengths=MAX_TRAIN_LENGTHS):
    """``pad_with_types`` to ``train_length`` of the longest row (``max_length``, ``lengths``: the run's)."""
    return pad_with_types(rows, types, pad_id, length=train_length(max(len(r) for r in rows), max_length, lengths))


def train_batch_indices(lengths, batch_size, rng: random.Random, bucket_batches=50):
    """One epoch of shuffled, length-bucketed batches of example indices.

    Shuffle, cut into pools of ``bucket_batches`` batches, sort each pool by
    length, split into batches, then shuffle the batch order. Random enough
    for SGD, yet most batches need little padding.
    """
    order = list(range(len(lengths)))
    rng.shuffle(order)
    pool = batch_size * bucket_batches
    batches = []
    for start in range(0, len(order), pool):
        chunk = sorted(order[start:start + pool], key=lambda i: lengths[i])
        batches += [chunk[j:j + batch_size] for j in range(0, len(chunk), batch_size)]
    rng.shuffle(batches)
    yield from batches


# ------------------------------------------------------- sentence-pair input
def encode_examples(tokenizer, texts, text_pairs, max_length):
    """Token ids and token type ids per example, ``[CLS] a [SEP]`` or ``[CLS] a [SEP] b [SEP]``
    (type 0 up to the first [SEP], 1 after), pairs truncated longest-first to max_length.

    A row whose texts are all empty once the tokenizer has normalised them (white space,
    control, zero-width or combining characters only: ``"\\u200b"``, ``"\\x01"``, a lone
    accent) would be ``[CLS] [SEP]`` like ``""``, which the readers refuse; it is a DataError
    naming the row (``path:line`` for a ``TextColumn``, else "example i"), and so is text
    the tokenizer refuses (a lone surrogate).
    Returns (ids, types): two lists of int lists.
    """
    pairs = text_pairs if text_pairs is not None else [None] * len(texts)
    sources = getattr(texts, "sources", None)
    ids, types = [], []
    for i, (a, b) in enumerate(zip(texts, pairs)):
        where = sources[i] if sources is not None else f"example {i}"
        try:
            e = tokenizer.encode(a, b, max_length=max_length)
        except AlbertMinError as err:   # the tokenizer's TokenizerError
            raise DataError(f"{where}: {err}") from None
        if len(e["input_ids"]) == (2 if b is None else 3):   # nothing but [CLS] [SEP] ([SEP])
            shown = " and ".join(repr(t[:40]) for t in (a, b) if t is not None)
            raise DataError(f"{where}: empty text once normalised ({shown}: only white space, control, "
                            "zero-width or combining characters)")
        ids.append(e["input_ids"])
        types.append(e["token_type_ids"])
    return ids, types


def pad_with_types(rows, types, pad_id, length=None, num_rows=None):
    """``pad_batch`` that keeps each row's token type ids (sentence pairs) instead of zeros."""
    input_ids, token_type_ids, attention_mask = pad_batch(rows, pad_id, length=length, num_rows=num_rows)
    for i, t in enumerate(types):
        token_type_ids[i, :len(t)] = t
    return input_ids, token_type_ids, attention_mask
