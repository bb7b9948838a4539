"""Converted transformers checkpoints (tests/fixtures/tiny_qa, tiny_multiple_choice,
tiny_token_cls) evaluate through SquadTask, RaceTask and ConllTask directly, and serve as
question-answering and NER pipelines. Their vocabulary is 120 pieces, so the tests train a
SentencePiece model of at most that size on the test files' text."""
import json
import os
import re
import subprocess
import sys

import mindspore as ms
import numpy as np
import pytest

from albert_min import convert as cv
from albert_min import pipeline
from albert_min.model.heads import AlbertForMultipleChoice, AlbertForQuestionAnswering, AlbertForTokenClassification
from albert_min.predict.pipelines import PipelineError
from albert_min.predict.task_pipelines import model_head
import evaluate
from albert_min.tasks.conll import features as conll_features
from albert_min.tasks.conll import metric as conll_metric
from albert_min.tasks.conll import reading as conll_reading
from albert_min.tasks.conll import task as conll_task
from albert_min.tasks.conll import windows as conll_windows
from albert_min.tasks.conll import writing as conll_writing
from albert_min.tasks import file_io
from albert_min.tasks.race import features as race_features
from albert_min.tasks.race import reading as race_reading
from albert_min.tasks.race import task as race_task
from albert_min.tasks.squad import metric as squad_metric
from albert_min.tasks.squad import reading as squad_reading
from albert_min.tasks.squad import task as squad_task
from albert_min.tasks import get_task
from albert_min.tasks.errors import DataError
from helpers.paths import FIXTURES
from helpers.task_files import (CONLL, CONTEXT_1, CONTEXT_2, CONTEXT_3, RACE_FILES, read_columns, write_conll, write_race,
                                write_squad)
from tokenizer import AlbertTokenizer, train_sentencepiece

NER_TAGS = {"0": "O", "1": "I-PER", "2": "I-LOC", "3": "I-ORG", "4": "I-MISC"}


@pytest.fixture(scope="module")
def spiece(tmp_path_factory):
    text = [CONTEXT_1, CONTEXT_2, CONTEXT_3] + [w for d in RACE_FILES.values() for q in d["options"] for w in q]
    text += [line.split()[0] for line in CONLL.splitlines() if line.strip()]
    path = train_sentencepiece(text * 3, str(tmp_path_factory.mktemp("spiece") / "spiece"), vocab_size=100)
    assert AlbertTokenizer(path).vocab_size <= 120
    return path


def converted(tmp_path, folder, spiece, id2label=None):
    dst = str(tmp_path / folder)
    cv.convert(os.path.join(FIXTURES, folder, "model.safetensors"), dst, tokenizer=spiece)
    if id2label is not None:   # a NER checkpoint as published: its tag names in config.json
        with open(os.path.join(dst, "config.json"), encoding="utf-8") as f:
            config = json.load(f)
        config["id2label"], config["label2id"] = id2label, {v: int(k) for k, v in id2label.items()}
        with open(os.path.join(dst, "config.json"), "w", encoding="utf-8") as f:
            json.dump(config, f)
    return dst


def test_a_converted_qa_model_evaluates_through_the_squad_task(tmp_path, spiece):
    dst = converted(tmp_path, "tiny_qa", spiece)
    model, tok = AlbertForQuestionAnswering.from_pretrained(dst), AlbertTokenizer.from_pretrained(dst)
    task = get_task("squad", doc_stride=8, max_query_length=12)
    data = task.read(write_squad(tmp_path))
    task.check_model(model.config, data, dst)
    prepared = task.prepare(data, tok, 32)
    outputs = task.predict(model, prepared, batch_size=4)
    metrics = task.score(prepared, outputs)
    path = str(tmp_path / "predictions.json")
    task.write_predictions(path, prepared, outputs)
    with open(path, encoding="utf-8") as f:
        written = json.load(f)
    contexts = {e.qid: e.context for e in data.examples}
    assert all(answer and answer in contexts[qid] for qid, answer in written.items())
    official = squad_metric.evaluate_v1(squad_reading.gold_answers(data.examples), written)
    assert (official["exact_match"] / 100, official["f1"] / 100, official["total"]) == \
        (metrics["exact_match"], metrics["f1"], metrics["examples"])


