"""SQuAD through the scripts, as a user runs it: train.py --task squad on a by-article slice of
dev-v1.1 (a non-standard split: no SQuAD training set is shipped here), then evaluate.py scores
the same dev slice, reproduces the score training recorded, and writes predictions.json."""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from helpers.paths import ROOT  # noqa: E402
SQUAD = os.path.join(os.path.dirname(ROOT), "shared", "data", "squad", "dev-v1.1.json")
TINY = ["--layers", "1", "--hidden-size", "32", "--embedding-size", "16", "--heads", "2",
        "--intermediate-size", "64", "--vocab-size", "1000", "--max-length", "384", "--quiet"]


def run(*args):
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.mark.skipif(not os.path.isfile(SQUAD), reason="../shared/data/squad is not here")
def test_squad_trains_and_evaluates_end_to_end(tmp_path):
    out, preds = str(tmp_path / "sq"), str(tmp_path / "predictions.json")
    trained = run("train.py", "--task", "squad", "--train", SQUAD + ":1-1", "--dev", SQUAD + ":25-25",
                  "--output", out, "--max-steps", "3", "--batch-size", "16", *TINY)
    assert trained.returncode == 0, trained.stderr
    recorded = json.load(open(os.path.join(out, "train_metrics.json")))
    scored = run("evaluate.py", "--model", out, "--data", SQUAD + ":25-25", "--output", preds, "--json", "--quiet")
    assert scored.returncode == 0, scored.stderr
    metrics = json.loads(scored.stdout)
    assert metrics["task"] == "squad" and metrics["examples"] == recorded["dev_examples"] == 407
    assert metrics["f1"] == pytest.approx(recorded["dev_f1"], abs=1e-9)
    assert metrics["exact_match"] == pytest.approx(recorded["dev_exact_match"], abs=1e-9)
    written = json.load(open(preds))
    assert len(written) == 407 and all(isinstance(v, str) for v in written.values())
    again = run("evaluate.py", "--model", out, "--data", SQUAD + ":25-25", "--output", preds, "--quiet")
    assert again.returncode != 0 and again.stderr.strip().startswith("error: ") and "already exists" in again.stderr


def test_squad_v2_never_replaces_a_users_null_odds_file(tmp_path):
    """v2.0 writes null_odds.json beside predictions.json: an existing one is refused before any work."""
    model = tmp_path / "m"
    model.mkdir()
    for name in ("config.json", "model.ckpt", "spiece.model"):
        os.link(os.path.join(ROOT, "weights", "sst2-small", name), model / name)
    (tmp_path / "null_odds.json").write_text("user")
    data = tmp_path / "dev.json"
    data.write_text('{"version": "v2.0", "data": []}')
    done = run("evaluate.py", "--task", "squad_v2", "--model", str(model), "--data", str(data),
               "--output", str(tmp_path / "predictions.json"), "--quiet")
    assert done.returncode == 1 and done.stderr.strip().splitlines() == [
        f"error: {tmp_path / 'null_odds.json'} already exists (--force replaces only a predictions file evaluate.py wrote)"]
    assert (tmp_path / "null_odds.json").read_text() == "user"
    assert not (tmp_path / "predictions.json").exists()


# ---------------------------------------------------------------- SQuAD's flags on train.py
# Windows of 32 pieces: 32 - 12 (question) - 3 = 17 context pieces, so the default stride (128)
# would not fit; evaluate.py must take the stride the model was trained with.
SQUAD_FLAGS = ["--max-length", "32", "--doc-stride", "8", "--max-query-length", "12", "--max-answer-length", "5",
               "--null-score-diff-threshold", "0.5"]
TINY_SQUAD = ["--layers", "1", "--hidden-size", "32", "--embedding-size", "16", "--heads", "2",
              "--intermediate-size", "64", "--vocab-size", "60", "--batch-size", "4", "--max-steps", "2", "--quiet"]


@pytest.fixture(scope="module")
def squad_run(tmp_path_factory):
    """A finished 2-step SQuAD v2.0 run with every SQuAD flag given (model folder and state)."""
    import train
    from helpers.task_files import write_squad
    tmp = tmp_path_factory.mktemp("squad_flags")
    data = write_squad(tmp, version_2=True)
    out = str(tmp / "run")
    train.main(["--task", "squad_v2", "--train", data, "--dev", data, "--output", out, *SQUAD_FLAGS, *TINY_SQUAD])
    return {"data": data, "out": out}


