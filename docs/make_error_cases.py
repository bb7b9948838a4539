"""Reproduce hostile inputs against the real command line; writes docs/error_cases.md.

    python3 docs/make_error_cases.py          # every case (about 2 minutes on 2 cores), writes the table
    python3 docs/make_error_cases.py 10 13a   # only the cases whose id starts so: prints rows, writes nothing

The inputs are built in one temporary folder (deleted at the end) with the writers in
tests/; each command runs in a subprocess. A row is marked FAILS when the tool does not
do what is asked (one error line naming the culprit, or a correct result): a traceback, the wrong exit code (0 where an error was due), a
message not naming the culprit, or files deleted, changed or left behind.
"""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from types import SimpleNamespace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# tests/ for its helpers package; the test folders whose constants the cases reuse
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")] + [os.path.join(ROOT, "tests", folder)
                                                    for folder in ("scripts", "tasks", "common")]

import numpy as np  # noqa: E402

from helpers.checkpoint_writers import (opcode, torch_pickle, write_raw_safetensors, write_safetensors,  # noqa: E402
                                        write_torch_zip)
from test_safety import KILL_BETWEEN_RENAMES  # noqa: E402
from helpers.tiny_runs import TINY_MODEL  # noqa: E402
from albert_min import convert as cv  # noqa: E402
from albert_min.fingerprint import main as fingerprint  # noqa: E402
from albert_min.checkpoints import formats  # noqa: E402
from albert_min.model.folder import read_checkpoint, write_checkpoint  # noqa: E402
from albert_min.common.safe_output import MANIFEST_FILE  # noqa: E402

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


