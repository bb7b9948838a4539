"""Hostile SQuAD and RACE inputs through train.py and evaluate.py (issue 36, part A): one
``error:`` line naming the file and the item, or a correct run; never a traceback or a model
trained on nothing. Tiny models, PyNative (--pynative), 2 steps."""
import contextlib
import io
import json
import os
import re
import shutil

import pytest

import evaluate  # noqa: E402
import train  # noqa: E402
from helpers.task_files import CONTEXT_1, CONTEXT_2, write_race

from helpers.paths import FIXTURES  # noqa: E402
TINY = ["--layers", "1", "--hidden-size", "32", "--embedding-size", "16", "--heads", "2", "--intermediate-size", "64",
        "--tokenizer", os.path.join(FIXTURES, "spiece_sst2_2k.model"), "--batch-size", "4", "--max-steps", "2",
        "--pynative", "--quiet"]
SQUAD = ["--max-length", "32", "--doc-stride", "8", "--max-query-length", "12"]


def error_of(main, argv):
    """The one line a script exits with."""
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    message = str(stopped.value.code)
    assert message.startswith("error: ") and "\n" not in message, message
    return message


def squad_json():
    """Two articles: a good answer, an answer_start pointing elsewhere ("Broncos" at "The old"),
    an empty answer, and two good ones."""
    def qa(qid, question, context, text, start=None):
        return {"id": qid, "question": question,
                "answers": [{"text": text, "answer_start": context.index(text) if start is None else start}]}
    return {"version": "1.1", "data": [
        {"paragraphs": [{"context": CONTEXT_1, "qas": [qa("good1", "Where did the cat sit?", CONTEXT_1, "the red mat"),
                                                       qa("wrong", "Who won?", CONTEXT_1, "Broncos", 0),
                                                       qa("empty", "What?", CONTEXT_1, "", 3)]}]},
        {"paragraphs": [{"context": CONTEXT_2, "qas": [qa("good2", "What is the capital?", CONTEXT_2, "Paris"),
                                                       qa("good3", "Which river?", CONTEXT_2, "Seine")]}]}]}


@pytest.fixture(scope="module")
def squad_run(tmp_path_factory):
    """A 2-step run on articles 1-2 of a file with two answers training cannot find; its log."""
    tmp = tmp_path_factory.mktemp("squad_inputs")
    data, out, log = str(tmp / "s.json"), str(tmp / "run"), io.StringIO()
    with open(data, "w") as f:
        json.dump(squad_json(), f)
    with contextlib.redirect_stdout(log):
        state = train.main(["--task", "squad", "--train", data + ":1-2", "--dev", data, "--output", out, *SQUAD,
                            *TINY])
    return {"data": data, "tmp": tmp, "out": out, "log": log.getvalue(), "state": state}


def test_squad_training_skips_unfound_answers_says_so_and_evaluates(squad_run):
    data, out = squad_run["data"], squad_run["out"]
    assert squad_run["state"]["step"] == 2
    assert (f"note: {data}: training skips 2 of 5 questions, whose answer it cannot find in the context (the first: "
            "question wrong: its answer 'Broncos' is not at answer_start 0 (the context has 'The old' there))"
            ) in squad_run["log"]
    predictions = str(squad_run["tmp"] / "predictions.json")
    metrics = evaluate.main(["--model", out, "--data", data, "--output", predictions, "--quiet", "--json",
                             "--no-jit"])
    assert metrics["examples"] == 5 and 0 <= metrics["f1"] <= 1
    with open(predictions) as f:
        assert set(json.load(f)) == {"good1", "wrong", "empty", "good2", "good3"}
    with open(out + ".state/state.json") as f:
        assert list(json.load(f)["inputs"]["files"])[:1] == [data]      # the whole file behind data:1-2


def test_resume_refuses_a_changed_context_in_a_squad_range(squad_run, tmp_path):
    out = str(tmp_path / "run")
    for suffix in ("", ".state"):
        shutil.copytree(squad_run["out"] + suffix, out + suffix)
    data = squad_run["data"]
    original = open(data).read()
    try:
        with open(data, "w") as f:
            f.write(original.replace("Paris is the capital", "Lyon is the capital"))
        assert error_of(train.main, ["--output", out, "--resume", "--max-steps", "3"]).startswith(
            f"error: {data}: changed since the run saved in {out}.state/state.json read it")
    finally:
        with open(data, "w") as f:
            f.write(original)


