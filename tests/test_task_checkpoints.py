"""Converted transformers checkpoints (tests/fixtures/tiny_qa, tiny_multiple_choice,
tiny_token_cls) evaluate through SquadTask, RaceTask and ConllTask directly, and serve as
question-answering and NER pipelines. Their vocabulary is 120 pieces, so the tests train a
SentencePiece model of at most that size on the test files' text."""
import json
import os

import mindspore as ms
import numpy as np
import pytest

from albert_min import convert as cv
from albert_min import pipeline
from albert_min.model.heads import AlbertForMultipleChoice, AlbertForQuestionAnswering, AlbertForTokenClassification
from albert_min.predict.pipelines import PipelineError
from albert_min.predict.task_pipelines import model_head
from albert_min.tasks import conll, conlleval, get_task, race, squad, squad_metric
from albert_min.tasks.base import DataError
from conftest import FIXTURES
from task_files import (CONLL, CONTEXT_1, CONTEXT_2, CONTEXT_3, RACE_FILES, read_columns, write_conll, write_race,
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
    official = squad_metric.evaluate_v1(squad.gold_answers(data.examples), written)
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
    arrays = race.batch(race.encode_all(tok, data, 48), [q.label for q in data], tok.pad_token_id)
    direct = model(*[ms.Tensor(a) for a in arrays[:3]]).asnumpy()
    assert np.abs(np.concatenate(outputs) - direct).max() < 1e-5
    metrics = task.score(prepared, outputs)
    path = str(tmp_path / "race.json")
    task.write_predictions(path, prepared, outputs)
    with open(path, encoding="utf-8") as f:
        letters = [letter for per_file in json.load(f).values() for letter in per_file]
    assert metrics["accuracy"] == np.mean([race.LETTERS.index(x) == q.label for x, q in zip(letters, data)])


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
    report = conlleval.evaluate((gold, predicted) for _, gold, predicted in read_columns(path))
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
    assert qa(items[1]) == results[1]
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
        words, spans = conll.split_words(text)   # the reference: each word tagged by its first piece alone
        firsts, ids = [], [ner.tokenizer.cls_token_id]
        for word in words:
            firsts.append(len(ids))
            ids += ner.tokenizer.encode_ids(word)
        logits = ner.model(*[ms.Tensor(np.array([x], np.int32)) for x in
                             (ids + [ner.tokenizer.sep_token_id], [0] * (len(ids) + 1), [1] * (len(ids) + 1))])
        tags = [names[int(logits.asnumpy()[0, p].argmax())] for p in firsts]
        want = [(kind, spans[a][0], spans[b][1]) for kind, a, b in conlleval.entities(tags)]
        assert [(e["type"], e["start"], e["end"]) for e in entities] == want
        assert all(text[e["start"]:e["end"]] == e["text"] for e in entities)
    assert sum(len(e) for e in results) > 0                          # the random head does find some


def test_pipeline_picks_the_head_and_refuses_qa_options_for_a_classifier(tmp_path, spiece):
    dst = converted(tmp_path, "tiny_multiple_choice", spiece)
    assert model_head(dst) == "sequence"                             # pooler + classifier: not a tagger
    with pytest.raises(PipelineError, match=r"options \['doc_stride'\] are for question answering models"):
        pipeline(dst, doc_stride=8)