def test_a_converted_multiple_choice_model_evaluates_through_the_race_task(tmp_path, spiece):
    dst = converted(tmp_path, "tiny_multiple_choice", spiece)
    model, tok = AlbertForMultipleChoice.from_pretrained(dst), AlbertTokenizer.from_pretrained(dst)
    model.set_train(False)
    task = get_task("race")
    data = task.read(write_race(tmp_path))
    prepared = task.prepare(data, tok, 48)
    outputs = list(task.predict(model, prepared, batch_size=3))      # compiled, padded to a bucket
    arrays = race_features.batch(race_features.encode_questions(tok, data, 48), [q.label for q in data], tok.pad_token_id)
    direct = model(*[ms.Tensor(a) for a in arrays[:3]]).asnumpy()
    assert np.abs(np.concatenate(outputs) - direct).max() < 1e-5
    metrics = task.score(prepared, outputs)
    path = str(tmp_path / "race.json")
    task.write_predictions(path, prepared, outputs)
    with open(path, encoding="utf-8") as f:
        letters = [letter for per_file in json.load(f).values() for letter in per_file]
    assert metrics["accuracy"] == np.mean([race_reading.LETTERS.index(x) == q.label for x, q in zip(letters, data)])


def test_a_converted_token_classification_model_tags_with_its_id2label_names(tmp_path, spiece):
    plain = converted(tmp_path, "tiny_token_cls", spiece)
    task = get_task("conll")
    data = task.read(write_conll(tmp_path, CONLL.replace("B-LOC", "I-LOC")))
    with pytest.raises(DataError, match=r"tiny_token_cls: config.json's id2label has no tag names"):
        task.check_model(AlbertForTokenClassification.from_pretrained(plain).config, data, plain)
    dst = converted(tmp_path / "named", "tiny_token_cls", spiece, NER_TAGS)
    model, tok = AlbertForTokenClassification.from_pretrained(dst), AlbertTokenizer.from_pretrained(dst)
    task.check_model(model.config, data, dst)
    assert task.label_names == tuple(NER_TAGS.values())
    prepared = task.prepare(data, tok, 48)
    outputs = list(task.predict(model, prepared, batch_size=2))
    tags = [t for batch in outputs for t in batch]
    assert [len(t) for t in tags] == [len(s.words) for s in data]
    assert set(t for ts in tags for t in ts) <= set(NER_TAGS.values())
    metrics = task.score(prepared, outputs)
    path = str(tmp_path / "columns.txt")
    task.write_predictions(path, prepared, outputs)
    report = conll_metric.evaluate((gold, predicted) for _, gold, predicted in read_columns(path))
    assert report["f1"] / 100 == metrics["f1"] and report["accuracy"] / 100 == metrics["accuracy"]


# ---------------------------------------------------------------- pipelines
def best_span(model, tok, question, context):
    """The highest start + end logit pair over the context's pieces (end within 30 pieces of
    the start), on the one-window input, as character offsets: the reference for the pipeline."""
    q = tok.encode_ids(question)
    pieces, offsets = tok.tokenize_with_offsets(context)
    ids = [tok.cls_token_id] + q + [tok.sep_token_id] + tok.convert_tokens_to_ids(pieces) + [tok.sep_token_id]
    types = [0] * (len(q) + 2) + [1] * (len(pieces) + 1)
    starts, ends = model(*[ms.Tensor(np.array([x], np.int32)) for x in (ids, types, [1] * len(ids))])
    starts, ends, first = starts.asnumpy()[0], ends.asnumpy()[0], len(q) + 2
    pairs = [(starts[first + s] + ends[first + e], s, e) for s in range(len(pieces)) for e in range(s, len(pieces))
             if e - s < 30 and context[offsets[s][0]:offsets[e][1]].strip()]
    _, s, e = max(pairs)
    return offsets[s][0], offsets[e][1]


def test_the_qa_pipeline_answers_with_the_best_span_and_its_characters(tmp_path, spiece):
    dst = converted(tmp_path, "tiny_qa", spiece)
    assert model_head(dst) == "qa"
    with pytest.raises(DataError, match=r"doc_stride 128 is longer than the window: max_length 64 - max_query_le"):
        pipeline(dst)                                                 # 64 positions: the defaults do not fit
    qa = pipeline(dst, doc_stride=16, max_query_length=16, n_best=64)   # every piece a candidate
    assert qa.max_length == 64
    items = [{"question": "Where did the cat sit?", "context": CONTEXT_1},
             {"question": "What is the capital?", "context": CONTEXT_2}]
    results = qa(items)
    # One item alone answers as in the batch; its score may differ in the last bits: the compiled forward
    # kernels (sgemm, batched matmul) round by the batch's shape (2.4215157e-2 against 2.4215155e-2 here).
    alone = qa(items[1])
    assert {k: alone[k] for k in ("answer", "start", "end")} == {k: results[1][k] for k in ("answer", "start", "end")}
    assert alone["score"] == pytest.approx(results[1]["score"], rel=1e-6)
    for item, result in zip(items, results):
        assert set(result) == {"answer", "score", "start", "end"} and 0 < result["score"] <= 1
        assert item["context"][result["start"]:result["end"]] == result["answer"]
        assert (result["start"], result["end"]) == best_span(qa.model, qa.tokenizer, **item)
    with pytest.raises(PipelineError, match=r"input 1: expected a dict with the keys 'question' and 'context'"):
        qa([items[0], {"question": "Where?"}])
    with pytest.raises(PipelineError, match=r"input \(context\): empty text"):
        qa({"question": "Where?", "context": "  "})


