"""SQuAD through the scripts, as a user runs it: train.py --task squad on a by-article slice of
dev-v1.1 (a non-standard split: no SQuAD training set is shipped here), then evaluate.py scores
the same dev slice, reproduces the score training recorded, and writes predictions.json."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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