def test_squad_flags_reach_the_task_the_state_and_the_model_folder(squad_run, capsys):
    import evaluate
    out = squad_run["out"]
    options = {"doc_stride": 8, "max_query_length": 12, "max_answer_length": 5, "null_score_diff_threshold": 0.5}
    with open(os.path.join(out, "training_settings.json")) as f:
        assert json.load(f) == {"task": "squad_v2", "max_length": 32, **options}   # written from the task's own
    with open(out + ".state/state.json") as f:
        run_settings = json.load(f)["settings"]["run"]
    assert {k: run_settings[k] for k in options} == options
    recorded = json.load(open(os.path.join(out, "train_metrics.json")))
    capsys.readouterr()
    metrics = evaluate.main(["--model", out, "--data", squad_run["data"], "--task", "squad_v2", "--quiet", "--json"])
    assert metrics["f1"] == pytest.approx(recorded["dev_f1"], abs=1e-12)        # the trained windows and decoding
    assert metrics["best_f1"] == pytest.approx(recorded["dev_best_f1"], abs=1e-12)
    assert metrics["seconds"] == round(metrics["seconds"], 1)                  # 39.0, not 38.99588028500057
    capsys.readouterr()
    evaluate.main(["--model", out, "--data", squad_run["data"], "--task", "squad_v2", "--quiet"])
    assert re.search(r"^seconds +\d+\.\d$", capsys.readouterr().out, re.M)
    with pytest.raises(SystemExit, match=re.escape("error: doc_stride 30 is longer than the window")):
        evaluate.main(["--model", out, "--data", squad_run["data"], "--task", "squad_v2", "--doc-stride", "30"])


def test_resume_refuses_a_changed_squad_flag_by_name(squad_run, tmp_path):
    import train
    out = str(tmp_path / "run")
    for suffix in ("", ".state"):
        shutil.copytree(squad_run["out"] + suffix, out + suffix)
    with pytest.raises(SystemExit, match=re.escape(
            "error: --doc-stride 4 (the run has 8); --max-answer-length 9 (the run has 5): --resume continues")):
        train.main(["--output", out, "--resume", "--doc-stride", "4", "--max-answer-length", "9"])
    state = train.main(["--output", out, "--resume", "--doc-stride", "8", "--max-steps", "3"])   # the same: fine
    assert state["step"] == 3


@pytest.mark.parametrize("flags, message", [
    (["--doc-stride", "32"], "--doc-stride is for SQuAD (--task squad or squad_v2), not --task sentence_label"),
    (["--task", "conll", "--null-score-diff-threshold", "1"],
     "--null-score-diff-threshold is for SQuAD (--task squad or squad_v2), not --task conll"),
    (["--task", "squad", "--max-length", "64"],
     "--doc-stride 128 with --max-length 64 and --max-query-length 64: doc_stride 128 is longer than the window"),
    (["--task", "squad", "--null-score-diff-threshold", "nan"],
     "argument --null-score-diff-threshold: 'nan' is not a finite number"),
])
def test_train_refuses_squad_flags_that_cannot_apply(flags, message, tmp_path, capsys):
    import train
    with pytest.raises(SystemExit) as stopped:
        train.main(["--train", str(tmp_path / "train.tsv"), "--output", str(tmp_path / "out"), *flags])
    assert stopped.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_evaluate_refuses_squad_flags_for_another_task(capsys):
    import evaluate
    with pytest.raises(SystemExit, match=re.escape(
            "error: --max-query-length is for SQuAD (--task squad or squad_v2), not --task sst2")):
        evaluate.main(["--model", os.path.join(ROOT, "weights", "sst2-small"), "--max-query-length", "16"])


def test_max_length_left_out_is_the_tasks_own():
    """--task squad alone trains 384-piece windows (train.py's 64 would not fit the default stride)."""
    import train
    from albert_min.training.run_config import RunConfig
    from albert_min.tasks import get_task
    for name in ("squad", "squad_v2", "race", "conll"):
        settings = train.parse_args(["--task", name, "--train", "data", "--output", "o"])
        assert settings.max_length == get_task(name).default_max_length
    assert train.parse_args(["--train", "t.tsv", "--output", "o"]).max_length == RunConfig.max_length
    assert train.parse_args(["--task", "squad", "--train", "d.json", "--output", "o", "--max-length", "256",
                             "--max-query-length", "32"]).max_length == 256


def test_max_length_left_out_fits_the_init_models_positions():
    """RACE's 512 on pretrained-small (128 positions) was an error about a flag the user never gave."""
    import train
    from albert_min.model.config import load_config
    small = os.path.join(ROOT, "weights", "pretrained-small")
    positions = load_config(small).max_position_embeddings
    settings = train.parse_args(["--task", "race", "--train", "d", "--output", "o", "--init", small])
    assert settings.max_length == positions < 512
    given = train.parse_args(["--task", "race", "--train", "d", "--output", "o", "--init", small, "--max-length", "96"])
    assert given.max_length == 96
