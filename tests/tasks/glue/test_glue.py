"""GLUE tasks: readers (real files and hand-made ones in the documented layouts) and metrics
against hand-computed numbers. Pair batching, the regression config and the scripts end to end:
test_glue_training.py."""

import math
import os

import numpy as np
import pytest

from helpers.glue_files import GLUE_DIR, needs_glue, write

from albert_min.tasks.glue import metric as glue_metric
from albert_min.tasks.glue import reading as glue_reading
from albert_min.tasks.errors import DataError

TASKS = glue_reading.TASKS


# ------------------------------------------------------------- real files
@needs_glue
@pytest.mark.parametrize("folder, task, train_rows, dev_rows", [
    ("CoLA", "cola", 8551, 1043), ("MRPC", "mrpc", 3668, 408),
    ("RTE", "rte", 2490, 277), ("STS-B", "stsb", 5749, 1500)])
def test_real_glue_files(folder, task, train_rows, dev_rows):
    for split, rows in (("train", train_rows), ("dev", dev_rows)):
        path = os.path.join(GLUE_DIR, folder, f"{split}.tsv")
        assert glue_reading.infer_task(path) == task
        examples = glue_reading.read_examples(path, TASKS[task])
        assert len(examples) == len(examples.labels) == len(examples.index) == rows
        assert (examples.text_pairs is not None) == (task != "cola")
        if task == "stsb":
            assert all(isinstance(y, float) and 0.0 <= y <= 5.0 for y in examples.labels)
        else:
            assert set(examples.labels) == {0, 1}


@needs_glue
def test_real_files_first_rows():
    mrpc = glue_reading.read_examples(os.path.join(GLUE_DIR, "MRPC", "train.tsv"), TASKS["mrpc"])
    assert mrpc.labels[0] == 1 and mrpc.texts[0].startswith("Amrozi accused his brother, whom he called \"the")
    assert mrpc.text_pairs[0].startswith("Referring to him as only \"the witness\"") and mrpc.index[:2] == ["0", "1"]
    rte = glue_reading.read_examples(os.path.join(GLUE_DIR, "RTE", "train.tsv"), TASKS["rte"])
    assert rte.labels[:2] == [1, 0]                 # not_entailment, entailment
    assert rte.text_pairs[0] == "Weapons of Mass Destruction Found in Iraq."
    cola = glue_reading.read_examples(os.path.join(GLUE_DIR, "CoLA", "train.tsv"), TASKS["cola"])
    assert cola.texts[0] == "Our friends won't buy this analysis, let alone the next one we propose."
    stsb = glue_reading.read_examples(os.path.join(GLUE_DIR, "STS-B", "train.tsv"), TASKS["stsb"])
    assert (stsb.texts[1], stsb.text_pairs[1], stsb.labels[1]) == (
        "A man is playing a large flute.", "A man is playing a flute.", 3.8)


# ------------------------------------------- hand-made files, documented layouts
MNLI_TRAIN_HEADER = ("index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
                     "sentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label")
MNLI_DEV_HEADER = MNLI_TRAIN_HEADER.replace("label1\tgold_label", "label1\tlabel2\tlabel3\tlabel4\tlabel5\tgold_label")


def mnli_row(i, a, b, labels):
    return "\t".join([str(i), "31193", "31193n", "government", "( ( a ) b )", "( c )", "(ROOT (S a))",
                      "(ROOT (S b))", a, b, *labels])


