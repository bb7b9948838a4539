"""What tests/tasks/glue/test_glue.py and test_glue_training.py share: the GLUE release's folder
(tests that read it are skipped without it) and a writer of hand-made TSV files."""

import os

import pytest

from helpers.paths import ROOT

GLUE_DIR = os.path.join(os.path.dirname(ROOT), "shared", "data", "glue")
needs_glue = pytest.mark.skipif(not os.path.isdir(GLUE_DIR), reason="needs ../shared/data/glue")


def write(path, lines, bom=False):
    with open(path, "w", encoding="utf-8-sig" if bom else "utf-8", newline="") as f:
        f.write("".join(line + "\n" for line in lines))
    return str(path)
