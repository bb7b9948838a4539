"""SQuAD decoding: the QA head's start/end logits over a question's windows -> answer text,
and the official prediction files.

As Google's ``run_squad``: in each window take the ``n_best`` highest start and end logits;
a pair is a candidate when both are context pieces, the start is the piece's max-context
window (``SquadFeature.is_max_context``), end >= start and it spans at most
``max_answer_length`` pieces; its score is start logit + end logit. The text is cut from the
original context between the start piece's first and the end piece's last character. For
v2.0 the null score is the smallest [CLS] start + end logit over the windows; the question
is answered "" when null score - best span score > ``null_score_diff_threshold``, and that
difference is its entry in null_odds.json.

``decode_stream`` reads (feature, start_logits, end_logits) in feature order and yields one
Prediction per question as soon as its last window has passed; each window is decoded as it
comes (``QuestionDecoder``), so only the n best answers so far are held, whatever the size of
the dev set or of one context.
"""

import dataclasses
import math
import os

import numpy as np

from ..file_io import write_json


@dataclasses.dataclass
class DecodeConfig:
    n_best: int = 20                          # start and end candidates per window, answers kept
    max_answer_length: int = 30               # pieces in an answer, at most
    null_score_diff_threshold: float = 0.0    # v2.0: answer "" when null - best span is above it
    version_2: bool = False                   # v2.0: allow "no answer"


@dataclasses.dataclass
class Prediction:
    qid: str
    text: str            # the answer ("" for no answer in v2.0)
    null_odds: float     # v2.0: null score - best span score (null_odds.json); 0 for v1.1
    nbest: list          # [{"text", "score", "probability", "start", "end"}], best first


def window_spans(feature, start_logits, end_logits, config: DecodeConfig):
    """Every admissible span of one window, as arrays in ``run_squad``'s order (the ``n_best``
    starts, best first, then for each its ``n_best`` ends, best first): (scores: start logit + end
    logit in the logits' dtype, start positions, end positions), positions in the window."""
    start_logits, end_logits = np.asarray(start_logits), np.asarray(end_logits)
    n = len(feature.input_ids)
    first, last = feature.context_start, feature.context_start + len(feature.offsets) - 1
    top_starts = np.argsort(-start_logits[:n], kind="stable")[:config.n_best]         # (K,)
    top_ends = np.argsort(-end_logits[:n], kind="stable")[:config.n_best]             # (K,)
    in_context = (first <= top_starts) & (top_starts <= last)
    max_context = np.zeros(len(top_starts), bool)
    max_context[in_context] = np.asarray(feature.is_max_context, bool)[top_starts[in_context] - first]
    s, e = top_starts[:, None], top_ends[None, :]                                      # (K, 1), (1, K)
    admissible = max_context[:, None] & (s <= e) & (e <= last) & (e - s + 1 <= config.max_answer_length)
    which_start, which_end = np.nonzero(admissible)                                    # row-major: starts first
    starts, ends = top_starts[which_start], top_ends[which_end]
    return start_logits[starts] + end_logits[ends], starts, ends


def window_candidates(feature, start_logits, end_logits, config: DecodeConfig):
    """(score, start character, end character) of every admissible span of one window."""
    scores, starts, ends = window_spans(feature, start_logits, end_logits, config)
    first = feature.context_start
    return [(float(score), feature.offsets[s - first][0], feature.offsets[e - first][1])
            for score, s, e in zip(scores, starts, ends)]


