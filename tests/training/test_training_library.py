"""Training as a library: the Python example of docs/training.md, the task registry, the typed
config, grad accumulation and LAMB, one writer per output, and train.py's messages."""

import os
import re
import subprocess
import sys

import numpy as np
import pytest

from helpers.paths import ROOT
from helpers.tiny_runs import TINY_MODEL, sentiment_tsv

import train  # noqa: E402
from albert_min.model.folder import read_checkpoint
from albert_min.tasks import REGISTRY, TASK_NAMES, get_task
from albert_min.training.config import TrainingConfig, TrainingConfigError


def python_example():
    with open(os.path.join(ROOT, "docs", "training.md"), encoding="utf-8") as f:
        return re.search(r"```python\n(.*?)```", f.read(), re.S).group(1)


def test_the_python_training_example_of_the_docs_runs(tmp_path, monkeypatch, capsys):
    output = str(tmp_path / "sst2-more")
    code = python_example()
    assert '"runs/sst2-more"' in code and "train.py" not in code
    monkeypatch.chdir(ROOT)
    exec(compile(code.replace('"runs/sst2-more"', repr(output)), "docs/training.md", "exec"), {})
    printed = capsys.readouterr().out
    accuracy = float(re.search(r"dev accuracy (\d\.\d+), model in", printed).group(1))
    assert accuracy > 0.75   # the committed model scores 0.8142; 4 small steps at lr 1e-5 keep it there
    assert {"config.json", "model.ckpt", "spiece.model", "training_settings.json"} <= set(os.listdir(output))
    assert os.path.isfile(os.path.join(output + ".state", "state.json"))


def test_every_registered_task_builds_and_names_itself():
    for name in TASK_NAMES:
        task = get_task(name)
        assert task.name == name and task.model_class.startswith("Albert")
    assert set(REGISTRY) >= {"sst2", "stsb", "rte", "sentence_label", "sop", "nsp", "mlm"}


@pytest.mark.parametrize("changes, message", [
    ({"batch_size": 0}, "batch_size must be an integer >= 1, got 0"),
    ({"lr": float("nan")}, "lr must be a finite number > 0.0"),
    ({"optimizer": "sgd"}, "optimizer must be one of adamw, lamb"),
    ({"batch_size": 10, "grad_accum": 4}, "batch_size 10 must be a multiple of grad_accum 4"),
    ({"output": "/"}, "output must be a folder path"),
])
def test_training_config_refuses_bad_values_naming_them(changes, message):
    with pytest.raises(TrainingConfigError, match=re.escape(message)):
        TrainingConfig(**{"output": "o", **changes})


def test_help_shows_every_default(capsys):
    with pytest.raises(SystemExit):
        train.main(["--help"])
    shown = " ".join(capsys.readouterr().out.split())
    for flag, default in [("--epochs", 3), ("--batch-size", 64), ("--lr", 0.0002), ("--warmup", 0.1),
                          ("--weight-decay", 0.01), ("--max-grad-norm", 1.0), ("--max-length", 64), ("--seed", 42),
                          ("--vocab-size", 8000), ("--hidden-size", 128), ("--heads", 4), ("--grad-accum", 1),
                          ("--optimizer", "adamw")]:
        assert re.search(re.escape(flag) + r" [A-Z_{},a-z]+ .*?\(default: " + re.escape(str(default)) + r"\)", shown), flag


def run(args, cwd=ROOT):
    done = subprocess.run([sys.executable, "train.py", *args], cwd=cwd, capture_output=True, text=True, timeout=300)
    return done.returncode, done.stdout, done.stderr


def test_model_shape_is_checked_before_any_work(tmp_path):
    tsv = sentiment_tsv(tmp_path / "train.tsv", 32, seed=0)
    code, out, err = run(["--train", tsv, "--output", str(tmp_path / "o"), "--heads", "3", "--hidden-size", "32"])
    assert code == 1 and err.strip() == "error: --heads 3 must divide --hidden-size 32 (each head gets " \
                                        "hidden-size / heads dimensions)"
    assert "SentencePiece" not in out and "tokenizer" not in out   # nothing trained first


