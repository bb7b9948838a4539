"""SQuAD reader, sliding windows, decoding and prediction files, on hand-made examples."""
import json
import os

import numpy as np
import pytest

from albert_min.tasks.errors import DataError
from albert_min.tasks.squad import decode as squad_decode
from albert_min.tasks.squad import features as squad_features
from albert_min.tasks.squad import reading as squad_reading
from albert_min.tasks.squad.metric import evaluate_v1
from tokenizer import AlbertTokenizer

from helpers.paths import FIXTURES, ROOT  # noqa: E402
SQUAD_DEV = os.path.join(ROOT, "..", "shared",
                         "data", "squad", "dev-v1.1.json")
CONTEXT = "The old cat sat on the red mat near the door. It was happy there, and it slept all day long."


@pytest.fixture(scope="module")
def tok():
    return AlbertTokenizer(os.path.join(FIXTURES, "spiece_sst2_2k.model"))


def write(tmp_path, obj, name="s.json"):
    path = tmp_path / name
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return str(path)


def dataset(*qas, context=CONTEXT, version="1.1"):
    return {"version": version, "data": [{"title": "t", "paragraphs": [{"context": context, "qas": list(qas)}]}]}


def qa(qid, question="Where did the cat sit?", answers=(("the red mat", None),), **extra):
    return {"id": qid, "question": question,
            "answers": [{"text": t, "answer_start": CONTEXT.index(t) if s is None else s} for t, s in answers],
            **extra}


# ------------------------------------------------------------------ reader
def test_reads_v1_and_v2(tmp_path):
    examples, is_v2 = squad_reading.read_squad(write(tmp_path, dataset(qa("q1"), qa("q2", answers=[("cat", None)]))))
    assert not is_v2 and [e.qid for e in examples] == ["q1", "q2"]
    assert examples[0].answers == [("the red mat", CONTEXT.index("the red mat"))]
    examples, is_v2 = squad_reading.read_squad(write(tmp_path, dataset(qa("q1"), qa("q2", answers=[], is_impossible=True),
                                                               version="v2.0")))
    assert is_v2 and examples[1].is_impossible and examples[1].answers == []
    assert squad_reading.gold_answers(examples) == {"q1": ["the red mat"], "q2": []}


def test_article_range_for_the_dev_split(tmp_path):
    three = {"version": "1.1", "data": [dataset(qa(f"q{i}"))["data"][0] for i in range(1, 4)]}
    path = write(tmp_path, three)
    assert [e.qid for e in squad_reading.read_squad(path, articles=(2, 3))[0]] == ["q2", "q3"]
    assert [e.qid for e in squad_reading.read_squad(path, articles=(1, 1))[0]] == ["q1"]
    with pytest.raises(DataError, match=r"articles 2-4 asked, the file has 1-3"):
        squad_reading.read_squad(path, articles=(2, 4))


@pytest.mark.parametrize("data, message", [
    ("{not json", r"s\.json:1: not JSON"),
    ({"version": "1.1"}, r"s\.json: not SQuAD JSON"),
    (dataset(qa("q1", answers=[("the red mat", 200)])), r"s\.json: question q1: answer_start 200"),
    (dataset(qa("q1"), qa("q1")), r"s\.json: question q1: the id appears twice"),
    (dataset(qa("q7", is_impossible=True)), r"question q7: is_impossible is true but it has 1 answers"),
    (dataset(qa("q8", question=" ")), r"question q8: no \"question\" text"),
    (dataset({"id": "q9", "question": "x", "answers": [{"text": "cat"}]}), r"question q9: an answer without"),
])
def test_bad_files_name_the_file_and_question(tmp_path, data, message):
    with pytest.raises(DataError, match=message):
        squad_reading.read_squad(write(tmp_path, data))


# ---------------------------------------------------------------- features
def test_one_window_layout_and_answer_label(tok):
    example = squad_reading.SquadExample("q", "Where did the cat sit?", CONTEXT, [("the red mat", CONTEXT.index("the red mat"))])
    (f,) = squad_features.example_features(tok, example, 0, squad_features.WindowConfig(384, 128, 64), with_labels=True)
    question = tok.encode_ids(example.question)
    assert f.input_ids == [tok.cls_token_id] + question + [tok.sep_token_id] + tok.encode_ids(CONTEXT) + [tok.sep_token_id]
    assert f.token_type_ids == [0] * (len(question) + 2) + [1] * (len(f.input_ids) - len(question) - 2)
    assert f.context_start == len(question) + 2
    s, e = f.start_position - f.context_start, f.end_position - f.context_start
    assert CONTEXT[f.offsets[s][0]:f.offsets[e][1]] == "the red mat"


