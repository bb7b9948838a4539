"""Hostile SQuAD, RACE and CoNLL inputs (issue 36, part A): every one is a correct result or one
DataError naming the file and the item, never a traceback, a hang or a wrong training label."""
import json
import os
import signal
import time

import numpy as np
import pytest

from albert_min.tasks.errors import DataError
from albert_min.common.json_files import load_json
from albert_min.tasks.conll import reading as conll_reading
from albert_min.tasks.race import reading as race_reading
from albert_min.tasks.squad import features as squad_features
from albert_min.tasks.squad import reading as squad_reading
from albert_min.tasks.squad import task as squad_task
from albert_min.tasks import get_task
from tokenizer import AlbertTokenizer, TokenizerError, train_sentencepiece
from tokenizer.albert_tokenizer import MAX_SENTENCE_BYTES, shorter_lines

from helpers.paths import FIXTURES  # noqa: E402
CONTEXT = "The Denver Broncos beat the Carolina Panthers in Santa Clara."


@pytest.fixture(scope="module")
def tok():
    return AlbertTokenizer(os.path.join(FIXTURES, "spiece_sst2_2k.model"))


def squad_file(tmp_path, *qas, context=CONTEXT, raw=None, name="s.json"):
    path = tmp_path / name
    data = {"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": context, "qas": list(qas)}]}]}
    path.write_bytes(raw if raw is not None else json.dumps(data).encode())
    return str(path)


def qa(qid, text, start, question="Who won?"):
    return {"id": qid, "question": question, "answers": [{"text": text, "answer_start": start}]}


def race_folder(tmp_path, files):
    for rel, content in files.items():
        path = tmp_path / "dev" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else json.dumps(content).encode())
    return str(tmp_path / "dev")


RACE_ITEM = {"article": "The cat is old.", "questions": ["The cat is _ ."], "options": [["young", "old", "red", "big"]],
             "answers": ["B"]}


# ------------------------------------------------------------ item 3 and 8: training labels
def test_an_answer_not_at_its_answer_start_is_skipped_in_training_and_named(tmp_path, tok):
    path = squad_file(tmp_path, qa("good", "Broncos", CONTEXT.index("Broncos")), qa("wrong", "Broncos", 4),
                      qa("empty", "", 0), qa("blank", "  \u200b", CONTEXT.index(" beat")))
    task = get_task("squad", max_query_length=16, doc_stride=16)
    data = task.read(path)
    assert [squad_features.unusable_answer(e) is None for e in data.examples] == [True, False, False, False]
    assert task.training_notes(data) == [
        f"note: {path}: training skips 3 of 4 questions, whose answer it cannot find in the context (the first: "
        "question wrong: its answer 'Broncos' is not at answer_start 4 (the context has 'Denver ' there))"]
    prepared = task.prepare(data, tok, 64)
    ids, _, starts, ends = prepared.features.training()
    assert len(ids) == 1 and 0 < starts[0] <= ends[0]                 # only "good" is trained on
    cut = tok.tokenize_with_offsets(CONTEXT)[1]
    context_start = len(tok.encode_ids("Who won?")) + 2
    assert CONTEXT[cut[starts[0] - context_start][0]:cut[ends[0] - context_start][1]] == "Broncos"
    windows = list(prepared.features)                                 # evaluation keeps every question
    assert [w.example_index for w in windows] == [0, 1, 2, 3]
    assert all((w.start_position, w.end_position) == (0, 0) for w in windows[1:])
    assert squad_reading.gold_answers(data.examples)["empty"] == [""]          # scored as the official script does


def test_a_file_whose_every_answer_is_unusable_has_nothing_to_train_on(tmp_path, tok):
    path = squad_file(tmp_path, qa("q1", "Broncos", 4))
    task = get_task("squad", max_query_length=16, doc_stride=16)
    prepared = task.prepare(task.read(path), tok, 64)
    with pytest.raises(DataError, match=f"^{path}: no question to train on: training skips every one, whose "
                                        r"answer it cannot find in the context \(the first: question q1: its answer"):
        task.steps_per_epoch(prepared, 4, 0, None)


def test_an_empty_answer_scores_and_writes_predictions(tmp_path, tok):
    path = squad_file(tmp_path, qa("empty", "", 0), qa("good", "Broncos", CONTEXT.index("Broncos")))
    task = get_task("squad", max_query_length=16, doc_stride=16)
    prepared = task.prepare(task.read(path), tok, 64)
    outputs = [[(f, np.zeros(len(f.input_ids)), np.zeros(len(f.input_ids))) for f in prepared.features]]
    metrics = task.score(prepared, outputs)
    assert metrics["examples"] == 2 and 0 <= metrics["f1"] <= 1
    task.write_predictions(str(tmp_path / "p.json"), prepared, outputs)
    assert set(json.loads((tmp_path / "p.json").read_text())) == {"empty", "good"}


