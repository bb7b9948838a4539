"""Every command in the README's (and docs/'s) code blocks parses as written.

Each ``python3 SCRIPT ...`` / ``python3 -m albert_min.MODULE ...`` / ``msrun ... SCRIPT ...`` line of a
bash block is handed to that script's own argparse parser, in this process: nothing is trained, converted
or exported. A script that defines ``parse_args`` has it called (so the checks it makes after argparse
count too); any other script runs as ``__main__`` until its first ``ArgumentParser.parse_args`` returns.
Python blocks must compile.
"""

import argparse
import ast
import contextlib
import glob
import importlib.util
import inspect
import io
import os
import re
import runpy
import shlex
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
OUR_PACKAGES = ("albert_min", "tokenizer")
PYTHON = re.compile(r"(.*/)?python(3(\.\d+)?)?$")     # python, python3, python3.11, .refenv/bin/python
LEADING_WORDS = {"do", "then", "else", "time", "exec"}
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def code_blocks(text):
    """(language, code, line of the block's first code line) of every fenced block."""
    return [(m.group(1), m.group(2), text.count("\n", 0, m.start(2)) + 1) for m in FENCE.finditer(text)]


def shell_commands(code):
    """The simple commands of a shell block: continuations joined, split at newlines, &&, ||, ; and |."""
    commands = []
    for line in code.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        words = []
        for word in list(lexer) + [";"]:
            if word in ("&&", "||", ";", "|", "&"):
                if words:
                    commands.append(words)
                words = []
            else:
                words.append(word)
    return commands


def python_target(words):
    """('script', path, args) / ('module', name, args) for a command that runs our Python code, else None."""
    while words and (words[0] in LEADING_WORDS or re.fullmatch(r"\w+=.*", words[0])):
        words = words[1:]
    if words[:1] == ["nice"]:
        words = words[3:] if words[1:2] == ["-n"] else words[1:]
    if not words:
        return None
    if words[0] == "msrun":        # msrun's own flags, then the script and its flags
        script = next((i for i, w in enumerate(words) if w.endswith(".py")), None)
        return None if script is None else ("script", words[script], words[script + 1:])
    if not PYTHON.fullmatch(words[0]) or len(words) < 2:
        return None
    if words[1] == "-m":
        name = words[2]
        return ("module", name, words[3:]) if name.split(".")[0] in OUR_PACKAGES else None
    return None if words[1].startswith("-") else ("script", words[1], words[2:])


class _Parsed(Exception):
    """Raised by the patched ArgumentParser.parse_args: the flags were accepted; stop the script there."""


def check_flags(kind, target, args):
    """Run TARGET's argparse parser on ARGS in this process; AssertionError with argparse's message if refused."""
    if kind == "script":
        path = os.path.join(ROOT, target)
        assert os.path.isfile(path), f"{target}: no such script in the repository"
        argv0, search_dir = path, os.path.dirname(path)
    else:
        spec = importlib.util.find_spec(target)
        assert spec is not None and spec.origin, f"python -m {target}: no such module"
        path, argv0, search_dir = spec.origin, spec.origin, ROOT
    with open(path, encoding="utf-8") as f:
        source = f.read()
    caller = re.search(r"^from (albert_min\.\w+) import main$", source, re.M)   # train.py, evaluate.py: thin callers
    if caller:
        with open(importlib.util.find_spec(caller[1]).origin, encoding="utf-8") as f:
            source = f.read()
    if "argparse" not in source:      # a script without flags: nothing to parse, but it must take none
        assert not args, f"{target} takes no flags (it does not use argparse), but is given {args}"
        return

    def load(run_name):
        if kind == "script":
            return runpy.run_path(path, run_name=run_name)
        # runpy warns when the module was imported before (by another test): run it as `python -m` would, afresh
        imported = sys.modules.pop(target, None)
        try:
            return runpy.run_module(target, run_name=run_name, alter_sys=run_name == "__main__")
        finally:
            if imported is not None:
                sys.modules[target] = imported

    saved_argv, saved_path, saved_env = sys.argv[:], sys.path[:], dict(os.environ)
    saved_parse_args = argparse.ArgumentParser.parse_args
    stderr = io.StringIO()
    try:
        sys.argv = [argv0] + list(args)
        sys.path.insert(0, search_dir)     # as `python3 script.py` puts the script's folder first
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(stderr):
            try:
                namespace = load("readme_check")
                parse_args = namespace.get("parse_args")
                if callable(parse_args):
                    if inspect.signature(parse_args).parameters:
                        parse_args(list(args))
                    else:                   # a parse_args() that reads sys.argv
                        parse_args()
                    return

                def parse_and_stop(self, args=None, namespace=None):
                    raise _Parsed(saved_parse_args(self, args, namespace))

                argparse.ArgumentParser.parse_args = parse_and_stop
                load("__main__")
                raise AssertionError(f"{target}: ran to the end without parsing its flags with argparse")
            except _Parsed:
                return
            except SystemExit as exit_:
                assert exit_.code in (0, None), \
                    f"{target} refuses {args}: {stderr.getvalue().strip() or exit_.code}"
    finally:
        argparse.ArgumentParser.parse_args = saved_parse_args
        sys.argv, sys.path[:] = saved_argv, saved_path
        os.environ.clear()
        os.environ.update(saved_env)


