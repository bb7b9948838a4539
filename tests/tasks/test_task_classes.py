"""SquadTask, RaceTask and ConllTask driven through the task interface as train.py and
evaluate.py drive them, on small hand-written files and a tiny random model:
read -> prepare -> train_batches -> loss_fn (a few steps memorise the set) -> predict ->
score -> write_predictions, and the written file re-scored by the metric gives score's numbers."""
import json
import os

import mindspore as ms
import numpy as np
import pytest

from albert_min.model.heads import AlbertForMultipleChoice, AlbertForQuestionAnswering, AlbertForTokenClassification
from albert_min.common.parallel import SingleProcess
from albert_min.tasks.conll import metric as conll_metric
from albert_min.tasks.race import reading as race_reading
from albert_min.tasks.squad import metric as squad_metric
from albert_min.tasks.squad import reading as squad_reading
from albert_min.tasks import get_task
from albert_min.tasks.errors import DataError
from albert_min.tasks.squad.task import null_odds_path
from albert_min.training.step import make_optimizer, make_train_step
from helpers.paths import FIXTURES
from helpers.task_files import RACE_FILES, read_columns, tiny_model, write_conll, write_race, write_squad
from tokenizer import AlbertTokenizer


@pytest.fixture(scope="module")
def tok():
    return AlbertTokenizer(os.path.join(FIXTURES, "spiece_sst2_2k.model"))


def train(task, model, prepared, steps, batch_size, lr=3e-3):
    """``steps`` compiled AdamW steps over the task's shuffled batches (epoch after epoch); the
    losses. A batch of the whole set keeps one shape: one compile."""
    optimizer = make_optimizer(model, np.full(steps, lr, np.float32), 0.0)
    step = make_train_step(task.loss_fn(model), optimizer, 1.0)
    model.set_train(True)
    losses, epoch = [], 0
    while len(losses) < steps:
        for batch in task.train_batches(prepared, epoch, batch_size, 0, SingleProcess()):
            losses.append(float(step(*[ms.Tensor(a) for a in batch]).asnumpy()))
            if len(losses) == steps:
                break
        epoch += 1
    model.set_train(False)
    return losses


def learned(losses):
    return np.mean(losses[-3:]) < 0.3 * losses[0]


# ------------------------------------------------------------------- SQuAD
SQUAD_OPTIONS = dict(doc_stride=8, max_query_length=12)   # windows of 32 pieces: 2-3 per question


def test_squad_v1_trains_predicts_scores_and_writes_the_official_file(tmp_path, tok):
    task = get_task("squad", **SQUAD_OPTIONS)
    data = task.read(write_squad(tmp_path))
    assert len(data) == 5
    prepared = task.prepare(data, tok, 32)
    windows = task.steps_per_epoch(prepared, 1, 0, SingleProcess())
    assert windows > 2 * len(data)                                  # several windows per question
    model = tiny_model(AlbertForQuestionAnswering, tok.vocab_size)
    assert learned(train(task, model, prepared, 50, windows))
    outputs = task.predict(model, prepared, batch_size=3, use_jit=False)
    metrics = task.score(prepared, outputs)
    assert list(metrics) == ["exact_match", "f1", "examples"] and metrics["examples"] == 5
    assert metrics["exact_match"] == 1.0          # the memorised answers, cut from the context as written
    path = str(tmp_path / "predictions.json")
    task.write_predictions(path, prepared, outputs)               # the same pass: answers decoded once
    with open(path, encoding="utf-8") as f:
        written = json.load(f)
    assert list(written) == ["q1", "q2", "q3", "q4", "q5"] and written["q4"] == "Paris"
    official = squad_metric.evaluate_v1(squad_reading.gold_answers(data.examples), written)
    assert official["exact_match"] / 100 == metrics["exact_match"] and official["f1"] / 100 == metrics["f1"]
    assert not os.path.exists(null_odds_path(path))               # v1.1 has no null odds
    with pytest.raises(RuntimeError, match="stream once"):
        list(outputs)
    assert task.selection_score({f"dev_{k}": v for k, v in metrics.items()}) == metrics["f1"]


