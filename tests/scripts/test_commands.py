"""The commands as a user meets them: train and evaluate from the installed package (python -m
albert_min.train / albert_min.evaluate, the console scripts of setup.cfg) as well as train.py /
evaluate.py from a clone; --help and bad flags or missing inputs answered before MindSpore is
imported (it takes seconds), bounded against the time `import mindspore` takes in the same run."""

import configparser
import importlib
import os
import subprocess
import sys
import time

import pytest

from helpers.paths import ROOT, SHARED_DATA

SST2_SMALL = os.path.join(ROOT, "weights", "sst2-small")

# Runs a command in this interpreter as its own process would (a script by path, a module with -m),
# then says whether MindSpore got imported: last line of stdout, after the command's own output.
RUN_AND_REPORT = """
import runpy, sys
kind, target, *argv = sys.argv[1:]
sys.argv = [target] + argv
try:
    if kind == "path":
        runpy.run_path(target, run_name="__main__")
    else:
        runpy.run_module(target, run_name="__main__", alter_sys=True)
except SystemExit as done:
    code = done.code
else:
    code = 0
if isinstance(code, str):   # sys.exit("error: ...") prints it, as the interpreter would
    print(code, file=sys.stderr)
print("\\nmindspore imported:", "mindspore" in sys.modules)
sys.exit(code if isinstance(code, int) else 1)
"""


