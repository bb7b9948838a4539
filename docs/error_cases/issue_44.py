"""Issue 44's cases: GLUE files, folder records, the compiled kernels, stale graphs, environment variables, read-only outputs."""

import json
import os
import shutil
import subprocess
from types import SimpleNamespace

import numpy as np

# error_cases.inputs first: it puts the repository and tests/ on sys.path
from error_cases.inputs import (copy, dev_slice, edit_json, ends_listing, intact, MOUNTS, p, PRE, ROOT, run,
                                SST2_SMALL, write)
from error_cases.issue_36 import replaced_alone
from albert_min.common.safe_output import MANIFEST_FILE


def issue_44_glue_files(add, train):
    """Issue 44, item 3: GLUE files (task named or inferred from the folder) with a byte that is not
    UTF-8, a NUL, or lines that end with CR alone: one error line naming the file and line."""
    def glue_file(id, folder, lines, edit):
        return write(p(id, folder, "dev.tsv"), b"".join(edit(n, line.encode()) + b"\n" for n, line in
                                                        enumerate(lines, start=1)))

    def at(line, inserted):
        return lambda n, row: row[:4] + inserted + row[4:] if n == line else row
    sst2 = ["sentence\tlabel", "a fine film\t1", "dull and long\t0", "a joy\t1"]
    stsb = ["index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore",
            "0\tg\tf\t2012\t1\tn\tn\tA man plays.\tA man is playing.\t4.5",
            "1\tg\tf\t2012\t2\tn\tn\tA cat.\tA dog runs.\t0.5"]
    mrpc = ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String", "1\t1\t2\tHe said yes.\tHe agreed.",
            "0\t3\t4\tA cat sat.\tA dog ran."]
    for id, folder, lines, line, how, argv in (
            ("44.3a", "SST-2", sst2, 3, "evaluate SST-2 (task from the folder)", []),
            ("44.3b", "STS-B", stsb, 2, "evaluate --task stsb", ["--task", "stsb"]),
            ("44.3c", "MRPC", mrpc, 3, "train MRPC (task from the folder)", None)):
        path = glue_file(id, folder, lines, at(line, b"\xff"))
        command = (train(p(id, "out"), data=path) if argv is None else
                   ["evaluate.py", "--model", SST2_SMALL, "--data", path, "--quiet", *argv])
        add(id, f"{how}: byte 0xff in line {line}", command, names=[f"{path}:{line}: not UTF-8"])
    nul = glue_file("44.3d", "SST-2", sst2, at(4, b"\0"))
    add("44.3d", "evaluate SST-2: a NUL byte in line 4", ["evaluate.py", "--model", SST2_SMALL, "--data", nul,
        "--quiet"], names=[f"{nul}:4: a NUL byte"])
    cr_only = write(p("44.3e", "mine", "dev.tsv"), "\r".join(["sentence\tlabel", "good\t1", "bad\t0"]) + "\r")
    add("44.3e", "evaluate the generic sentence_label task (once cls): lines that end with CR alone", ["evaluate.py", "--model", SST2_SMALL,
        "--data", cr_only, "--quiet"], names=[f"{cr_only}:1: a carriage return (CR)"])