def test_windows_cover_the_context_with_the_stride(tok):
    example = squad_reading.SquadExample("q", "cat?", CONTEXT, [("slept all day", CONTEXT.index("slept all day"))])
    q = len(tok.encode_ids("cat?"))
    config = squad_features.WindowConfig(max_length=q + 3 + 8, doc_stride=5, max_query_length=64)
    features = squad_features.example_features(tok, example, 0, config, with_labels=True)
    pieces = len(tok.encode_ids(CONTEXT))
    assert len(features) == len(squad_features.window_starts(pieces, 8, 5)) > 2
    assert all(len(f.input_ids) <= config.max_length for f in features)
    covered = [o for f in features for o in f.offsets]
    assert sorted(set(covered)) == sorted(set(tok.tokenize_with_offsets(CONTEXT)[1]))
    labelled = [f for f in features if f.start_position]
    assert labelled and len(labelled) < len(features)            # elsewhere the answer is labelled at [CLS]
    assert all((f.start_position, f.end_position) == (0, 0) for f in features if f not in labelled)
    for f in labelled:
        s, e = f.start_position - f.context_start, f.end_position - f.context_start
        assert CONTEXT[f.offsets[s][0]:f.offsets[e][1]] == "slept all day"
    # each piece is the max-context piece of exactly one window
    flags = {}
    for f in features:
        for o, flag in zip(f.offsets, f.is_max_context):
            flags[o] = flags.get(o, 0) + flag
    assert set(flags.values()) == {1}


def test_window_starts():
    assert squad_features.window_starts(20, 8, 5) == [0, 5, 10, 15]    # the last one reaches the end
    assert squad_features.window_starts(8, 8, 5) == [0]
    assert squad_features.window_starts(9, 8, 8) == [0, 8]


def test_stride_longer_than_the_window_is_an_error(tok):
    example = squad_reading.SquadExample("q", "cat?", CONTEXT, [])
    with pytest.raises(ValueError, match="doc_stride 9 must be between 1 and the window"):
        squad_features.example_features(tok, example, 0, squad_features.WindowConfig(len(tok.encode_ids("cat?")) + 3 + 8, 9, 64))
    with pytest.raises(ValueError, match="no room for the context"):
        squad_features.example_features(tok, example, 0, squad_features.WindowConfig(5, 1, 64))


def test_question_is_cut_to_max_query_length(tok):
    example = squad_reading.SquadExample("q", "where did the old cat sit in the story?", CONTEXT, [])
    (f,) = squad_features.example_features(tok, example, 0, squad_features.WindowConfig(384, 128, 3))
    assert f.context_start == 3 + 2


def test_unanswerable_is_labelled_at_cls(tok):
    example = squad_reading.SquadExample("q", "Who?", CONTEXT, [], is_impossible=True)
    (f,) = squad_features.example_features(tok, example, 0, squad_features.WindowConfig(), with_labels=True)
    assert (f.start_position, f.end_position) == (0, 0)


