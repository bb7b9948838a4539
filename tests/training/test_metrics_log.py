"""metrics.jsonl and TensorBoard's event files (albert_min.training.metrics_log), and train.py's --report-to."""

import json
import os
import subprocess
import sys

import pytest

from helpers.paths import ROOT
from helpers.tiny_runs import TINY_MODEL, sentiment_tsv

sys.path.insert(0, ROOT)
import train  # noqa: E402
from albert_min.training.metrics_log import (INSTALL_TENSORBOARD, METRICS_FILE, TENSORBOARD_FOLDER,  # noqa: E402
                                             MetricsLog, MetricsLogError, read_records)


def tensorboard_scalars(folder):
    """{tag: [(step, value)]} as TensorBoard itself reads ``folder``."""
    event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    acc = event_accumulator.EventAccumulator(folder, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def lines(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_log_is_kept_whole_across_folder_replacements_and_cut_back_on_resume(tmp_path):
    output = tmp_path / "model"
    log = MetricsLog(str(output))
    log.append({"step": 1, "loss": 0.7, "lr": 1e-4, "examples_per_s": 10.0})   # no folder yet: kept in memory
    assert not output.exists()
    output.mkdir()                                              # the first save: the whole log in the folder
    for name, write in log.files_for_save().items():
        write(str(output / name))
    log.append({"step": 2, "loss": 0.6, "lr": 2e-4, "examples_per_s": 11.0})   # then appended line by line
    log.append({"step": 2, "epoch": 1.0, "train_loss": 0.65, "eval": {"accuracy": 0.5}})
    log.append({"step": 3, "loss": 0.5, "lr": 1e-4, "examples_per_s": 12.0})
    assert [r["step"] for r in lines(output / METRICS_FILE)] == [1, 2, 2, 3]
    with open(output / METRICS_FILE, "a") as f:
        f.write('{"step": 4, "lo')                               # a torn last line (a crash mid-write)

    resumed = MetricsLog(str(output))
    resumed.resume(2)                                           # the state was saved at step 2
    assert [r["step"] for r in lines(output / METRICS_FILE)] == [1, 2, 2]
    resumed.append({"step": 3, "loss": 0.4, "lr": 1e-4, "examples_per_s": 12.0})
    assert [(r["step"], r.get("loss")) for r in read_records(str(output / METRICS_FILE))[0]] == \
        [(1, 0.7), (2, 0.6), (2, None), (3, 0.4)]


def test_a_fresh_run_does_not_append_to_a_folder_it_has_not_written(tmp_path):
    """--force over an older run's folder: its metrics.jsonl stays as it was until this run saves."""
    output = tmp_path / "model"
    output.mkdir()
    (output / METRICS_FILE).write_text('{"step": 9, "loss": 1.0}\n')
    log = MetricsLog(str(output))
    log.append({"step": 1, "loss": 0.7, "lr": 1e-4, "examples_per_s": 10.0})
    assert [r["step"] for r in lines(output / METRICS_FILE)] == [9]
    log.files_for_save()[METRICS_FILE](str(output / METRICS_FILE))
    assert [r["step"] for r in lines(output / METRICS_FILE)] == [1]


def test_tensorboard_files_read_back_by_tensorboard(tmp_path):
    pytest.importorskip("tensorboardX")
    output = tmp_path / "model"
    log = MetricsLog(str(output), report_to="tensorboard")
    log.append({"step": 1, "loss": 0.75, "lr": 1e-4, "examples_per_s": 10.0})
    output.mkdir()
    for name, write in log.files_for_save().items():
        write(str(output / name))
    log.append({"step": 2, "loss": 0.5, "lr": 2e-4, "examples_per_s": 11.0})
    log.append({"step": 2, "epoch": 1.0, "train_loss": 0.625, "eval": {"accuracy": 0.25}})
    log.close()
    scalars = tensorboard_scalars(str(output / TENSORBOARD_FOLDER))
    assert scalars["train/loss"] == [(1, 0.75), (2, 0.5)]
    assert scalars["eval/accuracy"] == [(2, 0.25)]
    assert [step for step, _ in scalars["train/lr"]] == [1, 2]


def test_without_tensorboardx_the_error_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorboardX", None)      # as if not installed: import raises ImportError
    with pytest.raises(MetricsLogError, match=r"pip install 'albert_min\[tensorboard\]'"):
        MetricsLog(str(tmp_path / "model"), report_to="tensorboard")
    MetricsLog(str(tmp_path / "model"))                         # metrics.jsonl alone needs nothing


def test_train_py_without_the_extra_gives_one_error_line(tmp_path):
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "tensorboardX.py").write_text("raise ImportError('hidden by the test')\n")
    data = sentiment_tsv(tmp_path / "train.tsv", 40, seed=0)
    env = {**os.environ, "PYTHONPATH": str(hide)}
    result = subprocess.run([sys.executable, "train.py", "--train", data, "--output", str(tmp_path / "m"),
                             "--report-to", "tensorboard", *TINY_MODEL], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"error: --report-to tensorboard needs the tensorboardX package: {INSTALL_TENSORBOARD} "
        "(or pip install tensorboardX)"]
    assert not (tmp_path / "m").exists()


def test_train_py_writes_metrics_and_tensorboard_and_resumes_without_duplicates(tmp_path):
    pytest.importorskip("tensorboardX")
    train_tsv = sentiment_tsv(tmp_path / "train.tsv", 96, seed=0)
    dev_tsv = sentiment_tsv(tmp_path / "dev.tsv", 32, seed=1)
    output = tmp_path / "model"
    args = ["--train", train_tsv, "--dev", dev_tsv, "--output", str(output), "--batch-size", "16",
            "--epochs", "2", "--report-to", "tensorboard", *TINY_MODEL]
    train.main(args + ["--max-steps", "4"])
    records = lines(output / METRICS_FILE)
    steps = [r for r in records if "eval" not in r]
    assert [r["step"] for r in steps] == [1, 2, 3, 4]
    assert all(r["loss"] > 0 and r["lr"] > 0 and r["examples_per_s"] > 0 for r in steps)
    evals = [r for r in records if "eval" in r]
    assert [r["step"] for r in evals] == [4] and "dev_accuracy" in evals[0]["eval"]

    # a crashed run got past its saved state (step 4) and logged step 5; the resume drops that line
    with open(output / METRICS_FILE, "a") as f:
        f.write(json.dumps({"step": 5, "loss": 99.0, "lr": 1.0, "examples_per_s": 1.0}) + "\n")
    train.main(args + ["--max-steps", "8", "--resume"])
    records = lines(output / METRICS_FILE)
    assert [r["step"] for r in records if "eval" not in r] == list(range(1, 9))
    assert 99.0 not in [r.get("loss") for r in records]
    assert [r["step"] for r in records if "eval" in r] == [4, 6, 8]   # 6: the end of the first epoch
    scalars = tensorboard_scalars(str(output / TENSORBOARD_FOLDER))
    assert [step for step, _ in scalars["train/loss"]] == list(range(1, 9))
    assert [v for _, v in scalars["train/loss"]] == pytest.approx([r["loss"] for r in records if "eval" not in r])
    assert [step for step, _ in scalars["eval/dev_accuracy"]] == [4, 6, 8]