def test_the_ner_pipeline_returns_entities_with_character_spans(tmp_path, spiece):
    dst = converted(tmp_path, "tiny_token_cls", spiece, NER_TAGS)
    assert model_head(dst) == "token"
    ner = pipeline(dst)
    texts = ["Peter Blackburn went to Paris .", "EU  rejects German call", "Bonn"]
    results = ner(texts)
    assert ner(texts[0]) == results[0]
    names = list(NER_TAGS.values())
    for text, entities in zip(texts, results):
        words, spans = conll_features.split_words(text)   # the reference: each word tagged by its first piece alone
        firsts, ids = [], [ner.tokenizer.cls_token_id]
        for word in words:
            firsts.append(len(ids))
            ids += ner.tokenizer.encode_ids(word)
        logits = ner.model(*[ms.Tensor(np.array([x], np.int32)) for x in
                             (ids + [ner.tokenizer.sep_token_id], [0] * (len(ids) + 1), [1] * (len(ids) + 1))])
        tags = [names[int(logits.asnumpy()[0, p].argmax())] for p in firsts]
        want = [(kind, spans[a][0], spans[b][1]) for kind, a, b in conll_metric.entities(tags)]
        assert [(e["type"], e["start"], e["end"]) for e in entities] == want
        assert all(text[e["start"]:e["end"]] == e["text"] for e in entities)
    assert sum(len(e) for e in results) > 0                          # the random head does find some


def test_pipeline_picks_the_head_and_refuses_qa_options_for_a_classifier(tmp_path, spiece):
    dst = converted(tmp_path, "tiny_multiple_choice", spiece)
    assert model_head(dst) == "sequence"                             # pooler + classifier: not a tagger
    with pytest.raises(PipelineError, match=r"options \['doc_stride'\] are for question answering models"):
        pipeline(dst, doc_stride=8)