def test_batch_pads_with_types(tok):
    examples = [squad_reading.SquadExample("a", "cat?", CONTEXT, [("cat", 8)]), squad_reading.SquadExample("b", "x", "short one", [])]
    features = list(squad_features.iter_features(tok, examples, squad_features.WindowConfig(), with_labels=True))
    b = squad_features.batch(features, tok.pad_token_id)
    n = len(features[1].input_ids)
    longest = len(features[0].input_ids)
    assert b["input_ids"].shape == b["token_type_ids"].shape == (2, -(-longest // 8) * 8)   # multiple of 8
    assert b["attention_mask"][1].sum() == n and b["token_type_ids"][1, n:].sum() == 0
    assert b["start_positions"].tolist() == [features[0].start_position, 0]


# ---------------------------------------------------------------- decoding
def logits_for(feature, start, end, value=5.0):
    s, e = np.zeros(len(feature.input_ids), np.float32), np.zeros(len(feature.input_ids), np.float32)
    s[start] += value
    e[end] += value - 1
    return s, e


def span_of(feature, text):
    """(first, last) positions of the pieces that cover ``text``'s first occurrence in CONTEXT."""
    lo = CONTEXT.index(text)
    hi = lo + len(text)
    inside = [feature.context_start + i for i, (s, e) in enumerate(feature.offsets) if e > lo and s < hi]
    return inside[0], inside[-1]


def test_decodes_the_span_from_the_original_context(tok):
    example = squad_reading.SquadExample("q", "Where?", CONTEXT, [])
    (f,) = squad_features.example_features(tok, example, 0, squad_features.WindowConfig())
    s, e = logits_for(f, *span_of(f, "red mat"))
    p = squad_decode.decode_question(example, [(f, s, e)], squad_decode.DecodeConfig())
    assert p.text == "red mat" and p.nbest[0]["score"] == pytest.approx(9.0)
    assert (p.nbest[0]["start"], p.nbest[0]["end"]) == (CONTEXT.index("red mat"), CONTEXT.index("red mat") + 7)
    assert sum(c["probability"] for c in p.nbest) == pytest.approx(1.0)


def test_end_before_start_and_overlong_spans_are_skipped(tok):
    example = squad_reading.SquadExample("q", "Where?", CONTEXT, [])
    (f,) = squad_features.example_features(tok, example, 0, squad_features.WindowConfig())
    s, e = logits_for(f, span_of(f, "door")[0], span_of(f, "cat")[1])  # end before start
    e[span_of(f, "door")[1]] += 1.0                                     # a weaker but valid end
    p = squad_decode.decode_question(example, [(f, s, e)], squad_decode.DecodeConfig())
    assert p.text == "door"
    s, e = logits_for(f, span_of(f, "The")[0], span_of(f, "day")[1])
    p = squad_decode.decode_question(example, [(f, s, e)], squad_decode.DecodeConfig(max_answer_length=3))
    assert len(p.text.split()) <= 3


def test_a_span_of_only_white_space_is_never_the_answer(tok):
    context = "x $5 y"   # this vocabulary has lone "▁" pieces before "x", "$" and "y"
    example = squad_reading.SquadExample("q", "Where?", context, [])
    (f,) = squad_features.example_features(tok, example, 0, squad_features.WindowConfig())
    lone = [i for i, (s, e) in enumerate(f.offsets) if s == e]
    assert lone, "the case this test is about"
    s, e = logits_for(f, f.context_start + lone[0], f.context_start + lone[0], value=10.0)
    s[f.context_start] += 1.0
    e[f.context_start] += 1.0
    p = squad_decode.decode_question(example, [(f, s, e)], squad_decode.DecodeConfig())
    assert p.text.strip() and all(c["text"].strip() for c in p.nbest)


def test_question_tokens_and_cls_are_never_an_answer(tok):
    example = squad_reading.SquadExample("q", "Where?", CONTEXT, [])
    (f,) = squad_features.example_features(tok, example, 0, squad_features.WindowConfig())
    s, e = logits_for(f, 1, 1, value=50.0)          # the question's first piece
    s[f.context_start] += 1.0
    e[f.context_start] += 1.0
    p = squad_decode.decode_question(example, [(f, s, e)], squad_decode.DecodeConfig())
    assert CONTEXT.startswith(p.text) and p.text


def test_v2_null_score_against_the_best_span(tok):
    example = squad_reading.SquadExample("q", "Where?", CONTEXT, [])
    (f,) = squad_features.example_features(tok, example, 0, squad_features.WindowConfig())
    s, e = logits_for(f, *span_of(f, "door"))                            # span 5 + 4 = 9
    s[0], e[0] = 2.0, 1.0                                                 # null 3
    answered = squad_decode.decode_question(example, [(f, s, e)], squad_decode.DecodeConfig(version_2=True))
    assert answered.text == "door" and answered.null_odds == pytest.approx(3.0 - 9.0)
    refused = squad_decode.decode_question(
        example, [(f, s, e)], squad_decode.DecodeConfig(version_2=True, null_score_diff_threshold=-7.0))
    assert refused.text == "" and refused.null_odds == pytest.approx(-6.0)


def test_v2_null_score_is_the_smallest_over_windows(tok):
    example = squad_reading.SquadExample("q", "cat?", CONTEXT, [])
    q = len(tok.encode_ids("cat?"))
    f1, f2 = squad_features.example_features(tok, example, 0, squad_features.WindowConfig(q + 3 + 12, 12, 64))[:2]
    s1, e1 = logits_for(f1, f1.context_start, f1.context_start)
    s1[0], e1[0] = 4.0, 4.0
    s2, e2 = np.zeros(len(f2.input_ids)), np.zeros(len(f2.input_ids))
    s2[0], e2[0] = 1.0, 0.5
    p = squad_decode.decode_question(example, [(f1, s1, e1), (f2, s2, e2)], squad_decode.DecodeConfig(version_2=True))
    assert p.null_odds == pytest.approx(1.5 - 9.0)


def test_decode_stream_yields_each_question_once_its_windows_are_done(tok):
    examples = [squad_reading.SquadExample("a", "cat?", CONTEXT, []), squad_reading.SquadExample("b", "mat?", CONTEXT, [])]
    q = len(tok.encode_ids("mat?"))
    features = list(squad_features.iter_features(tok, examples, squad_features.WindowConfig(q + 3 + 10, 10, 64)))
    consumed = []

    def scored():
        for f in features:
            consumed.append(f.example_index)
            yield (f,) + logits_for(f, f.context_start, f.context_start)

    stream = squad_decode.decode_stream(examples, scored(), squad_decode.DecodeConfig())
    first = next(stream)
    assert first.qid == "a" and consumed.count(1) == 1      # only one window of "b" read so far
    assert [p.qid for p in stream] == ["b"]
    with pytest.raises(ValueError, match="not consecutive"):
        list(squad_decode.decode_stream(examples, [(features[0],) + logits_for(features[0], 0, 0),
                                                   (features[-1],) + logits_for(features[-1], 0, 0),
                                                   (features[0],) + logits_for(features[0], 0, 0)],
                                        squad_decode.DecodeConfig()))


def test_prediction_files(tmp_path):
    preds = [squad_decode.Prediction("q1", "red mat", -2.5, []), squad_decode.Prediction("q2", "", 3.0, [])]
    paths = squad_decode.write_predictions(str(tmp_path), preds, version_2=True)
    assert json.loads(open(paths[0]).read()) == {"q1": "red mat", "q2": ""}
    assert json.loads(open(paths[1]).read()) == {"q1": -2.5, "q2": 3.0}
    assert sorted(os.listdir(tmp_path)) == [".null_odds.json.albert_min.json", ".predictions.json.albert_min.json",
                                            "null_odds.json", "predictions.json"]   # each with its record


@pytest.mark.skipif(not os.path.isfile(SQUAD_DEV), reason="needs ../shared/data/squad")
def test_dev_split_by_article_halves_the_questions():
    train, _ = squad_reading.read_squad(SQUAD_DEV, articles=(1, 24))
    held_out, _ = squad_reading.read_squad(SQUAD_DEV, articles=(25, 48))
    assert len(train) + len(held_out) == 10570 and not {e.qid for e in train} & {e.qid for e in held_out}


@pytest.mark.skipif(not os.path.isfile(SQUAD_DEV), reason="needs ../shared/data/squad")
def test_gold_spans_come_back_through_features_on_real_data(tok):
    """Label the first 300 dev questions from their character answers, then decode those labels as
    logits: the texts cut from the contexts score as the gold answers do (piece boundaries that
    fall inside a word, e.g. "1990s" for "1990", cost a little)."""
    examples = squad_reading.read_squad(SQUAD_DEV, articles=(1, 1))[0][:300]
    preds = {}
    for i, example in enumerate(examples):
        windows = []
        for f in squad_features.example_features(tok, example, i, squad_features.WindowConfig(), with_labels=True):
            windows.append((f,) + logits_for(f, f.start_position, f.end_position, value=20.0))
        preds[example.qid] = squad_decode.decode_question(example, windows, squad_decode.DecodeConfig()).text
    score = evaluate_v1(squad_reading.gold_answers(examples), preds)
    assert score["exact_match"] > 97 and score["f1"] > 99