def run(kind, target, *argv):
    """(exit status, stdout, stderr, seconds) of one command in a fresh interpreter."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", RUN_AND_REPORT, kind, target, *argv], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    return done.returncode, done.stdout, done.stderr, time.perf_counter() - start


@pytest.fixture(scope="module")
def import_mindspore_seconds():
    """The time a fresh interpreter takes to `import mindspore` here, now (the better of two)."""
    times = []
    for _ in range(2):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import mindspore"], check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return min(times)


TRAIN, EVALUATE = ("path", "train.py"), ("path", "evaluate.py")
FAST = {   # command -> (exit status, what stderr or stdout says)
    "train --help": (TRAIN + ("--help",), 0, "--max-length"),
    "python -m albert_min.train --help": (("module", "albert_min.train", "--help"), 0, "python -m albert_min.train"),
    "train misspelt --task": (TRAIN + ("--task", "sst", "--output", "o"), 2, "invalid choice: 'sst'"),
    "train unknown flag": (TRAIN + ("--epohcs", "2", "--output", "o"), 2, "unrecognized arguments: --epohcs"),
    "train bad value": (TRAIN + ("--max-steps", "0", "--output", "o"), 2, "--max-steps: must be an integer >= 1"),
    "train no --train": (TRAIN + ("--task", "sst2", "--output", "o"), 2, "--task sst2 needs --train"),
    "train missing --train": (TRAIN + ("--train", "no/such.tsv", "--output", "o"), 1,
                              "error: data file not found: no/such.tsv"),
    "train missing --init": (TRAIN + ("--train", "evaluate.py", "--init", "no/such", "--output", "o"), 1,
                             "error: model folder not found: no/such"),
    "train missing --text": (TRAIN + ("--task", "sop", "--text", "no.txt", "--output", "o"), 1,
                             "error: text file not found: no.txt"),
    "train --max-length past a new model's positions": (
        TRAIN + ("--train", "evaluate.py", "--max-length", "100000", "--output", "o"), 2,
        "error: --max-length 100000 is more than the 512 positions of a model trained from scratch (ALBERT's; "
        "a --config can give more): pass at most 512"),
    "train --max-length past --init's positions": (
        TRAIN + ("--train", "evaluate.py", "--init", "weights/pretrained-small", "--max-length", "129", "--output", "o"),
        2, "error: --max-length 129 is more than weights/pretrained-small's max_position_embeddings (128): "
           "pass at most 128"),
    "evaluate --help": (EVALUATE + ("--help",), 0, "--model"),
    "python -m albert_min.evaluate --help": (("module", "albert_min.evaluate", "--help"), 0,
                                             "python -m albert_min.evaluate"),
    "evaluate misspelt --task": (EVALUATE + ("--task", "sst"), 2, "invalid choice: 'sst'"),
    "evaluate missing --model": (EVALUATE + ("--model", "no/such"), 1, "error: model folder not found: no/such"),
    "evaluate missing --data": (EVALUATE + ("--model", SST2_SMALL, "--data", "no/such.tsv"), 1,
                                "error: data file not found: no/such.tsv"),
    "convert --help": (("module", "albert_min.convert", "--help"), 0, "python -m albert_min.convert"),
    "export --help": (("module", "albert_min.export", "--help"), 0, "python -m albert_min.export"),
}


@pytest.mark.parametrize("name", FAST)
def test_help_and_argument_errors_come_before_mindspore_is_imported(name, import_mindspore_seconds):
    command, status, says = FAST[name]
    code, out, err, seconds = run(*command)
    assert code == status, (out, err)
    assert says in out + err
    assert out.rstrip().endswith("mindspore imported: False"), out[-300:]
    if status:
        assert len([line for line in err.splitlines() if "error:" in line]) == 1, err
    # Well under the seconds MindSpore's import alone takes (0.6-0.9 s against 4.5-6 s measured on a loaded
    # 2-core machine; train.py --help took 7.7 s when it imported MindSpore first).
    assert seconds < 0.5 * import_mindspore_seconds, (seconds, import_mindspore_seconds)


def test_train_and_evaluate_run_from_the_package_with_the_scripts_flags():
    """python -m albert_min.train / .evaluate: the same parsers as train.py / evaluate.py (whose
    top-level files only call them)."""
    import evaluate
    import train
    from albert_min import evaluate as packaged_evaluate, train as packaged_train
    assert train.main is packaged_train.main and evaluate.main is packaged_evaluate.main

    def flags(parser):
        return sorted(option for action in parser._actions for option in action.option_strings)
    assert flags(train.build_parser()) == flags(packaged_train.build_parser())
    assert "--max-length" in flags(packaged_train.build_parser())
    assert "--model" in flags(packaged_evaluate.build_parser())


def test_console_scripts_name_functions_that_exist():
    """setup.cfg's entry points (albert-min-train, albert-min-evaluate) resolve to the commands' ``command``."""
    setup = configparser.ConfigParser()
    setup.read(os.path.join(ROOT, "setup.cfg"))
    scripts = dict(line.split(" = ") for line in setup["options.entry_points"]["console_scripts"].split("\n") if line)
    assert set(scripts) == {"albert-min-train", "albert-min-evaluate"}
    for name, target in scripts.items():
        module, function = target.split(":")
        assert callable(getattr(importlib.import_module(module), function)), name
        assert module == "albert_min." + name.split("-")[-1]


CONSOLE_SCRIPT = """
import sys
from albert_min.evaluate import command
sys.exit(command())
"""


def test_the_console_scripts_exit_0_after_a_run(monkeypatch):
    """A console script is ``sys.exit(function())``. ``main`` returns the run's state or the scores (a dict,
    for Python callers): named as the entry point it printed that dict as an error and exited 1 after
    every successful run. The entry points are ``command``, which returns nothing."""
    from albert_min import evaluate as packaged_evaluate, train as packaged_train
    for module in (packaged_train, packaged_evaluate):
        monkeypatch.setattr(module, "main", lambda: {"accuracy": 0.8})
        with pytest.raises(SystemExit) as done:
            sys.exit(module.command())
        assert done.value.code is None
    # and as the installed script runs it: SST-2 dev scored, exit status 0, nothing on stderr but MindSpore's
    proc = subprocess.run([sys.executable, "-c", CONSOLE_SCRIPT, "--data", os.path.join(SHARED_DATA, "sst2", "dev.tsv"),
                           "--model", SST2_SMALL], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "accuracy    81.42" in proc.stdout
    assert "{'task'" not in proc.stderr


def test_python_m_albert_min_evaluate_scores_a_model():
    """The packaged command end to end, as an installed user runs it (from another folder)."""
    data = os.path.join(os.path.dirname(ROOT), "shared", "data", "sst2", "dev.tsv")
    done = subprocess.run([sys.executable, "-m", "albert_min.evaluate", "--model", SST2_SMALL, "--data", data,
                           "--quiet", "--json", "--no-compile-cache"],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": ROOT}, cwd=os.path.dirname(ROOT))
    assert done.returncode == 0, done.stderr[-2000:]
    assert '"accuracy": 0.8142' in done.stdout


@pytest.mark.parametrize("command", [TRAIN, EVALUATE, ("module", "albert_min.convert"), ("module", "albert_min.export")])
def test_help_wraps_at_100_columns_on_a_wide_terminal(command):
    done = subprocess.run([sys.executable, "-c", RUN_AND_REPORT, *command, "--help"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    width = max(len(line) for line in done.stdout.splitlines())
    assert 80 <= width <= 100, width   # wide enough to use the terminal, never the 140-odd columns of before


def flag_help(parser, flag):
    """One flag's help text as --help prints it (defaults filled in), on one line."""
    action = next(a for a in parser._actions if flag in a.option_strings)
    return " ".join(parser._get_formatter()._expand_help(action).split())


