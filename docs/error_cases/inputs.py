"""What every case module of docs/make_error_cases.py builds on: the paths, the writers of inputs
under one temporary folder ($T), the checks run after a command, and ``run`` (one command as a user runs it)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from types import SimpleNamespace

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # docs/error_cases/..
# tests/ for its helpers package; the test folders whose constants the cases reuse
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")] + [os.path.join(ROOT, "tests", folder)
                                                    for folder in ("scripts", "tasks", "common")]

import numpy as np  # noqa: E402

from albert_min.common.safe_output import MANIFEST_FILE  # noqa: E402
from albert_min.model.folder import read_checkpoint  # noqa: E402
from helpers.tiny_runs import TINY_MODEL  # noqa: E402

FIXTURES = os.path.join(ROOT, "tests", "fixtures")
PRE = os.path.join(FIXTURES, "tiny_pretraining")                  # a converter source folder
SST2_SMALL = os.path.join(ROOT, "weights", "sst2-small")         # the committed model folder
DEV = os.path.join(os.path.dirname(ROOT), "shared", "data", "sst2", "dev.tsv")
T = tempfile.mkdtemp(prefix="albert_min_cases_")
BACKGROUND = []     # processes a case left running (killed at the end)
MOUNTS = []         # read-only bind mounts a case made (unmounted at the end)
ENV = dict(os.environ, ALBERT_MIN_CACHE=os.path.join(T, "compile_cache"))   # not the user's ~/.cache
TRAIN_FLAGS = ["--tokenizer", os.path.join(FIXTURES, "spiece_sst2_2k.model"), "--epochs", "1", "--batch-size", "16",
               *TINY_MODEL]


# ------------------------------------------------------------------ building inputs
def p(*parts, mkdir=False):     # a path under $T; its parent (with mkdir: itself) is created
    path = os.path.join(T, *parts)
    os.makedirs(path if mkdir else os.path.dirname(path), exist_ok=True)
    return path


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)
    return path


def dev_slice(path, rows, bad_row=False):      # SST-2 dev's first rows (bad_row: line 4 has no label)
    lines = open(DEV, encoding="utf-8").read().splitlines()[:rows + 1]
    return write(path, "\n".join(lines[:3] + ["a row without a label"] * bad_row + lines[3:]) + "\n")


def copy(src, *parts):
    shutil.copytree(src, p(*parts))
    return p(*parts)


def edit_json(path, **values):              # float("nan") is written as NaN
    with open(path) as f:
        write(path, json.dumps({**json.load(f), **values}))


def user_files(folder):
    write(os.path.join(folder, "notes.txt"), "mine")
    write(os.path.join(folder, "sub", "important.csv"), "1,2\n")
    return folder


def source(*parts, weights=None):       # a converter source: tiny_pretraining's config.json (+ .bin bytes)
    src = p(*parts, mkdir=True)
    shutil.copy(os.path.join(PRE, "config.json"), src)
    if weights is not None:
        write(os.path.join(src, "pytorch_model.bin"), weights)
    return src


def trained(*parts):       # a copy of a model folder (+ .state) that train.py wrote (once, on 32 dev rows)
    base = os.path.join(T, "base", "out")
    if not os.path.isdir(base):
        result = run(["train.py", "--train", os.path.join(T, "dev32.tsv"), "--output", base, *TRAIN_FLAGS])
        assert result.code == 0, result.err[-3000:]
    shutil.copytree(base + ".state", p(*parts) + ".state")
    return copy(base, *parts)


def crash_swap(target, complete):
    """What ``atomic_directory`` leaves when killed between its two renames: the new version in
    ``.NAME.tmp-crash`` (marked complete or not; its manifest rewritten, so its bytes differ from
    the old one's), the previous one moved to ``.NAME.old-crash``."""
    parent, name = os.path.split(target)
    shutil.copytree(target, os.path.join(parent, f".{name}.tmp-crash"))
    edit_json(os.path.join(parent, f".{name}.tmp-crash", MANIFEST_FILE), complete=complete)
    os.rename(target, os.path.join(parent, f".{name}.old-crash"))


# ------------------------------------------------------------------ checks run after a command
def snapshot(folder):
    return {os.path.relpath(os.path.join(r, n), folder): open(os.path.join(r, n), "rb").read()
            for r, _, names in os.walk(folder) for n in names}


def intact(folder):
    """``folder`` then holds exactly the files and bytes it holds now."""
    before = snapshot(folder)

    def check():
        after = snapshot(folder)
        if after == before:
            return True, f"{folder} intact ({len(before)} file{'s' * (len(before) != 1)})"
        lost, new = sorted(set(before) - set(after)), sorted(set(after) - set(before))
        return False, f"{folder} changed: lost {lost}, new {new} (or bytes changed)"
    return check


def ends_as(parent, names, model, same=(), told=""):
    """``parent`` then lists ``names``, ``model`` is a model folder, and for each (folder, like) in
    ``same``, folder then holds the files and bytes ``like`` holds now (``told``: what ``like`` is)."""
    before = {folder: snapshot(like) for folder, like in same}

    def check():
        listed, files = sorted(os.listdir(parent)), sorted(os.listdir(model)) if os.path.isdir(model) else []
        ok = all(snapshot(f) == s for f, s in before.items())
        text = f"{parent} lists {listed}; {os.path.basename(model)}/ has {files}" + (
            f"; {' and '.join(os.path.basename(f) + '/' for f in before)}: {'the same' if ok else 'NOT the same'} "
            f"files and bytes as {told}" if before else "")
        return listed == sorted(names) and {"config.json", "model.ckpt"} <= set(files) and ok, text
    return check


def same_weights(out, reference):
    """A damaged source gave nothing, or exactly the weights of the undamaged one."""
    def check():
        if not os.path.exists(out):
            return True, "nothing written"
        a, b = (read_checkpoint(os.path.join(d, "model.ckpt")) for d in (out, reference))
        same = a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
        return same, ("not an error, and rightly: the tensors converted are identical to the unflipped file's "
                      "(the byte is in a field the reader does not use)" if same
                      else "converted tensors DIFFER from the unflipped file's")
    return check


def ends_listing(folder, names):
    def check():
        listed = sorted(os.listdir(folder)) if os.path.isdir(folder) else None
        return listed == sorted(names), f"{folder} lists {listed}"
    return check


# ------------------------------------------------------------------ running a command
def run(argv, cwd=ROOT, env=None):
    """One tool run as a user runs it: exit code, output, wall time, peak RSS (from wait4)."""
    tool, *args = argv
    modules = {"convert": "albert_min.convert", "export": "albert_min.export", "fingerprint": "albert_min.fingerprint"}
    cmd = [sys.executable, *(["-m", modules[tool]] if tool in modules else [] if tool == "python"
                             else [os.path.join(ROOT, tool)])]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd + args, cwd=cwd, stdout=out, stderr=err, env={**ENV, **(env or {})})
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0), err.seek(0)
        return SimpleNamespace(code=proc.returncode, out=out.read().decode(errors="replace"),
                               err=err.read().decode(errors="replace"), wall=time.perf_counter() - start,
                               rss_mb=usage.ru_maxrss / 1024)
