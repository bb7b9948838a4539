"""Reproduce hostile inputs against the real command line; writes docs/error_cases.md.

    python3 docs/make_error_cases.py          # every case (about 2 minutes on 2 cores), writes the table
    python3 docs/make_error_cases.py 10 13a   # only the cases whose id starts so: prints rows, writes nothing

The cases are in docs/error_cases/: inputs.py (the paths, the writers of inputs, the checks, ``run``)
and one module per issue; this script holds issue 7's cases, calls the others in order, judges and
reports. The inputs are built in one temporary folder (deleted at the end) with the writers in
tests/; each command runs in a subprocess. A row is marked FAILS when the tool does not
do what is asked (one error line naming the culprit, or a correct result): a traceback, the wrong exit code (0 where an error was due), a
message not naming the culprit, or files deleted, changed or left behind.
"""

import json
import os
import shutil
import subprocess
import sys
import zipfile
from types import SimpleNamespace

import numpy as np

# The cases live in docs/error_cases/, one module per issue (imported as the package error_cases: this
# script's folder is on sys.path); error_cases.inputs first: it puts the repository and tests/ on sys.path.
from error_cases.inputs import (BACKGROUND, copy, crash_swap, dev_slice, edit_json, ends_as, FIXTURES, intact,
                                MOUNTS, p, PRE, ROOT, run, same_weights, source, SST2_SMALL, T, TRAIN_FLAGS, trained,
                                user_files, write)
from error_cases.issue_24 import issue_24_outputs
from error_cases.issue_28 import issue_28_devices
from error_cases.issue_36 import issue_36_damaged_and_long, issue_36_task_inputs
from error_cases.issue_44 import (issue_44_cache_environment_read_only, issue_44_glue_files, issue_44_kernels,
                                  issue_44_records)
from error_cases.issue_45_46 import issue_45_one_error_line, issue_46_convert_and_vocabulary, issue_46_newcomer
from albert_min import convert as cv
from albert_min.checkpoints import formats
from albert_min.common.safe_output import MANIFEST_FILE
from albert_min.fingerprint import main as fingerprint
from albert_min.model.folder import read_checkpoint, write_checkpoint
from helpers.checkpoint_writers import opcode, torch_pickle, write_raw_safetensors, write_safetensors, write_torch_zip
from helpers.tiny_runs import TINY_MODEL
from test_safety import KILL_BETWEEN_RENAMES


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


# ------------------------------------------------------------------ judging and reporting
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
