"""What tests/scripts/test_safety.py and test_flag_and_input_checks.py share: a converted classifier
folder (the fixture ``model_dir``), copies of it, and the scripts run as a user runs them."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from helpers.paths import FIXTURES, ROOT
from albert_min import convert as cv
from albert_min.common.safe_output import MANIFEST_FILE

COMMITTED = os.path.join(ROOT, "weights", "sst2-small")
HF_SST2 = os.path.join(FIXTURES, "tiny_sst2_hf")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A converted classifier folder (with spiece.model) that evaluate.py accepts."""
    out = str(tmp_path_factory.mktemp("models") / "cls")
    cv.convert(HF_SST2, out)
    return out


def copy_model(model_dir, tmp_path, name="m"):
    dst = str(tmp_path / name)
    shutil.copytree(model_dir, dst)
    return dst


def without_record(path):
    """Take ``path``'s sha256 out of its folder's manifest, as albert_min wrote folders before it recorded
    fingerprints (issue 44): what the checks below it (CRC, SentencePiece, shapes) then see."""
    manifest_path = os.path.join(os.path.dirname(path), MANIFEST_FILE)
    manifest = json.load(open(manifest_path))
    del manifest["sha256"][os.path.basename(path)]
    json.dump(manifest, open(manifest_path, "w"))


def script(name, *args, cwd=ROOT):
    """Run train.py / evaluate.py as a user does; returns (exit code, stderr)."""
    result = subprocess.run([sys.executable, os.path.join(ROOT, name), *args], cwd=cwd,
                            capture_output=True, text=True, timeout=300)
    return result.returncode, result.stderr