def issue_44_records(add, evaluate):
    """Issue 44.2: a model folder's files must belong together (its fingerprint in .albert_min.json);
    44.5: evaluate.py --force replaces only a predictions file it wrote and nobody changed since."""
    weights = os.path.join(ROOT, "weights")
    for id, into, other, name in (("44.2a", "sst2-small", "sst2-pretrained-small", "model.ckpt"),
                                  ("44.2b", "sst2-pretrained-small", "sst2-small", "model.ckpt"),
                                  ("44.2c", "sst2-small", "sst2-pretrained-small", "spiece.model")):
        folder = copy(os.path.join(weights, into), id, "m")
        shutil.copyfile(os.path.join(weights, other, name), os.path.join(folder, name))
        add(id, f"evaluate {into} holding {other}'s {name} (same shapes, another vocabulary)", evaluate(folder),
            names=[os.path.join(folder, name), "sha256", "python -m albert_min.fingerprint"], check=intact(p(id)))
    edited = copy(SST2_SMALL, "44.2d", "m")
    edit_json(os.path.join(edited, "config.json"), num_hidden_layers=12)
    add("44.2d", "evaluate sst2-small with config.json's num_hidden_layers edited 4 -> 12", evaluate(edited),
        expect="ok", stderr=True, lines=("note:",), check=intact(p("44.2d")))
    old = copy(SST2_SMALL, "44.2e", "m")
    manifest = json.load(open(os.path.join(old, MANIFEST_FILE)))
    write(os.path.join(old, MANIFEST_FILE), json.dumps({k: manifest[k] for k in ("written_by", "kind", "complete",
                                                                                  "files")}, indent=1))
    add("44.2e", "evaluate a folder written before fingerprints (its .albert_min.json lists files only)",
        evaluate(old), expect="ok", stderr=True, lines=("note:",), check=intact(p("44.2e")))
    chosen = copy(SST2_SMALL, "44.2f", "m")
    shutil.copyfile(os.path.join(weights, "sst2-pretrained-small", "model.ckpt"), os.path.join(chosen, "model.ckpt"))
    add("44.2f", "fingerprint a folder whose model.ckpt the user replaced on purpose", ["fingerprint", chosen],
        expect="ok", lines=("recorded",))
    # 44.5: --force onto a user's file in GLUE's layout, onto evaluate.py's output edited since, onto its own.
    mine = write(p("44.5a", "user_preds.tsv"), "index\tprediction\n0\tmy label\n")
    add("44.5a", "evaluate --force onto a user's user_preds.tsv that begins with index<TAB>prediction",
        evaluate(SST2_SMALL, "--output", mine, "--force"), names=[mine, "no record"], check=intact(p("44.5a")))
    from albert_min.tasks.glue.task import GlueTask
    ours = p("44.5b", "preds.tsv")
    edited_preds = p("44.5c", "preds.tsv")
    for path in (ours, edited_preds):
        GlueTask("sst2").write_predictions(path, SimpleNamespace(examples=SimpleNamespace(index=[0])),
                                           [np.array([[0.0, 1.0]])])
    write(edited_preds, open(edited_preds).read() + "1\tan edit\n")
    add("44.5b", "evaluate --force onto preds.tsv an earlier evaluate.py wrote", evaluate(SST2_SMALL, "--output", ours,
        "--force"), expect="ok", check=replaced_alone(ours))
    add("44.5c", "evaluate --force onto preds.tsv an earlier evaluate.py wrote, edited since",
        evaluate(SST2_SMALL, "--output", edited_preds, "--force"), names=[edited_preds, "changed since"],
        check=intact(p("44.5c")))


def issue_44_kernels(add, evaluate):
    """44.4: a foreign library in the kernels' cache with a matching record; 44.7: a full disk, no compiler."""
    from albert_min.common.checksums import sha256_of
    from albert_min.model.kernels import build
    cache = p("44.4", "cache", mkdir=True)
    library = build.library_path(cache)
    source = p("44.4", "foreign.cc")
    write(source, 'extern "C" int set_blas_threads(int n) { return n; }\n')
    subprocess.run([build.compiler()[0], "-shared", "-fPIC", source, "-o", library], check=True)
    record = json.load(open(library + build.RECORD_SUFFIX))
    write(library + build.RECORD_SUFFIX, json.dumps({**record, "size": os.path.getsize(library),
                                                     "sha256": sha256_of(library)}))
    add("44.4", "evaluate with a foreign (valid) albert_kernels.so in the cache, its record matching",
        evaluate(SST2_SMALL), expect="ok", env={"ALBERT_MIN_CACHE": cache}, stderr=True, lines=("albert_min: kernels",))
    full_disk = p("44.7a", "g++")
    write(full_disk, '#!/bin/sh\ncase "$1" in --version) echo "g++ (full disk)"; exit 0;; esac\n'
                     'echo "/usr/bin/ld: final link failed: No space left on device" >&2\n'
                     'echo "collect2: error: ld returned 1 exit status" >&2\nexit 1\n')
    os.chmod(full_disk, 0o755)
    add("44.7a", "evaluate, the kernels built on a full disk (a g++ that fails as g++ does on ENOSPC)",
        evaluate(SST2_SMALL), expect="ok", env={"ALBERT_MIN_CACHE": p("44.7a", "cache", mkdir=True), "CXX": full_disk},
        stderr=True, lines=("albert_min: kernels",))
    built = p("44.7b", "cache", mkdir=True)
    build.library_path(built)
    add("44.7b", "evaluate with no compiler, the kernels built before in the cache", evaluate(SST2_SMALL),
        expect="ok", env={"ALBERT_MIN_CACHE": built, "CXX": "no-such-compiler"}, lines=("accuracy",))


