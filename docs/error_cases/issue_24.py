"""Issue 24's cases: outputs (a folder or file a command writes: its own input, a sparse or foreign file, a race, umask)."""

import os
import subprocess
import sys
import time

# error_cases.inputs first: it puts the repository and tests/ on sys.path
from error_cases.inputs import BACKGROUND, dev_slice, ends_listing, ENV, intact, p, PRE, ROOT, SST2_SMALL, write
from albert_min import convert as cv


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