def test_squad_windows_stream_with_the_logits_of_one_window_alone(tmp_path, tok):
    """Compiled, padded to a bucket with filler rows, batch after batch: each window's logits
    are the model's on that window alone, and windows come out in file order."""
    task = get_task("squad", **SQUAD_OPTIONS)
    data = task.read(write_squad(tmp_path))
    prepared = task.prepare(data, tok, 32)
    model = tiny_model(AlbertForQuestionAnswering, tok.vocab_size)
    outputs = task.predict(model, prepared, batch_size=4, use_jit=True, progress=True)
    batches = list(outputs)
    assert [len(b) for b in batches[:-1]] == [4] * (len(batches) - 1)
    order = [w.example_index for b in batches for w, _, _ in b]
    assert order == sorted(order) and len(set(order)) == 5
    for window, starts, ends in (batches[0][0], batches[-1][-1]):
        alone = [ms.Tensor(np.array([x], np.int32)) for x in
                 (window.input_ids, window.token_type_ids, [1] * len(window.input_ids))]
        want_starts, want_ends = model(*alone)
        assert np.abs(starts - want_starts.asnumpy()[0]).max() < 1e-5
        assert np.abs(ends - want_ends.asnumpy()[0]).max() < 1e-5
    assert task.score(prepared, batches)["examples"] == 5          # a list of batches scores too


def test_squad_v2_scores_and_writes_null_odds_as_the_official_script_reads_them(tmp_path, tok):
    path = write_squad(tmp_path, version_2=True)
    model = tiny_model(AlbertForQuestionAnswering, tok.vocab_size)
    task = get_task("squad_v2", **SQUAD_OPTIONS)
    data = task.read(path)
    prepared = task.prepare(data, tok, 32)
    outputs = task.predict(model, prepared, batch_size=8, use_jit=False)
    metrics = task.score(prepared, outputs)
    out = str(tmp_path / "predictions.json")
    task.write_predictions(out, prepared, outputs)
    with open(out, encoding="utf-8") as f:
        predictions = json.load(f)
    with open(tmp_path / "null_odds.json", encoding="utf-8") as f:
        null_odds = json.load(f)
    assert set(predictions) == set(null_odds) == {"q1", "q2", "q3", "q4", "q5", "n1", "n2"}
    official = squad_metric.evaluate_v2(squad_reading.gold_answers(data.examples), predictions, null_odds)
    for key, value in official.items():
        ours = metrics[key] * 100 if key in ("exact", "f1", "best_exact", "best_f1") or "Ans_" in key and \
            not key.endswith("_total") else metrics[key]
        assert ours == pytest.approx(value, abs=1e-9), key
    # the threshold decides: any null score beats every span by more than -1e9, none by 1e9
    for threshold, no_answer_right in ((-1e9, 1.0), (1e9, 0.0)):
        task = get_task("squad_v2", null_score_diff_threshold=threshold, **SQUAD_OPTIONS)
        m = task.score(prepared, task.predict(model, prepared, batch_size=8, use_jit=False))
        assert m["NoAns_exact"] == no_answer_right and m["HasAns_exact"] <= 1 - no_answer_right


def test_squad_reader_options_and_errors(tmp_path, tok):
    v1, v2 = write_squad(tmp_path), write_squad(tmp_path, version_2=True)
    with pytest.raises(DataError, match=r"v2\.json: a SQuAD v2\.0 file .* use --task squad_v2"):
        get_task("squad").read(v2)
    assert [e.qid for e in get_task("squad").read(v1 + ":2-2").examples] == ["q4", "q5"]   # article 2 only
    with pytest.raises(DataError, match=r"doc_stride 40 is longer than the window: max_length 64 - "
                                        r"max_query_length 64 - 3"):
        get_task("squad", doc_stride=40).prepare(get_task("squad").read(v1), tok, 64)
    with pytest.raises(DataError, match="max_answer_length must be an integer >= 1"):
        get_task("squad", max_answer_length=0)
    with open(v1, encoding="utf-8") as f:
        unanswered = json.load(f)
    unanswered["data"][1]["paragraphs"][0]["qas"][1]["answers"] = []     # q5: a test file's question
    with open(v1, "w", encoding="utf-8") as f:
        json.dump(unanswered, f)
    task = get_task("squad", **SQUAD_OPTIONS)
    prepared = task.prepare(task.read(v1), tok, 32)
    with pytest.raises(DataError, match=r"v1\.json: question q5 has no answer to score against"):
        task.score(prepared, [])
    defaults = get_task("squad")
    assert (defaults.doc_stride, defaults.max_query_length, defaults.decoding.max_answer_length,
            defaults.default_max_length) == (128, 64, 30, 384)


