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


TASK_FAMILIES = ("conll", "glue", "pretraining", "race", "squad")
# A family's files, named by their role, the same name in every family (albert_min/tasks/__init__.py).
TASK_ROLE_FILES = {"task.py", "reading.py", "features.py", "loss.py", "metric.py", "decode.py", "writing.py",
                   "windows.py"}
EVERY_FAMILY_HAS = {"task.py", "reading.py", "metric.py"}


def test_each_task_family_is_a_folder_of_role_files():
    """Issue 45: tasks/ is one folder per family, each file named by its role, the same names across
    families; the registry finds each family's Task subclass in its task.py."""
    import albert_min.tasks as tasks
    folder = os.path.dirname(tasks.__file__)
    families = sorted(d for d in os.listdir(folder) if os.path.isfile(os.path.join(folder, d, "__init__.py")))
    assert families == list(TASK_FAMILIES)
    for family in TASK_FAMILIES:
        files = {f for f in os.listdir(os.path.join(folder, family)) if f.endswith(".py")} - {"__init__.py"}
        assert EVERY_FAMILY_HAS <= files, f"tasks/{family}/ lacks {sorted(EVERY_FAMILY_HAS - files)}"
        assert files <= TASK_ROLE_FILES, f"tasks/{family}/ has files of no role: {sorted(files - TASK_ROLE_FILES)}"
    assert {module for module, _, _ in tasks.REGISTRY.values()} == {f"{f}.task" for f in TASK_FAMILIES}
    assert all(f"{role:<12}" in tasks.__doc__ for role in TASK_ROLE_FILES)   # the docstring lists every role