# ------------------------------------------------------ issue 36: long NER texts, lone surrogates
def test_word_windows_cover_every_word_within_capacity_at_the_stride():
    rng = np.random.default_rng(0)
    for _ in range(300):
        capacity = int(rng.integers(1, 12))
        stride = int(rng.integers(1, capacity + 1))
        sizes = [int(s) for s in rng.integers(0, capacity + 1, size=int(rng.integers(1, 40)))]
        windows = conll_windows.word_windows(sizes, capacity, stride)
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        assert windows[0][0] == 0 and windows[-1][1] == len(sizes)
        for (s, e), (s2, e2) in zip(windows, windows[1:]):
            assert s < s2 <= e < e2                                # no word skipped, always onwards
            # the next window starts at the first word `stride` pieces on from which a new word fits
            assert s2 == next((i for i in range(s + 1, e) if offsets[i] - offsets[s] >= stride
                               and offsets[e + 1] - offsets[i] <= capacity), e)
        for s, e in windows:
            assert offsets[e] - offsets[s] <= capacity                   # fits
            assert e == len(sizes) or offsets[e + 1] - offsets[s] > capacity   # and is full
    many = conll_windows.word_windows([1] * 100_000, 62, 31)          # one pass: about pieces / stride windows
    assert len(many) == -(-(100_000 - 62) // 31) + 1 and many[-1] == (99_944, 100_000)


def test_the_ner_pipeline_tags_a_text_longer_than_max_length_whole(tmp_path, spiece):
    """Issue 36.5: the pipeline tagged the first max_length pieces of a text only, silently."""
    dst = converted(tmp_path, "tiny_token_cls", spiece, NER_TAGS)
    ner = pipeline(dst, max_length=16, use_jit=False)
    text = " ".join(["Peter Blackburn went to Paris ."] * 12)
    words, spans = conll_features.split_words(text)
    found = ner(text)
    prepared = conll_windows.prepare_windows([words], ner.tokenizer, ner.task.label_names, 16)
    rows = prepared.features["features"]
    assert len(prepared.examples) > 4                                  # many windows, each within max_length
    assert all(len(ids) <= 16 for ids in rows.input_ids)
    # The reference: each window run alone; each word tagged by the window where it has the most context.
    names, best = list(NER_TAGS.values()), {}
    padded = [np.array([r + [0] * (16 - len(r)) for r in rows.input_ids], np.int32),
              np.zeros((len(rows.input_ids), 16), np.int32),
              np.array([[1] * len(r) + [0] * (16 - len(r)) for r in rows.input_ids], np.int32)]
    logits = ner.model(*map(ms.Tensor, padded)).asnumpy()               # (windows, 16, tags)
    for row, (window, ids, firsts) in enumerate(zip(prepared.examples, rows.input_ids, rows.first_piece)):
        for w, p in zip(range(window.start, window.end), firsts):
            context = (min(p - 1, len(ids) - 2 - p) + 0.01 * (len(ids) - 2), -window.start)
            best[w] = max(best.get(w, (context, "")), (context, names[int(logits[row, p].argmax())]))
    tags = [best[w][1] for w in range(len(words))]
    assert [(e["type"], e["start"], e["end"]) for e in found] == \
        [(kind, spans[a][0], spans[b][1]) for kind, a, b in conll_metric.entities(tags)]
    assert found[-1]["end"] > len(text) - 20 > 16 * 8                # an entity at the end, far beyond one window
    assert ner([text, "Bonn"])[0] == found


def test_a_ner_text_that_fits_one_window_gets_evaluates_features(tmp_path, spiece):
    tok = AlbertTokenizer(spiece)
    texts = [conll_features.split_words(t)[0] for t in ("Peter Blackburn went to Paris .", "EU  rejects German call", "Bonn")]
    prepared = conll_windows.prepare_windows(texts, tok, tuple(NER_TAGS.values()), 48)
    sentences = [conll_reading.Sentence(w, ["O"] * len(w), [0] * len(w)) for w in texts]
    direct = conll_features.encode_sentences(tok, sentences, tuple(NER_TAGS.values()), 48)
    assert len(prepared.examples) == 3
    assert prepared.features["features"].input_ids == direct.input_ids
    assert prepared.features["features"].first_piece == direct.first_piece


@pytest.mark.parametrize("fixture, item, where", [
    ("tiny_token_cls", "Peter \ud800 Blackburn", "input"),
    ("tiny_token_cls", ["Bonn", "Peter \ud800 Blackburn"], "input 1"),
    ("tiny_qa", {"question": "Where?", "context": "Peter \ud800 Blackburn"}, r"input \(context\)"),
    ("tiny_qa", [{"question": "Who\udc00?", "context": "Bonn"}], r"input 0 \(question\)")])
def test_the_qa_and_ner_pipelines_name_the_item_with_a_lone_surrogate(fixture, item, where, tmp_path, spiece):
    dst = converted(tmp_path, fixture, spiece, NER_TAGS if fixture == "tiny_token_cls" else None)
    run = pipeline(dst, **({"doc_stride": 16, "max_query_length": 16} if fixture == "tiny_qa" else {}))
    with pytest.raises(PipelineError, match=f"^{where}: not valid Unicode: lone surrogate U\\+D[8C]00 at character"):
        run(item)


# ------------------------------------------------ issue 36: evaluate.py --force and the tasks' own files
EVALUATED = {"squad": ("tiny_qa", "predictions.json"), "squad_v2": ("tiny_qa", "predictions.json"),
             "race": ("tiny_multiple_choice", "race.json"), "conll": ("tiny_token_cls", "columns.txt")}


def dead_pid():
    return int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout)


def another_layout(path):
    """The same predictions as another tool writes them (JSON indented by 4, as Google's and Hugging
    Face's SQuAD scripts do; columns separated by tabs)."""
    text = open(path, encoding="utf-8").read()
    return json.dumps(json.loads(text), indent=4) + "\n" if path.endswith(".json") else text.replace(" ", "\t")


def changed(path):
    """Other predictions, in the layout evaluate.py writes: what an earlier run left."""
    text = open(path, encoding="utf-8").read()
    if not path.endswith(".json"):
        return text.replace(" O\n", " I-PER\n", 1)
    value = json.loads(text)
    first = next(iter(value))
    value[first] = ("another answer" if isinstance(value[first], str) else
                    ["A" for _ in value[first]] if isinstance(value[first], list) else value[first] + 1.5)
    return file_io.json_text(value)


