"""albert_min/common/errors.py: the one way the commands (train, evaluate, convert, export,
fingerprint) end on bad input: one ``error:`` line and the command's exit status."""

import errno
import sys

import pytest

from albert_min.common.errors import (EXIT_INTERRUPTED, EXIT_USAGE, AlbertMinError, OutputExistsError, fail,
                                      reported_errors, returns_status)


def test_fail_is_one_error_line_with_status_1_or_the_code_given(capsys):
    with pytest.raises(SystemExit) as stop:
        fail("data file not found: x.tsv")
    assert stop.value.code == "error: data file not found: x.tsv"      # Python prints it and exits 1
    assert capsys.readouterr().err == ""                               # not printed twice
    with pytest.raises(SystemExit) as stop:
        fail("--device tpu: unknown device", EXIT_USAGE)
    assert stop.value.code == 2 and capsys.readouterr().err == "error: --device tpu: unknown device\n"


@pytest.mark.parametrize("raised, line", [
    (AlbertMinError("x.tsv:3: not UTF-8"), "error: x.tsv:3: not UTF-8"),
    (OSError(errno.EACCES, "Permission denied", "m/model.ckpt"), "error: m/model.ckpt: Permission denied"),
    (OSError("no filename"), "error: no filename"),
    (OutputExistsError("out"), "error: out already exists (pass --force to replace it)"),
])
def test_reported_errors_turns_user_errors_into_their_line(raised, line):
    with pytest.raises(SystemExit) as stop, reported_errors():
        raise raised
    assert stop.value.code == line


def test_reported_errors_names_the_commands_force_flag():
    with pytest.raises(SystemExit) as stop, reported_errors(force_flag="--overwrite"):
        raise OutputExistsError("out")
    assert stop.value.code == "error: out already exists (pass --overwrite to replace it)"


def test_a_bug_keeps_its_traceback():
    with pytest.raises(ZeroDivisionError), reported_errors():
        1 / 0


def test_ctrl_c_says_how_to_go_on_with_status_130_where_asked(capsys):
    with pytest.raises(SystemExit) as stop, reported_errors(interrupted="interrupted; continue with --resume"):
        raise KeyboardInterrupt
    assert stop.value.code == EXIT_INTERRUPTED == 130
    assert capsys.readouterr().err == "interrupted; continue with --resume\n"
    with pytest.raises(KeyboardInterrupt), reported_errors():
        raise KeyboardInterrupt


def test_returns_status_gives_1_after_the_line_and_lets_argparse_exits_through(capsys):
    @returns_status
    def main(what):
        if what == "bad":
            with reported_errors():
                raise AlbertMinError("bad input")
        if what == "usage":
            fail("bad flag", EXIT_USAGE)
        if what == "help":
            sys.exit(0)
        return 0

    assert main("good") == 0
    assert main("bad") == 1 and capsys.readouterr().err == "error: bad input\n"
    for what, code in (("usage", 2), ("help", 0)):
        with pytest.raises(SystemExit) as stop:
            main(what)
        assert stop.value.code == code
