"""CoNLL-2003 entity scores, counted as the shared task's ``conlleval`` (Perl) counts them.

A tag is ``PREFIX-TYPE`` (split at the first hyphen) or a bare ``O``. Chunks start and end
by conlleval's rules on (previous tag, tag), which read IOB1 (``I-`` inside, ``B-`` only
where a chunk follows an adjacent chunk of the same type) as well as IOB2 and IOE: a change
of type always ends one chunk and starts another, so ``I-PER I-LOC`` is two entities.
An entity is correct when the gold and the predicted chunk start on the same token, end on
the same token and have the same type. Sentence breaks end every chunk.

Scores are percentages: precision = correct / predicted chunks, recall = correct / gold
chunks, F1 their harmonic mean (0 where undefined), overall and per type; accuracy is the
share of tokens whose whole tag is right.
"""

import dataclasses


def split_tag(tag):
    """"I-PER" -> ("I", "PER"); "O" -> ("O", "")."""
    prefix, dash, kind = tag.partition("-")
    return (prefix, kind) if dash else (tag, "")


def chunk_ends(prev_tag, tag, prev_type, kind):
    """Does a chunk end between the previous token and this one? (conlleval's endOfChunk)."""
    if (prev_tag, tag) in {("B", "B"), ("B", "O"), ("I", "B"), ("I", "O"), ("E", "E"), ("E", "I"), ("E", "O")}:
        return True
    if prev_tag not in ("O", ".") and prev_type != kind:
        return True
    return prev_tag in ("[", "]")   # one-token chunk markers


def chunk_starts(prev_tag, tag, prev_type, kind):
    """Does a chunk start at this token? (conlleval's startOfChunk)."""
    if (prev_tag, tag) in {("B", "B"), ("I", "B"), ("O", "B"), ("O", "I"), ("E", "E"), ("E", "I"), ("O", "E")}:
        return True
    if tag not in ("O", ".") and prev_type != kind:
        return True
    return tag in ("[", "]")


@dataclasses.dataclass
class ChunkCounts:
    correct: dict = dataclasses.field(default_factory=dict)     # type -> correctly found chunks
    gold: dict = dataclasses.field(default_factory=dict)        # type -> chunks in the gold tags
    predicted: dict = dataclasses.field(default_factory=dict)   # type -> chunks in the predicted tags
    tokens: int = 0
    correct_tags: int = 0

    def add(self, table, kind):
        table[kind] = table.get(kind, 0) + 1


def count_chunks(sentences):
    """``sentences``: iterable of (gold tags, predicted tags) lists of one sentence each.

    Walks the tokens exactly as conlleval does, a sentence break acting as an ``O``/``O`` token.
    """
    counts = ChunkCounts()
    last_gold, last_pred, last_gold_type, last_pred_type = "O", "O", "", ""
    in_correct = False
    # A trailing break closes the last sentence's chunks like the blank line after it would.
    for gold_tags, pred_tags in _with_breaks(sentences):
        for gold_tag, pred_tag in zip(gold_tags, pred_tags):
            boundary = gold_tag is None
            gold, gold_type = ("O", "") if boundary else split_tag(gold_tag)
            pred, pred_type = ("O", "") if boundary else split_tag(pred_tag)
            gold_end = chunk_ends(last_gold, gold, last_gold_type, gold_type)
            pred_end = chunk_ends(last_pred, pred, last_pred_type, pred_type)
            if in_correct:
                if gold_end and pred_end and last_gold_type == last_pred_type:
                    in_correct = False
                    counts.add(counts.correct, last_gold_type)
                elif gold_end != pred_end or gold_type != pred_type:
                    in_correct = False
            gold_start = chunk_starts(last_gold, gold, last_gold_type, gold_type)
            pred_start = chunk_starts(last_pred, pred, last_pred_type, pred_type)
            if gold_start and pred_start and gold_type == pred_type:
                in_correct = True
            if gold_start:
                counts.add(counts.gold, gold_type)
            if pred_start:
                counts.add(counts.predicted, pred_type)
            if not boundary:
                counts.tokens += 1
                counts.correct_tags += gold == pred and gold_type == pred_type
            last_gold, last_pred, last_gold_type, last_pred_type = gold, pred, gold_type, pred_type
    if in_correct:
        counts.add(counts.correct, last_gold_type)
    return counts