@pytest.mark.parametrize("task", EVALUATED)
def test_evaluate_force_replaces_its_own_task_predictions_and_nothing_else(task, tmp_path, spiece):
    fixture, name = EVALUATED[task]
    model = converted(tmp_path, fixture, spiece, NER_TAGS if task == "conll" else None)
    data = {"squad": lambda: write_squad(tmp_path), "squad_v2": lambda: write_squad(tmp_path, version_2=True),
            "race": lambda: write_race(tmp_path),
            "conll": lambda: write_conll(tmp_path, CONLL.replace("B-LOC", "I-LOC"))}[task]()
    out = str(tmp_path / "out" / name)
    args = ["--model", model, "--data", data, "--task", task, "--output", out, "--quiet", "--pynative",
            *(["--doc-stride", "16", "--max-query-length", "16"] if task.startswith("squad") else [])]
    evaluate.main(args)
    outputs = sorted(n for n in os.listdir(tmp_path / "out") if not n.startswith("."))
    assert outputs == sorted([name] + ["null_odds.json"] * (task == "squad_v2"))
    written = {n: open(os.path.join(tmp_path, "out", n), "rb").read() for n in os.listdir(tmp_path / "out")}
    assert sorted(written) == sorted(outputs + [f".{n}.albert_min.json" for n in outputs])   # each with its record
    inodes = {n: os.stat(os.path.join(tmp_path, "out", n)).st_ino for n in outputs}
    killed = os.path.join(tmp_path, "out", f".{name}.tmp-{dead_pid()}-x1")   # a killed writer's temporary
    open(killed, "w").write("half")
    evaluate.main(args + ["--force"])                        # its earlier predictions, unchanged: replaced
    assert {n: open(os.path.join(tmp_path, "out", n), "rb").read() for n in os.listdir(tmp_path / "out")} == written
    assert all(os.stat(os.path.join(tmp_path, "out", n)).st_ino != inodes[n] for n in outputs)
    for n in outputs:
        path = os.path.join(tmp_path, "out", n)
        record = os.path.join(tmp_path, "out", f".{n}.albert_min.json")
        edited = changed(path)                               # edited since evaluate.py wrote it: kept
        open(path, "w", encoding="utf-8").write(edited)
        with pytest.raises(SystemExit, match=re.escape(f"error: {path}: changed since albert_min wrote it (its sha256 "
                                                       f"is not the one recorded in {record}); refusing")):
            evaluate.main(args + ["--force"])
        assert open(path, encoding="utf-8").read() == edited
        os.remove(record)                                    # a user's file in exactly evaluate.py's layout: kept
        open(path, "wb").write(written[n])
        with pytest.raises(SystemExit, match=re.escape(f"error: {path}: not a predictions file evaluate.py wrote: "
                                                       f"no record of it ({record}")):
            evaluate.main(args + ["--force"])
        theirs = another_layout(path)                        # the same predictions in another tool's layout: kept
        open(path, "w", encoding="utf-8").write(theirs)
        with pytest.raises(SystemExit, match=re.escape(f"error: {path}: not a predictions file evaluate.py wrote")):
            evaluate.main(args + ["--force"])
        assert open(path, encoding="utf-8").read() == theirs
        open(path, "wb").write(written[n])
        open(record, "wb").write(written[f".{n}.albert_min.json"])
    evaluate.main(args + ["--force"])                        # restored as written, with their records: replaced


def test_the_task_files_are_not_taken_for_predictions(tmp_path):
    """Neither data file of a task is a predictions file, whatever --force says."""
    squad_data, conll_data = write_squad(tmp_path), write_conll(tmp_path)
    assert not squad_task.SquadTask.prediction_kind.is_ours(squad_data)
    assert not race_task.RaceTask.prediction_kind.is_ours(os.path.join(write_race(tmp_path), "high", "2.txt"))
    assert not conll_task.ConllTask.prediction_kind.is_ours(conll_data)       # four columns, a -DOCSTART- line
    sentences = [(s.words, s.tags, s.tags) for s in conll_reading.read_conll(conll_data)]
    conll_writing.write_columns(str(tmp_path / "ours.txt"), sentences)
    assert conll_task.ConllTask.prediction_kind.is_ours(str(tmp_path / "ours.txt"))
    file_io.write_json(str(tmp_path / "ours.json"), {"q1": "on the red mat"})
    assert squad_task.SquadTask.prediction_kind.is_ours(str(tmp_path / "ours.json"))
    assert not race_task.RaceTask.prediction_kind.is_ours(str(tmp_path / "ours.json"))   # not letters per file