def test_a_file_of_another_task_is_described(tmp_path):
    rte = tmp_path / "train.tsv"
    rte.write_text("index\tsentence1\tsentence2\tlabel\n0\tA man.\tA person.\tentailment\n")
    with pytest.raises(SystemExit, match=re.escape(
            f"error: {rte}:1: does not match task sst2's layout (columns sentence, label); its header is "
            "['index', 'sentence1', 'sentence2', 'label']")):
        train.main(["--train", str(rte), "--task", "sst2", "--output", str(tmp_path / "o"), *TINY_MODEL])


def test_without_dev_the_last_model_is_kept_and_said_so(tmp_path, capsys):
    tsv = sentiment_tsv(tmp_path / "train.tsv", 32, seed=0)
    state = train.main(["--train", tsv, "--output", str(tmp_path / "o"), "--epochs", "2", "--batch-size", "16",
                        *TINY_MODEL])
    out = capsys.readouterr().out
    assert state["best"] is None and "score 0.0" not in out
    assert "no dev set (the last model is kept)" in out
    assert "saved" in out and "(no dev set: the last model, step 4)" in out
    assert out.strip().endswith(f"done: no dev set given, so nothing was scored; the last model (step 4) is in "
                                f"{tmp_path / 'o'}")


def test_the_trained_tokenizer_is_reported_with_why_it_is_smaller(tmp_path, capsys):
    tsv = sentiment_tsv(tmp_path / "train.tsv", 32, seed=0)
    train.main(["--train", tsv, "--output", str(tmp_path / "o"), "--max-steps", "1", "--batch-size", "16",
                *TINY_MODEL[:8], "--vocab-size", "300", "--max-length", "24", "--quiet"])
    line = next(x for x in capsys.readouterr().out.splitlines() if "SentencePiece" in x)
    pieces = int(re.search(r"trained a (\d+)-piece SentencePiece tokenizer on 32 lines", line).group(1))
    assert pieces < 300 and "(asked for 300; SentencePiece stops when the text has no more pieces" in line