def test_help_says_each_default_and_what_force_does():
    import train
    parser = train.build_parser()
    assert "None:" not in parser.format_help()
    for flag, says in [("--dropout", "(default: the --init or --config model's, else 0.1)"),
                       ("--mask-prob", "(default: 0.15, as in BERT and ALBERT)"),
                       ("--max-steps", "(default: no limit, --epochs decides)"),
                       ("--max-minutes", "(default: no limit)"), ("--eval-every", "(default: after every epoch only)"),
                       ("--save-every", "(default: after every epoch only)"),
                       ("--force", "a folder albert_min did not write is refused, with or without --force"),
                       ("--task", "sentence_label (any sentence<TAB>label TSV; cls still names it)")]:
        assert says in flag_help(parser, flag), flag
    convert = " ".join(subprocess.run([sys.executable, "-m", "albert_min.convert", "--help"], cwd=ROOT,
                                      capture_output=True, text=True, timeout=300).stdout.split())
    assert "Hugging Face's layout, for transformers (default: albert_min)" in convert
    assert "checked on load) (default: ckpt)" in convert


def test_no_task_and_no_train_error_names_train(capsys):
    import train
    with pytest.raises(SystemExit):
        train.parse_args(["--output", "o"])
    err = capsys.readouterr().err
    assert "error: --train is needed: the data to fine-tune on (or pre-train: --task sop --text FILE)" in err
    assert "sentence_label" not in err.splitlines()[-1]


def test_a_checkpoint_not_converted_says_how_to_convert_it(tmp_path):
    """An HF download (pytorch_model.bin) or a Google TF release given as --model / --init / from_pretrained:
    one error line that names the file and the convert command, not 'model.ckpt not found'."""
    import shutil
    from albert_min.model.folder import CheckpointError, weights_file
    from albert_min.model.heads import AlbertForSequenceClassification
    hf = os.path.join(ROOT, "tests", "fixtures", "tiny_sst2_hf")
    tf = shutil.copytree(os.path.join(ROOT, "tests", "fixtures", "tiny_classifier_tf"), tmp_path / "tf")
    convert = f"python -m albert_min.convert {hf} {hf}-albert_min"
    code, out, err, _ = run(*EVALUATE, "--model", hf, "--data", os.path.join(hf, "dev64.tsv"))
    assert code == 1 and f"holds pytorch_model.bin, a PyTorch (Hugging Face) checkpoint" in err and convert in err
    assert out.rstrip().endswith("mindspore imported: False")
    code, out, err, _ = run(*TRAIN, "--init", str(tf), "--train", os.path.join(hf, "dev64.tsv"), "--output", "o")
    assert code == 1 and "a TensorFlow (Google) checkpoint" in err and f"python -m albert_min.convert {tf}" in err
    with pytest.raises(CheckpointError, match="convert it first"):
        weights_file(hf)
    with pytest.raises(CheckpointError, match="holds albert_config.json"):
        AlbertForSequenceClassification.from_pretrained(str(tf))


def test_a_comma_separated_file_is_told_to_be_tab_separated(tmp_path):
    from albert_min.tasks import get_task
    from albert_min.tasks.errors import DataError
    csv = tmp_path / "reviews.csv"
    csv.write_text("sentence,label\na gorgeous film,1\n")
    with pytest.raises(DataError, match=r"reviews\.csv:1: .*the file must be tab-separated \(a TSV\), and this one "
                                        r"has commas instead$"):
        get_task("sentence_label").read(str(csv))


def test_an_undefined_dev_metric_is_shown_as_undefined_not_as_minus_one():
    """CoLA's Matthews correlation of constant predictions is undefined: the Trainer ranks it as -1 but
    says what it is ("saved ... (score -1.0000)" looked like a perfectly wrong model)."""
    import numpy as np
    from albert_min.tasks import get_task
    from albert_min.tasks.glue import metric as glue_metric
    from albert_min.tasks.glue import reading as glue_reading
    from albert_min.training.trainer import shown_score
    constant = np.array([[1.0, 0.0]] * 4)
    metrics = {f"dev_{k}": v for k, v in glue_metric.evaluation_metrics(glue_reading.TASKS["cola"], [0, 1, 1, 0], constant).items()}
    score = get_task("cola").selection_score(metrics)
    assert score == -1.0
    assert shown_score(score, metrics) == ("score undefined: dev_matthews (one class predicted for every example); "
                                           "ranked below any defined score")
    assert shown_score(-1.0, {"dev_matthews": -1.0}) == "score -1.0000"   # a defined -1: every prediction wrong
    assert shown_score(0.25, metrics) == "score 0.2500"


