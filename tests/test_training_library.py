"""Training as a library: the Python example of docs/training.md, the task registry, the typed
config, one writer per output, and train.py's messages."""

import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT
from test_scripts import TINY_MODEL, sentiment_tsv

import train  # noqa: E402
from albert_min.tasks import REGISTRY, TASK_NAMES, get_task
from albert_min.training_config import TrainingConfig, TrainingConfigError


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
    assert set(REGISTRY) >= {"sst2", "stsb", "rte", "cls", "sop", "nsp", "mlm"}


@pytest.mark.parametrize("changes, message", [
    ({"batch_size": 0}, "batch_size must be an integer >= 1, got 0"),
    ({"lr": float("nan")}, "lr must be a finite number > 0.0"),
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
                          ("--vocab-size", 8000), ("--hidden-size", 128), ("--heads", 4)]:
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