class QuestionDecoder:
    """One question's answer, decoded as its windows come (``add``), holding only what the
    answer needs: the ``n_best`` best distinct answer texts so far and the null score, never
    every window or candidate (a 4 MB context is some 130,000 windows of 64 pieces).

    ``result`` is what sorting every candidate of every window by score and keeping the first
    ``n_best`` distinct non-blank texts gives (``run_squad``'s n-best list): a text scores its best
    candidate, and among equal scores the earliest candidate (window order, then start, then end)
    comes first. A text pushed out of the n best can come back only with a better score than
    the one that now stands last, which can only rise, so nothing a later window could need is lost.
    """

    def __init__(self, example, config: DecodeConfig):
        self.example, self.config = example, config
        self.best = {}                    # text -> (score, order, start character, end character)
        self.last = None                  # the text ranked last in ``best`` once it is full
        self.seen = 0                     # candidates offered so far: the next one's order
        self.null_score = math.inf

    def add(self, feature, start_logits, end_logits):
        scores, starts, ends = window_spans(feature, start_logits, end_logits, self.config)
        order, first = self.seen, feature.context_start
        self.seen += len(scores)
        self.null_score = min(self.null_score, float(start_logits[0] + end_logits[0]))
        candidates = np.arange(len(scores))
        if self.last is not None:         # full: only a better score than the last one's can enter
            candidates = candidates[scores > self.best[self.last][0]]
        for i in candidates:
            self._offer(float(scores[i]), order + int(i), feature.offsets[starts[i] - first][0],
                        feature.offsets[ends[i] - first][1])

    def _offer(self, score, order, start, end):
        text = self.example.context[start:end]
        if not text.strip():              # only "▁" pieces
            return
        kept = self.best.get(text)
        if kept is not None:              # a repeat: it keeps its best score (the earliest on a tie)
            if score > kept[0]:
                self.best[text] = (score, order, start, end)
                self._rank()
            return
        if self.last is not None:
            if (-score, order) >= _rank_key(self.best[self.last]):
                return
            del self.best[self.last]
        self.best[text] = (score, order, start, end)
        self._rank()

    def _rank(self):
        full = len(self.best) == self.config.n_best
        self.last = max(self.best, key=lambda t: _rank_key(self.best[t])) if full else None

    def result(self):
        """The question's Prediction."""
        ranked = sorted(self.best.items(), key=lambda item: _rank_key(item[1]))
        nbest = [{"text": text, "score": score, "start": start, "end": end}
                 for text, (score, _, start, end) in ranked]
        return prediction(self.example, nbest, self.null_score, self.config)


def _rank_key(kept):
    """Best first: the higher score, then the earlier candidate."""
    score, order, _, _ = kept
    return -score, order


def prediction(example, nbest, null_score, config: DecodeConfig):
    """The Prediction from a question's n-best distinct answers (best first) and its null score."""
    if config.version_2:
        nbest.append({"text": "", "score": null_score, "start": 0, "end": 0})
        nbest.sort(key=lambda c: -c["score"])
    if not nbest:
        nbest.append({"text": "", "score": 0.0, "start": 0, "end": 0})
    scores = np.array([c["score"] for c in nbest])
    probabilities = np.exp(scores - scores.max())
    for c, p in zip(nbest, probabilities / probabilities.sum()):
        c["probability"] = float(p)
    best_span = next((c for c in nbest if c["text"]), None)
    if not config.version_2:
        return Prediction(example.qid, nbest[0]["text"], 0.0, nbest)
    if best_span is None:   # no admissible span: no answer, odds against a span scored 0 (Google's "empty")
        return Prediction(example.qid, "", null_score, nbest)
    diff = null_score - best_span["score"]
    text = "" if diff > config.null_score_diff_threshold else best_span["text"]
    return Prediction(example.qid, text, diff, nbest)


def decode_question(example, windows, config: DecodeConfig):
    """One question's Prediction from its windows [(feature, start_logits, end_logits)]."""
    decoder = QuestionDecoder(example, config)
    for window in windows:
        decoder.add(*window)
    return decoder.result()


def decode_stream(examples, scored_features, config: DecodeConfig):
    """Yield a Prediction per question from (feature, start_logits, end_logits) in feature order
    (as ``squad.iter_features`` makes them); a question's windows must be consecutive. Each
    window is decoded as it comes (``QuestionDecoder``) and then let go."""
    current, decoder, done = None, None, set()
    for feature, start_logits, end_logits in scored_features:
        if feature.example_index != current:
            if decoder is not None:
                yield decoder.result()
            if feature.example_index in done:
                raise ValueError(f"question {examples[feature.example_index].qid}: its windows are not consecutive")
            done.add(feature.example_index)
            current, decoder = feature.example_index, QuestionDecoder(examples[feature.example_index], config)
        decoder.add(feature, start_logits, end_logits)
    if decoder is not None:
        yield decoder.result()


def write_predictions(directory, predictions, version_2=False):
    """The official files: predictions.json {id: text} and, for v2.0, null_odds.json {id: odds}.
    Returns the paths written."""
    predictions = list(predictions)
    paths = [os.path.join(directory, "predictions.json")]
    write_json(paths[0], {p.qid: p.text for p in predictions}, record=True)
    if version_2:
        paths.append(os.path.join(directory, "null_odds.json"))
        write_json(paths[1], {p.qid: p.null_odds for p in predictions}, record=True)
    return paths
