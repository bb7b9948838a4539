"""Pre-training's model inputs: the objectives of the ALBERT paper on documents' token ids.

- n-gram masking as Google's ``create_pretraining_data.py``: whole-word spans
  of n <= 3 words with p(n) proportional to 1/n, 15% of the sequence (``mask_prob``), each
  chosen piece 80% [MASK] / 10% a random piece / 10% unchanged;
- a sentence objective on two segments A and B: ``sop`` (ALBERT: consecutive
  segments, swapped with p = 0.5), ``nsp`` (BERT: B replaced with p = 0.5 by
  text of another document) or none (``mlm``);
- held-out DOCUMENTS (not pairs) on which MLM, SOP and NSP accuracy are
  measured, every model on both sentence tasks (the paper's Table 5: ``metric``).

Batches carry the masked positions (Google's ``masked_lm_positions/ids/weights``),
so the MLM head runs on ~15% of the tokens instead of all of them.

Layer: ``albert_min.tasks``, above ``checkpoints`` (the layers: ``albert_min/__init__.py``).
"""

import random

import numpy as np

from ..batching import MAX_TRAIN_LENGTHS, pad_for_training


MAX_NGRAM = 3
MASK_PROB = 0.15


# ---------------------------------------------------------- sentence pairs
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


def consecutive_pairs(documents_ids, max_length, rng: random.Random):
    """Yield (A, B) segment pairs, B the text right after A, fitting ``max_length`` with
    [CLS] A [SEP] B [SEP]: the pairs both sentence objectives start from.

    documents_ids: list of documents, each a list of sentences as id lists.
    Consecutive sentences are packed into a chunk of up to ``max_length - 3``
    pieces, the chunk is cut at a random sentence boundary (a lone over-long
    sentence: in its middle) into segments A and B, and trimmed to fit as Google
    does (``truncate_pair``). A generator: the caller's own draws (SOP's swap,
    NSP's negative) come between two pairs' draws.
    """
    budget = max_length - 3
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
                    yield a, b
                chunk, size = [], 0


def make_sop_examples(documents_ids, max_length, rng: random.Random):
    """ALBERT's sentence-order prediction: (A, B, label) from ``consecutive_pairs``, swapped
    with probability 0.5 (label 1). Both orders use the same two segments, so only the
    order is a signal."""
    examples = []
    for a, b in consecutive_pairs(documents_ids, max_length, rng):
        examples.append((b, a, 1) if rng.random() < 0.5 else (a, b, 0))
    return examples


def make_nsp_examples(documents_ids, max_length, rng: random.Random):
    """BERT's next-sentence prediction: (A, B, label), label 0 = B follows A,
    1 = B is text from another document (p = 0.5).

    A random B is as long as the true B it replaces (so length is no clue),
    cut from a random sentence onwards in a random other document.
    """
    if len(documents_ids) < 2:
        raise ValueError("NSP needs 2+ documents to draw negatives from")
    examples = []
    for d, doc in enumerate(documents_ids):
        for a, b in consecutive_pairs([doc], max_length, rng):
            if rng.random() < 0.5:
                other = rng.randrange(len(documents_ids) - 1)
                other += other >= d                                 # any document but this one
                other_doc = documents_ids[other]
                start = rng.randrange(len(other_doc))
                pieces = [t for s in other_doc[start:] for t in s]
                examples.append((a, pieces[:len(b)], 1))
            else:
                examples.append((a, b, 0))
    return examples


def make_sentence_examples(task, documents_ids, max_length, rng: random.Random):
    """Pairs for ``task``: SOP or NSP examples; for ``mlm`` the SOP pairs (the label is unused)."""
    if task == "nsp":
        return make_nsp_examples(documents_ids, max_length, rng)
    return make_sop_examples(documents_ids, max_length, rng)


def sop_batch(examples, tokenizer, max_length, lengths=MAX_TRAIN_LENGTHS):
    """SOP examples -> (input_ids, token_type_ids, attention_mask, sop_labels), padded to
    ``batching.train_length`` of ``max_length`` and ``lengths``."""
    rows, types = [], []
    for a, b, _ in examples:
        rows.append([tokenizer.cls_token_id] + a + [tokenizer.sep_token_id] + b + [tokenizer.sep_token_id])
        types.append([0] * (len(a) + 2) + [1] * (len(b) + 1))
    input_ids, token_type_ids, attention_mask = pad_for_training(rows, types, tokenizer.pad_token_id, max_length, lengths)
    return input_ids, token_type_ids, attention_mask, np.array([e[2] for e in examples], np.int32)


# -------------------------------------------------------------- n-gram masking
def word_start_table(tokenizer):
    """``[V]`` bool: does this piece begin a word? (Google's ``_is_start_piece``:
    a piece starting with '▁', a special piece, or punctuation.)"""
    pieces = tokenizer.convert_ids_to_tokens(list(range(tokenizer.vocab_size)))
    return np.array([p.startswith(("▁", "<", "[")) or not p[:1].isalnum() for p in pieces])