# ------------------------------------------------------------------ the cases of issue 7
def cases():
    rows = []

    def add(id, what, argv, expect="error", names=(), cwd=ROOT, check=None, cost=False, note=None, lines=(),
            env=None, stderr=False):
        """expect: error (exit 1), usage (2), ok (0), or "error or same" (1, or 0 if check() passes);
        names: what the error must name; check() -> (ok, text); cost: report time and memory;
        lines: show the stdout lines starting so (on exit 0) instead of the last line;
        env: environment variables set for this command; stderr: ``lines`` are picked from stderr
        (a notice on a run that succeeds)."""
        rows.append(SimpleNamespace(**{k: v for k, v in locals().items() if k != "rows"}))

    data, data16 = dev_slice(p("dev32.tsv"), 32), dev_slice(p("dev16.tsv"), 16)
    ev = ["--data", data16, "--quiet"]

    def train(output, *flags, data=data):
        return ["train.py", "--train", data, "--output", output, *flags, *TRAIN_FLAGS]

    def evaluate(model, *flags):
        return ["evaluate.py", "--model", model, *ev, *flags]

    # 1. The converter's DST is a parent of SRC (a copy of tests/fixtures/tiny_pretraining).
    for id, dst in (("1a", ("1a", "models")), ("1b", ("1b",))):
        src = copy(PRE, id, "models", "tiny")
        add(id, f"convert --force, DST = {'grand' * (id == '1b')}parent of SRC", ["convert", src, p(*dst), "--force"],
            names=[src], check=intact(p(id)))
    # 2. cd myproject && train.py --train train.tsv --output . --force
    for id, output in (("2a", "."), ("2b", "..")):
        project = user_files(p(id, "myproject", mkdir=True))
        dev_slice(os.path.join(project, "train.tsv"), 32)
        add(id, f"cd myproject (train.tsv, notes.txt, sub/); train --output {output} --force",
            train(output, "--force", data="train.tsv"), cwd=project, names=["refusing"], check=intact(p(id)))
    # 3. --force onto a folder holding unrelated files; onto a folder albert_min wrote.
    users, mixed, users_c, ours = (user_files(p("3a", "out", mkdir=True)), user_files(trained("3b", "out")),
                                   user_files(p("3c", "out", mkdir=True)), trained("3d", "out"))
    add("3a", "train --force onto a folder of user files (notes.txt, sub/important.csv)", train(users, "--force"),
        names=[users], check=intact(p("3a")))
    add("3b", "train --force onto a folder train.py wrote + notes.txt, sub/important.csv", train(mixed, "--force"),
        names=["notes.txt", "sub/important.csv"], check=intact(p("3b")))
    add("3c", "convert --force onto a folder of user files", ["convert", PRE, users_c, "--force"], names=[users_c],
        check=intact(p("3c")))
    add("3d", "train --force onto a folder train.py wrote", train(ours, "--force"), expect="ok",
        check=ends_as(p("3d"), ["out", "out.state"], ours))
    # 4. --resume when the state folder holds unrelated files.
    only_users, mixed = p("4a", "out"), trained("4b", "out")
    write(only_users + ".state/notes.txt", "mine")
    write(mixed + ".state/notes.txt", "mine")
    add("4a", "train --resume, out.state/ holds only notes.txt", train(only_users, "--resume"),
        names=[only_users + ".state"], check=intact(p("4a")))
    add("4b", "train --resume, out.state/ written by train.py + notes.txt", train(mixed, "--resume"),
        names=["notes.txt"], check=intact(p("4b")))
    # 5. --output a regular file; a path that contains the source.
    file_a, file_b = write(p("5a", "model.txt"), "mine"), write(p("5b", "model.txt"), "mine")
    folder, src = p("5c", "data", mkdir=True), copy(PRE, "5d", "tiny")
    tsv = dev_slice(os.path.join(folder, "train.tsv"), 32)
    add("5a", "train --output is a regular file, --force", train(file_a, "--force"), names=[file_a],
        check=intact(p("5a")))
    add("5b", "convert DST is a regular file, --force", ["convert", PRE, file_b, "--force"], names=[file_b],
        check=intact(p("5b")))
    add("5c", "train --output = the folder holding --train, --force", train(folder, "--force", data=tsv),
        names=[tsv], check=intact(p("5c")))
    add("5d", "convert DST = SRC, --force", ["convert", src, src, "--force"], names=[src], check=intact(p("5d")))
    # 6. Leftovers of a killed save; a swap killed between its two renames (completed or rolled back).
    killed, swapped, rolled = trained("6a", "out"), trained("6b", "out"), trained("6c", "out")
    check_a = ends_as(p("6a"), [".out.old-user", "out", "out.state"], killed,
                      [(killed, killed), (killed + ".state", killed + ".state")], "before")
    check_c = ends_as(p("6c"), ["out", "out.state"], rolled, [(rolled + ".state", rolled + ".state")],
                      "before the crash: rolled back")
    write(p("6a", ".out.tmp-killed1", MANIFEST_FILE), json.dumps(     # a save killed half-way
        {"written_by": "albert_min", "kind": "model", "complete": False, "files": []}))
    write(p("6a", ".out.tmp-killed1", "model.ckpt"), b"half")
    os.makedirs(p("6a", ".out.tmp-empty"))                             # killed right after mkdtemp
    write(p("6a", ".out.old-user", "keep"), "not albert_min's: must stay")
    crash_swap(swapped, complete=True)
    crash_swap(swapped + ".state", complete=True)
    crash_swap(rolled + ".state", complete=False)
    check_b = ends_as(p("6b"), ["out", "out.state"], swapped, [(swapped, p("6b", ".out.tmp-crash")), (
        swapped + ".state", p("6b", ".out.state.tmp-crash"))], "the new .tmp-crash versions: the swap was completed")
    conv = p("6d", "conv")                                              # a real process killed between the renames
    subprocess.run([sys.executable, "-c", KILL_BETWEEN_RENAMES.format(root=ROOT, target=conv)])
    assert sorted(n.split("-")[0] for n in os.listdir(p("6d"))) == [".conv.lock", ".conv.old", ".conv.tmp"]
    shown = ("completed", "rolled back", "resumed", "done")
    add("6a", "train --resume; beside out/: .out.tmp-killed1/ (ours, incomplete), .out.tmp-empty/, .out.old-user/ "
        "(not ours)", train(killed, "--resume"), expect="ok", check=check_a, lines=shown)
    add("6b", "train --resume; out/ and out.state/ each killed mid-swap (.tmp-crash complete, .old-crash)",
        train(swapped, "--resume"), expect="ok", check=check_b, lines=shown)
    add("6c", "train --resume; out.state/ killed mid-swap before .tmp-crash was complete (roll back)",
        train(rolled, "--resume"), expect="ok", check=check_c, lines=shown)
    add("6d", "convert --force after test_safety's KILL_BETWEEN_RENAMES left .conv.old-*/ and .conv.tmp-*/",
        ["convert", PRE, conv, "--force"], expect="ok", check=ends_as(p("6d"), ["conv"], conv), lines=("converted",))
    # 7. evaluate.py's numeric flags.
    for id, flags in zip(("7a", "7b", "7c"), (["--batch-size", "-1"], ["--batch-size", "0"], ["--max-length", "0"])):
        add(id, f"evaluate {' '.join(flags)}", evaluate(SST2_SMALL, *flags), expect="usage", names=[flags[0]])
    # 8. A NaN weight; layer_norm_eps: NaN.
    arrays = formats.read_safetensors(os.path.join(PRE, "model.safetensors"))
    arrays["albert.pooler.bias"][3] = np.nan
    write_safetensors(arrays, os.path.join(source("8a", "src"), "model.safetensors"))
    edit_json(os.path.join(copy(PRE, "8b", "src"), "config.json"), layer_norm_eps=float("nan"))
    edit_json(os.path.join(copy(SST2_SMALL, "8c", "m"), "config.json"), layer_norm_eps=float("nan"))
    add("8a", "convert: safetensors with a NaN in albert.pooler.bias", ["convert", p("8a", "src"), p("8a", "out")],
        names=["albert.pooler.bias"], check=intact(p("8a")))
    add("8b", "convert: config.json has layer_norm_eps: NaN", ["convert", p("8b", "src"), p("8b", "out")],
        names=["layer_norm_eps"], check=intact(p("8b")))
    add("8c", "evaluate: config.json has layer_norm_eps: NaN", evaluate(p("8c", "m")), names=["layer_norm_eps"])
    # 9. One flipped byte in model.ckpt: the committed model, and a folder albert_min writes now.
    committed, fresh = copy(SST2_SMALL, "9a", "m"), p("9b", "m")
    cv.convert(os.path.join(FIXTURES, "tiny_sst2_hf"), fresh)
    for model in (committed, fresh):
        raw = bytearray(open(os.path.join(model, "model.ckpt"), "rb").read())
        raw[len(raw) // 2] ^= 0x01
        write(os.path.join(model, "model.ckpt"), bytes(raw))
    add("9a", "evaluate: weights/sst2-small (committed) with one flipped byte in model.ckpt", evaluate(committed),
        names=[committed + "/model.ckpt"], lines=("accuracy",), note="the committed model.ckpt predates albert_min's "
        "CRCs and loaded unchecked (exit 0, accuracy 93.75) until it was re-saved with one")
    add("9b", "evaluate: a folder converted now (tiny_sst2_hf) with one flipped byte in model.ckpt",
        evaluate(fresh), names=[fresh + "/model.ckpt"])
    # Issue 28: safetensors has no CRC; the sha256 the folder's manifest records catches the flipped byte.
    st, both = p("9c", "m"), p("9d", "m")
    for folder, fmt in ((st, "safetensors"), (both, "ckpt"), (p("9d", "st"), "safetensors")):
        cv.convert(os.path.join(FIXTURES, "tiny_sst2_hf"), folder, weights_format=fmt)
    raw = bytearray(open(os.path.join(st, "model.safetensors"), "rb").read())
    raw[-3] ^= 0x01   # in the last tensor's data: the header stays valid
    write(os.path.join(st, "model.safetensors"), bytes(raw))
    add("9c", "evaluate: a folder converted with --format safetensors, one flipped byte in model.safetensors",
        evaluate(st), names=[st + "/model.safetensors", "sha256"])
    shutil.copy(os.path.join(p("9d", "st"), "model.safetensors"), both)
    add("9d", "evaluate: a model folder holding both model.ckpt and model.safetensors", evaluate(both),
        names=[both + "/model.ckpt", both + "/model.safetensors"], check=intact(both))
    # 10. A stride-0 view declared 40000 x 40000; a deflate bomb (2 GB of zeros, as in test_formats).
    stride0, bomb = source("10a", "src"), source("10b", "src")
    write_torch_zip(torch_pickle([("w", "0", "FloatStorage", 1, 0, (40000, 40000), (0, 0))]),
                    {"0": np.float32([1.0])}, os.path.join(stride0, "pytorch_model.bin"))
    numel = 500_000_000
    with zipfile.ZipFile(os.path.join(bomb, "pytorch_model.bin"), "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("archive/data.pkl", torch_pickle([("w", "0", "FloatStorage", numel, 0, (numel,), (1,))]),
                   compress_type=zipfile.ZIP_STORED)
        with z.open("archive/data/0", "w", force_zip64=True) as f:
            for _ in range(4 * numel >> 24):
                f.write(bytes(1 << 24))
    size = os.path.getsize(os.path.join(bomb, "pytorch_model.bin")) / 2**20
    add("10a", "convert: .bin with a stride-0 view declared 40000x40000 (1 float stored)",
        ["convert", stride0, p("10a", "out")], names=[stride0 + "/pytorch_model.bin"], cost=True)
    add("10b", f"convert: deflate bomb .bin ({size:.1f} MB file, 2 GB inflated)", ["convert", bomb, p("10b", "out")],
        names=[bomb + "/pytorch_model.bin"], cost=True)
    # 10c/d (issue 24): a pickle opcode torch.save never writes, declaring 6 GiB; an array where a storage
    # reference belongs (the message printed the whole array over three lines).
    greedy, pid = source("10c", "src"), source("10d", "src")
    write_torch_zip(b"\x80\x05" + opcode("BYTEARRAY8", 6 << 30, b"x") + b".", {},
                    os.path.join(greedy, "pytorch_model.bin"))
    entry = torch_pickle([("w", "0", "FloatStorage", 1600, 0, (40, 40), (40, 1))])[4:-2]
    write_torch_zip(b"\x80\x02}(" + entry + b"q\x01" + opcode("BINUNICODE", 1, b"v") + b"(" +
                    opcode("BINUNICODE", 40, b"albert.embeddings.word_embeddings.weight") + b"h\x01tQu.",
                    {"0": np.zeros(1600, np.float32)}, os.path.join(pid, "pytorch_model.bin"))
    add("10c", f"convert: a {os.path.getsize(os.path.join(greedy, 'pytorch_model.bin'))}-byte .bin whose pickle "
        "declares a 6 GiB BYTEARRAY8", ["convert", greedy, p("10c", "out")],
        names=[greedy + "/pytorch_model.bin", "BYTEARRAY8"], cost=True)
    add("10d", "convert: .bin whose storage reference holds a 40x40 tensor", ["convert", pid, p("10d", "out")],
        names=[pid + "/pytorch_model.bin", "array(shape=(40, 40)"])
    # 11. Byte flips in a .bin: an error naming the file, or (a field nobody reads) the same weights.
    raw = open(os.path.join(PRE, "pytorch_model.bin"), "rb").read()
    cv.convert(source("11", "src", weights=raw), p("11", "reference"))
    for c, at in zip("abcde", (0, 30, len(raw) // 2, len(raw) - 22, len(raw) - 10)):
        src = source(f"11{c}", "src", weights=raw[:at] + bytes([raw[at] ^ 0xFF]) + raw[at + 1:])
        add(f"11{c}", f"convert: pytorch_model.bin with byte {at} of {len(raw)} flipped",
            ["convert", src, p(f"11{c}", "out")], expect="error or same", names=[src + "/pytorch_model.bin"],
            check=same_weights(p(f"11{c}", "out"), p("11", "reference")))
    # 12. safetensors with overlapping data_offsets.
    write_raw_safetensors({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                           "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}},
                          bytes(range(20)), os.path.join(source("12", "src"), "model.safetensors"))
    add("12", "convert: safetensors whose tensor b's data_offsets overlap a's", ["convert", p("12", "src"),
        p("12", "out")], names=[p("12", "src", "model.safetensors"), "overlap"])
    # 13. Bad data files, tokenizer, metrics; --output that cannot be written.
    missing, bad = p("13a", "missing.tsv"), dev_slice(p("13b", "bad.tsv"), 8, bad_row=True)
    empty = write(p("13c", "empty.txt"), "\n\n  \n")
    long = write(p("13d", "long.txt"), "a short line .\n" + "word " * 1000 + "\n\nanother one .\nand more .\n")
    spiece = write(os.path.join(copy(SST2_SMALL, "13e", "m"), "spiece.model"), b"\x00garbage" * 50)
    metrics = write(os.path.join(copy(SST2_SMALL, "13f", "m"), "train_metrics.json"), '{"max_length": 6')
    a_file, read_only = write(p("13h", "results"), "a file, not a folder"), p("13i", "ro", mkdir=True)
    os.chmod(read_only, 0o555)
    try:                                                  # root ignores the mode bits
        os.remove(write(os.path.join(read_only, "probe"), ""))
        expect, note = "ok", "NOT TESTABLE HERE: this machine runs as root, and chmod 555 does not stop root writing"
    except PermissionError:
        expect, note = "error", None
    sop = ["--task", "sop", *TINY_MODEL]
    add("13a", "train: --train file missing", train(p("13a", "o"), data=missing), names=[missing],
        check=intact(p("13a")))
    add("13b", "train: TSV with a row without a label (line 4)", train(p("13b", "o"), data=bad), names=[bad + ":4"],
        check=intact(p("13b")))
    add("13c", "train --task sop: a text file that is empty", ["train.py", "--text", empty, "--output",
        p("13c", "o"), *sop], names=[empty], check=intact(p("13c")))
    add("13d", "train --task sop: a 4999-byte line", ["train.py", "--text", long, "--output", p("13d", "o"), *sop],
        names=[long], check=intact(p("13d")))
    add("13e", "evaluate: corrupt spiece.model", evaluate(p("13e", "m")), names=[spiece])
    add("13f", "evaluate: corrupt train_metrics.json", evaluate(p("13f", "m")), names=[metrics])
    add("13g", "evaluate, control: a normal run on the same 16 rows", evaluate(SST2_SMALL, "--no-compile-cache"),
        expect="ok", cost=True, lines=("accuracy",))
    add("13h", "evaluate --output below a regular file (time: compare with 13g)",
        evaluate(SST2_SMALL, "--no-compile-cache", "--output", a_file + "/preds.tsv"), names=[a_file], cost=True,
        check=intact(p("13h")))
    add("13i", "evaluate --output into a chmod 555 folder", evaluate(SST2_SMALL, "--output", read_only + "/preds.tsv"),
        expect=expect, note=note, names=[read_only] * (expect == "error"), lines=("accuracy",))
    no_spiece = p("13k", "m")                      # issue 27: a converted TF checkpoint has no tokenizer
    cv.convert(os.path.join(FIXTURES, "tiny_classifier_tf"), no_spiece)
    add("13k", "evaluate: a converted TF checkpoint (no spiece.model)", evaluate(no_spiece),
        names=[no_spiece + "/spiece.model", "--tokenizer spiece.model"])
    add("13j", "train --output inside a chmod 555 folder", train(os.path.join(read_only, "out")), expect=expect,
        note=note, names=[read_only] * (expect == "error"))
    # 14. NaN weights (refused when read); weights whose outputs overflow (refused after predicting).
    arrays = read_checkpoint(os.path.join(SST2_SMALL, "model.ckpt"))
    for id, value, what, names in (("14a", np.nan, "all NaN", ["classifier.weight"]),
                                   ("14b", 3e38, "3e38 (finite; the outputs overflow)", ["non-finite outputs"])):
        write_checkpoint({**arrays, "classifier.weight": np.full_like(arrays["classifier.weight"], value)},
                         os.path.join(copy(SST2_SMALL, id, "m"), "model.ckpt"))
        fingerprint([p(id, "m")])    # changed on purpose, so the folder's record accepts the new weights
        add(id, f"evaluate: classifier.weight {what}, written with save_checkpoint", evaluate(p(id, "m")), names=names)
    issue_24_outputs(add, evaluate, ev)
    issue_28_devices(add, train, evaluate)
    issue_36_damaged_and_long(add, train, evaluate)
    issue_36_task_inputs(add)
    issue_44_kernels(add, evaluate)
    issue_44_cache_environment_read_only(add, train, evaluate)
    issue_44_glue_files(add, train)
    issue_44_records(add, evaluate)
    issue_46_newcomer(add, train, evaluate)
    issue_46_convert_and_vocabulary(add, evaluate)
    issue_45_one_error_line(add)
    return rows


def issue_45_one_error_line(add):
    """Issue 45: every command ends on bad input through one wrapper (common/errors.py): the same missing
    model folder given to each, one error line naming it, exit 1, nothing written."""
    missing = p("45", "no-such")
    add("45a", "evaluate --model: a missing folder", ["evaluate.py", "--model", missing], names=[missing])
    add("45b", "train --init: the missing folder",
        ["train.py", "--train", DEV, "--init", missing, "--output", p("45b", "out")], names=[missing],
        check=ends_listing(p("45b", mkdir=True), []))
    add("45c", "convert: the missing folder", ["convert", missing, p("45c", "out")], names=[missing],
        check=ends_listing(p("45c", mkdir=True), []))
    add("45d", "export: the missing folder", ["export", missing, p("45d", "m.mindir")], names=[missing],
        check=ends_listing(p("45d", mkdir=True), []))
    add("45e", "fingerprint: the missing folder", ["fingerprint", missing], names=[missing])


def issue_46_newcomer(add, train, evaluate):
    """What a newcomer meets: a checkpoint not converted, a --max-length past the positions, a CSV."""
    hf, tf = os.path.join(FIXTURES, "tiny_sst2_hf"), copy(os.path.join(FIXTURES, "tiny_classifier_tf"), "46b", "tf")
    add("46a", "evaluate --model: a Hugging Face download (pytorch_model.bin, not converted)", evaluate(hf),
        names=["pytorch_model.bin", "python -m albert_min.convert"])
    add("46b", "train --init: a Google TF release (albert_config.json, model.ckpt-30.*)",
        ["train.py", "--train", DEV, "--init", tf, "--output", p("46b", "out")],
        names=["albert_config.json", "python -m albert_min.convert"])
    add("46c", "train --max-length 100000 (a new model: 512 positions)",
        ["train.py", "--train", DEV, "--max-length", "100000", "--output", p("46c", "out")], expect="usage",
        names=["--max-length 100000", "512"])
    add("46d", "train --init weights/pretrained-small --max-length 129 (its 128 positions)",
        ["train.py", "--train", DEV, "--init", os.path.join(ROOT, "weights", "pretrained-small"), "--max-length", "129",
         "--output", p("46d", "out")], expect="usage", names=["--max-length 129", "128"])
    csv = write(p("46e", "reviews.csv"), "sentence,label\na gorgeous film,1\n")
    add("46e", "evaluate --data: a comma-separated file", evaluate(SST2_SMALL, "--data", csv),
        names=[csv, "tab-separated"])


def issue_46_convert_and_vocabulary(add, evaluate):
    """convert's missing or unreadable SRC before MindSpore is imported; a model folder whose spiece.model
    has more pieces than its config's vocab_size (written by albert_min's writer, so its fingerprint is right)."""
    from test_vocab_and_convert_messages import folder_with_a_bigger_tokenizer
    add("46f", "convert: SRC missing", ["convert", p("46f", "no-such"), p("46f", "out")], names=[p("46f", "no-such")],
        cost=True, check=ends_listing(p("46f", mkdir=True), []))
    empty = p("46g", "src", mkdir=True)
    add("46g", "convert: SRC a folder holding no checkpoint", ["convert", empty, p("46g", "out")], names=[empty],
        cost=True, check=ends_listing(p("46g"), ["src"]))
    model = folder_with_a_bigger_tokenizer(pathlib.Path(p("46h", mkdir=True)))
    names = [model, "2000 pieces", "vocab_size 120", "python -m albert_min.fingerprint"]
    add("46h", "evaluate: spiece.model of 2000 pieces, vocab_size 120", evaluate(model), names=names)
    add("46i", "train --init: the same folder", ["train.py", "--train", DEV, "--init", model, "--max-steps", "1",
                                                  "--output", p("46i", "out")], names=names)
    add("46j", "export: the same folder", ["export", model, p("46j", "m.mindir")], names=names)
    add("46k", "convert --to hf: the same folder", ["convert", "--to", "hf", model, p("46k", "hf")], names=names)


# ------------------------------------------------------------------ issue 28: devices this MindSpore was not built for
def issue_28_devices(add, train, evaluate):
    import mindspore as ms
    build = f"MindSpore {ms.__version__}"
    add("28a", "evaluate --device GPU (this MindSpore: CPU only)", evaluate(SST2_SMALL, "--device", "GPU"),
        expect="usage", names=["--device GPU", build])
    add("28b", "train --device ascend (this MindSpore: CPU only)", train(p("28b", "out"), "--device", "ascend"),
        expect="usage", names=["--device Ascend", build], check=ends_listing(p("28b", mkdir=True), []))
    add("28c", "export --device GPU", ["export", SST2_SMALL, p("28c", "x.mindir"), "--device", "GPU"],
        expect="usage", names=["--device GPU", build], check=ends_listing(p("28c", mkdir=True), []))
    add("28d", "ALBERT_MIN_DEVICE=GPU evaluate", evaluate(SST2_SMALL), expect="usage",
        names=["ALBERT_MIN_DEVICE=GPU", build], env={"ALBERT_MIN_DEVICE": "GPU"})
    add("28e", "ALBERT_MIN_DEVICE=tpu evaluate", evaluate(SST2_SMALL), expect="usage",
        names=["ALBERT_MIN_DEVICE=tpu"], env={"ALBERT_MIN_DEVICE": "tpu"})
    add("28f", "evaluate --device tpu", evaluate(SST2_SMALL, "--device", "tpu"), expect="usage",
        names=["--device", "tpu"])
    # Mixed precision: a setting this CPU cannot run, and flags that would do nothing.
    add("28g", "train --amp O2 --amp-dtype bfloat16 (no bfloat16 CPU kernels)",
        train(p("28g", "out"), "--amp", "O2", "--amp-dtype", "bfloat16"), expect="error",
        names=["--amp-dtype bfloat16", build], check=ends_listing(p("28g", mkdir=True), []))
    add("28h", "train --amp-dtype float16 without --amp", train(p("28h", "out"), "--amp-dtype", "float16"),
        expect="usage", names=["--amp-dtype", "--amp O0"], check=ends_listing(p("28h", mkdir=True), []))
    add("28i", "train --amp O1 --amp-dtype bfloat16 --loss-scale 64",
        train(p("28i", "out"), "--amp", "O1", "--amp-dtype", "bfloat16", "--loss-scale", "64"),
        expect="usage", names=["--loss-scale", "bfloat16"], check=ends_listing(p("28i", mkdir=True), []))
    add("43.4a", "train --amp bf16 --amp-dtype float16 (bf16 GEMMs take no dtype)",
        train(p("43.4a", "out"), "--amp", "bf16", "--amp-dtype", "float16"),
        expect="usage", names=["--amp-dtype", "--amp bf16"], check=ends_listing(p("43.4a", mkdir=True), []))
    add("43.4b", "ALBERT_MIN_KERNELS=off train --amp bf16 (bf16 GEMMs are the kernels')",
        train(p("43.4b", "out"), "--amp", "bf16"), env={"ALBERT_MIN_KERNELS": "off"}, expect="error",
        names=["--amp bf16", "compiled kernels"], check=ends_listing(p("43.4b", mkdir=True), []))


# ------------------------------------------------------------------ issue 36 (part B): damaged files, long texts
NER_TAGS = {"0": "O", "1": "I-PER", "2": "I-LOC", "3": "I-ORG", "4": "I-MISC"}
PIPELINE = """import sys
sys.path.insert(0, {root!r})
from albert_min import pipeline
from albert_min.common.errors import AlbertMinError
model, item, options = sys.argv[1], eval(sys.argv[2]), eval(sys.argv[3])
try:
    result = pipeline(model, **options)(item)
except AlbertMinError as err:      # as a user's script reports the pipeline's errors
    sys.exit(f"error: {{err}}")
if isinstance(item, str) and len(item) > 1000:
    print(f"{{len(result)}} entities in {{len(item)}} characters; the last ends at character {{result[-1]['end']}}")
else:
    print(result)
"""


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


def task_models():
    """The converted fixtures tiny_qa, tiny_multiple_choice and tiny_token_cls (tag names in id2label),
    with a SentencePiece model of their 120-piece vocabulary trained on tests/helpers/task_files' text."""
    from helpers.task_files import CONLL, CONTEXT_1, CONTEXT_2, CONTEXT_3, RACE_FILES
    from tokenizer import train_sentencepiece
    text = [CONTEXT_1, CONTEXT_2, CONTEXT_3] + [w for d in RACE_FILES.values() for q in d["options"] for w in q]
    text += [line.split()[0] for line in CONLL.splitlines() if line.strip()]
    spiece = train_sentencepiece(text * 3, p("36", "spiece", "spiece"), vocab_size=100)
    models = {}
    for fixture in ("tiny_qa", "tiny_multiple_choice", "tiny_token_cls"):
        models[fixture] = cv.convert(os.path.join(FIXTURES, fixture, "model.safetensors"), p("36", "models", fixture),
                                     tokenizer=spiece)["dst"]
    config = os.path.join(models["tiny_token_cls"], "config.json")
    edit_json(config, id2label=NER_TAGS, label2id={v: int(k) for k, v in NER_TAGS.items()})
    return models


def replaced_alone(path):
    """``path`` then holds other bytes, and is all its folder holds with its record (no temporary left)."""
    before = open(path, "rb").read()

    def check():
        changed, listed = open(path, "rb").read() != before, sorted(os.listdir(os.path.dirname(path)))
        name = os.path.basename(path)
        return changed and listed == [f".{name}{MANIFEST_FILE}", name], \
            f"{os.path.basename(path)} {'replaced' if changed else 'NOT replaced'}; its folder lists {listed}"
    return check


def issue_36_damaged_and_long(add, train, evaluate):
    from albert_min.model.kernels import build
    from albert_min.tasks.conll import writing as conll_writing
    from albert_min.tasks import file_io
    from helpers.task_files import CONLL, write_conll, write_race, write_squad
    # 36.1: convert read an albert_min folder's model.safetensors as a public checkpoint (a flipped bit laundered).
    st = p("36.1", "m")
    cv.convert(os.path.join(FIXTURES, "tiny_sst2_hf"), st, weights_format="safetensors")
    raw = bytearray(open(os.path.join(st, "model.safetensors"), "rb").read())
    raw[-3] ^= 0x01
    write(os.path.join(st, "model.safetensors"), bytes(raw))
    add("36.1", "convert a --format safetensors folder with one flipped bit in model.safetensors",
        ["convert", st, p("36.1", "out")], names=[st + "/model.safetensors", "sha256"],
        check=ends_listing(p("36.1"), ["m"]))
    # 36.11: a truncated cached kernel library (SIGBUS) beside a killed build's temporary.
    cache = p("36.11", "cache", mkdir=True)
    library = build.library_path(cache)
    good = open(library, "rb").read()
    write(library, good[:len(good) // 2])
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    write(os.path.join(os.path.dirname(library), f".{build.LIBRARY}.tmp-{int(dead.stdout)}-killed"), b"half")

    def library_rebuilt():
        listed = sorted(os.listdir(os.path.dirname(library)))
        ok = listed == [build.LIBRARY, build.LIBRARY + build.RECORD_SUFFIX] and open(library, "rb").read() == good
        return ok, f"the kernels' folder lists {listed}; the library is {'whole again' if ok else 'NOT whole'}"
    add("36.11", "train with a cached albert_kernels.so cut to half its size, beside a killed build's temporary",
        train(p("36.11", "out")), expect="ok", env={"ALBERT_MIN_CACHE": cache}, stderr=True,
        lines=("albert_min: kernels",), check=library_rebuilt)
    # evaluate.py --force: the tasks' own prediction files (an earlier run's, in albert_min's layout) and others'.
    models = task_models()
    inputs = pathlib.Path(p("36.f", mkdir=True))
    data = {"squad": write_squad(inputs), "race": write_race(inputs),
            "conll": write_conll(inputs, CONLL.replace("B-LOC", "I-LOC"))}
    squad_flags = ["--doc-stride", "16", "--max-query-length", "16"]
    for task, model, name, earlier, extra in (
            ("squad", "tiny_qa", "predictions.json",
             lambda f: file_io.write_json(f, {"q1": "an earlier answer"}, record=True), squad_flags),
            ("race", "tiny_multiple_choice", "race.json",
             lambda f: file_io.write_json(f, {"1.txt": ["A", "B"]}, record=True), []),
            ("conll", "tiny_token_cls", "columns.txt",
             lambda f: conll_writing.write_columns(f, [(["Bonn"], ["I-LOC"], ["O"])]), [])):
        ours, theirs = p(f"36.f{task}", "ours", name), p(f"36.f{task}", "theirs", name)
        earlier(ours)
        dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
        write(p(f"36.f{task}", "ours", f".{name}.tmp-{int(dead.stdout)}-killed"), b"half")   # a killed writer's
        write(theirs, json.dumps({"q1": "their answer"}, indent=4) + "\n" if name.endswith(".json")
              else "Bonn\tI-LOC\tO\n\n")
        args = ["evaluate.py", "--model", models[model], "--data", data[task], "--task", task, "--quiet", *extra]
        add(f"36.f{task}", f"evaluate --force onto the {task} predictions an earlier run wrote (+ a killed writer's "
            "temporary)", args + ["--output", ours, "--force"], expect="ok", lines=("predictions:",),
            check=replaced_alone(ours))
        add(f"36.f{task}x", f"evaluate --force onto a {task} predictions file another tool wrote",
            args + ["--output", theirs, "--force"], names=[theirs, "not a predictions file evaluate.py wrote"],
            check=intact(os.path.dirname(theirs)))
    # An unusable $ALBERT_MIN_CACHE: MindSpore printed 9 raw [ERROR] lines.
    a_file = write(p("36.c", "a_file"), "not a folder")
    add("36.c", "evaluate with $ALBERT_MIN_CACHE below a regular file", evaluate(SST2_SMALL), expect="ok",
        env={"ALBERT_MIN_CACHE": os.path.join(a_file, "cache")}, stderr=True, lines=("albert_min:", "[ERROR]"),
        check=intact(p("36.c")))
    # 36.5: the NER pipeline tagged the first max_length pieces of a long text only; lone surrogates.
    ner, qa = models["tiny_token_cls"], models["tiny_qa"]
    script = write(p("36", "call_pipeline.py"), PIPELINE.format(root=ROOT))   # MODEL ITEM OPTIONS (Python literals)
    add("36.5", "NER pipeline(max_length=16) on a 64,000-character text",
        ["python", script, ner, "' '.join(['Peter Blackburn went to Paris .'] * 2000)", "{'max_length': 16}"],
        expect="ok", lines=("",), cost=True)
    for id, model, item, options in (("36.s1", ner, "'Peter \\ud800 Blackburn'", "{}"),
                                     ("36.s2", qa, "[{'question': 'Where?', 'context': 'Bonn \\ud800'}]",
                                      "{'doc_stride': 16, 'max_query_length': 16}")):
        add(id, f"{'NER' if model == ner else 'QA'} pipeline on a text with a lone surrogate",
            ["python", script, model, item, options], names=["not valid Unicode: lone surrogate U+D800", "input"])


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


# ------------------------------------------------------------------ issue 36: SQuAD, RACE and CoNLL inputs (part A)
TASK_FLAGS = [*TINY_MODEL, "--batch-size", "4", "--max-steps", "2", "--pynative"]
SQUAD_FLAGS = ["--task", "squad", "--max-length", "32", "--doc-stride", "8", "--max-query-length", "12"]


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


def squad_file(path, edit=None, raw=None):
    """tests/helpers/task_files' five-question SQuAD v1.1 file (``edit(data)`` changes it first), or ``raw``."""
    from helpers.task_files import squad_json
    data = squad_json()
    if edit:
        edit(data)
    return write(path, raw if raw is not None else json.dumps(data))


def race_split(folder, articles):
    """A RACE split with high/1.txt, high/2.txt ... holding one question on each article."""
    for n, article in enumerate(articles, start=1):
        write(os.path.join(folder, "high", f"{n}.txt"), json.dumps({
            "article": article, "questions": ["The cat sat on the _ ."], "options": [["red", "blue", "old", "big"]],
            "answers": ["A"]}))
    return folder


def task_run(parts, argv):
    """A model folder (+ .state) train.py wrote, for the cases that need one (trained once)."""
    out = p(*parts)
    result = run(["train.py", *argv, "--output", out])
    assert result.code == 0, result.err[-3000:]
    return out


def issue_36_task_inputs(add):
    from test_task_inputs import CONTEXT
    qas = lambda d: d["data"][0]["paragraphs"][0]["qas"]   # noqa: E731 - article 1's first paragraph
    # SQuAD: q2's answer_start points elsewhere, q3's answer is empty; trained on articles 1-2 as a range.
    labels = squad_file(p("36s", "data", "s.json"), lambda d: (qas(d)[1]["answers"][0].update(answer_start=0),
                                                       qas(d)[1]["answers"][0].update(text="Broncos"),
                                                       qas(d)[0]["answers"][0].update(text="", answer_start=3)))
    squad = task_run(("36s", "out"), ["--train", labels + ":1-2", "--dev", labels, *TASK_FLAGS, *SQUAD_FLAGS])
    add("36.3", "train SQuAD: q2's answer_start points at other text, q1's answer is \"\" (training labels)",
        ["train.py", "--train", labels + ":1-2", "--output", p("36.3", "out"), *TASK_FLAGS, *SQUAD_FLAGS],
        expect="ok", lines=("note:", "done"))
    add("36.8", "evaluate SQuAD with an empty answer text", ["evaluate.py", "--model", squad, "--data", labels,
        "--quiet", "--pynative"], expect="ok", lines=("f1",))
    # 2. --resume after an input changed: a context of a SQuAD range's file, a gold answer of a RACE file.
    changed = copy(os.path.dirname(labels), "36.2a", "data")
    resumed = copy(squad, "36.2a", "out")
    shutil.copytree(squad + ".state", resumed + ".state")
    edit_state_paths(resumed + ".state", os.path.dirname(labels), changed)
    squad_file(os.path.join(changed, "s.json"), raw=open(labels).read().replace("Paris is", "Lyon is"))
    add("36.2a", "train --resume after a context changed in FILE.json of --train FILE.json:1-2",
        ["train.py", "--output", resumed, "--resume", "--max-steps", "3"], names=[os.path.join(changed, "s.json")])
    long_article = " ".join(["The old cat sat on the red mat near the door ."] * 100)          # 4.6 kB
    split = race_split(p("36r", "RACE", "train"), [long_article, "A small boat left the harbour at dawn ."])
    race = task_run(("36r", "out"), ["--task", "race", "--train", split, *TASK_FLAGS, "--max-length", "32"])
    add("36.m1", "train RACE from scratch: an article of 4.6 kB (over SentencePiece's 4,192-byte sentence limit)",
        ["train.py", "--task", "race", "--train", split, "--output", p("36.m1", "out"), *TASK_FLAGS,
         "--max-length", "32"], expect="ok", lines=("trained a", "done"))
    race_copy = copy(p("36r", "RACE"), "36.2b", "RACE")
    resumed = copy(race, "36.2b", "out")
    shutil.copytree(race + ".state", resumed + ".state")
    edit_state_paths(resumed + ".state", p("36r", "RACE"), race_copy)
    gold = os.path.join(race_copy, "train", "high", "2.txt")
    edit_json(gold, answers=["D"])
    add("36.2b", "train --resume after a gold answer of a RACE file changed", ["train.py", "--output", resumed,
        "--resume", "--max-steps", "3"], names=[gold])
    # 4, 10. A RACE folder whose file holds no question.
    empty = race_split(p("36.4", "RACE", "dev"), ["A text ."])
    edit_json(os.path.join(empty, "high", "1.txt"), questions=[], options=[], answers=[])
    add("36.4", "train RACE (--tokenizer given) on a folder without questions", ["train.py", "--task", "race", "--train",
        empty, "--output", p("36.4", "out"), *TASK_FLAGS, "--max-length", "32",
        "--tokenizer", os.path.join(FIXTURES, "spiece_sst2_2k.model")], names=[empty, "no questions"],
        check=ends_listing(p("36.4"), ["RACE"]))
    add("36.10", "evaluate RACE on a folder without questions", ["evaluate.py", "--model", race, "--data", empty,
        "--quiet"], names=[empty, "no questions"])
    # 6. Windows over a long context (quadratic before: 116 s for 100 kB in the QA pipeline).
    long_context = " ".join([CONTEXT] * 1700)                                            # 105 kB
    big = squad_file(p("36.6", "s.json"), lambda d: d["data"][0]["paragraphs"][0].update(
        context=long_context, qas=[{"id": "q1", "question": "Who won?",
                                    "answers": [{"text": "Broncos", "answer_start": long_context.index("Broncos")}]}]))
    add("36.6", "evaluate SQuAD, one context of 105 kB (11,500 windows of 32 pieces, stride 8)", ["evaluate.py",
        "--model", squad, "--data", big, "--quiet"], expect="ok", lines=("f1", "seconds"), cost=True)
    # Issue 44, item 6: memory on one long context (0.5 GB more per MB of context before: 949 MB at 1 MB).
    huge_context = " ".join([CONTEXT] * (1_000_000 // (len(CONTEXT) + 1)))                # 1 MB
    huge = squad_file(p("44.6", "s.json"), lambda d: d["data"][0]["paragraphs"][0].update(
        context=huge_context, qas=[{"id": "q1", "question": "Who won?",
                                    "answers": [{"text": "Broncos", "answer_start": huge_context.index("Broncos")}]}]))
    add("44.6", "evaluate SQuAD, one context of 1 MB (windows of 32 pieces, stride 8): peak memory",
        ["evaluate.py", "--model", squad, "--data", huge, "--quiet"], expect="ok", lines=("f1", "seconds"), cost=True)
    # 7, 9. JSON Python cannot read; lone surrogates; a RACE file name that is not UTF-8; a FIFO named *.txt.
    for id, what, raw in (("36.7a", "nested 100,000 deep", "[" * 100000),
                          ("36.7b", "an integer of 5,000 digits on line 2", '{"version": "1.1",\n "data": ' + "9" * 5000 +
                           "}")):
        path = squad_file(p(id, "s.json"), raw=raw)
        add(id, f"evaluate SQuAD: JSON {what}", ["evaluate.py", "--model", squad, "--data", path, "--quiet"],
            names=[path + ":"])
    surrogate = squad_file(p("36.9a", "s.json"), lambda d: qas(d)[1].update(question="How long did it \ud800 sleep?"))
    add("36.9a", "evaluate SQuAD: a question holding the JSON escape \\ud800 (a lone surrogate)",
        ["evaluate.py", "--model", squad, "--data", surrogate, "--quiet"], names=[surrogate, "question q2"])
    odd = race_split(p("36.9b", "RACE", "dev"), ["The cat is old ."])
    shutil.copy(os.path.join(os.fsencode(odd), b"high", b"1.txt"), os.path.join(os.fsencode(odd), b"high", b"\xff2.txt"))
    add("36.9b", "evaluate RACE: a file named b'\\xff2.txt' (not UTF-8)", ["evaluate.py", "--model", race, "--data",
        odd, "--quiet"], names=[os.path.join(odd, "high"), "xff2.txt"])
    fifo = race_split(p("36.12", "RACE", "dev"), ["The cat is old ."])
    os.mkfifo(os.path.join(fifo, "high", "2.txt"))
    add("36.12", "evaluate RACE: a FIFO named high/2.txt beside high/1.txt", ["evaluate.py", "--model", race,
        "--data", fifo, "--quiet"], expect="ok", lines=("accuracy ",))
    # Messages: a v1.1 question without answers, a byte-order mark, CR-only CoNLL, zero-width text.
    unanswered = squad_file(p("36.m2", "s.json"), lambda d: qas(d)[1].update(answers=[]))
    add("36.m2", "evaluate SQuAD v1.1: a question without answers", ["evaluate.py", "--model", squad, "--data",
        unanswered, "--quiet", "--pynative"], names=[unanswered, "question q2", "--task squad_v2"])
    bom = squad_file(p("36.m3", "s.json"), raw="\ufeff" + open(labels).read())
    add("36.m3", "evaluate SQuAD: the JSON starts with a UTF-8 byte-order mark", ["evaluate.py", "--model", squad,
        "--data", bom, "--quiet", "--pynative"], expect="ok", lines=("f1",))
    from helpers.task_files import CONLL
    cr = write(p("36.m4", "eng.train"), CONLL.replace("\n", "\r"))
    add("36.m4", "train CoNLL on a file with CR-only line ends", ["train.py", "--train", cr, "--output",
        p("36.m4", "out"), *TASK_FLAGS, "--tokenizer", os.path.join(FIXTURES, "spiece_sst2_2k.model")],
        expect="ok", lines=("task conll", "done"))
    zero = race_split(p("36.m5", "RACE", "train"), ["\u200b\u200c"])
    edit_json(os.path.join(zero, "high", "1.txt"), questions=["\u200b"], options=[["\u200b"] * 4])
    add("36.m5", "train RACE from scratch on text of zero-width characters only", ["train.py", "--task", "race",
        "--train", zero, "--output", p("36.m5", "out"), *TASK_FLAGS, "--max-length", "32"],
        names=[zero, "zero-width"], check=ends_listing(p("36.m5"), ["RACE"]))


def edit_state_paths(state_dir, old, new):
    """A copied training state as if its run had read the inputs copied from ``old`` to ``new``."""
    path = os.path.join(state_dir, "state.json")
    with open(path) as f:
        text = f.read()
    write(path, text.replace(json.dumps(old)[1:-1], json.dumps(new)[1:-1]))


# ------------------------------------------------------------------ issue 24: outputs (cases 1, 3, 4, 6, 8, 12, 13)
def sparse_mindir(path, ours, size=3 * 10 ** 9):
    """A ``size``-byte sparse file: a MindIR whose graph field is all holes, with albert_min's metadata
    after it (``ours``), or just holes (not a MindIR)."""
    def varint(n):
        out = b""
        while n >= 0x80:
            out, n = out + bytes([n & 0x7F | 0x80]), n >> 7
        return out + bytes([n])
    with open(path, "wb") as f:
        if ours:
            entry = b"\x0a\x08producer\x12\x0aalbert_min"
            f.write(b"\x3a" + varint(size))
            f.seek(size, os.SEEK_CUR)
            f.write(b"\x72" + varint(len(entry)) + entry)
        else:
            f.truncate(size)
    return path


def exists_all(*paths):
    def check():
        there = [os.path.lexists(q) for q in paths]
        return all(there), f"{', '.join(os.path.basename(q) for q in paths)}: {'all still there' if all(there) else 'GONE'}"
    return check


def modes_follow_umask(folder):
    umask = os.umask(0o022)
    os.umask(umask)

    def check():
        modes = {n: oct(os.stat(os.path.join(folder, n)).st_mode & 0o777) for n in sorted(os.listdir(folder))}
        ok = all(m == oct(0o666 & ~umask) for m in modes.values())
        return ok, f"umask {umask:03o}: " + ", ".join(f"{n} {m[2:]}" for n, m in modes.items())
    return check


def winner_intact(holder, dst, go):
    """The process holding ``dst`` still has its temporary folder; told to go on, it finishes the folder."""
    def check():
        parent = os.path.dirname(dst)
        temporary = [n for n in os.listdir(parent) if n.startswith(f".{os.path.basename(dst)}.tmp-{holder.pid}-")]
        intact_tmp = len(temporary) == 1 and os.path.isfile(os.path.join(parent, temporary[0], "model.ckpt"))
        write(go, "")
        code = holder.wait(timeout=300)
        ok = intact_tmp and code == 0 and os.path.isfile(os.path.join(dst, "model.ckpt"))
        return ok, (f"the holder's temporary folder was {'intact' if intact_tmp else 'TOUCHED'}; then it exited {code} "
                    f"and {os.path.basename(dst)}/ has {sorted(os.listdir(dst)) if os.path.isdir(dst) else 'nothing'}")
    return check


def issue_24_outputs(add, evaluate, ev):
    from test_safe_output import SLOW_CONVERT
    data = dev_slice(p("24.1", "dev16.tsv"), 16)
    os.symlink(data, p("24.1", "link.tsv"))
    notes = write(p("24.1", "notes.txt"), "mine")
    add("24.1a", "evaluate --output = its own --data, --force", ["evaluate.py", "--model", SST2_SMALL, "--data", data,
        "--quiet", "--output", data, "--force"], names=[data], check=intact(p("24.1")))
    add("24.1b", "evaluate --output = a symlink to its --data, --force", ["evaluate.py", "--model", SST2_SMALL,
        "--data", data, "--quiet", "--output", p("24.1", "link.tsv"), "--force"], names=[data], check=intact(p("24.1")))
    add("24.1c", "evaluate --output = a user's notes.txt, --force", evaluate(SST2_SMALL, "--output", notes, "--force"),
        names=[notes], check=intact(p("24.1")))
    add("24.1d", "evaluate --output = a user's notes.txt, no --force", evaluate(SST2_SMALL, "--output", notes),
        names=[notes, "--force"], check=intact(p("24.1")))
    # 3. A real convert holds DST (stopped inside its write) while a second one is started on it.
    dst, writing, go = p("24.3", "out", "dst"), p("24.3", "writing"), p("24.3", "go")
    holder = subprocess.Popen([sys.executable, "-c", SLOW_CONVERT.format(root=ROOT, writing=writing, go=go, src=PRE,
                                                                         dst=dst)],
                              env=ENV, stdout=subprocess.DEVNULL)
    BACKGROUND.append(holder)
    while not os.path.exists(writing) and holder.poll() is None:
        time.sleep(0.1)
    add("24.3", "convert --force into a DST another convert is writing", ["convert", PRE, dst, "--force"],
        names=[f"{dst}: in use by another albert_min process (pid {holder.pid})"], check=winner_intact(holder, dst, go))
    # 4. Folders, symlinks and fifos the user put in a folder albert_min wrote.
    model = p("24.4", "model")
    cv.convert(PRE, model)
    os.makedirs(p("24.4", "userdata", mkdir=True), exist_ok=True)
    os.symlink(p("24.4", "userdata"), os.path.join(model, "my_data_link"))
    os.mkdir(os.path.join(model, "my_empty_results_dir"))
    os.mkfifo(os.path.join(model, "pipe"))
    add("24.4", "convert --force onto a folder it wrote + my_data_link -> userdata/, my_empty_results_dir/, a fifo",
        ["convert", PRE, model, "--force"], names=["my_data_link (symlink)", "my_empty_results_dir/", "pipe (fifo)"],
        check=exists_all(*(os.path.join(model, n) for n in ("my_data_link", "my_empty_results_dir", "pipe"))))
    # 6. export --force onto 3 GB sparse targets: only the field headers are read.
    ours, zeros = sparse_mindir(p("24.6a", "big.mindir"), True), sparse_mindir(p("24.6b", "zeros.mindir"), False)
    add("24.6a", "export --force onto a 3 GB sparse MindIR whose metadata names albert_min",
        ["export", SST2_SMALL, ours, "--force"], expect="ok", cost=True, lines=("wrote",))
    add("24.6b", "export --force onto a 3 GB sparse file of zeros", ["export", SST2_SMALL, zeros, "--force"],
        names=[zeros, "not a MindIR file albert_min wrote"], cost=True)
    # 8. Names MindSpore's file-name regex refuses.
    for id, name in (("24.8a", "sp ace/x.mindir"), ("24.8b", "é/x.mindir")):
        add(id, f"export to {name!r}", ["export", SST2_SMALL, p(id, name), "--batch", "1", "--seq", "8"],
            expect="ok", lines=("wrote",), check=ends_listing(os.path.dirname(p(id, name)), ["x.mindir"]))
    # 12. The user's umask, whatever MindSpore's writers chmod.
    add("24.12", "convert: the modes of the files written", ["convert", PRE, p("24.12", "out")], expect="ok",
        lines=("converted",), check=modes_follow_umask(p("24.12", "out")))
    # 13. One rule for parent folders: created for every output.
    a, b, c = (p(id, mkdir=True) for id in ("24.13a", "24.13b", "24.13c"))   # new/ below each is not made here
    add("24.13a", "evaluate --output into missing folders", evaluate(SST2_SMALL, "--output", os.path.join(
        a, "new", "dir", "preds.tsv")), expect="ok", lines=("accuracy",), check=ends_listing(a, ["new"]))
    add("24.13b", "export into missing folders", ["export", SST2_SMALL, os.path.join(b, "new", "x.mindir"), "--batch",
        "1", "--seq", "8"], expect="ok", lines=("wrote",), check=ends_listing(os.path.join(b, "new"), ["x.mindir"]))
    add("24.13c", "export into missing folders, failing after they were made: they are removed again",
        ["export", SST2_SMALL, os.path.join(c, "new", "x.mindir"), "--seq", "100000"], names=["--seq 100000"],
        check=ends_listing(c, []))
    # Issue 27, friction 10: a pre-trained backbone exported as a classifier.
    add("24.27", "export weights/pretrained-small (a pre-trained backbone) without --backbone",
        ["export", os.path.join(ROOT, "weights", "pretrained-small"), p("24.27", "x.mindir")], names=["--backbone"],
        check=ends_listing(p("24.27"), []))


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


def ends_listing(folder, names):
    def check():
        listed = sorted(os.listdir(folder)) if os.path.isdir(folder) else None
        return listed == sorted(names), f"{folder} lists {listed}"
    return check


# ------------------------------------------------------------------ running and reporting
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


def judge(row, result):
    """(what FAILS, notes, the line(s) shown)."""
    lines = [x for x in (result.err if result.code or row.stderr else result.out or result.err).splitlines()
             if x.strip()]
    picked = [x for x in lines if x.startswith(tuple(row.lines))] if row.lines and not result.code else []
    shown = " / ".join(picked) or (lines[-1] if lines else "(nothing)")
    wanted = {"ok": {0}, "error": {1}, "usage": {2}, "error or same": {0, 1}}[row.expect]
    problems = [f"exit {result.code}, expected {' or '.join(map(str, sorted(wanted)))}"] * (result.code not in wanted)
    problems += ["traceback"] * ("Traceback" in result.err)
    problems += [f"the error does not name {n}" for n in row.names if result.code and n not in result.err]
    notes = [row.note] if row.note else []
    if row.check:
        ok, text = row.check()
        (notes if ok else problems).append(text)
    if row.cost:
        notes.append(f"{result.wall:.1f} s wall, peak RSS {result.rss_mb:.0f} MB")
    return problems, notes, shown


def short(text):
    return (str(text).replace(" ".join(TRAIN_FLAGS), "[tiny]").replace(" ".join(TINY_MODEL), "[tiny]")
            .replace(T, "$T").replace(ROOT + os.sep, "").replace("|", "\\|").replace("\n", " "))


def code(text):
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def main():
    only, rows, failing = tuple(sys.argv[1:]), [], []
    try:
        for row in cases():
            if only and not row.id.startswith(only):
                continue
            result = run(row.argv, row.cwd, row.env)
            problems, notes, shown = judge(row, result)
            argv = [f"-m albert_min.{row.argv[0]}" if row.argv[0] in ("convert", "export", "fingerprint")
                    else row.argv[0],
                    *(f'"{a}"' if row.argv[0] == "python" and " " in a else a for a in row.argv[1:])]
            command = ("cd " + row.cwd + " && " if row.cwd != ROOT else "") + " ".join(
                [f"{k}={v}" for k, v in (row.env or {}).items()] + argv)
            text = code(short(shown)) + "".join(f" — {short(n)}" for n in notes)
            if problems:
                failing.append(row.id)
                text = f"**FAILS** ({short('; '.join(problems))}): {text}"
            rows.append(f"| {row.id} {short(row.what)} | {code(short(command))} | {result.code} | {text} |")
            print(rows[-1], flush=True)
    finally:
        for proc in BACKGROUND:
            proc.kill()
        for folder in MOUNTS:
            subprocess.run(["umount", folder], capture_output=True)
        for folder, _, _ in os.walk(T):
            os.chmod(folder, 0o755)
        shutil.rmtree(T, ignore_errors=True)
    if not only:
        with open(os.path.join(ROOT, "docs", "error_cases.md"), "w", encoding="utf-8") as f:
            f.write("# What the tools print for hostile inputs: unsafe output paths, interrupted saves, bad flags, corrupt or malicious files\n\n"
                    "Generated by `python3 docs/make_error_cases.py` (do not edit by hand). Each case runs the real "
                    "command line in a subprocess, on inputs built with the writers in tests/ in a temporary folder "
                    "(`$T`). `[tiny]` is tests/scripts/test_scripts.py's TINY_MODEL flags (with `--tokenizer "
                    "tests/fixtures/spiece_sst2_2k.model --epochs 1 --batch-size 16` for train.py); `dev16.tsv` "
                    "and `dev32.tsv` are the first rows of ../shared/data/sst2/dev.tsv. The last column is the "
                    "last line printed (stderr on an error, else stdout), then what was checked after the run.\n\n"
                    f"{len(rows) - len(failing)} of {len(rows)} cases behave as asked "
                    "(one error line naming the file, item or flag, or a correct result)"
                    + (f"; **FAILS**: {', '.join(failing)}" if failing else "") + ".\n\n"
                    "| case | command (shortened) | exit | what it prints |\n|---|---|---|---|\n"
                    + "\n".join(rows) + "\n")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
