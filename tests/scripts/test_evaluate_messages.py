"""evaluate.py's messages and printing: how to get a model, a model scored on another task's
data, --max-length past the model's positions, percent vs fractions, undefined metrics, help."""

import json
import os
import re
import shlex
import sys

import pytest

from helpers.paths import ROOT

sys.path.insert(0, ROOT)
import evaluate  # noqa: E402
import train  # noqa: E402

SST2_SMALL = os.path.join(ROOT, "weights", "sst2-small")
NEGATIVE = ["a mess .", "dull and boring .", "the worst film of the year .", "an awful , tedious bore ."]


def write(path, lines):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))
    return str(path)


# ------------------------------------------------------------------ no --model
def test_without_a_model_the_committed_ones_come_first(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    with pytest.raises(SystemExit) as exit_info:
        evaluate.main([])
    message = str(exit_info.value)
    ready = message.index("python evaluate.py --model weights/sst2-small ")
    assert "trained on sst2: dev accuracy 81.42" in message
    training = message.index("python train.py")
    assert ready < training
    command = re.search(r"python train.py (.*)", message).group(1)
    assert "--dropout 0.2 --eval-every 300" in command     # the README's command for the committed model
    args = train.parse_args(shlex.split(command))           # a command train.py accepts...
    assert not os.path.exists(args.training.output)                  # ...into a folder that is not there yet


def test_the_training_hint_never_names_an_existing_folder(tmp_path):
    weights = tmp_path / "weights"
    (weights / "sst2-mine").mkdir(parents=True)
    (weights / "sst2-mine-2.state").mkdir()
    message = evaluate.how_to_get_a_model(str(weights))
    assert re.search(r"--output \S*sst2-mine-3$", message, re.M)
    assert "Ready in this clone" not in message              # nothing ready in an empty weights/


# --------------------------------------------------- task recorded vs the data's
def test_a_model_scored_on_another_tasks_data_is_warned_about(tmp_path, capsys):
    rte = write(tmp_path / "RTE" / "dev.tsv", ["index\tsentence1\tsentence2\tlabel",
                                               "0\tA man plays.\tA man plays a guitar.\tentailment",
                                               "1\tIt rains.\tThe sun shines.\tnot_entailment"])
    evaluate.main(["--model", SST2_SMALL, "--data", rte, "--quiet"])
    out, err = capsys.readouterr()
    assert (f"warning: {SST2_SMALL} was trained on sst2 (single sentences), but {rte} is rte (sentence pairs)"
            in err)
    # RTE's GLUE metric is accuracy: no F1/precision/recall of label 1 (not_entailment), but the confusion matrix.
    assert re.search(r"^accuracy +\d", out, re.M) and not re.search(r"^(f1|precision|recall) ", out, re.M)
    assert "(label 0 = entailment, label 1 = not_entailment)" in out
    # Its own task, and any sentence<TAB>label file (cls: no task named), go without a warning.
    for folder in ("SST-2", "my-reviews"):
        sst2 = write(tmp_path / folder / "dev.tsv", ["sentence\tlabel", "a mess .\t0", "superb acting .\t1"])
        evaluate.main(["--model", SST2_SMALL, "--data", sst2, "--quiet"])
        assert "warning" not in capsys.readouterr().err
    cola = write(tmp_path / "CoLA" / "dev.tsv", ["gj04	1		a fine sentence .", "gj04	0	*	sentence fine a ."])
    evaluate.main(["--model", SST2_SMALL, "--data", cola, "--quiet"])
    assert f"warning: {SST2_SMALL} was trained on sst2 (single sentences), but {cola} is cola" in capsys.readouterr().err


def test_max_length_past_the_models_positions_is_refused():
    with pytest.raises(SystemExit, match=re.escape(f"error: --max-length 100000 is more than {SST2_SMALL}'s "
                                                   "max_position_embeddings (128, config.json): pass at most 128")):
        evaluate.main(["--model", SST2_SMALL, "--max-length", "100000"])


# ------------------------------------------------------- percent, fractions, n/a
def test_table_in_percent_json_in_fractions_and_undefined_metrics_are_n_a(tmp_path, capsys):
    """All labels 0 and all predictions 0: accuracy 100, while F1, precision and recall of
    label 1 are 0/0: n/a with the reason in the table, null with "notes" in JSON."""
    data = write(tmp_path / "negative.tsv", ["sentence\tlabel"] + [f"{s}\t0" for s in NEGATIVE])
    evaluate.main(["--model", SST2_SMALL, "--data", data, "--quiet"])
    table = capsys.readouterr().out
    assert re.search(r"^accuracy +100\.00$", table, re.M)
    assert re.search(r"^precision +n/a  \(no positive predictions \(label 1\)\)$", table, re.M)
    assert re.search(r"^recall +n/a  \(no positive labels \(label 1\)\)$", table, re.M)
    assert re.search(r"^f1 +n/a  \(no positive labels or predictions \(label 1\)\)$", table, re.M)
    evaluate.main(["--model", SST2_SMALL, "--data", data, "--json"])
    printed = json.loads(capsys.readouterr().out)
    assert printed["scale"] == "fraction" and printed["accuracy"] == 1.0
    assert printed["f1"] is printed["precision"] is printed["recall"] is None
    assert printed["notes"]["precision"] == "no positive predictions (label 1)"


def test_help_names_the_scale_and_every_flags_default():
    parser = evaluate.build_parser()
    text = " ".join(parser.format_help().split())
    assert "as fractions (0.8142; the table prints percent, 81.42)" in text and '"scale": "fraction"' in text
    flags = [a for a in parser._actions if a.option_strings != ["-h", "--help"]]
    assert len(flags) == 17                      # --int8 the 17th
    for action in flags:
        assert action.help and "default" in action.help, f"{action.option_strings[0]} has no default in its help"


# ------------------------------------------------------------------ an unusable $ALBERT_MIN_CACHE
def test_an_unusable_compile_cache_is_one_notice_not_mindspores_errors(tmp_path):
    """Issue 36: MindSpore logged 9 raw [ERROR] lines for a cache folder it could not make. Both parts
    that keep files there (the kernels' build, the compiled graph: GRAPH_FROM_ROWS rows) are said in one line."""
    import subprocess
    from albert_min.tasks.prediction_engine import GRAPH_FROM_ROWS
    (tmp_path / "a_file").write_text("not a folder")
    rows = ["a gorgeous film .\t1", *[f"{s}\t0" for s in NEGATIVE]] * (GRAPH_FROM_ROWS // (len(NEGATIVE) + 1) + 1)
    data = write(tmp_path / "dev.tsv", ["sentence\tlabel", *rows])
    cache = tmp_path / "a_file" / "cache"
    env = dict(os.environ, ALBERT_MIN_CACHE=str(cache))
    done = subprocess.run([sys.executable, "evaluate.py", "--model", SST2_SMALL, "--data", data, "--json"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and json.loads(done.stdout)["examples"] == len(rows)
    assert done.stderr.strip().splitlines() == [   # one line for the folder, not one per part (issue 46)
        f"albert_min: cache folder {cache} not usable ({cache}: Not a directory): kernels not built "
        "(MindSpore's ops used), no compiled graphs kept"]
    assert (tmp_path / "a_file").read_text() == "not a folder"
