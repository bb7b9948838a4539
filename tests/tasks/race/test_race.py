"""RACE reader, per-option encoding, accuracy and the prediction file, on hand-made folders."""
import dataclasses
import json
import os

import numpy as np
import pytest

from albert_min.tasks.errors import DataError
from albert_min.tasks.race import features as race_features
from albert_min.tasks.race import metric as race_metric
from albert_min.tasks.race import reading as race_reading
from albert_min.tasks.race import writing as race_writing
from tokenizer import AlbertTokenizer

from helpers.paths import FIXTURES, ROOT  # noqa: E402
RACE_DEV = os.path.join(ROOT, "..", "shared",
                        "data", "race", "RACE", "dev")


@pytest.fixture(scope="module")
def tok():
    return AlbertTokenizer(os.path.join(FIXTURES, "spiece_sst2_2k.model"))


def race_file(questions=("The cat is _ .", "What is the best title?"), answers=("B", "D")):
    return {"id": "x", "article": "The cat is old. It sleeps all day.", "questions": list(questions),
            "options": [["young", "old", "red", "big"], ["Cats", "Dogs", "Days", "An old cat"]],
            "answers": list(answers)}


def make_split(root, files):
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(root)


def test_split_folder_level_folder_and_numeric_order(tmp_path):
    root = make_split(tmp_path / "dev", {"high/10.txt": race_file(), "high/9.txt": race_file(answers=("A", "A")),
                                         "middle/1.txt": race_file()})
    questions = race_reading.read_race(root)
    assert [q.key for q in questions] == ["middle1.txt"] * 2 + ["high9.txt"] * 2 + ["high10.txt"] * 2
    assert [q.label for q in questions] == [1, 3, 0, 0, 1, 3]
    assert [q.level for q in race_reading.read_race(os.path.join(root, "high"))] == ["high"] * 4


@pytest.mark.parametrize("files, message", [
    ({"high/1.txt": "{"}, r"high/1\.txt:1: not JSON"),
    ({"high/2.txt": race_file(answers=("B", "E"))}, r"high/2\.txt: question 2 has answer 'E'"),
    ({"high/3.txt": race_file(answers=("B",))}, r"high/3\.txt: 2 questions, 2 option lists and 1 answers"),
    ({"high/4.txt": {**race_file(), "options": [["a", "b", "c"], ["a", "b", "c", "d"]]}},
     r"high/4\.txt: question 1 does not have 4 option strings"),
    ({"other/5.txt": race_file()}, r"holds no middle/ or high/ folder"),
    ({"high/readme.md": "x"}, r"no RACE \.txt files"),
])
def test_bad_input_names_the_file(tmp_path, files, message):
    with pytest.raises(DataError, match=message):
        race_reading.read_race(make_split(tmp_path / "dev", files))


def test_blank_is_filled_and_other_questions_get_the_option_appended():
    assert race_features.question_with_option("The cat is _ .", "old") == "The cat is old ."
    assert race_features.question_with_option("What is the title?", "Cats") == "What is the title? Cats"


def test_one_sequence_per_option_article_first(tok):
    q = race_reading.RaceQuestion("high1.txt", "high", "The cat is old. It sleeps all day.", "The cat is _ .",
                          ["young", "old", "red", "big"], 1)
    rows, types = race_features.encode_question(tok, q, max_length=64)
    article = tok.encode_ids(q.article)
    for row, typ, option in zip(rows, types, q.options):
        qa = tok.encode_ids(f"The cat is {option} .")
        assert row == [tok.cls_token_id] + article + [tok.sep_token_id] + qa + [tok.sep_token_id]
        assert typ == [0] * (len(article) + 2) + [1] * (len(qa) + 1)


def test_article_is_truncated_first_and_long_questions_keep_their_end(tok):
    q = race_reading.RaceQuestion("high1.txt", "high", "word " * 100, "which one?", ["a", "b", "c", "d"], 0)
    rows, types = race_features.encode_question(tok, q, max_length=20)
    qa = tok.encode_ids("which one? a")
    assert len(rows[0]) == 20 and rows[0][-len(qa) - 1:-1] == qa
    long_question = dataclasses.replace(q, question="why " * 50)
    rows, _ = race_features.encode_question(tok, long_question, max_length=20, max_qa_length=8)
    assert len(rows[0]) == 20 and rows[0][-2] == tok.encode_ids("a")[-1]   # the option survives


def test_batch_is_questions_by_options_by_length(tok, tmp_path):
    qs = race_reading.read_race(make_split(tmp_path / "dev", {"middle/1.txt": race_file()}))
    encoded = race_features.encode_questions(tok, qs, max_length=64)
    ids, types, mask, labels = race_features.batch(encoded, [q.label for q in qs], tok.pad_token_id)
    longest = max(len(r) for rows, _ in encoded for r in rows)
    assert ids.shape == types.shape == mask.shape == (2, 4, -(-longest // 8) * 8)
    assert labels.tolist() == [1, 3]
    assert mask[1, 3].sum() == len(encoded[1][0][3])
    assert ids.dtype == np.int32


def test_accuracy_by_level_and_prediction_file(tmp_path):
    qs = [race_reading.RaceQuestion(k, lvl, "a", "q", ["1", "2", "3", "4"], y)
          for k, lvl, y in [("middle1.txt", "middle", 0), ("middle1.txt", "middle", 1),
                            ("high7.txt", "high", 2), ("high7.txt", "high", 3)]]
    acc = race_metric.accuracy(qs, [0, 0, 2, 2])
    assert acc == {"all": 50.0, "middle": 50.0, "high": 50.0}
    assert race_metric.accuracy(qs[:1], [0]) == {"all": 100.0, "middle": 100.0}
    path = str(tmp_path / "race.json")
    race_writing.write_predictions(path, qs, [0, 0, 2, 2])
    assert json.load(open(path)) == {"middle1.txt": ["A", "A"], "high7.txt": ["C", "C"]}
    assert race_metric.majority_option(qs + qs[3:]) == 3


@pytest.mark.skipif(not os.path.isdir(RACE_DEV), reason="needs ../shared/data/race")
def test_reads_the_real_dev_split():
    questions = race_reading.read_race(RACE_DEV)
    assert len(questions) == 4887                                  # 1,436 middle + 3,451 high (README)
    assert sum(q.level == "middle" for q in questions) == 1436
    assert questions[0].key.startswith("middle")