def collect():
    shell, python = [], []
    for page in PAGES:
        with open(os.path.join(ROOT, page), encoding="utf-8") as f:
            text = f.read()
        for language, code, line in code_blocks(text):
            if language in ("bash", "sh", "shell"):
                for words in shell_commands(code):
                    target = python_target(words)
                    if target:
                        shell.append(pytest.param(*target, id=f"{page}:{line}:{target[1]} {' '.join(target[2])}"[:150]))
            elif language == "python":
                python.append(pytest.param(code, id=f"{page}:{line}"))
    return shell, python


SHELL_COMMANDS, PYTHON_BLOCKS = collect()


@pytest.mark.parametrize("kind, target, args", SHELL_COMMANDS)
def test_command_parses(kind, target, args, monkeypatch):
    monkeypatch.chdir(ROOT)        # every command runs from the repository root
    check_flags(kind, target, args)


@pytest.mark.parametrize("code", PYTHON_BLOCKS)
def test_python_block_compiles(code):
    ast.parse(code)


def test_readme_has_commands_of_every_kind():
    readme = [p.id for p in SHELL_COMMANDS if p.id.startswith("README.md:")]
    for wanted in ("train.py", "evaluate.py", "albert_min.convert", "albert_min.export"):
        assert any(f":{wanted} " in i for i in readme), f"no `{wanted}` command found in the README"


def test_readme_examples_write_under_runs_or_weights():
    """Outputs go to runs/ (ignored by git) or weights/, never the repository root."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        blocks = [code for language, code, _ in code_blocks(f.read()) if language in ("bash", "sh", "shell")]
    for words in (w for code in blocks for w in shell_commands(code)):
        outputs = [b for a, b in zip(words, words[1:]) if a in ("--output", "--log_dir", ">")]
        outputs += [w for w in words if w.endswith(".mindir")]
        for path in outputs:
            assert path.startswith(("runs/", "weights/")), f"{' '.join(words)}: writes {path} outside runs/ and weights/"


def test_the_ci_command_is_the_readme_test_command():
    """.ci/run's first command is the README's test command, as written; then the README stage, then the
    wheel on each Python (tests/test_python_versions.py)."""
    with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as f:
        commands = [line for line in f.read().splitlines() if line.strip() and not line.startswith(("#", "set ", "cd "))]
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        assert commands[0] in f.read().splitlines()
    assert any("pytest -m readme" in c for c in commands[1:]), "the README stage runs after the test command"
    assert commands[2:] == ["python3 -m pytest -m wheels -v -s"], "the wheel stage runs last"


def test_commands_are_split_as_the_shell_does():
    code = ("mkdir -p runs && python3 train.py --train a.tsv \\\n    --output runs/x   # a comment\n"
            "for t in A B; do python3 evaluate.py --model runs/$t --json; done\n"
            "msrun --worker_num 2 --join True train.py --data-parallel | tail -n 1\n"
            "python3 -m pip install -e . && nice -n 10 python3 -m albert_min.export m runs/m.mindir\n")
    targets = [python_target(w) for w in shell_commands(code)]
    assert [t for t in targets if t] == [
        ("script", "train.py", ["--train", "a.tsv", "--output", "runs/x"]),
        ("script", "evaluate.py", ["--model", "runs/$t", "--json"]),
        ("script", "train.py", ["--data-parallel"]),
        ("module", "albert_min.export", ["m", "runs/m.mindir"]),
    ]


@pytest.mark.parametrize("kind, target, args", [
    ("script", "evaluate.py", ["--model", "weights/sst2-small", "--no-such-flag"]),        # parse_args(argv)
    ("script", "train.py", ["--task", "sop", "--output", "runs/x"]),                      # its own check: no --text
    ("module", "albert_min.convert", ["src", "dst", "--no-such-flag"]),                   # parser inside main()
    ("script", "benchmarks/heldout_eval.py", ["--no-such-flag"]),                         # parser inside main()
    ("script", "no_such_script.py", []),
])
def test_a_wrong_command_is_caught(kind, target, args, monkeypatch):
    monkeypatch.chdir(ROOT)
    with pytest.raises(AssertionError):
        check_flags(kind, target, args)


def test_checking_a_module_that_is_imported_already_gives_no_runpy_warning():
    """runpy warned ("'albert_min.convert' found in sys.modules ...", 14 times in the suite) when a test
    had imported the module before its README line was checked."""
    import warnings
    import albert_min.convert  # noqa: F401
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_flags("module", "albert_min.convert", ["SRC", "DST", "--format", "safetensors"])
    assert "albert_min.convert" in sys.modules


def test_readme_is_at_most_250_lines_and_shows_both_ways_to_run_the_commands():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    assert len(text.splitlines()) <= 250
    readme = [p.id for p in SHELL_COMMANDS if p.id.startswith("README.md:")]
    assert any(":train.py " in i for i in readme) and any(":albert_min.evaluate " in i for i in readme)
    for name in ("python -m albert_min.train", "albert-min-train", "albert-min-evaluate", "`sentence_label`"):
        assert name in text, name


def test_a_max_steps_marker_shortens_the_train_commands_and_leaves_the_others():
    from helpers.readme_examples import examples
    block = ("<!-- example: max-steps 20 -->\n```bash\npython3 train.py --train a.tsv --output runs/x\n"
             "python3 evaluate.py --model weights/sst2-small --int8\n```\n")
    train_example, evaluate_example = examples(block)[0]
    assert train_example.shell() == "python3 train.py --train a.tsv --output runs/x --max-steps 20"
    assert evaluate_example.shell() == "python3 evaluate.py --model weights/sst2-small --int8"
    with pytest.raises(ValueError, match="a 'max-steps' marker on a block with no train.py command"):
        examples(block.replace("python3 train.py --train a.tsv --output runs/x\n", ""))