def test_squad_v1_question_without_answers_names_a_real_way_out(tmp_path, tok):
    path = squad_file(tmp_path, {"id": "q9", "question": "Who?", "answers": []})
    task = get_task("squad", max_query_length=16, doc_stride=16)
    prepared = task.prepare(task.read(path), tok, 64)
    with pytest.raises(DataError, match=r"question q9 has no answer to score against; give it one, or score the "
                                        r"file as SQuAD v2\.0 \(--task squad_v2\)"):
        task.score(prepared, [])


# ------------------------------------------------------------ item 6: windows in linear time
BLOCK = "the old cat sat on the red mat near the door, and slept all day long. "


def long_context(tok, chars):
    """A context of about ``chars`` characters (copies of BLOCK) and its pieces, made from the
    pieces of one BLOCK (a copy starts after a space, so it tokenizes as the first one does)."""
    copies = chars // len(BLOCK)
    ids, offsets = squad_features.context_pieces(tok, BLOCK)
    step = len(BLOCK)
    return BLOCK * copies, (ids * copies, [(s + k * step, e + k * step) for k in range(copies) for s, e in offsets])


def cut_seconds(tok, chars, config):
    context, pieces = long_context(tok, chars)
    example = squad_reading.SquadExample("q", "where did the cat sit?", context, [("red mat", context.index("red mat"))])
    start = time.perf_counter()
    features = squad_features.example_features(tok, example, 0, config, with_labels=True, context=pieces)
    return time.perf_counter() - start, features


def test_copies_of_a_block_tokenize_as_the_block(tok):
    context, pieces = long_context(tok, 10 * len(BLOCK))
    assert squad_features.context_pieces(tok, context) == pieces


def test_max_context_flags_are_googles(tok):
    """The bisected flags equal Google's loop over every window, on awkward sizes and strides."""
    rng = np.random.default_rng(0)
    for _ in range(200):
        size, pieces = int(rng.integers(1, 12)), int(rng.integers(1, 60))
        stride = int(rng.integers(1, size + 1))
        starts = squad_features.window_starts(pieces, size, stride)
        for start in starts:
            length = min(size, pieces - start)
            expected = []
            for position in range(start, start + length):
                best, best_score = None, None
                for s in starts:
                    n = min(size, pieces - s)
                    if s <= position < s + n:
                        score = min(position - s, s + n - 1 - position) + 0.01 * n
                        if best_score is None or score > best_score:
                            best, best_score = s, score
                expected.append(best == start)
            assert squad_features.max_context_flags(start, length, starts, size, pieces) == expected


def test_an_empty_context_is_one_window_without_pieces(tok):
    """(Found by the fuzz: the bisected flags once took the argmax of nothing.)"""
    example = squad_reading.SquadExample("q", "Who won?", "", [("", 0)])
    (window,) = squad_features.example_features(tok, example, 0, squad_features.WindowConfig(32, 8, 12), with_labels=True)
    assert window.offsets == window.is_max_context == [] and (window.start_position, window.end_position) == (0, 0)


def test_a_1_mb_context_is_cut_within_seconds(tok):
    seconds, features = cut_seconds(tok, 1 << 20, squad_features.WindowConfig(128, 32, 32))
    assert len(features) > 5000 and seconds < 20        # quadratic cutting: far beyond 300 s
    assert sum(f.start_position > 0 for f in features) >= 1


def test_cutting_windows_grows_linearly_with_the_context(tok):
    """4x the context: about 4x the time (quadratic cutting took 16x); the best of 3 runs each."""
    config = squad_features.WindowConfig(128, 32, 32)
    t_small = min(cut_seconds(tok, 50_000, config)[0] for _ in range(3))
    t_large = min(cut_seconds(tok, 200_000, config)[0] for _ in range(3))
    assert t_large < 8 * t_small, (t_small, t_large)


# ------------------------------------------------------------ items 7, 9 and the byte-order mark: the readers
@pytest.mark.parametrize("raw, message", [
    (b"[" * 100000, r"s\.json:1: not usable JSON \(nested too deeply: 100000 levels\)"),
    (b'{"version": "1.1",\n "data": [' + b"9" * 5000 + b"]}", r"s\.json:2: not usable JSON \(an integer of 5000 digits"),
    (b'{"data": [NaN]}', r"s\.json:1: not usable JSON \(NaN is not a JSON number\)"),
    (b'{"data":\n "\xff"}', r"s\.json:2: not UTF-8"),
], ids=["deep", "long-integer", "NaN", "not-utf8"])
def test_json_python_cannot_read_is_one_error_naming_file_and_line(tmp_path, raw, message):
    with pytest.raises(DataError, match=message):
        get_task("squad").read(squad_file(tmp_path, raw=raw))
    with pytest.raises(DataError, match=message.replace("s\\.json", r"high/1\.txt")):
        race_reading.read_race(race_folder(tmp_path, {"high/1.txt": raw}))


