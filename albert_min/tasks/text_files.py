"""Data: TSV files -> token ids -> padded batches (pre-training's raw text: albert_min.tasks.pretraining_objectives).

Batches are length-bucketed: examples of similar length go together and each
batch is padded only to its own longest row, rounded up to one of a few lengths
(``train_length``, ``bucket_length``) so that a compiled graph sees few distinct shapes.

Layer: ``albert_min.tasks``, above ``checkpoints`` (the layers: ``albert_min/__init__.py``).
"""

import itertools
import os
import random

import numpy as np
from ..common.errors import AlbertMinError


class DataError(AlbertMinError):
    """A data file that cannot be read as asked, with the file and line number."""


class HeaderError(DataError):
    """A TSV file whose header lacks a column the task needs; ``header``: the header as read."""

    def __init__(self, message, header):
        super().__init__(message)
        self.header = header


# ------------------------------------------------------------------- TSV input
class TextColumn(list):
    """A file's texts, each knowing the ``path:line`` it came from (``sources``).

    Some rows can only be refused once tokenized (``encode_examples``: text that
    normalises to nothing); the readers return their texts as a TextColumn so that
    error still names the row's line, through every caller that passes the texts on.
    A plain list works wherever a TextColumn does; errors then name "example i".
    """

    def __init__(self, texts, sources):
        super().__init__(texts)
        self.sources = list(sources)
        if len(self.sources) != len(self):
            raise ValueError(f"{len(self)} texts but {len(self.sources)} sources")


UTF8_BOM = b"\xef\xbb\xbf"


def _utf8_lines(path):
    """Yield ``(line number, line with its end-of-line)`` of a UTF-8 file split at LF (b"\\n");
    a byte-order mark at the start is skipped (spreadsheet exports, MRPC's header write one);
    bytes that are not UTF-8 are a DataError naming ``path:line``."""
    with open(path, "rb") as f:
        for line_no, raw in enumerate(f, start=1):
            if line_no == 1 and raw.startswith(UTF8_BOM):
                raw = raw[len(UTF8_BOM):]
            try:
                yield line_no, raw.decode("utf-8")
            except UnicodeDecodeError:
                raise DataError(f"{path}:{line_no}: not UTF-8") from None


def text_lines(path):
    """Yield ``(line number, line without its end-of-line)`` of a UTF-8 text file (plain text
    and CoNLL columns; TSV files: ``tsv_lines``).

    A UTF-8 byte-order mark at the start is skipped (spreadsheet exports write
    one); bytes that are not UTF-8 are a DataError naming ``path:line``.
    """
    for line_no, line in _utf8_lines(path):
        yield line_no, line.rstrip("\r\n")


def tsv_lines(path):
    """Yield ``(line number, line without its end-of-line)`` of a TSV file: the one way every
    TSV task (GLUE's and the generic ``cls``) reads its file, through ``tsv_rows``.

    UTF-8, a byte-order mark at the start skipped (``text_lines``). A line ends at LF or CR LF
    (GLUE's files end lines with LF; Windows tools with CR LF). A carriage return anywhere else
    is a DataError naming ``path:line``, not text: TSV fields cannot be quoted, so a CR inside
    one is a broken row, and a file whose lines end with CR alone (old Mac editors) would
    otherwise read as one long line, or as rows that other tools do not see. A NUL byte is a
    DataError too (a UTF-16 or binary file, which would otherwise read as text with the NULs
    dropped by the tokenizer).
    """
    for line_no, line in _utf8_lines(path):
        line = line[:-2] if line.endswith("\r\n") else line[:-1] if line.endswith("\n") else line
        if "\r" in line:
            raise DataError(f"{path}:{line_no}: a carriage return (CR) that does not end the line; TSV lines "
                            "end with LF or CR LF (lines that end with CR alone, as old Mac editors write them: "
                            "convert them, e.g. tr '\\r' '\\n')")
        if "\0" in line:
            raise DataError(f"{path}:{line_no}: a NUL byte; TSV files are UTF-8 text (a UTF-16 or binary file?)")
        yield line_no, line