def test_the_no_model_message_names_the_commands_as_this_user_runs_them(tmp_path):
    """From a clone `python evaluate.py` / `python train.py`; installed (no evaluate.py beside the
    package, weights/ in the user's folder) `python -m albert_min.evaluate` / `.train`."""
    import shutil
    import evaluate
    assert "python evaluate.py --model" in evaluate.how_to_get_a_model() and evaluate.IN_A_CLONE
    site = tmp_path / "site-packages"
    shutil.copytree(os.path.join(ROOT, "albert_min"), site / "albert_min")
    shutil.copytree(os.path.join(ROOT, "tokenizer"), site / "tokenizer")
    user = tmp_path / "project"
    shutil.copytree(SST2_SMALL, user / "weights" / "sst2-small")
    done = subprocess.run([sys.executable, "-m", "albert_min.evaluate"], cwd=user, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(site)})
    assert done.returncode == 1
    assert "Ready in weights (SST-2 dev is --data's default):" in done.stderr
    assert "python -m albert_min.evaluate --model weights/sst2-small " in done.stderr
    assert "python -m albert_min.train --train ../shared/data/sst2/train.tsv" in done.stderr
    assert "python evaluate.py" not in done.stderr and "python train.py" not in done.stderr


# Issue 45: one error wrapper (common.errors: fail, reported_errors, returns_status) for every command.
ONE_LINE = {   # command -> (its arguments, environment, exit status, its one line on stderr)
    "train": (["train.py", "--train", "no/such.tsv", "--output", "o"], {}, 1, "error: data file not found: no/such.tsv"),
    "train, a bad environment variable": (["train.py", "--train", "evaluate.py", "--output", "o"],
                                          {"ALBERT_MIN_DEVICE": "tpu"}, 2,
                                          "error: ALBERT_MIN_DEVICE=tpu: unknown device; choose CPU, GPU, Ascend"),
    "evaluate": (["evaluate.py", "--model", "no/such"], {}, 1, "error: model folder not found: no/such"),
    "convert": (["-m", "albert_min.convert", "no/such", "out"], {}, 1, "error: no such file or folder: no/such"),
    "export": (["-m", "albert_min.export", "no/such", "out.mindir"], {}, 1, "error: model folder not found: no/such"),
    "fingerprint": (["-m", "albert_min.fingerprint", "no/such"], {}, 1, "error: model folder not found: no/such"),
}


@pytest.mark.parametrize("name", ONE_LINE)
def test_every_command_ends_on_bad_input_with_one_error_line_and_its_status(name, tmp_path):
    argv, env, status, line = ONE_LINE[name]
    done = subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env})
    assert done.returncode == status, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(line), done.stderr          # no traceback, no second line
    assert not os.path.exists(os.path.join(ROOT, "o")) and not os.path.exists(os.path.join(ROOT, "out"))


def test_evaluate_without_a_model_keeps_its_lines_after_one_error_line():
    done = subprocess.run([sys.executable, "evaluate.py"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    lines = done.stderr.splitlines()
    assert done.returncode == 1 and lines[0] == "error: no model given (--model DIR)."
    assert len(lines) > 3 and sum("error:" in line for line in lines) == 1


@pytest.mark.parametrize("flag", ["--pynative", "--no-jit"])
def test_pynative_and_its_old_name_no_jit_run_op_by_op(flag):
    """--no-jit meant PyNative: --pynative says so, and --no-jit stays as its other name in both scripts."""
    import evaluate
    import train
    from albert_min.training.run_config import flag_name
    assert train.parse_args(["--train", "t.tsv", "--output", "o", flag]).training.use_jit is False
    assert train.parse_args(["--train", "t.tsv", "--output", "o"]).training.use_jit is True
    assert evaluate.parse_args(["--model", "m", flag]).pynative is True
    assert evaluate.parse_args(["--model", "m"]).pynative is False
    assert flag_name("use_jit") == "--pynative" and train.settings_argv({"use_jit": False}) == ["--pynative"]
    assert "PyNative mode (op by op)" in flag_help(train.build_parser(), flag)
    assert "PyNative mode (op by op)" in flag_help(evaluate.build_parser(), flag)