def entities(tags):
    """The chunks of one sentence's tags as conlleval reads them: [(type, first, last)] word
    positions, last inclusive (e.g. for a pipeline turning tags into character spans)."""
    out, last_tag, last_type = [], "O", ""
    for i, tag in enumerate(list(tags) + ["O"]):
        prefix, kind = split_tag(tag)
        if out and out[-1][2] is None and chunk_ends(last_tag, prefix, last_type, kind):
            out[-1] = (out[-1][0], out[-1][1], i - 1)
        if i < len(tags) and chunk_starts(last_tag, prefix, last_type, kind):
            out.append((kind, i, None))
        last_tag, last_type = prefix, kind
    return out


def _with_breaks(sentences):
    for gold_tags, pred_tags in sentences:
        if len(gold_tags) != len(pred_tags):
            raise ValueError(f"a sentence has {len(gold_tags)} gold tags but {len(pred_tags)} predicted")
        yield gold_tags, pred_tags
        yield [None], [None]


def prf(correct, gold, predicted):
    """(precision %, recall %, F1 %), 0 where a denominator is 0 (as conlleval prints them)."""
    precision = 100.0 * correct / predicted if predicted else 0.0
    recall = 100.0 * correct / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def evaluate(sentences):
    """conlleval's report as a dict: overall precision/recall/f1/accuracy and chunk counts,
    and ``per_type`` {type: {precision, recall, f1, predicted}} for every type seen."""
    c = count_chunks(sentences)
    total = {name: sum(table.values()) for name, table in
             (("correct", c.correct), ("gold", c.gold), ("predicted", c.predicted))}
    precision, recall, f1 = prf(total["correct"], total["gold"], total["predicted"])
    report = {"precision": precision, "recall": recall, "f1": f1,
              "accuracy": 100.0 * c.correct_tags / c.tokens if c.tokens else 0.0,
              "tokens": c.tokens, "gold_chunks": total["gold"], "predicted_chunks": total["predicted"],
              "correct_chunks": total["correct"], "per_type": {}}
    for kind in sorted(set(c.gold) | set(c.predicted)):
        p, r, f = prf(c.correct.get(kind, 0), c.gold.get(kind, 0), c.predicted.get(kind, 0))
        report["per_type"][kind] = {"precision": p, "recall": r, "f1": f, "predicted": c.predicted.get(kind, 0)}
    return report


def format_report(report):
    """The lines conlleval prints, numbers formatted as it formats them."""
    lines = [f"processed {report['tokens']} tokens with {report['gold_chunks']} phrases; "
             f"found: {report['predicted_chunks']} phrases; correct: {report['correct_chunks']}.",
             f"accuracy: {report['accuracy']:6.2f}%; precision: {report['precision']:6.2f}%; "
             f"recall: {report['recall']:6.2f}%; FB1: {report['f1']:6.2f}"]
    for kind, s in report["per_type"].items():
        lines.append(f"{kind:>17}: precision: {s['precision']:6.2f}%; recall: {s['recall']:6.2f}%; "
                     f"FB1: {s['f1']:6.2f}  {s['predicted']}")
    return "\n".join(lines)


def majority_tagger(sentences):
    """The per-word majority baseline: each training word's most frequent tag (ties: the tag
    seen first); returns a function words -> tags, "O" for an unseen word."""
    counts = {}
    for s in sentences:
        for word, tag in zip(s.words, s.tags):
            by_tag = counts.setdefault(word, {})
            by_tag[tag] = by_tag.get(tag, 0) + 1
    best = {word: max(by_tag, key=by_tag.get) for word, by_tag in counts.items()}
    return lambda words: [best.get(w, "O") for w in words]