def test_two_train_processes_on_one_output_exactly_one_wins(tmp_path):
    tsv = sentiment_tsv(tmp_path / "train.tsv", 64, seed=0)
    output = str(tmp_path / "out")
    args = ["--train", tsv, "--output", output, "--epochs", "1", "--batch-size", "16", *TINY_MODEL]
    first = subprocess.Popen([sys.executable, "train.py", *args], cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    second = subprocess.Popen([sys.executable, "train.py", *args], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    results = [(p.wait(timeout=300), p.stdout.read(), p.stderr.read(), p.pid) for p in (first, second)]
    winners = [r for r in results if r[0] == 0]
    losers = [r for r in results if r[0] != 0]
    assert len(winners) == 1 and len(losers) == 1, results
    code, _, err, _ = losers[0]
    assert code == 1 and err.strip() == (f"error: {output}: in use by another albert_min process "
                                         f"(pid {winners[0][3]})")
    assert f"done: best score" not in losers[0][1] and "done:" in winners[0][1]


def train_tiny(tmp_path, name, *extra, rows=64):
    tsv = sentiment_tsv(tmp_path / "train.tsv", rows, seed=5)
    output = str(tmp_path / name)
    train.main(["--train", tsv, "--output", output, "--epochs", "2", "--batch-size", "16", "--lr", "3e-3",
                "--dropout", "0", *TINY_MODEL, *extra])
    return read_checkpoint(os.path.join(output + ".state", "model.ckpt"))


@pytest.mark.parametrize("optimizer", ["adamw", pytest.param("lamb", marks=pytest.mark.slow)])   # lamb: 45 s
def test_grad_accumulation_equals_one_larger_batch(tmp_path, optimizer):
    """--batch-size 16 in 4 micro-batches of 4 is the step on the batch of 16 (dropout off): float32 tolerance."""
    whole = train_tiny(tmp_path, "whole", "--optimizer", optimizer)
    accumulated = train_tiny(tmp_path, "accumulated", "--optimizer", optimizer, "--grad-accum", "4")
    for name, value in whole.items():
        np.testing.assert_allclose(accumulated[name], value, rtol=1e-4, atol=1e-5, err_msg=name)
    smaller = train_tiny(tmp_path, "smaller", "--optimizer", optimizer, "--batch-size", "4")
    assert not all(np.allclose(whole[n], smaller[n], rtol=1e-4, atol=1e-5) for n in whole)   # not 4-row batches


def test_lamb_is_the_optimizer_and_its_state_resumes(tmp_path):
    adamw = train_tiny(tmp_path, "adamw")
    lamb = train_tiny(tmp_path, "lamb", "--optimizer", "lamb")
    assert any(not np.allclose(adamw[n], lamb[n]) for n in adamw)
    moments = read_checkpoint(str(tmp_path / "lamb.state" / "optimizer.ckpt"))
    assert any(k.startswith("lamb_m.") for k in moments) and int(moments["global_step"]) == 8


@pytest.mark.parametrize("use_jit", [True, False])
def test_lamb_follows_its_formula(use_jit):
    """Two steps of albert_min.training.lamb against LAMB written out in numpy (nn.Lamb's documented update:
    bias-corrected Adam ratio plus weight decay, scaled per tensor by ||w|| / ||update||)."""
    import mindspore as ms
    from albert_min.training.lamb import Lamb
    rng = np.random.default_rng(0)
    w0, b0 = rng.normal(size=(3, 4)).astype(np.float32), rng.normal(size=(4,)).astype(np.float32)
    w, b = ms.Parameter(ms.Tensor(w0), name="w"), ms.Parameter(ms.Tensor(b0), name="b")
    lrs = np.array([0.1, 0.05], np.float32)
    optimizer = Lamb([{"params": [w], "weight_decay": 0.01}, {"params": [b], "weight_decay": 0.0}],
                     learning_rate=ms.Tensor(lrs))
    grads = [(rng.normal(size=(3, 4)).astype(np.float32), rng.normal(size=(4,)).astype(np.float32)) for _ in range(2)]

    def step(gw, gb):
        return optimizer((gw, gb))
    step = ms.jit(step) if use_jit else step
    for gw, gb in grads:
        step(ms.Tensor(gw), ms.Tensor(gb))
    for parameter, p, decay, k in ((w, w0, 0.01, 0), (b, b0, 0.0, 1)):
        m, v = np.zeros_like(p), np.zeros_like(p)
        for t, g in enumerate(grads, start=1):
            m, v = 0.9 * m + 0.1 * g[k], 0.999 * v + 0.001 * g[k] ** 2
            u = (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-6) + decay * p
            p = p - lrs[t - 1] * np.linalg.norm(p) / np.linalg.norm(u) * u
        np.testing.assert_allclose(parameter.asnumpy(), p, rtol=1e-5, atol=1e-6)
    assert int(optimizer.global_step.asnumpy()[0]) == 2


def test_a_tasks_predictions_file_is_evaluate_pys(tmp_path):
    """GlueTask.predict -> write_predictions writes what evaluate.py --output writes for the same model."""
    import evaluate
    from albert_min.model.heads import AlbertForSequenceClassification
    from tokenizer import AlbertTokenizer
    model_dir, data = os.path.join(ROOT, "weights", "sst2-small"), os.path.join(ROOT, "tests", "fixtures",
                                                                                 "tiny_sst2_hf", "dev64.tsv")
    task = get_task("sst2")
    prepared = task.prepare(task.read(data), AlbertTokenizer.from_pretrained(model_dir), max_length=64)
    model = AlbertForSequenceClassification.from_pretrained(model_dir)
    task.write_predictions(str(tmp_path / "task.tsv"), prepared, task.predict(model, prepared))
    evaluate.main(["--model", model_dir, "--data", data, "--output", str(tmp_path / "evaluate.tsv"), "--quiet"])
    assert (tmp_path / "task.tsv").read_text() == (tmp_path / "evaluate.tsv").read_text()
    assert len((tmp_path / "task.tsv").read_text().splitlines()) == 65
