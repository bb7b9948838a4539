"""The package's layout: every module of albert_min/ at most 450 lines, and the import contracts
of .importlinter kept (each layer imports only the layers below it, no import circles)."""

import glob
import os
import subprocess
import sys

import pytest

from helpers.paths import ROOT

MAX_LINES = 450   # the guide asks for about 400


def test_no_package_file_is_over_the_line_limit():
    files = glob.glob(os.path.join(ROOT, "albert_min", "**", "*.py"), recursive=True)
    assert len(files) > 40                      # the glob found the package
    lines = {}
    for path in files:
        with open(path, encoding="utf-8") as f:
            lines[os.path.relpath(path, ROOT)] = sum(1 for _ in f)
    too_long = {path: n for path, n in lines.items() if n > MAX_LINES}
    assert not too_long, f"over {MAX_LINES} lines: {too_long}"


def test_import_contracts_are_kept():
    """What .ci/run's `lint-imports` checks, so that the test command catches an import going up a layer."""
    pytest.importorskip("importlinter")   # the test extra: pip install -e ".[test]"
    code = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_cache=True, no_logo=True))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "albert_min's layers import downwards only KEPT" in done.stdout, done.stdout[-3000:]
    assert "no import cycles between the modules of any package KEPT" in done.stdout, done.stdout[-3000:]