def test_a_lone_surrogate_is_named_before_any_work(squad_run, tmp_path):
    bad = tmp_path / "bad.json"
    content = squad_json()
    content["data"][1]["paragraphs"][0]["qas"][0]["question"] = "What is the \ud800 capital?"
    bad.write_text(json.dumps(content))                   # json.dumps writes the JSON escape "\ud800"
    message = error_of(evaluate.main, ["--model", squad_run["out"], "--data", str(bad), "--quiet"])
    assert message == (f"error: {bad}: question good2: the question: not valid Unicode (a lone surrogate U+D800 at "
                       "character 12, half of a UTF-16 pair)")


# ------------------------------------------------------------------ RACE
@pytest.fixture(scope="module")
def race_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("race_inputs")
    data, out = write_race(tmp), str(tmp / "run")
    train.main(["--task", "race", "--train", data, "--output", out, "--max-length", "32", *TINY])
    return {"data": data, "out": out, "tmp": tmp}


def copied(race_run, tmp_path):
    data = shutil.copytree(race_run["data"], tmp_path / "RACE" / "dev")
    out = str(tmp_path / "run")
    for suffix in ("", ".state"):
        shutil.copytree(race_run["out"] + suffix, out + suffix)
    state = out + ".state/state.json"
    with open(state) as f:
        saved = json.load(f)
    saved["settings"]["run"]["train"] = str(data)            # the run as if it had read this copy
    saved["inputs"]["files"] = {k.replace(race_run["data"], str(data)): v for k, v in saved["inputs"]["files"].items()}
    with open(state, "w") as f:
        json.dump(saved, f)
    return str(data), out


def test_resume_refuses_a_changed_or_added_race_file(race_run, tmp_path):
    with open(race_run["out"] + ".state/state.json") as f:
        recorded = json.load(f)["inputs"]["files"]
    assert {os.path.relpath(k, race_run["data"]) for k in recorded if k.startswith(race_run["data"])} == {
        "middle/1.txt", "high/2.txt", "high/10.txt"}
    data, out = copied(race_run, tmp_path)
    changed = os.path.join(data, "high", "2.txt")
    with open(changed) as f:
        content = json.load(f)
    with open(changed, "w") as f:
        json.dump({**content, "answers": ["A"]}, f)          # every gold answer of the file changed
    assert error_of(train.main, ["--output", out, "--resume", "--max-steps", "3"]) == (
        f"error: {changed}: changed since the run saved in {out}.state/state.json read it (size or sha256 differ); "
        "--resume needs the same inputs")
    with open(changed, "w") as f:
        json.dump(content, f)
    added = os.path.join(data, "high", "3.txt")
    shutil.copy(changed, added)
    assert error_of(train.main, ["--output", out, "--resume", "--max-steps", "3"]) == (
        f"error: {added}: the run saved in {out}.state/state.json did not read this file (in {data} now); "
        "--resume needs the same inputs")
    os.remove(added)
    assert train.main(["--output", out, "--resume", "--max-steps", "3"])["step"] == 3     # unchanged: resumes


def test_race_without_questions_is_an_error_for_train_and_evaluate(race_run, tmp_path):
    empty = tmp_path / "RACE" / "dev" / "high"
    empty.mkdir(parents=True)
    (empty / "1.txt").write_text(json.dumps({"article": "A text.", "questions": [], "options": [], "answers": []}))
    folder = str(tmp_path / "RACE" / "dev")
    expected = f'error: {folder}: no questions (its 1 RACE file hold empty "questions" lists)'
    assert error_of(train.main, ["--task", "race", "--train", folder, "--output", str(tmp_path / "m"),
                                 "--max-length", "32", *TINY]) == expected
    assert not os.path.exists(tmp_path / "m")
    assert error_of(evaluate.main, ["--model", race_run["out"], "--data", folder, "--quiet"]) == expected


def test_race_text_of_zero_width_characters_cannot_train_a_tokenizer(tmp_path):
    folder = tmp_path / "RACE" / "train" / "high"
    folder.mkdir(parents=True)
    zw = "\u200b\u200c"
    (folder / "1.txt").write_text(json.dumps({"article": zw, "questions": [zw], "options": [[zw] * 4],
                                              "answers": ["A"]}))
    flags = [f for f in TINY if f not in ("--tokenizer", os.path.join(FIXTURES, "spiece_sst2_2k.model"))]
    message = error_of(train.main, ["--task", "race", "--train", str(folder.parent), "--output", str(tmp_path / "m"),
                                    "--vocab-size", "60", "--max-length", "32", *flags])
    assert re.fullmatch(f"error: {re.escape(str(folder.parent))}: no text to train a SentencePiece model on: every "
                        "character is white space, a control or a zero-width character", message), message