def tsv_rows(path, layout=None):
    """``(header, rows)`` of a TSV file (``tsv_lines``): ``rows`` yields ``(line number, fields)``
    of every line that is not blank, each with one field per header column (else a DataError
    naming ``path:line``, ``row_fields``). The header is the first line's fields, unless
    ``layout(first line's fields)`` says otherwise: it returns ``(header, whether the first line
    is a row)`` (CoLA's train and dev files have no header row). A missing file is a
    FileNotFoundError naming it.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"data file not found: {path}")
    lines = tsv_lines(path)
    first = next(lines, None)
    first_fields = first[1].split("\t") if first is not None else []
    header, first_is_row = layout(first_fields) if layout is not None else (first_fields, False)

    def rows():
        for line_no, line in itertools.chain([first] if first is not None and first_is_row else [], lines):
            if line.strip():
                yield line_no, row_fields(path, line_no, line, header)
    return header, rows()


def row_fields(path, line_no, line, header):
    """The tab-separated fields of one TSV row; a DataError naming ``path:line_no`` unless
    there is one per header column."""
    fields = line.split("\t")
    if len(fields) != len(header):
        raise DataError(f"{path}:{line_no}: expected {len(header)} tab-separated fields "
                        f"({', '.join(header)}), found {len(fields)}")
    return fields


def read_tsv(path, text_column="sentence", label_column="label", require_labels=True):
    """Read a GLUE TSV with a header row. Returns (sentences, labels or None).

    Every malformed row is an error naming ``path:line`` (1-based, header = line 1).
    Labels must be integers. If ``require_labels`` is False a file without a
    label column is accepted (labels = None), for prediction only.
    """
    header, rows = tsv_rows(path)
    sentences, labels, sources = [], [], []
    if text_column not in header:
        raise HeaderError(f"{path}:1: header {header} has no {text_column!r} column", header)
    text_at = header.index(text_column)
    label_at = header.index(label_column) if label_column in header else None
    if label_at is None and require_labels:
        raise HeaderError(f"{path}:1: header {header} has no {label_column!r} column", header)
    for line_no, fields in rows:
        text = fields[text_at].strip()
        if not text:
            raise DataError(f"{path}:{line_no}: empty {text_column!r}")
        sentences.append(text)
        sources.append(f"{path}:{line_no}")
        if label_at is not None:
            try:
                labels.append(int(fields[label_at]))
            except ValueError:
                raise DataError(f"{path}:{line_no}: label {fields[label_at]!r} is not an integer") from None
    if not sentences:
        raise DataError(f"{path}: no examples after the header")
    return TextColumn(sentences, sources), (labels if label_at is not None else None)


def check_labels(labels, num_labels, path):
    bad = [y for y in set(labels) if not 0 <= y < num_labels]
    if bad:
        raise DataError(f"{path}: labels {sorted(bad)} outside 0..{num_labels - 1} (the model has {num_labels})")


# --------------------------------------------------------------------- batches
def encode_all(tokenizer, sentences, max_length):
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


def train_length(n, max_length):
    """Padded length of a training batch whose longest row has ``n`` tokens: ``n`` rounded up
    to a multiple of ``8 * ceil(max_length / 64)``, at most ``max_length`` (unless ``n`` is longer).

    That is at most 8 lengths per run (multiples of 8 up to max_length 64, of 16 up to 128,
    48 at 384, 64 at 512). A compiled train step is one graph per input shape, and MindSpore
    keeps every graph, with its memory, for the life of the process: padded only to a multiple
    of 8, a SQuAD run at max_length 384 met a new shape nearly every step and grew by ~1 GB
    per step (docs/training.md, "Memory and batch shapes").
    """
    step = 8 * -(-max_length // 64)
    return min(-(-n // step) * step, max(n, max_length))


def padding_limit(lengths, max_length):
    """The ``max_length`` to give ``train_length`` for a training set whose rows have ``lengths``:
    the run's ``max_length``, or the longest row where the data is shorter, so that rows of 20
    pieces are not padded to 64 for a --max-length of 512 (still at most 8 lengths a run)."""
    return min(max_length, max(lengths, default=max_length))


def pad_for_training(rows, types, pad_id, max_length):
    """``pad_with_types`` to ``train_length`` of the longest row (``max_length``: the run's)."""
    return pad_with_types(rows, types, pad_id, length=train_length(max(len(r) for r in rows), max_length))


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