def test_mnli_train_dev_matched_and_mismatched(tmp_path):
    os.makedirs(tmp_path / "MNLI")
    train = write(tmp_path / "MNLI" / "train.tsv", [
        MNLI_TRAIN_HEADER,
        mnli_row(0, "Conceptually cream skimming has two basic dimensions.", "Product and geography are what "
                 "make cream skimming work. ", ["neutral", "neutral"]),
        mnli_row(1, "you know during the season", "You lose the things.", ["entailment", "entailment"]),
        mnli_row(2, "One of our number will carry out your instructions.", "A member of my team will not.",
                 ["contradiction", "contradiction"])])
    matched = write(tmp_path / "MNLI" / "dev_matched.tsv", [
        MNLI_DEV_HEADER,
        mnli_row(0, "The new rights are nice enough", "Everyone really likes the newest benefits",
                 ["neutral", "entailment", "neutral", "neutral", "neutral", "neutral"])])
    mismatched = write(tmp_path / "MNLI" / "dev_mismatched.tsv", [
        MNLI_DEV_HEADER,
        mnli_row(0, "Your contribution helped.", "Your contribution did not help.",
                 ["contradiction", "contradiction", "contradiction", "contradiction", "contradiction",
                  "contradiction"])])
    assert glue_reading.infer_task(matched) == glue_reading.infer_task(mismatched) == "mnli"
    data = glue_reading.read_examples(train, TASKS["mnli"])
    assert data.labels == [2, 1, 0]                 # contradiction, entailment, neutral
    assert data.text_pairs[0] == "Product and geography are what make cream skimming work."
    assert glue_reading.read_examples(matched, TASKS["mnli"]).labels == [2]   # gold_label, not label1
    assert glue_reading.read_examples(mismatched, TASKS["mnli"]).labels == [0]
    test = write(tmp_path / "MNLI" / "test_matched.tsv", [
        MNLI_TRAIN_HEADER.rsplit("\t", 2)[0], mnli_row(7, "a b", "c d", [])])
    unlabeled = glue_reading.read_examples(test, TASKS["mnli"])
    assert unlabeled.labels is None and unlabeled.index == ["7"] and unlabeled.text_pairs == ["c d"]


def test_qnli_qqp_wnli_layouts(tmp_path):
    qnli = write(tmp_path / "qnli.tsv", [
        "index\tquestion\tsentence\tlabel",
        "0\tWhat came into force after the new constitution?\tThe Convention came into force.\tentailment",
        "1\tWhat is the first major city?\tThe city lies on a river.\tnot_entailment"])
    data = glue_reading.read_examples(qnli, TASKS["qnli"])
    assert data.labels == [0, 1] and data.texts[1] == "What is the first major city?"
    qqp = write(tmp_path / "qqp.tsv", [
        "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate",
        "133273\t213221\t213222\tHow is the life of a math student?\tWhich level of prepration is enough?\t0",
        "402555\t536040\t536041\tHow do I control my horny emotions?\tHow do you control your horniness?\t1"])
    data = glue_reading.read_examples(qqp, TASKS["qqp"])
    assert data.labels == [0, 1] and data.index == ["133273", "402555"]
    assert data.text_pairs[1] == "How do you control your horniness?"
    qqp_test = write(tmp_path / "qqp_test.tsv", ["id\tquestion1\tquestion2", "0\tWhy?\tWhy not?"])
    assert glue_reading.read_examples(qqp_test, TASKS["qqp"]).labels is None
    wnli = write(tmp_path / "wnli.tsv", [
        "index\tsentence1\tsentence2\tlabel",
        "0\tI stuck a pin through a carrot. When I pulled the pin out, it had a hole.\tThe carrot had a hole.\t1"])
    data = glue_reading.read_examples(wnli, TASKS["wnli"])
    assert data.labels == [1] and data.text_pairs == ["The carrot had a hole."]


def test_test_file_layouts_without_labels(tmp_path):
    cola = glue_reading.read_examples(write(tmp_path / "cola_test.tsv", ["index\tsentence", "0\tBill whistled past the house.",
                                                                 "1\tThe car honked."]), TASKS["cola"])
    assert cola.labels is None and cola.texts == ["Bill whistled past the house.", "The car honked."]
    rte = glue_reading.read_examples(write(tmp_path / "rte_test.tsv", ["index\tsentence1\tsentence2", "5\tA b.\tC d."]),
                             TASKS["rte"])
    assert rte.labels is None and rte.index == ["5"]
    mrpc = glue_reading.read_examples(write(tmp_path / "mrpc_test.tsv", [
        "index\t#1 ID\t#2 ID\t#1 String\t#2 String", "0\t1\t2\tA b.\tC d."], bom=True), TASKS["mrpc"])
    assert mrpc.labels is None and mrpc.text_pairs == ["C d."]