# ------------------------------------------------------------------ issue 44: stale graphs, environment, read-only
def same_files(a, b):
    def check():
        same = os.path.isfile(a) and os.path.isfile(b) and open(a, "rb").read() == open(b, "rb").read()
        return same, (f"its predictions are {'the same as' if same else 'NOT the same as'} those of "
                      "--no-compile-cache on the edited code")
    return check


def read_only_mount(folder):
    """``folder`` as a read-only bind mount (unmounted at the end), or False where this process may not mount."""
    if subprocess.run(["mount", "--bind", folder, folder], capture_output=True).returncode:
        return False
    MOUNTS.append(folder)
    return not subprocess.run(["mount", "-o", "remount,bind,ro", folder], capture_output=True).returncode


def issue_44_cache_environment_read_only(add, train, evaluate):
    # 1. A copy of the code whose graph is in the compile cache, then its kernels' softmax edited (x / 2).
    repo = p("44.1", "repo", mkdir=True)
    for name in ("albert_min", "tokenizer"):
        shutil.copytree(os.path.join(ROOT, name), os.path.join(repo, name), ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(os.path.join(ROOT, "evaluate.py"), repo)
    data, cache = dev_slice(p("44.1", "dev300.tsv"), 300), {"ALBERT_MIN_CACHE": p("44.1", "cache", mkdir=True)}
    argv = [os.path.join(repo, "evaluate.py"), "--model", SST2_SMALL, "--data", data, "--quiet", "--output"]
    filled = run(argv + [p("44.1", "before.tsv")], cwd=repo, env=cache)     # GRAPH_FROM_ROWS rows: the graph cached
    assert filled.code == 0, filled.err[-2000:]
    layers = os.path.join(repo, "albert_min", "model", "kernels", "layers.py")
    write(layers, open(layers).read().replace("return ops.softmax(x, -1)", "return ops.softmax(x / 2, -1)"))
    fresh = run(argv + [p("44.1", "fresh.tsv"), "--no-compile-cache"], cwd=repo, env=cache)
    assert fresh.code == 0, fresh.err[-2000:]
    add("44.1", "evaluate 300 rows after an edit of the kernels' softmax (layers.py), with the graphs the unedited "
        "code cached", argv + [p("44.1", "cached.tsv")], cwd=repo, env=cache, expect="ok", lines=("accuracy",),
        check=same_files(p("44.1", "cached.tsv"), p("44.1", "fresh.tsv")))
    # 2. Environment variables: each one albert_min reads, one error line naming it.
    add("44.7enva", "ALBERT_MIN_CPU_THREADS=² evaluate (a digit to str.isdigit, not to int())", evaluate(SST2_SMALL),
        env={"ALBERT_MIN_CPU_THREADS": "²"}, expect="usage", names=["ALBERT_MIN_CPU_THREADS=²", "1 to 256"])
    add("44.7envb", "ALBERT_MIN_KERNELS=maybe train", train(p("44.7envb", "out")), env={"ALBERT_MIN_KERNELS": "maybe"},
        expect="usage", names=["ALBERT_MIN_KERNELS=maybe", "on, 1, true, yes, off, 0, false, no"],
        check=ends_listing(p("44.7envb"), []))
    add("44.7envc", "ALBERT_MIN_CPU_THREADS=٣ convert (int() reads it as 3)", ["convert", PRE, p("44.7envc", "out")],
        env={"ALBERT_MIN_CPU_THREADS": "٣"}, expect="usage", names=["ALBERT_MIN_CPU_THREADS"],
        check=ends_listing(p("44.7envc"), []))
    add("44.7envd", "MS_WORKER_NUM=two train --data-parallel (as if under msrun)", train(p("44.7envd", "out"),
        "--data-parallel"), env={"MS_WORKER_NUM": "two", "MS_SCHED_HOST": "127.0.0.1", "MS_SCHED_PORT": "1",
                                 "MS_ROLE": "MS_WORKER"}, expect="usage", names=["MS_WORKER_NUM=two"],
        check=ends_listing(p("44.7envd"), []))
    # 7. An output in a read-only folder (a read-only bind mount: root may write through chmod 555).
    folder = p("44.7", "ro", mkdir=True)
    if read_only_mount(folder):
        add("44.7", "evaluate --output into a read-only file system", evaluate(SST2_SMALL, "--output",
            os.path.join(folder, "p.tsv")), names=[f"{folder}: read-only file system"], check=ends_listing(folder, []))