@pytest.mark.parametrize("where, edit", [
    ("the context", lambda d: d["data"][0]["paragraphs"][0].update(context="The \ud800 Broncos")),
    ("question q1: the question", lambda d: d["data"][0]["paragraphs"][0]["qas"][0].update(question="Who\udfff?")),
    ("question q1: answer 1", lambda d: d["data"][0]["paragraphs"][0]["qas"][0]["answers"][0].update(text="\ud800")),
    ("a question id", lambda d: d["data"][0]["paragraphs"][0]["qas"][0].update(id="q\ud800")),
])
def test_a_lone_surrogate_in_squad_is_named_at_the_reader(tmp_path, where, edit):
    data = {"version": "1.1", "data": [{"paragraphs": [{"context": CONTEXT, "qas": [qa("q1", "The", 0)]}]}]}
    edit(data)
    path = squad_file(tmp_path, raw=json.dumps(data).encode())      # ensure_ascii writes "\ud800" escapes
    with pytest.raises(DataError, match=f"^{path}: .*{where}: not valid Unicode \\(a lone surrogate U\\+D"):
        get_task("squad").read(path)


@pytest.mark.parametrize("field, where", [("article", "the article"), ("questions", "question 1"),
                                          ("options", "question 1 option C")])
def test_a_lone_surrogate_in_race_is_named_at_the_reader(tmp_path, field, where):
    item = dict(RACE_ITEM, article="The \ud800 cat." if field == "article" else RACE_ITEM["article"])
    if field == "questions":
        item["questions"] = ["The cat is \udc80 _ ."]
    if field == "options":
        item["options"] = [["young", "old", "\ud83d", "big"]]
    folder = race_folder(tmp_path, {"high/1.txt": item})
    with pytest.raises(DataError, match=r"high/1\.txt: " + where + r": not valid Unicode"):
        race_reading.read_race(folder)


def test_a_byte_order_mark_is_read_in_squad_and_race(tmp_path):
    data = {"version": "1.1", "data": [{"paragraphs": [{"context": CONTEXT, "qas": [qa("q1", "The", 0)]}]}]}
    path = squad_file(tmp_path, raw=b"\xef\xbb\xbf" + json.dumps(data).encode())
    assert [e.qid for e in get_task("squad").read(path).examples] == ["q1"]
    folder = race_folder(tmp_path, {"high/1.txt": b"\xef\xbb\xbf" + json.dumps(RACE_ITEM).encode()})
    assert [q.label for q in race_reading.read_race(folder)] == [1]


def test_one_json_reader_for_every_file(tmp_path):
    """albert_min's own files, config.json and the data sets share ``json_files.load_json``."""
    path = tmp_path / "x.json"
    path.write_text('{"a":\n [1,\n  NaN]}')
    for error in (DataError, ValueError):
        with pytest.raises(error, match=r"x\.json:3: not usable JSON \(NaN is not a JSON number\)"):
            load_json(str(path), error)


# ------------------------------------------------------------ items 4, 10, 12 and odd names: RACE folders
def test_a_race_folder_without_questions_is_an_error(tmp_path):
    folder = race_folder(tmp_path, {"high/1.txt": {**RACE_ITEM, "questions": [], "options": [], "answers": []}})
    with pytest.raises(DataError, match=r"dev: no questions \(its 1 RACE file hold"):
        get_task("race").read(folder)


def test_a_fifo_named_txt_is_not_read(tmp_path):
    folder = race_folder(tmp_path, {"high/1.txt": RACE_ITEM})
    os.mkfifo(os.path.join(folder, "high", "2.txt"))
    os.mkdir(os.path.join(folder, "high", "3.txt"))
    signal.alarm(20)                                  # a blocking open would hang the suite: fail instead
    try:
        questions = race_reading.read_race(folder)
    finally:
        signal.alarm(0)
    assert [q.key for q in questions] == ["high1.txt"]
    assert get_task("race").files_read(folder) == [os.path.join(folder, "high", "1.txt")]


def test_a_race_file_name_that_is_not_utf8_is_named(tmp_path):
    folder = race_folder(tmp_path, {"high/1.txt": RACE_ITEM})
    with open(os.path.join(os.fsencode(folder), b"high", b"\xff2.txt"), "w") as f:
        json.dump(RACE_ITEM, f)
    with pytest.raises(DataError, match=r"high: the file name b'\\xff2\.txt' is not UTF-8 .*; rename it"):
        race_reading.read_race(folder)


