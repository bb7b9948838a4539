"""SQuAD exact match and F1, counted as the official evaluation scripts count them.

v1.1 (``evaluate-v1.1.py``): every question of the dataset is in the average; a question
without a prediction scores 0. An answer and a prediction are compared after
``normalize_answer``; the score of a question is its best over the gold answers.

v2.0 (``evaluate-v2.0.py``): gold answers that normalise to nothing are dropped, and a
question left with none (unanswerable) has the single gold answer "" - only an empty
prediction is right. Questions without a prediction are left out of the average. With
per-question no-answer probabilities (``null_odds``) a question whose probability is above
``na_prob_thresh`` counts as answered "no answer"; scores are also split into HasAns and
NoAns, and ``best_exact`` / ``best_f1`` are the scores at the best threshold.
"""

import collections
import re
import string

_PUNCTUATION = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(text):
    """Lower-case, drop ASCII punctuation, drop the articles a/an/the, collapse white space."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction, gold):
    return int(normalize_answer(prediction) == normalize_answer(gold))


def f1_v1(prediction, gold):
    """v1.1's token F1: 0 when nothing is shared (also when either side is empty)."""
    pred_tokens, gold_tokens = normalize_answer(prediction).split(), normalize_answer(gold).split()
    same = sum((collections.Counter(pred_tokens) & collections.Counter(gold_tokens)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred_tokens), same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def f1_v2(prediction, gold):
    """v2.0's token F1: as v1.1, except that when either side is empty it is 1 if both are."""
    pred_tokens, gold_tokens = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if not pred_tokens or not gold_tokens:
        return float(pred_tokens == gold_tokens)
    return f1_v1(prediction, gold)


def evaluate_v1(gold_answers, predictions):
    """``gold_answers``: {question id: [answer texts]} in dataset order; ``predictions``:
    {question id: text}. Returns {"exact_match": %, "f1": %, "total": n, "missing": n}."""
    exact = f1 = 0.0
    missing = 0
    for qid, answers in gold_answers.items():
        if not answers:
            raise ValueError(f"question {qid} has no gold answer; score v2.0 files with evaluate_v2")
        if qid not in predictions:
            missing += 1   # scores 0, still counted in the total
            continue
        exact += max(exact_match(predictions[qid], a) for a in answers)
        f1 += max(f1_v1(predictions[qid], a) for a in answers)
    total = len(gold_answers)
    return {"exact_match": 100.0 * exact / total, "f1": 100.0 * f1 / total, "total": total, "missing": missing}


def raw_scores_v2(gold_answers, predictions):
    """Per-question (exact, f1) dicts over the questions that have a prediction."""
    exact, f1 = {}, {}
    for qid, answers in gold_answers.items():
        if qid not in predictions:
            continue
        golds = [a for a in answers if normalize_answer(a)] or [""]
        exact[qid] = max(exact_match(predictions[qid], a) for a in golds)
        f1[qid] = max(f1_v2(predictions[qid], a) for a in golds)
    return exact, f1


def apply_no_answer_threshold(scores, na_probs, has_answer, threshold):
    """A question whose no-answer probability is above ``threshold`` is answered "no answer":
    right (1) exactly when it has no answer."""
    return {qid: (float(not has_answer[qid]) if na_probs[qid] > threshold else score)
            for qid, score in scores.items()}


def _mean(scores, qids):
    return 100.0 * sum(scores[q] for q in qids) / len(qids)


def best_threshold(predictions, scores, na_probs, has_answer):
    """The official sweep: start from "every question answered no-answer" (the unanswerable ones
    right), then answer the questions in increasing no-answer probability; keep the best total.

    As the script does, the start counts the unanswerable questions of the whole dataset and the
    total divides by the questions that have a prediction. Returns (best score %, threshold).
    """
    score = best = sum(1 for q in has_answer if not has_answer[q])
    threshold = 0.0
    for qid in sorted(na_probs, key=lambda q: na_probs[q]):
        if qid not in scores:
            continue
        if has_answer[qid]:
            score += scores[qid]
        elif predictions[qid]:
            score -= 1
        if score > best:
            best, threshold = score, na_probs[qid]
    return 100.0 * best / len(scores), threshold


def evaluate_v2(gold_answers, predictions, na_probs=None, na_prob_thresh=1.0):
    """``gold_answers``: {question id: [answer texts]} ([] for an unanswerable question);
    ``predictions``: {question id: text, "" for no answer}; ``na_probs``: {question id:
    no-answer probability} or None (then all 0 and no best thresholds, as the script).

    Returns the script's dict: exact, f1, total, HasAns_*/NoAns_* when such questions exist,
    and best_exact(_thresh), best_f1(_thresh) when ``na_probs`` is given.
    """
    has_answer = {qid: bool(answers) for qid, answers in gold_answers.items()}
    probs = na_probs if na_probs is not None else {qid: 0.0 for qid in predictions}
    exact_raw, f1_raw = raw_scores_v2(gold_answers, predictions)
    if not exact_raw:
        raise ValueError("no prediction for any question of the dataset")
    exact = apply_no_answer_threshold(exact_raw, probs, has_answer, na_prob_thresh)
    f1 = apply_no_answer_threshold(f1_raw, probs, has_answer, na_prob_thresh)
    out = {"exact": _mean(exact, list(exact)), "f1": _mean(f1, list(f1)), "total": len(exact)}
    for name, wanted in (("HasAns", True), ("NoAns", False)):
        # The script lists the split's questions from the dataset, so one without a prediction
        # there is a KeyError; here it is simply not in the split.
        qids = [q for q, has in has_answer.items() if has == wanted and q in exact]
        if qids:
            out.update({f"{name}_exact": _mean(exact, qids), f"{name}_f1": _mean(f1, qids),
                        f"{name}_total": len(qids)})
    if na_probs is not None:
        out["best_exact"], out["best_exact_thresh"] = best_threshold(predictions, exact_raw, probs, has_answer)
        out["best_f1"], out["best_f1_thresh"] = best_threshold(predictions, f1_raw, probs, has_answer)
    return out
