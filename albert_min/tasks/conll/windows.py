"""Tagging a text longer than one window: overlapping windows of whole words, as SQuAD windows a context.

A CoNLL sentence fits in ``max_length`` pieces (a word beyond it is predicted ``O`` and
counted, as the file is scored); a pipeline's text can be a whole book. Its words are cut
into windows of at most ``max_length - 2`` pieces ([CLS] and [SEP] take the other two),
each starting about ``stride`` pieces after the one before (half a window by default), so
that every word lies in one window or two. A word takes its tag from the window where it
has the most context: SQuAD's rule (``_check_is_max_context`` in Google's ``run_squad``),
the larger min(pieces on its left, pieces on its right), plus 0.01 per piece of the window,
the first window on a tie. A text that fits one window gets exactly the features
``conll.encode_sentences`` gives it, so its tags are what evaluate.py would predict.

Windows are found in one pass over the words (``word_windows``): linear in the text's length.
"""

import dataclasses

from ..task_base import Prepared
from .features import Features, IGNORE


@dataclasses.dataclass
class Window:
    text: int       # which text of the call
    start: int      # its first word
    end: int        # one past its last word


def default_stride(max_length):
    """Half a window: every word then has a quarter of a window of context on each side,
    except near the text's ends."""
    return max(1, (max_length - 2) // 2)


def word_windows(sizes, capacity, stride):
    """``[(first word, end word)]`` covering words of ``sizes`` pieces (each at most
    ``capacity``), each window holding as many words as fit in ``capacity`` pieces and
    starting at the first word at least ``stride`` pieces after the previous window's start
    from which a new word fits (never past its end, so no word is skipped). Starts and ends
    only move on: linear in ``len(sizes)``."""
    windows, start, end, filled = [], 0, 0, 0
    while True:
        while end < len(sizes) and filled + sizes[end] <= capacity:
            filled, end = filled + sizes[end], end + 1
        windows.append((start, end))
        if end == len(sizes):
            return windows
        moved = 0
        while start < end and (moved < stride or filled + sizes[end] > capacity):   # on to a new word
            moved, filled, start = moved + sizes[start], filled - sizes[start], start + 1


def prepare_windows(texts, tokenizer, label_names, max_length, stride=None):
    """``texts``: lists of words -> a ``Prepared`` that ``ConllTask.predict`` reads, one row per
    window (its examples: the ``Window``s), and, per text, each word's (row, index in the row)
    of the window where it has the most context (None for a word without pieces)."""
    if max_length < 3:
        raise ValueError(f"max_length={max_length} leaves no room for a word")
    capacity, stride = max_length - 2, stride or default_stride(max_length)
    feats, windows, best = Features([], [], [], 0), [], []
    for t, words in enumerate(texts):
        pieces = [tokenizer.encode_ids(w)[:capacity] for w in words]   # a word's tag is its first piece's
        chosen, scores = [None] * len(words), [-1.0] * len(words)
        for start, end in word_windows([len(p) for p in pieces], capacity, stride):
            ids, first = [tokenizer.cls_token_id], []
            for w in range(start, end):
                first.append(len(ids) if pieces[w] else -1)
                ids += pieces[w]
            length = len(ids) - 1                     # the window's pieces
            for i, position in enumerate(first):
                score = min(position - 1, length - position) + 0.01 * length
                if position > 0 and score > scores[start + i]:
                    scores[start + i], chosen[start + i] = score, (len(windows), i)
            feats.input_ids.append(ids + [tokenizer.sep_token_id])
            feats.labels.append([IGNORE] * (len(ids) + 1))
            feats.first_piece.append(first)
            windows.append(Window(t, start, end))
        feats.dropped_words += chosen.count(None)
        best.append(chosen)
    return Prepared(windows, {"features": feats, "tokenizer": tokenizer, "label_names": label_names, "best": best},
                    max_length)


def text_tags(prepared, outputs):
    """Per text, its words' tags from ``ConllTask.predict``'s outputs on ``prepare_windows``'s
    rows: each word's from its best window, "O" for a word without pieces."""
    rows = [tags for batch_tags in outputs for tags in batch_tags]
    return [["O" if at is None else rows[at[0]][at[1]] for at in chosen] for chosen in prepared.features["best"]]
