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
Prediction per question as soon as its last window has passed, so no more than one
question's logits are held, whatever the size of the dev set.
"""

import dataclasses
import math
import os

import numpy as np

from .files import write_json


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


def window_candidates(feature, start_logits, end_logits, config: DecodeConfig):
    """(score, start character, end character) of every admissible span of one window."""
    start_logits, end_logits = np.asarray(start_logits), np.asarray(end_logits)
    n = len(feature.input_ids)
    first, last = feature.context_start, feature.context_start + len(feature.offsets) - 1
    top_starts = np.argsort(-start_logits[:n], kind="stable")[:config.n_best]
    top_ends = np.argsort(-end_logits[:n], kind="stable")[:config.n_best]
    out = []
    for s in top_starts:
        if not first <= s <= last or not feature.is_max_context[s - first]:
            continue
        for e in top_ends:
            if not s <= e <= last or e - s + 1 > config.max_answer_length:
                continue
            chars = (feature.offsets[s - first][0], feature.offsets[e - first][1])
            out.append((float(start_logits[s] + end_logits[e]), chars[0], chars[1]))
    return out


def decode_question(example, windows, config: DecodeConfig):
    """One question's Prediction from its windows [(feature, start_logits, end_logits)]."""
    candidates, null_score = [], math.inf
    for feature, start_logits, end_logits in windows:
        candidates += window_candidates(feature, start_logits, end_logits, config)
        null_score = min(null_score, float(start_logits[0] + end_logits[0]))
    candidates.sort(key=lambda c: -c[0])
    nbest, seen = [], set()
    for score, start, end in candidates:
        text = example.context[start:end]
        if text in seen or not text.strip():   # a repeat (keep its best score), or only "▁" pieces
            continue
        seen.add(text)
        nbest.append({"text": text, "score": score, "start": start, "end": end})
        if len(nbest) == config.n_best:
            break
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


def decode_stream(examples, scored_features, config: DecodeConfig):
    """Yield a Prediction per question from (feature, start_logits, end_logits) in feature order
    (as ``squad.iter_features`` makes them); a question's windows must be consecutive."""
    current, windows, done = None, [], set()
    for feature, start_logits, end_logits in scored_features:
        if feature.example_index != current:
            if windows:
                yield decode_question(examples[current], windows, config)
            if feature.example_index in done:
                raise ValueError(f"question {examples[feature.example_index].qid}: its windows are not consecutive")
            done.add(feature.example_index)
            current, windows = feature.example_index, []
        windows.append((feature, start_logits, end_logits))
    if windows:
        yield decode_question(examples[current], windows, config)


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
