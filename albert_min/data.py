"""Data: GLUE-style TSV files -> token ids -> padded batches; raw text -> SOP/MLM examples.

Batches are length-bucketed: examples of similar length go together and each
batch is padded only to its own longest row, rounded up to a multiple of
``pad_multiple`` so that a compiled graph sees few distinct shapes.
"""

import os
import random

import numpy as np
from .errors import AlbertMinError


class DataError(AlbertMinError):
    """A data file that cannot be read as asked, with the file and line number."""


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


def text_lines(path):
    """Yield ``(line number, line without its end-of-line)`` of a UTF-8 text file.

    A UTF-8 byte-order mark at the start is skipped (spreadsheet exports write
    one); bytes that are not UTF-8 are a DataError naming ``path:line``.
    """
    with open(path, "rb") as f:
        for line_no, raw in enumerate(f, start=1):
            if line_no == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            try:
                yield line_no, raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError:
                raise DataError(f"{path}:{line_no}: not UTF-8") from None


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
    if not os.path.isfile(path):
        raise FileNotFoundError(f"data file not found: {path}")
    sentences, labels, sources = [], [], []
    lines = text_lines(path)
    header = next(lines, (1, ""))[1].split("\t")
    if text_column not in header:
        raise DataError(f"{path}:1: header {header} has no {text_column!r} column")
    text_at = header.index(text_column)
    label_at = header.index(label_column) if label_column in header else None
    if label_at is None and require_labels:
        raise DataError(f"{path}:1: header {header} has no {label_column!r} column")
    for line_no, line in lines:
        if not line.strip():
            continue
        fields = row_fields(path, line_no, line, header)
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


def bucketed_eval_batches(encoded, batch_size, max_length):
    """Batches with few distinct shapes, for compiled graphs: yields (indices, rows, num_rows, length).

    Rows sorted by length are padded to ``bucket_length`` (16/32/64/128...),
    so a graph mode run compiles 3-4 shapes instead of one per multiple of 8.
    Short buckets take more rows (``batch_size * 64 // length``), keeping
    about the same tokens per batch. Every batch of a bucket has ``num_rows``
    rows: the last one is topped up with filler rows (``pad_batch(num_rows=)``),
    fewer on small inputs (the bucket's row count rounded up to 8).
    """
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
    buckets = {}
    for i in order:
        buckets.setdefault(bucket_length(len(encoded[i]), max_length), []).append(i)
    for length, members in buckets.items():          # ascending: dicts keep insertion order
        full = batch_size * max(1, 64 // length)
        num_rows = min(full, -(-len(members) // 8) * 8)
        for start in range(0, len(members), num_rows):
            idx = members[start:start + num_rows]
            yield idx, [encoded[i] for i in idx], num_rows, length


def train_batches(encoded, labels, batch_size, rng: random.Random, bucket_batches=50):
    """One epoch of shuffled, length-bucketed batches: yields (rows, labels)."""
    for idx in train_batch_indices([len(r) for r in encoded], batch_size, rng, bucket_batches):
        yield [encoded[i] for i in idx], np.array([labels[i] for i in idx], np.int32)


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


# ------------------------------------------------------------ SOP / MLM input
def read_documents(path):
    """Raw text: one sentence (or paragraph) per line, blank lines between documents."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"text file not found: {path}")
    documents, current = [], []
    for _, line in text_lines(path):
        line = line.strip()
        if line:
            current.append(line)
        elif current:
            documents.append(current)
            current = []
    if current:
        documents.append(current)
    if not documents:
        raise DataError(f"{path}: no text")
    return documents


def truncate_pair(a, b, budget, rng: random.Random):
    """Google's ``truncate_seq_pair``: drop pieces from the longer segment until the pair
    fits ``budget``, each from its front or its back at random.

    Always trimming the same ends would be a cue for SOP: with A cut at its front and
    B at its back, "the first segment ends where a sentence ends" means "not swapped",
    and a model can learn the order from punctuation without reading the text.
    """
    while len(a) + len(b) > budget:
        longer = a if len(a) > len(b) else b
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()


def make_sop_examples(documents_ids, max_length, rng: random.Random):
    """Sentence-order-prediction pairs from tokenized documents.

    documents_ids: list of documents, each a list of sentences as id lists.
    Consecutive sentences are packed into a chunk of up to ``max_length - 3``
    pieces, the chunk is cut at a random sentence boundary (a lone over-long
    sentence: in its middle) into segments A and B, trimmed to fit as Google
    does (``truncate_pair``), and with probability 0.5
    they are swapped (label 1) - ALBERT's SOP:
    both orders use the same two segments, so only the order is a signal.
    Returns a list of (ids_a, ids_b, label).
    """
    budget = max_length - 3
    examples = []
    for doc in documents_ids:
        chunk, size = [], 0
        for i, sentence in enumerate(doc):
            chunk.append(sentence)
            size += len(sentence)
            if i == len(doc) - 1 or size >= budget:
                a = b = None
                if len(chunk) >= 2:
                    cut = rng.randint(1, len(chunk) - 1)
                    a = [t for s in chunk[:cut] for t in s]
                    b = [t for s in chunk[cut:] for t in s]
                elif len(chunk[0]) > budget:
                    # One sentence that fills the whole budget on its own: its two
                    # halves are still consecutive text, so their order is learnable.
                    a, b = list(chunk[0][:budget // 2]), list(chunk[0][budget // 2:])
                if a and b:
                    truncate_pair(a, b, budget, rng)
                    if rng.random() < 0.5:
                        examples.append((b, a, 1))
                    else:
                        examples.append((a, b, 0))
                chunk, size = [], 0
    return examples


def sop_batch(examples, tokenizer, pad_multiple=8):
    """SOP examples -> (input_ids, token_type_ids, attention_mask, sop_labels)."""
    rows, types = [], []
    for a, b, _ in examples:
        rows.append([tokenizer.cls_token_id] + a + [tokenizer.sep_token_id] + b + [tokenizer.sep_token_id])
        types.append([0] * (len(a) + 2) + [1] * (len(b) + 1))
    input_ids, token_type_ids, attention_mask = pad_batch(rows, tokenizer.pad_token_id, pad_multiple)
    for i, t in enumerate(types):
        token_type_ids[i, :len(t)] = t
    return input_ids, token_type_ids, attention_mask, np.array([e[2] for e in examples], np.int32)


def mask_tokens(input_ids, attention_mask, tokenizer, rng: np.random.Generator, mask_prob=0.15):
    """BERT/ALBERT masking: pick 15% of real, non-special tokens as targets; of
    those 80% -> [MASK], 10% -> a random token, 10% unchanged.

    Returns (masked_input_ids, mlm_labels) with labels = -1 where no target,
    and at least one target per row.
    """
    special = np.isin(input_ids, [tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id])
    candidates = (attention_mask == 1) & ~special
    targets = candidates & (rng.random(input_ids.shape) < mask_prob)
    for row in np.where(~targets.any(1) & candidates.any(1))[0]:   # never leave a row without a target
        targets[row, rng.choice(np.where(candidates[row])[0])] = True
    labels = np.where(targets, input_ids, -1).astype(np.int32)
    masked = input_ids.copy()
    roll = rng.random(input_ids.shape)
    masked[targets & (roll < 0.8)] = tokenizer.mask_token_id
    random_tokens = targets & (roll >= 0.8) & (roll < 0.9)
    masked[random_tokens] = rng.integers(5, tokenizer.vocab_size, size=int(random_tokens.sum()))
    return masked, labels