def ngram_mask(ids, word_start, special_ids, random_ids, mask_id, rng: np.random.Generator,
               max_predictions, mask_prob=MASK_PROB, max_ngram=MAX_NGRAM):
    """Google's n-gram masking of one sequence.

    ids: list of piece ids including [CLS]/[SEP]. Returns (masked ids, positions,
    original ids at those positions), positions sorted. round(15% of the length)
    pieces are predicted (at least 1, at most ``max_predictions``), taken as
    whole-word n-grams: shuffle every start word, draw n with p(n) ~ 1/n, fall
    back to shorter n-grams where the budget is nearly spent, skip overlaps.
    ``random_ids``: the pieces a "random piece" replacement draws from.
    """
    words = []   # each word: its piece positions; special pieces are never candidates
    for i, t in enumerate(ids):
        if t in special_ids:
            continue
        if words and not word_start[t] and words[-1][-1] == i - 1:
            words[-1].append(i)
        else:
            words.append([i])
    num_to_predict = min(max_predictions, max(1, int(round(len(ids) * mask_prob))))
    pvals = 1.0 / np.arange(1, max_ngram + 1)
    starts = rng.permutation(len(words))
    covered, chosen = set(), []
    for start in starts:
        if len(chosen) >= num_to_predict:
            break
        available = min(max_ngram, len(words) - start)
        n = rng.choice(np.arange(1, available + 1), p=pvals[:available] / pvals[:available].sum())
        span = [i for w in words[start:start + n] for i in w]
        while len(chosen) + len(span) > num_to_predict and n > 1:   # shorter n-grams to fit
            n -= 1
            span = [i for w in words[start:start + n] for i in w]
        if len(chosen) + len(span) > num_to_predict or covered.intersection(span):
            continue
        covered.update(span)
        chosen += span
    positions = sorted(chosen)
    masked = list(ids)
    for i in positions:
        if rng.random() < 0.8:
            masked[i] = mask_id
        elif rng.random() < 0.5:   # 10%: a random piece (not a special one); else 10% unchanged
            masked[i] = int(random_ids[rng.integers(len(random_ids))])
    return masked, positions, [ids[i] for i in positions]


class PretrainingBatcher:
    """Sentence pairs -> model inputs with n-gram masks, as numpy arrays:

    (input_ids, token_type_ids, attention_mask ``[B, S]``, mlm_positions ``[B*P]``
    (flat into ``[B*S]``), mlm_ids, mlm_weights ``[B*P]``, sentence_labels ``[B]``),
    P = ``max_predictions``; unused prediction slots have weight 0.
    """

    def __init__(self, tokenizer, max_length, mask_prob=MASK_PROB):
        self.tokenizer, self.max_length = tokenizer, max_length
        self.word_start = word_start_table(tokenizer)
        self.special_ids = set(tokenizer.special_ids.values())
        self.random_ids = np.array([i for i in range(tokenizer.vocab_size) if i not in self.special_ids])
        self.mask_prob = mask_prob
        self.max_predictions = max(1, int(round(max_length * mask_prob)))

    def __call__(self, examples, rng: np.random.Generator, lengths=MAX_TRAIN_LENGTHS):
        """``lengths``: the most padded lengths the run's batches use (``batching.train_length``)."""
        tok = self.tokenizer
        input_ids, token_type_ids, attention_mask, labels = sop_batch(examples, tok, self.max_length, lengths)
        B, S = input_ids.shape
        P = self.max_predictions
        positions = np.zeros((B, P), np.int32)
        mlm_ids = np.zeros((B, P), np.int32)
        weights = np.zeros((B, P), np.float32)
        for row in range(B):
            length = int(attention_mask[row].sum())
            masked, pos, orig = ngram_mask(input_ids[row, :length].tolist(), self.word_start, self.special_ids,
                                           self.random_ids, tok.mask_token_id, rng, P, self.mask_prob)
            input_ids[row, :length] = masked
            positions[row, :len(pos)], mlm_ids[row, :len(pos)], weights[row, :len(pos)] = pos, orig, 1.0
        flat_positions = (positions + S * np.arange(B, dtype=np.int32)[:, None]).reshape(-1)
        return (input_ids, token_type_ids, attention_mask, flat_positions, mlm_ids.reshape(-1),
                weights.reshape(-1), labels)


def shard_batch(batch, rows: slice):
    """The examples ``rows`` of a ``PretrainingBatcher`` batch (a data-parallel worker's
    share), with the flat MLM positions re-based to the smaller batch."""
    input_ids, token_type_ids, attention_mask, flat_positions, mlm_ids, weights, labels = batch
    B, S = input_ids.shape

    def per_example(flat):   # [B*P] -> this worker's rows, flat again
        return flat.reshape(B, -1)[rows].reshape(-1)

    return (input_ids[rows], token_type_ids[rows], attention_mask[rows],
            per_example(flat_positions) - rows.start * S, per_example(mlm_ids), per_example(weights), labels[rows])
