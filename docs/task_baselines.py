"""Trivial baselines of SQuAD v1.1, RACE and CoNLL-2003, scored with albert_min's metrics.

    python3 docs/task_baselines.py                 # all three, about a minute on 2 cores
    python3 docs/task_baselines.py race conll      # some of them
    python3 docs/task_baselines.py squad-ceiling   # not a baseline: the SQuAD pipeline's ceiling (30 s)

- RACE: chance (25%) and the majority option: the letter most often right in train,
  answered everywhere; accuracy on dev and test, middle / high / all.
- CoNLL-2003: each word's most frequent tag in eng.train ("O" for an unseen word), scored
  on eng.testa and eng.testb by albert_min.tasks.conlleval (conlleval's counting).
- SQuAD v1.1 dev (all of it, and articles 25-48): longest-overlap sentence heuristics (not the SQuAD paper's sliding-window
  baseline, which needs constituency parses): split the context into sentences, pick the one
  sharing the most question unigrams + bigrams (normalised as the metric normalises; the
  first on a tie) and answer (a) that whole sentence, (b) its words that are not in the
  question. Exact match / F1 by albert_min.tasks.squad_metric.
- squad-ceiling (not run by default): the best the SQuAD pipeline can score. Every dev
  question's first gold answer is labelled on its windows (weights/pretrained-small's
  vocabulary, 384/128/64) and those labels are decoded back as if they were the logits;
  answers over 30 pieces or ending inside a piece are what it loses.
"""

import argparse
import os
import re
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
DATA = os.path.join(os.path.dirname(ROOT), "shared", "data")

from albert_min.common.errors import AlbertMinError  # noqa: E402
from albert_min.tasks.conll import metric as conll_metric  # noqa: E402
from albert_min.tasks.conll import reading as conll_reading  # noqa: E402
from albert_min.tasks.race import metric as race_metric  # noqa: E402
from albert_min.tasks.race import reading as race_reading  # noqa: E402
from albert_min.tasks.squad import decode as squad_decode  # noqa: E402
from albert_min.tasks.squad import features as squad_features  # noqa: E402
from albert_min.tasks.squad import metric as squad_metric  # noqa: E402
from albert_min.tasks.squad import reading as squad_reading  # noqa: E402

SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+")


def race_baselines(data):
    train = race_reading.read_race(os.path.join(data, "race", "RACE", "train"))
    letter = race_metric.majority_option(train)
    rows = [f"RACE majority option from train: {race_reading.LETTERS[letter]}"]
    for split in ("dev", "test"):
        questions = race_reading.read_race(os.path.join(data, "race", "RACE", split))
        acc = race_metric.accuracy(questions, [letter] * len(questions))
        rows.append(f"RACE {split:<4}  chance 25.00 | majority {race_reading.LETTERS[letter]}: "
                    f"middle {acc['middle']:.2f}  high {acc['high']:.2f}  all {acc['all']:.2f}  "
                    f"({len(questions)} questions)")
    return rows


def conll_baselines(data):
    folder = os.path.join(data, "conll2003")
    tagger = conll_metric.majority_tagger(conll_reading.read_conll(os.path.join(folder, "eng.train")))
    rows = []
    for name in ("eng.testa", "eng.testb"):
        sentences = conll_reading.read_conll(os.path.join(folder, name))
        report = conll_metric.evaluate([(s.tags, tagger(s.words)) for s in sentences])
        per_type = "  ".join(f"{k} {v['f1']:.2f}" for k, v in report["per_type"].items())
        rows.append(f"CoNLL {name}  per-word majority tag: precision {report['precision']:.2f}  "
                    f"recall {report['recall']:.2f}  F1 {report['f1']:.2f}  (F1 by type: {per_type})")
    return rows


def sentences_of(context):
    """(start, end) character spans of the context's sentences."""
    spans, start = [], 0
    for m in SENTENCE_END.finditer(context):
        spans.append((start, m.start()))
        start = m.end()
    spans.append((start, len(context)))
    return [(s, e) for s, e in spans if context[s:e].strip()]


def grams(text):
    words = squad_metric.normalize_answer(text).split()
    return set(words) | set(zip(words, words[1:]))


def overlap_answers(example):
    """(whole best sentence, its words that are not in the question)."""
    question = grams(example.question)
    s, e = max(sentences_of(example.context), key=lambda span: len(question & grams(example.context[span[0]:span[1]])))
    sentence = example.context[s:e]
    new_words = [w for w in sentence.split() if squad_metric.normalize_answer(w) not in question]
    return sentence, " ".join(new_words)


def squad_baselines(data):
    """On all of dev-v1.1, and on articles 25-48 (the non-standard split's evaluation half)."""
    rows = []
    for articles, label in ((None, "dev-v1.1"), ((25, 48), "dev-v1.1 articles 25-48")):
        examples, _ = squad_reading.read_squad(os.path.join(data, "squad", "dev-v1.1.json"), articles=articles)
        gold = squad_reading.gold_answers(examples)
        answers = {e.qid: overlap_answers(e) for e in examples}
        for i, name in enumerate(("best-overlap sentence", "best-overlap sentence minus question words")):
            score = squad_metric.evaluate_v1(gold, {qid: a[i] for qid, a in answers.items()})
            rows.append(f"SQuAD {label}  {name}: EM {score['exact_match']:.2f}  F1 {score['f1']:.2f}  "
                        f"({score['total']} questions)")
    return rows


def squad_ceiling(data):
    from tokenizer import AlbertTokenizer
    tokenizer = AlbertTokenizer.from_pretrained(os.path.join(ROOT, "weights", "pretrained-small"))
    examples, _ = squad_reading.read_squad(os.path.join(data, "squad", "dev-v1.1.json"))

    def gold_as_logits():
        for f in squad_features.iter_features(tokenizer, examples, squad_features.WindowConfig(), with_labels=True):
            start, end = np.zeros(len(f.input_ids)), np.zeros(len(f.input_ids))
            start[f.start_position], end[f.end_position] = 20.0, 19.0
            yield f, start, end

    preds = {p.qid: p.text for p in squad_decode.decode_stream(examples, gold_as_logits(), squad_decode.DecodeConfig())}
    score = squad_metric.evaluate_v1(squad_reading.gold_answers(examples), preds)
    return [f"SQuAD dev-v1.1  ceiling (gold windows decoded back): EM {score['exact_match']:.2f}  F1 {score['f1']:.2f}"]


BASELINES = {"squad": squad_baselines, "race": race_baselines, "conll": conll_baselines}
EXTRAS = {"squad-ceiling": squad_ceiling}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("tasks", nargs="*", metavar="TASK", help=f"some of {', '.join(BASELINES)} (default: all), or squad-ceiling")
    p.add_argument("--data", default=DATA, help="the folder holding squad/, race/ and conll2003/")
    args = p.parse_args()
    known = {**BASELINES, **EXTRAS}
    unknown = sorted(set(args.tasks) - set(known))
    if unknown:
        p.error(f"unknown task {unknown[0]!r}; choose from {', '.join(known)}")
    for task in args.tasks or BASELINES:
        try:
            print("\n".join(known[task](args.data)), flush=True)
        except (AlbertMinError, OSError) as err:
            sys.exit(f"error: {err}")


if __name__ == "__main__":
    main()
