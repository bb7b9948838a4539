"""conlleval's entity counts on hand-made IOB1 sentences, with values computed by hand."""
import random

import pytest

from albert_min.tasks.conll.metric import count_chunks, entities, evaluate, format_report
from albert_min.tasks.conll.writing import write_columns

SENTENCES = [
    # IOB1: B- starts a second PER right after the first; the prediction merges them.
    (["I-PER", "I-PER", "B-PER", "O"], ["I-PER", "I-PER", "I-PER", "O"]),
    # touching entities of different types: two chunks, both found
    (["I-LOC", "I-ORG"], ["I-LOC", "I-ORG"]),
    # right start, wrong end
    (["O", "I-ORG", "I-ORG", "O"], ["O", "I-ORG", "O", "O"]),
    # right span, wrong type
    (["I-PER"], ["I-ORG"]),
    # a sentence break ends a chunk: I-MISC | I-MISC O are two entities
    (["I-MISC"], ["I-MISC"]),
    (["I-MISC", "O"], ["I-MISC", "O"]),
]


def test_counts_by_hand():
    c = count_chunks(SENTENCES)
    assert c.gold == {"PER": 3, "LOC": 1, "ORG": 2, "MISC": 2}
    assert c.predicted == {"PER": 1, "LOC": 1, "ORG": 3, "MISC": 2}
    assert c.correct == {"LOC": 1, "ORG": 1, "MISC": 2}
    assert (c.tokens, c.correct_tags) == (14, 11)


def test_scores_by_hand():
    r = evaluate(SENTENCES)
    assert r["precision"] == pytest.approx(400 / 7)          # 4 of 7 found
    assert r["recall"] == pytest.approx(50.0)                # 4 of 8
    assert r["f1"] == pytest.approx(800 / 15)                # 2*4 / (7+8)
    assert r["accuracy"] == pytest.approx(1100 / 14)
    assert list(r["per_type"]) == ["LOC", "MISC", "ORG", "PER"]
    assert r["per_type"]["PER"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "predicted": 1}
    org = r["per_type"]["ORG"]
    assert (org["precision"], org["recall"], org["f1"]) == (pytest.approx(100 / 3), 50.0, pytest.approx(40.0))
    assert r["per_type"]["LOC"]["f1"] == 100.0


def test_report_lines_as_conlleval_prints_them():
    lines = format_report(evaluate(SENTENCES)).splitlines()
    assert lines[0] == "processed 14 tokens with 8 phrases; found: 7 phrases; correct: 4."
    assert lines[1] == "accuracy:  78.57%; precision:  57.14%; recall:  50.00%; FB1:  53.33"
    assert lines[4] == "              ORG: precision:  33.33%; recall:  50.00%; FB1:  40.00  3"


@pytest.mark.parametrize("gold, pred, correct", [
    (["I-PER", "I-PER"], ["B-PER", "I-PER"], 1),      # B- after O starts a chunk (IOB2 style reads the same)
    (["I-PER", "O"], ["I-PER", "I-PER"], 0),          # the prediction runs on past the end
    (["B-PER", "B-PER"], ["I-PER", "B-PER"], 2),      # B- B-: two one-word entities either way
    (["I-PER", "B-PER"], ["I-PER", "I-PER"], 0),      # the touching pair read as one entity
    (["I-ORG", "I-ORG"], ["I-ORG", "I-LOC"], 0),      # a type change inside splits the chunk
])
def test_boundaries(gold, pred, correct):
    assert sum(count_chunks([(gold, pred)]).correct.values()) == correct


def spans(tags):
    """An independent IOB1 reader: (start, end, type) of every entity."""
    out, start = [], None
    for i, tag in enumerate(tags + ["O"]):
        prefix, _, kind = tag.partition("-")
        prev_kind = tags[i - 1].partition("-")[2] if i else None
        continues = prefix == "I" and start is not None and kind == prev_kind
        if start is not None and not continues:
            out.append((start, i, prev_kind))
            start = None
        if prefix in ("B", "I") and start is None:
            start = i
    return set(out)


def random_iob1(rng, n):
    tags, prev = [], "O"
    for _ in range(n):
        kind = rng.choice(["O", "PER", "ORG"])
        if kind == "O":
            tag = "O"
        else:   # IOB1: B- only directly after an entity of the same type
            tag = ("B-" if prev[2:] == kind and rng.random() < 0.5 else "I-") + kind
        tags.append(tag)
        prev = tag
    return tags


def test_agrees_with_exact_span_matching_on_valid_iob1():
    rng = random.Random(0)
    for _ in range(300):
        sentences = [(random_iob1(rng, 6), random_iob1(rng, 6)) for _ in range(3)]
        c = count_chunks(sentences)
        gold = sum(len(spans(g)) for g, _ in sentences)
        pred = sum(len(spans(p)) for _, p in sentences)
        both = sum(len(spans(g) & spans(p)) for g, p in sentences)
        assert (sum(c.gold.values()), sum(c.predicted.values()), sum(c.correct.values())) == (gold, pred, both)


def test_sentences_of_different_lengths_are_refused():
    with pytest.raises(ValueError, match="2 gold tags but 1"):
        count_chunks([(["O", "O"], ["O"])])


def test_write_columns(tmp_path):
    path = str(tmp_path / "pred.txt")
    write_columns(path, [(["EU", "rejects"], ["I-ORG", "O"], ["I-ORG", "I-ORG"]), (["Peter"], ["I-PER"], ["O"])])
    assert open(path).read() == "EU I-ORG I-ORG\nrejects O I-ORG\n\nPeter I-PER O\n\n"
    with pytest.raises(ValueError, match="white space"):
        write_columns(path, [(["New York"], ["I-LOC"], ["I-LOC"])])
    assert open(path).read().startswith("EU")   # the old file is still whole


@pytest.mark.parametrize("tags, expected", [
    (["I-PER", "I-PER", "B-PER", "O", "I-LOC"], [("PER", 0, 1), ("PER", 2, 2), ("LOC", 4, 4)]),
    (["I-LOC", "I-ORG", "I-ORG"], [("LOC", 0, 0), ("ORG", 1, 2)]),
    (["B-PER", "I-PER", "O", "O"], [("PER", 0, 1)]),      # IOB2 reads the same
    (["O", "O"], []),
])
def test_entities(tags, expected):
    assert entities(tags) == expected