def test_mrpc_header_with_and_without_byte_order_mark(tmp_path):
    lines = ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String", "1\t1\t2\tHe said \"yes\".\tHe agreed."]
    for bom in (True, False):
        data = glue_reading.read_examples(write(tmp_path / f"mrpc{bom}.tsv", lines, bom=bom), TASKS["mrpc"])
        assert data.labels == [1] and data.texts == ['He said "yes".']


@pytest.mark.parametrize("task, lines, message", [
    ("rte", ["index\tsentence1\tsentence2\tlabel", "0\ta\tb\tentailment", "1\ta\tb\tcontradiction"],
     ":3: label 'contradiction' is not one of entailment, not_entailment"),
    ("rte", ["index\tsentence1\tsentence2\tlabel", "0\ta\tb\tentailment", "", "1\ta b\tentailment"],
     ":4: expected 4 tab-separated fields"),
    ("rte", ["index\tsentence1\tsentence2\tlabel", "0\t \t\tentailment"], ":2: empty text"),
    ("rte", ["sentence\tlabel", "good\t1"], ":1: header ['sentence', 'label'] has no 'sentence1' column"),
    ("stsb", ["index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore",
              "0\tg\tf\ty\t1\tn\tn\ta\tb\t5.0", "1\tg\tf\ty\t1\tn\tn\ta\tb\tnan"],
     ":3: score 'nan' is not a finite number"),
    ("stsb", ["index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore",
              "0\tg\tf\ty\t1\tn\tn\ta\tb\thigh"], ":2: score 'high' is not a finite number"),
    ("cola", ["gj04\t1\t\tFine.", "gj04\t2\t*\tNot fine."], ":2: label '2' is not one of 0, 1"),
    ("cola", ["gj04\t1\tFine."], ":1: expected 4 tab-separated fields"),
    ("cola", ["sentence\tlabel", "fine\t1"], ":1: CoLA files have no header row"),
    ("mrpc", ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String", "yes\t1\t2\ta\tb"], ":2: label 'yes' is not one of"),
    ("sentence_label", ["sentence\tlabel", "good\t1", "bad\tx"], ":3: label 'x' is not an integer"),
])
def test_malformed_rows_name_file_and_line(tmp_path, task, lines, message):
    path = write(tmp_path / "bad.tsv", lines)
    with pytest.raises(DataError) as err:
        glue_reading.read_examples(path, TASKS[task])
    assert str(err.value).startswith(path) and message in str(err.value)


def test_task_inferred_from_folder_name():
    assert glue_reading.infer_task("../shared/data/glue/RTE/dev.tsv") == "rte"
    assert glue_reading.infer_task("../shared/data/sst2/dev.tsv") == "sst2"
    assert glue_reading.infer_task("glue_data/SST-2/train.tsv") == "sst2"
    assert glue_reading.infer_task("glue_data/STS-B/dev.tsv") == "stsb"
    assert glue_reading.infer_task("glue_data/QQP/dev.tsv") == "qqp"
    assert glue_reading.infer_task("/tmp/anything/train.tsv") == "sentence_label"
    assert glue_reading.infer_task("train.tsv") == "sentence_label"
    with pytest.raises(DataError, match="unknown task 'foo'"):
        glue_reading.get_task("foo")


# ------------------------------------------------------------------ metrics
def test_matthews_by_hand():
    # tp = 3, fn = 1, fp = 1, tn = 3: (3*3 - 1*1) / sqrt(4*4*4*4) = 8 / 16
    labels = [1, 1, 1, 1, 0, 0, 0, 0]
    assert glue_metric.matthews_corrcoef(labels, [1, 1, 1, 0, 1, 0, 0, 0]) == pytest.approx(0.5)
    # tp = 1, fn = 2, fp = 2, tn = 1: (1 - 4) / sqrt(3*3*3*3) = -1/3
    assert glue_metric.matthews_corrcoef([1, 1, 1, 0, 0, 0], [1, 0, 0, 1, 1, 0]) == pytest.approx(-1 / 3)
    assert glue_metric.matthews_corrcoef(labels, labels) == 1.0
    assert glue_metric.matthews_corrcoef(labels, [1] * 8) is None     # one class predicted: undefined (0/0)
    assert glue_metric.matthews_corrcoef([0] * 4, [1, 0, 1, 0]) is None   # one class in the labels


def test_f1_and_accuracy_by_hand():
    # tp = 2, fn = 2, fp = 1, tn = 1: F1 = 2*2 / (2*2 + 1 + 2) = 4/7, accuracy 3/6
    labels, predictions = [1, 1, 1, 1, 0, 0], [1, 1, 0, 0, 1, 0]
    assert glue_metric.f1_score(labels, predictions) == pytest.approx(4 / 7)
    assert glue_metric.accuracy(labels, predictions) == pytest.approx(0.5)
    assert glue_metric.f1_score([0, 0], [0, 0]) is None               # label 1 neither true nor predicted: 0/0
    assert glue_metric.f1_score([1, 1], [0, 0]) == 0.0                # never predicted, but true: a real 0
    assert glue_metric.compute_metrics(TASKS["mrpc"], labels, predictions) == {
        "f1": pytest.approx(4 / 7), "accuracy": 0.5, "examples": 6}
    with pytest.raises(ValueError, match="as many predictions as labels"):
        glue_metric.accuracy([1, 0], [1])


def test_pearson_and_spearman_by_hand():
    # dx = (-1.5, -.5, .5, 1.5), dy = (-3, -1, 0, 4): 11 / sqrt(5 * 26)
    assert glue_metric.pearson([1, 2, 3, 4], [2, 4, 5, 9]) == pytest.approx(11 / math.sqrt(130))
    # Ties share their average rank: (1, 2.5, 2.5, 4) vs (1, 2, 3.5, 3.5) -> 3.75 / 4.5
    assert glue_metric.spearman([1.0, 2.0, 2.0, 3.0], [10.0, 20.0, 30.0, 30.0]) == pytest.approx(3.75 / 4.5)
    assert glue_metric.spearman([1, 2, 3, 4], [1, 4, 9, 16]) == pytest.approx(1.0)       # monotone, not linear
    assert glue_metric.pearson([1, 2, 3, 4], [1, 4, 9, 16]) < 1.0
    assert glue_metric.pearson([1, 2, 3], [2, 2, 2]) is None          # constant predictions: undefined
    metrics = glue_metric.compute_metrics(TASKS["stsb"], [1, 2, 3, 4], [2, 4, 5, 9])
    assert sorted(metrics) == ["examples", "pearson", "spearman"] and metrics["spearman"] == pytest.approx(1.0)
    assert glue_metric.selection_score(TASKS["stsb"], {"pearson": None}) == -1.0


def test_each_task_reports_glues_metric():
    assert {name: t.metrics for name, t in TASKS.items()} == {
        "cola": ("matthews",), "sst2": ("accuracy",), "mrpc": ("f1", "accuracy"), "stsb": ("pearson", "spearman"),
        "qqp": ("f1", "accuracy"), "mnli": ("accuracy",), "qnli": ("accuracy",), "rte": ("accuracy",),
        "wnli": ("accuracy",), "sentence_label": ("accuracy",)}
    logits = np.array([[2.0, 1.0, 0.0], [0.0, 3.0, 1.0], [0.0, 0.0, 1.0]])
    assert glue_metric.evaluation_metrics(TASKS["mnli"], [0, 1, 0], logits) == {"accuracy": pytest.approx(2 / 3),
                                                                         "examples": 3}
    binary = glue_metric.evaluation_metrics(TASKS["cola"], [1, 0, 1], np.array([[0, 1], [1, 0], [1, 0]]))
    assert binary["matthews"] == pytest.approx(0.5) and binary["confusion"] == {"tp": 1, "fp": 0, "fn": 1, "tn": 1}


@pytest.mark.parametrize("task, labels, predictions, undefined", [
    # every label and prediction 0: accuracy 100, while F1/precision/recall of label 1 are 0/0
    ("sst2", [0, 0, 0], [0, 0, 0], {"f1": "no positive labels or predictions (label 1)",
                                    "precision": "no positive predictions (label 1)",
                                    "recall": "no positive labels (label 1)"}),
    ("sst2", [1, 0, 1], [0, 0, 0], {"precision": "no positive predictions (label 1)"}),
    ("sst2", [0, 0, 0], [1, 0, 0], {"recall": "no positive labels (label 1)"}),
    ("cola", [1, 0, 1], [1, 1, 1], {"matthews": "one class predicted for every example"}),
    ("cola", [1, 1, 1], [1, 0, 1], {"matthews": "one class in every label"}),
    ("stsb", [1.0, 2.0, 3.0], [2.0, 2.0, 2.0], {"pearson": "constant predictions", "spearman": "constant predictions"}),
    ("stsb", [2.0, 2.0, 2.0], [1.0, 2.0, 3.0], {"pearson": "constant labels", "spearman": "constant labels"}),
])
def test_undefined_metrics_are_none_with_a_note(task, labels, predictions, undefined):
    """0/0 is no score: None (JSON null, "n/a" in evaluate.py's table) and a note saying why."""
    if TASKS[task].is_regression:
        logits = np.array(predictions, np.float32)[:, None]
    else:
        logits = np.eye(2, dtype=np.float32)[predictions]
    metrics = glue_metric.evaluation_metrics(TASKS[task], labels, logits)
    assert {k for k, v in metrics.items() if v is None} == set(undefined)
    assert metrics["notes"] == undefined
    assert all(isinstance(v, float) for k, v in metrics.items() if k in ("accuracy", "f1", "precision", "recall",
                                                                           "matthews", "pearson", "spearman")
               and k not in undefined)
    assert glue_metric.selection_score(TASKS[task], metrics) == (-1.0 if TASKS[task].metrics[0] in undefined
                                                          else metrics[TASKS[task].metrics[0]])


def test_defined_metrics_carry_no_notes():
    metrics = glue_metric.evaluation_metrics(TASKS["sst2"], [1, 0, 1, 0], np.eye(2)[[1, 0, 0, 0]])
    assert "notes" not in metrics and metrics["precision"] == 1.0 and metrics["recall"] == 0.5


def test_inference_tasks_report_accuracy_and_the_confusion_matrix_only():
    """RTE/QNLI/WNLI: label 1 (not_entailment, or WNLI's entailment) is no positive class;
    GLUE reports accuracy alone, and so do we (the confusion matrix stays: it names no positive)."""
    logits = np.eye(2)[[1, 0, 0, 1]]
    for name in ("rte", "qnli", "wnli"):
        assert glue_metric.evaluation_metrics(TASKS[name], [1, 0, 1, 1], logits) == {
            "accuracy": 0.75, "examples": 4, "confusion": {"tp": 2, "fp": 0, "fn": 1, "tn": 1}}
    assert {"f1", "precision", "recall"} <= set(glue_metric.evaluation_metrics(TASKS["sst2"], [1, 0, 1, 1], logits))


def test_model_label_order_maps_by_name():
    mnli = TASKS["mnli"]
    hf_datasets_order = {0: "entailment", 1: "neutral", 2: "contradiction"}
    assert glue_reading.model_label_order(mnli, hf_datasets_order) == [1, 2, 0]
    assert glue_reading.model_label_order(mnli, {0: "contradiction", 1: "entailment", 2: "neutral"}) is None
    assert glue_reading.model_label_order(mnli, None) is None
    assert glue_reading.model_label_order(TASKS["sst2"], {0: "negative", 1: "positive"}) is None   # unknown names: as is
