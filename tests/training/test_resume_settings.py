"""--resume continues the saved run with its own settings and tokenizer, refuses changed flags and
inputs by name, and every JSON file the training side reads is checked (issue 24, cases 2 and 7)."""

import json
import os
import re
import shutil

import numpy as np
import pytest

from helpers.paths import ROOT
from helpers.tiny_runs import TINY_MODEL, sentiment_tsv

import evaluate  # noqa: E402
import train  # noqa: E402
from albert_min.model.folder import read_checkpoint
from albert_min.common.json_files import Field, JSONFileError, read_json
from albert_min.training.trainer import Trainer

ROWS = 64   # 4 steps per epoch at batch 16


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A finished 1-epoch run (model folder and state) to copy and tamper with."""
    tmp = tmp_path_factory.mktemp("saved")
    tsv = sentiment_tsv(tmp / "train.tsv", ROWS, seed=5)
    dev = sentiment_tsv(tmp / "dev.tsv", 16, seed=6)
    args = ["--train", tsv, "--dev", dev, "--epochs", "1", "--batch-size", "16", "--lr", "3e-3", *TINY_MODEL]
    train.main(args + ["--output", str(tmp / "run")])
    return {"tmp": tmp, "args": args, "train": tsv}


def copy_run(saved, tmp_path):
    for suffix in ("", ".state"):
        shutil.copytree(saved["tmp"] / f"run{suffix}", tmp_path / f"run{suffix}")
    return str(tmp_path / "run")


def test_resume_alone_continues_the_run_exactly_without_training_the_tokenizer(tmp_path, monkeypatch, capsys):
    tsv = sentiment_tsv(tmp_path / "train.tsv", ROWS, seed=5)
    args = ["--train", tsv, "--epochs", "2", "--batch-size", "16", "--lr", "3e-3", "--save-every", "2",
            "--dropout", "0.1", *TINY_MODEL]
    whole = train.main(args + ["--output", str(tmp_path / "whole")])
    real_step = Trainer.step

    def interrupted_after_3_steps(self, batch):
        if self.state["step"] == 3:
            raise KeyboardInterrupt
        return real_step(self, batch)
    with monkeypatch.context() as patch:
        patch.setattr(Trainer, "step", interrupted_after_3_steps)
        with pytest.raises(SystemExit) as stopped:
            train.main(args + ["--output", str(tmp_path / "cut")])
    assert stopped.value.code == 130
    capsys.readouterr()
    resumed = train.main(["--output", str(tmp_path / "cut"), "--resume"])   # no other flag
    out = capsys.readouterr().out
    assert "resumed from" in out and "SentencePiece" not in out   # the state's tokenizer, not a new one
    assert resumed["step"] == whole["step"] == 8
    assert [h["train_loss"] for h in resumed["history"]] == [h["train_loss"] for h in whole["history"]]
    a = read_checkpoint(str(tmp_path / "whole" / "model.ckpt"))
    b = read_checkpoint(str(tmp_path / "cut" / "model.ckpt"))
    assert all(np.array_equal(a[k], b[k]) for k in a)


def test_a_changed_flag_is_refused_and_named(saved, tmp_path):
    out = copy_run(saved, tmp_path)
    with pytest.raises(SystemExit, match=re.escape(
            "error: --layers 4 (the run has 2); --lr 0.05 (the run has 0.003); --seed 99 (the run has 42): --resume "
            f"continues the run saved in {out}.state/state.json as it was started; leave these flags out")):
        train.main(["--output", out, "--resume", "--layers", "4", "--lr", "0.05", "--seed", "99"])
    with pytest.raises(SystemExit, match=re.escape(f"error: --train {saved['tmp'] / 'dev.tsv'} (the run has "
                                                   f"{saved['train']})")):
        train.main(["--output", out, "--resume", "--train", str(saved["tmp"] / "dev.tsv")])


def test_the_budget_may_be_extended_and_the_same_flags_repeated(saved, tmp_path):
    out = copy_run(saved, tmp_path)
    state = train.main(saved["args"] + ["--output", out, "--resume", "--epochs", "2"])
    assert state["epoch"] == 2 and state["step"] == 8
    with open(out + ".state/state.json") as f:
        assert json.load(f)["settings"]["training"]["epochs"] == 2


def test_a_changed_input_file_is_refused(saved, tmp_path):
    out = copy_run(saved, tmp_path)
    data = str(tmp_path / "train.tsv")
    shutil.copy(saved["train"], data)
    with open(out + ".state/state.json") as f:
        state = json.load(f)
    state["settings"]["run"]["train"] = data
    state["inputs"]["files"] = {data: state["inputs"]["files"][saved["train"]]}
    with open(out + ".state/state.json", "w") as f:
        json.dump(state, f)
    with open(data, "a") as f:
        f.write("one more row .\t1\n")
    with pytest.raises(SystemExit, match=re.escape(f"error: {data}: changed since the run saved in")):
        train.main(["--output", out, "--resume", "--epochs", "2"])


def hostile_state(saved, tmp_path, edit):
    out = copy_run(saved, tmp_path)
    path = out + ".state/state.json"
    with open(path) as f:
        state = json.load(f)
    content = edit(state)
    with open(path, "w") as f:
        f.write(content if isinstance(content, str) else json.dumps(content))
    return out, path


HUGE = "9" * 5001


@pytest.mark.parametrize("edit, message", [
    (lambda s: json.dumps(s).replace('"step": 4', f'"step": {HUGE}', 1),
     "1: not usable JSON (an integer of 5001 digits; Python reads at most 4300)"),
    (lambda s: "[" * 100000 + "]" * 100000, "1: not usable JSON (nested too deeply: 100000 levels)"),
    (lambda s: {**s, "step": -3}, "'step' must be in [0, "),
    (lambda s: {**s, "epoch_losses": "abc"}, "'epoch_losses' must be list, got 'abc'"),
    (lambda s: {**s, "history": [{"step": "x"}]}, "'history[0].step' must be int"),
    (lambda s: {"epoch": 0, "step": 0}, "'step' is 0 but"),
    (lambda s: {**s, "step": 2}, "'step' is 2 but"),
    (lambda s: {**s, "settings": {**s["settings"], "run": {**s["settings"]["run"], "layers": "abc"}}},
     "the saved run's settings do not pass train.py's checks: argument --layers: 'abc' is not an integer"),
    (lambda s: {**s, "inputs": {"files": []}}, "'inputs.files' must be dict"),
])
def test_hostile_state_json_is_one_error_line(saved, tmp_path, edit, message):
    out, path = hostile_state(saved, tmp_path, edit)
    with pytest.raises(SystemExit) as error:
        train.main(saved["args"] + ["--output", out, "--resume", "--epochs", "2"])
    assert str(error.value.code).startswith(f"error: {path}:") and message in str(error.value.code)
    assert "\n" not in str(error.value.code)


@pytest.mark.parametrize("name, content, message", [
    ("train_metrics.json", f'{{"max_length": {HUGE}}}', "1: not usable JSON (an integer of 5001 digits"),
    ("train_metrics.json", '{"max_length": NaN}', "1: not usable JSON (NaN is not a JSON number"),
    ("training_settings.json", '{"task": "sst2", "max_length": -1}', "'max_length' must be in [3, "),
    ("training_settings.json", '{"task": 7, "max_length": 64}', "'task' must be str, got 7"),
    ("training_settings.json", "[" * 100000, "1: not usable JSON (nested too deeply"),
])
def test_hostile_model_folder_json_is_one_error_line(saved, tmp_path, name, content, message):
    out = copy_run(saved, tmp_path)
    if name == "train_metrics.json":
        os.remove(os.path.join(out, "training_settings.json"))   # an older folder: max_length in the metrics
    path = os.path.join(out, name)
    with open(path, "w") as f:
        f.write(content)
    with pytest.raises(SystemExit) as error:
        evaluate.main(["--model", out, "--data", str(saved["tmp"] / "dev.tsv"), "--quiet"])
    assert str(error.value.code).startswith(f"error: {path}:") and message in str(error.value.code)


def test_settings_are_stored_as_settings_and_old_folders_still_read(saved, tmp_path):
    out = copy_run(saved, tmp_path)
    with open(os.path.join(out, "training_settings.json")) as f:
        assert json.load(f) == {"task": "sentence_label", "max_length": 24}
    with open(os.path.join(out, "train_metrics.json")) as f:
        assert "max_length" not in json.load(f)
    from albert_min.model.folder import training_max_length
    assert training_max_length(out) == 24
    assert training_max_length(os.path.join(ROOT, "weights", "sst2-small")) == 64   # old


def test_read_json_checks_types_ranges_and_items(tmp_path):
    path = tmp_path / "x.json"
    schema = {"n": Field(int, low=0, high=10), "xs": Field(list, items=float), "b": Field(float, none=True)}
    for content, message in [('{"n": true, "xs": [], "b": null}', ": 'n' must be int, got True"),
                             ('{"n": 11, "xs": [], "b": 1}', ": 'n' must be in [0, 10], got 11"),
                             ('{"n": 1, "xs": [1, "a"], "b": 1}', ": xs[1] must be a finite float, got 'a'"),
                             ('{"n": 1, "xs": []}', ": key 'b' is missing"),
                             ('{"n": 1, "xs": [],\n "b": Infinity}', ":2: not usable JSON (Infinity is not a JSON"),
                             (b'{"n": "\xff"}', ":1: not UTF-8")]:
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        with pytest.raises(JSONFileError, match=re.escape(f"{path}{message}")):
            read_json(str(path), schema)
    path.write_text('{"n": 3, "xs": [1, 2.5], "b": null, "other": 1}')
    assert read_json(str(path), schema)["n"] == 3