# -------------------------------------------------------------------- RACE
def test_race_trains_predicts_scores_by_level_and_writes_letters_per_file(tmp_path, tok):
    task = get_task("race")
    data = task.read(write_race(tmp_path))
    assert [q.key for q in data] == ["middle1.txt", "middle1.txt", "high2.txt", "high10.txt"]
    prepared = task.prepare(data, tok, 48)
    batch = next(task.train_batches(prepared, 0, 4, 0, SingleProcess()))
    assert batch[0].shape[:2] == (4, 4) and batch[3].dtype == np.int32
    model = tiny_model(AlbertForMultipleChoice, tok.vocab_size)
    # 4 choices start level at ln 4; a small rate climbs out steadily (3e-3 can fall back to the plateau
    # on a last-bit difference, kernels on or off). It then rests near ln(4) / 4 (three questions of four
    # answered) before the last one: 50 steps ended there (0.46) once subnormals were no longer flushed;
    # 100 steps memorise all four (0.002).
    assert learned(train(task, model, prepared, 100, 4, lr=5e-4))
    outputs = task.predict(model, prepared, batch_size=3, use_jit=False)   # one pass, read twice
    metrics = task.score(prepared, outputs)
    assert list(metrics) == ["accuracy", "accuracy_middle", "accuracy_high", "examples"]
    assert metrics["accuracy"] == 1.0                               # memorised
    path = str(tmp_path / "race_predictions.json")
    task.write_predictions(path, prepared, outputs)
    with open(path, encoding="utf-8") as f:
        written = json.load(f)
    assert list(written) == ["middle1.txt", "high2.txt", "high10.txt"] and len(written["middle1.txt"]) == 2
    right = {level: [0, 0] for level in race_reading.LEVELS}
    for (level, name), data in RACE_FILES.items():
        for letter, answer in zip(written[level + name], data["answers"], strict=True):
            right[level][0] += letter == answer
            right[level][1] += 1
    assert metrics["accuracy_middle"] == right["middle"][0] / right["middle"][1]
    assert metrics["accuracy_high"] == right["high"][0] / right["high"][1]


# ------------------------------------------------------------------- CoNLL
def test_conll_trains_predicts_scores_and_writes_the_conlleval_file(tmp_path, tok):
    from albert_min.model.config import AlbertConfig
    task = get_task("conll")
    data = task.read(write_conll(tmp_path))
    assert [len(s.words) for s in data] == [6, 5, 7]                # -DOCSTART- lines skipped
    config = tiny_model(AlbertForTokenClassification, tok.vocab_size).config
    task.configure_model(config, data)
    assert config.id2label == {0: "O", 1: "B-LOC", 2: "I-LOC", 3: "I-MISC", 4: "I-ORG", 5: "I-PER"}
    AlbertConfig.from_dict(config.to_dict())                        # id2label goes into config.json as it is
    ms.set_seed(0)
    model = AlbertForTokenClassification(config)
    prepared = task.prepare(data, tok, 32)
    assert learned(train(task, model, prepared, 40, 3))
    outputs = task.predict(model, prepared, batch_size=2, use_jit=False)   # one pass, read twice
    metrics = task.score(prepared, outputs)
    assert list(metrics)[:4] == ["f1", "precision", "recall", "accuracy"] and metrics["words_dropped"] == 0
    assert metrics["f1"] == 1.0 and metrics["LOC_f1"] == 1.0        # memorised, B-LOC after I-LOC included
    path = str(tmp_path / "columns.txt")
    task.write_predictions(path, prepared, outputs)
    columns = read_columns(path)
    assert [words for words, _, _ in columns] == [s.words for s in data]
    report = conll_metric.evaluate((gold, pred) for _, gold, pred in columns)
    assert [report[k] / 100 for k in ("f1", "precision", "recall", "accuracy")] == \
        [metrics[k] for k in ("f1", "precision", "recall", "accuracy")]
    for kind, scores in report["per_type"].items():
        assert scores["f1"] / 100 == metrics[f"{kind}_f1"]


def test_conll_tag_names_come_from_the_model(tmp_path, tok):
    task = get_task("conll")
    data = task.read(write_conll(tmp_path))
    config = tiny_model(AlbertForTokenClassification, tok.vocab_size, num_labels=3).config
    with pytest.raises(DataError, match=r"model: config.json's id2label has no tag names"):
        task.check_model(config, data, "model")
    config.id2label = {0: "O", 1: "I-PER", 2: "I-LOC"}
    with pytest.raises(DataError, match=r"eng\.testa:10: tag 'I-ORG' is not one of the model's labels"):
        task.check_model(config, data, "model")
    with pytest.raises(DataError, match="tag names are not known yet"):
        get_task("conll").prepare(data, tok, 32)