# ------------------------------------------------------------ item 2: what a resume fingerprints
def test_resume_fingerprints_every_file_read(tmp_path):
    from albert_min.training.run_config import RunConfig, ResumeError, check_inputs_unchanged
    from albert_min.training.config import TrainingConfig
    path = squad_file(tmp_path, qa("q1", "The", 0))
    folder = race_folder(tmp_path, {"middle/1.txt": RACE_ITEM, "high/2.txt": RACE_ITEM})
    squad_run = RunConfig(task="squad", training=TrainingConfig(output="o"), train=path + ":1-1")
    race_run = RunConfig(task="race", training=TrainingConfig(output="o"), train=folder)
    assert list(squad_run.fingerprints()) == [path]
    assert sorted(race_run.fingerprints()) == sorted(os.path.join(folder, f) for f in ("middle/1.txt", "high/2.txt"))
    for run, changed in ((squad_run, path), (race_run, os.path.join(folder, "high", "2.txt"))):
        saved = run.fingerprints()
        check_inputs_unchanged(saved, "state.json", run)
        with open(changed, "a") as f:
            f.write(" ")
        with pytest.raises(ResumeError, match=f"^{changed}: changed since the run saved in state.json read it"):
            check_inputs_unchanged(saved, "state.json", run)
    saved = race_run.fingerprints()
    with open(os.path.join(folder, "high", "3.txt"), "w") as f:
        json.dump(RACE_ITEM, f)
    added = os.path.join(folder, "high", "3.txt")
    with pytest.raises(ResumeError, match=f"^{added}: the run saved in state.json did not read this file "
                                          f"\\(in {folder} now\\)"):
        check_inputs_unchanged(saved, "state.json", race_run)
    with pytest.raises(ResumeError, match=f"^{folder}: the run saved in state.json recorded no fingerprint of it"):
        check_inputs_unchanged({}, "state.json", race_run)            # a state saved before this fix


# ------------------------------------------------------------ CoNLL files with old Mac line ends
def test_cr_only_conll_reads_as_lf(tmp_path):
    text = "-DOCSTART- -X- -X- O\n\nPeter NNP B-NP I-PER\nwent VBD B-VP O\n\nEU NNP B-NP I-ORG\n"
    lf, cr = tmp_path / "eng.lf", tmp_path / "eng.cr"
    lf.write_bytes(text.encode())
    cr.write_bytes(text.replace("\n", "\r").encode())
    assert conll_reading.read_conll(str(cr)) == conll_reading.read_conll(str(lf))
    cr.write_bytes(text.replace("\n", "\r").replace("went VBD B-VP O", "went O").encode())
    with pytest.raises(DataError, match=r"eng\.cr:4: expected 4 space-separated columns"):
        conll_reading.read_conll(str(cr))


# ------------------------------------------------------------ tokenizer training on official-size texts
def test_long_texts_are_cut_at_spaces_for_sentencepiece():
    text = " ".join(f"w{i % 97}" for i in range(3000)) + " " + "x" * 9000
    lines = shorter_lines(text)
    assert max(len(line.encode()) for line in lines) <= MAX_SENTENCE_BYTES < len(text)
    assert " ".join(lines[:-3]) + " " + "".join(lines[-3:]) == text     # cut at spaces; the long word at characters
    assert shorter_lines("short one") == ["short one"]


def test_a_race_article_over_sentencepieces_limit_trains_a_tokenizer(tmp_path):
    article = " ".join(["The old cat sat on the red mat near the door ."] * 120)        # 5.5 kB
    folder = race_folder(tmp_path, {"high/1.txt": {**RACE_ITEM, "article": article}})
    task = get_task("race")
    sentences = task.tokenizer_text(task.read(folder))
    assert max(len(s.encode()) for s in sentences) > MAX_SENTENCE_BYTES
    model = AlbertTokenizer(train_sentencepiece(sentences, str(tmp_path / "sp"), vocab_size=60))
    assert model.decode(model.encode_ids(article[:46])) == article[:46].lower()


def test_text_of_zero_width_characters_only_is_a_plain_error(tmp_path):
    with pytest.raises(TokenizerError, match="^no text to train a SentencePiece model on: every character is white "
                                             "space, a control or a zero-width character$"):
        train_sentencepiece(["\u200b\u200b", "\u200b"], str(tmp_path / "sp"), vocab_size=40)


def test_squad_task_reads_the_whole_file_of_a_range(tmp_path):
    path = squad_file(tmp_path, qa("q1", "The", 0))
    assert squad_task.SquadTask().files_read(path + ":1-1") == [path]
