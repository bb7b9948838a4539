"""Nothing lost, round two (issue 24, cases 1, 3, 4, 8, 12, 13): the rules of albert_min.common.safe_output for
every file and folder albert_min writes, on the real command line where it matters."""

import contextlib
import errno
import json
import os
import shutil
import stat
import subprocess
import sys
import time

import pytest

from helpers.paths import FIXTURES, ROOT
from helpers.tiny_runs import TINY_MODEL, sentiment_tsv

import evaluate  # noqa: E402
import train  # noqa: E402
from albert_min import convert as cv
from albert_min.model.folder import save_model_dir
from albert_min.common.checksums import sha256_of
from albert_min.model.heads import AlbertForSequenceClassification
from albert_min.common.safe_output import (MANIFEST_FILE, OutputError, OutputInUse, atomic_directory, atomic_file,
                                           check_replaceable, output_lock, read_manifest, recover_directory)
from helpers.tiny_runs import tiny_config

HF_SST2 = os.path.join(FIXTURES, "tiny_sst2_hf")
DEV64 = os.path.join(HF_SST2, "dev64.tsv")
COMMITTED = os.path.join(ROOT, "weights", "sst2-small")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("models") / "cls")
    cv.convert(HF_SST2, out)
    return out


def run_evaluate(model_dir, output, *flags, data=DEV64):
    """evaluate.py in this process; returns its one-line error, or None when it succeeded."""
    try:
        evaluate.main(["--model", model_dir, "--data", data, "--output", str(output), "--quiet", *flags])
    except SystemExit as exit_:
        return str(exit_.code)
    return None


# ------------------------------------------------------------- case 1: files
def test_evaluate_never_replaces_its_own_input(model_dir, tmp_path):
    data = tmp_path / "dev.tsv"
    shutil.copy(DEV64, data)
    before = data.read_bytes()
    (tmp_path / "link.tsv").symlink_to(data)
    os.link(data, tmp_path / "hard.tsv")
    for output, same in ((data, ""), (tmp_path / "link.tsv", f" (the same file as {data})"),
                         (tmp_path / "hard.tsv", f" (the same file as {data})")):
        for flags in ((), ("--force",)):
            assert run_evaluate(model_dir, output, *flags, data=str(data)) == \
                f"error: {output}: is an input of this run{same}; refusing to replace it"
    assert data.read_bytes() == before and (tmp_path / "hard.tsv").read_bytes() == before
    inside = os.path.join(model_dir, "preds.tsv")
    assert run_evaluate(model_dir, inside) == \
        f"error: {inside}: lies inside {model_dir}, an input of this run; write it elsewhere"


def test_evaluate_replaces_only_predictions_and_only_with_force(model_dir, tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    kind = "a predictions file evaluate.py wrote"
    assert run_evaluate(model_dir, notes) == f"error: {notes} already exists (--force replaces only {kind})"
    assert run_evaluate(model_dir, notes, "--force") == \
        f"error: {notes}: not {kind}: no record of it ({tmp_path / '.notes.txt.albert_min.json'}, which albert_min " \
        "writes beside each such file with its sha256); refusing to replace it - remove it yourself or choose " \
        "another path"
    assert notes.read_text() == "mine"
    preds = tmp_path / "preds.tsv"
    assert run_evaluate(model_dir, preds) is None
    first = preds.read_text()
    assert first.startswith("index\tprediction\n") and len(first.splitlines()) == 65
    assert run_evaluate(model_dir, preds).startswith(f"error: {preds} already exists")
    inode = os.stat(preds).st_ino
    assert run_evaluate(model_dir, preds, "--force") is None   # its own earlier output, unchanged: replaced
    assert preds.read_text() == first and os.stat(preds).st_ino != inode
    record = tmp_path / ".preds.tsv.albert_min.json"
    assert json.loads(record.read_text())["sha256"] == [sha256_of(str(preds))]
    assert sorted(os.listdir(tmp_path)) == [record.name, "notes.txt", "preds.tsv"]   # no temporary, no lock file left
    preds.write_text("index\tprediction\n0\tstale\n")   # edited since evaluate.py wrote it: the user's now
    assert run_evaluate(model_dir, preds, "--force") == \
        f"error: {preds}: changed since albert_min wrote it (its sha256 is not the one recorded in {record}); " \
        "refusing to replace it - remove it yourself or choose another path"
    assert preds.read_text() == "index\tprediction\n0\tstale\n"


def test_force_never_replaces_a_users_file_in_the_predictions_layout(model_dir, tmp_path):
    """Issue 44.5: a user's own file that begins with index<TAB>prediction was REPLACED by --force."""
    mine = tmp_path / "user_preds.tsv"
    mine.write_text("index\tprediction\n0\tmy own label\n")
    assert run_evaluate(model_dir, mine, "--force").startswith(
        f"error: {mine}: not a predictions file evaluate.py wrote: no record of it")
    assert mine.read_text() == "index\tprediction\n0\tmy own label\n" and os.listdir(tmp_path) == [mine.name]
    ours = tmp_path / "ours.tsv"                 # evaluate.py's own file, copied: the copy has no record
    assert run_evaluate(model_dir, ours) is None
    shutil.copyfile(ours, mine)
    assert run_evaluate(model_dir, mine, "--force").startswith(f"error: {mine}: not a predictions file")
    (tmp_path / ".user_preds.tsv.albert_min.json").write_text("{}")   # nor a record it did not write
    assert run_evaluate(model_dir, mine, "--force").startswith(f"error: {mine}: not a predictions file")


def test_the_record_accepts_the_old_file_until_the_new_one_is_in_place(tmp_path, monkeypatch):
    """A writer killed between writing the record and renaming the file into place leaves a file that is
    still recognised as its own: the record holds the old file's sha256 and the new one's until then."""
    path = str(tmp_path / "p.tsv")
    evaluate.write_predictions(path, [0], ["a"])
    old = sha256_of(path)
    replace = os.replace

    def killed_before_the_rename(src, dst):
        if dst == path:
            raise RuntimeError("killed")
        replace(src, dst)
    monkeypatch.setattr(os, "replace", killed_before_the_rename)
    with pytest.raises(RuntimeError, match="killed"):
        evaluate.write_predictions(path, [0], ["b"], force=True)
    monkeypatch.setattr(os, "replace", replace)
    record = json.load(open(tmp_path / ".p.tsv.albert_min.json"))
    assert sha256_of(path) == old and record["sha256"][0] == old and len(record["sha256"]) == 2
    evaluate.write_predictions(path, [0], ["c"], force=True)   # still its own: replaced
    assert open(path).read() == "index\tprediction\n0\tc\n"
    assert json.load(open(tmp_path / ".p.tsv.albert_min.json"))["sha256"] == [sha256_of(path)]


def test_atomic_file_leaves_the_old_file_on_failure(tmp_path):
    kind_ours = evaluate.predictions_kind()
    path = tmp_path / "p.tsv"
    evaluate.write_predictions(str(path), ["old"], ["x"])   # its own earlier file, which --force may replace
    assert path.read_text() == "index\tprediction\nold\tx\n"
    with pytest.raises(RuntimeError, match="writer died"):
        with atomic_file(str(path), kind_ours, force=True) as tmp:
            with open(tmp, "w") as f:
                f.write("index\tprediction\nhalf")
            raise RuntimeError("writer died")
    assert path.read_text() == "index\tprediction\nold\tx\n"
    assert sorted(os.listdir(tmp_path)) == [".p.tsv.albert_min.json", "p.tsv"]


# ------------------------------------------------------------- case 3: one writer
LOCK_HOLDER = """
import sys, time
sys.path.insert(0, {root!r})
from albert_min.common.safe_output import output_lock
try:
    with output_lock({target!r}):
        print("locked", flush=True)
        time.sleep(60)
except Exception as err:
    print(f"error: {{err}}", flush=True)
"""


def test_the_lock_is_reentrant_and_excludes_other_processes(tmp_path):
    target = str(tmp_path / "out")
    with output_lock(target):
        with output_lock(target):    # atomic_directory inside a run that holds the lock
            pass
        other = subprocess.run([sys.executable, "-c", LOCK_HOLDER.format(root=ROOT, target=target)],
                               capture_output=True, text=True, timeout=60)
        assert other.stdout.strip() == f"error: {target}: in use by another albert_min process (pid {os.getpid()})"
        with atomic_directory(target) as tmp:    # the writers take it again
            open(os.path.join(tmp, "v"), "w").close()
    assert sorted(os.listdir(tmp_path)) == ["out"]   # the lock file goes with the lock
    holder = subprocess.Popen([sys.executable, "-c", LOCK_HOLDER.format(root=ROOT, target=target)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(OutputInUse, match=f"^{target}: in use by another albert_min process "
                                              f"\\(pid {holder.pid}\\)$"):
            with output_lock(target):
                pass
    finally:
        holder.kill()
        holder.wait()
    with output_lock(target):   # the kernel dropped a killed holder's lock
        pass


SLOW_CONVERT = """
import os, sys, time
sys.path.insert(0, {root!r})
from albert_min import convert
from albert_min.model import folder as checkpoint
real_write = checkpoint.write_checkpoint

def slow_write(arrays, path):      # the winner waits, its temporary folder half-written, until the test says go
    real_write(arrays, path)
    open({writing!r}, "w").close()
    deadline = time.time() + 900   # docs/make_error_cases.py holds it while other cases run
    while not os.path.exists({go!r}) and time.time() < deadline:
        time.sleep(0.05)
checkpoint.write_checkpoint = slow_write
sys.exit(convert.main([{src!r}, {dst!r}, "--force"]))
"""


def test_two_converts_into_one_folder(tmp_path):
    """Two real processes started together: exactly one wins; the other prints one line naming the
    winner and exits 1, and nothing of the winner's is touched."""
    dst, writing, go = str(tmp_path / "out" / "dst"), str(tmp_path / "writing"), str(tmp_path / "go")
    script = SLOW_CONVERT.format(root=ROOT, writing=writing, go=go, src=HF_SST2, dst=dst)
    procs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    try:
        deadline = time.time() + 120
        while all(p.poll() is None for p in procs) and time.time() < deadline:
            time.sleep(0.05)
        loser = next(p for p in procs if p.poll() is not None)
        winner = next(p for p in procs if p is not loser)
        err = loser.stderr.read()
        assert loser.returncode == 1 and err.splitlines() == [
            f"error: {dst}: in use by another albert_min process (pid {winner.pid})"]
        while not os.path.exists(writing) and time.time() < deadline:
            time.sleep(0.05)
        temporary = [n for n in os.listdir(tmp_path / "out") if n.startswith(".dst.tmp-")]
        assert len(temporary) == 1 and temporary[0].startswith(f".dst.tmp-{winner.pid}-")
        assert os.path.isfile(tmp_path / "out" / temporary[0] / "model.ckpt")   # the winner's work is intact
        open(go, "w").close()
        assert winner.wait(timeout=120) == 0, winner.stderr.read()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert sorted(os.listdir(tmp_path / "out")) == ["dst"]
    assert read_manifest(dst)["complete"] and sorted(read_manifest(dst)["files"]) == ["config.json", "model.ckpt",
                                                                                      "spiece.model"]


def test_cleanup_never_touches_a_live_owners_temporary(tmp_path):
    target = str(tmp_path / "m")
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        working = tmp_path / f".m.tmp-{owner.pid}-abc"    # a live writer's folder, without the lock (older albert_min)
        working.mkdir()
        (working / MANIFEST_FILE).write_text(json.dumps({"written_by": "albert_min", "kind": "model",
                                                         "complete": False, "files": []}))
        just_made = tmp_path / f".m.tmp-{owner.pid}-def"  # right after its mkdtemp: empty
        just_made.mkdir()
        assert recover_directory(target) is None
        assert working.is_dir() and just_made.is_dir()
    finally:
        owner.kill()
        owner.wait()
    assert recover_directory(target) is None               # its owner is gone: now they are leftovers
    assert os.listdir(tmp_path) == []


READER_WRITER = """
import os, sys, time
sys.path.insert(0, {root!r})
from albert_min.common.safe_output import atomic_directory
for version in range(40):
    with atomic_directory({target!r}, overwrite=True) as tmp:
        for name in ("a", "b", "c"):
            with open(os.path.join(tmp, name), "w") as f:
                f.write(str(version))
            time.sleep(0.005)           # a wide window: a reader of the folder in place would see it half-written
"""


def test_readers_never_see_a_half_written_folder(tmp_path):
    target = str(tmp_path / "m")
    with atomic_directory(target) as tmp:
        for name in ("a", "b", "c"):
            open(os.path.join(tmp, name), "w").write("start")
    writer = subprocess.Popen([sys.executable, "-c", READER_WRITER.format(root=ROOT, target=target)])
    seen, half = set(), []
    while writer.poll() is None:
        try:   # one version: read through a descriptor of the folder, which a rename does not move
            fd = os.open(target, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            continue                    # between the two renames: absent, never partial
        try:
            names = sorted(os.listdir(fd))
            values = [open(name, opener=lambda p, flags: os.open(p, flags, dir_fd=fd)).read()
                      for name in ("a", "b", "c")]
        except FileNotFoundError:
            continue                    # an old version being deleted after the swap
        finally:
            os.close(fd)
        if names != [MANIFEST_FILE, "a", "b", "c"] or len(set(values)) != 1:
            half.append((names, values))
        seen.add(values[0])
    assert writer.returncode == 0 and not half, half[:3]
    assert len(seen) > 3   # the reader did watch the folder being replaced


# ------------------------------------------------------------- case 4: --force and foreign things
@pytest.mark.parametrize("make, shown", [
    (lambda m, user: os.symlink(user, os.path.join(m, "my_data_link")), "my_data_link (symlink)"),
    (lambda m, user: os.symlink(os.path.join(user, "data.tsv"), os.path.join(m, "data.tsv")), "data.tsv (symlink)"),
    (lambda m, user: os.mkdir(os.path.join(m, "my_empty_results_dir")), "my_empty_results_dir/"),
    (lambda m, user: os.mkfifo(os.path.join(m, "pipe")), "pipe (fifo)"),
])
def test_force_refuses_folders_symlinks_and_fifos_it_did_not_write(tmp_path, make, shown):
    model = AlbertForSequenceClassification(tiny_config())
    target = str(tmp_path / "m")
    save_model_dir(model, target)
    user = tmp_path / "userdata"
    user.mkdir()
    (user / "data.tsv").write_text("keep")
    make(target, str(user))
    before = sorted(os.listdir(target))
    with pytest.raises(OutputError) as refused:
        save_model_dir(model, target, overwrite=True)
    assert str(refused.value) == f"{target}: holds files albert_min did not write ({shown}); refusing to replace it"
    assert sorted(os.listdir(target)) == before and (user / "data.tsv").read_text() == "keep"


def test_manifests_list_folders_and_old_manifests_still_work(tmp_path):
    model = AlbertForSequenceClassification(tiny_config())
    target = str(tmp_path / "m")

    def nested(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        open(path, "w").write("{}")
    save_model_dir(model, target, extra_files={"logs/run/notes.json": nested})
    assert read_manifest(target)["folders"] == ["logs", "logs/run"]
    os.mkdir(os.path.join(target, "logs", "mine"))        # a user's folder inside one albert_min wrote
    with pytest.raises(OutputError, match=r"did not write \(logs/mine/\)"):
        check_replaceable(target, overwrite=True)
    os.rmdir(os.path.join(target, "logs", "mine"))
    save_model_dir(model, target, overwrite=True)
    old = str(tmp_path / "committed")                      # weights/*/: manifests that list files only
    shutil.copytree(COMMITTED, old)
    assert "folders" not in read_manifest(old)
    check_replaceable(old, overwrite=True)
    os.mkdir(os.path.join(old, "results"))
    with pytest.raises(OutputError, match=r"did not write \(results/\)"):
        check_replaceable(old, overwrite=True)


# ------------------------------------------------------------- case 12: the user's umask
@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_written_files_get_the_users_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        target = str(tmp_path / "m")
        save_model_dir(AlbertForSequenceClassification(tiny_config()), target)   # MindSpore chmods model.ckpt 0400
        cv.convert(HF_SST2, str(tmp_path / "c"))
    finally:
        os.umask(old)
    for folder in (target, str(tmp_path / "c")):
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o777 & ~umask
        for name in os.listdir(folder):
            assert stat.S_IMODE(os.stat(os.path.join(folder, name)).st_mode) == 0o666 & ~umask, name


# ------------------------------------------------------------- case 13: one rule for parent folders
def test_missing_parent_folders_are_created_and_removed_again_on_failure(model_dir, tmp_path):
    preds = tmp_path / "runs" / "today" / "preds.tsv"
    assert run_evaluate(model_dir, preds) is None and preds.is_file()
    out = tmp_path / "new" / "deeper" / "model"
    cv.convert(HF_SST2, str(out))
    assert (out / "model.ckpt").is_file()
    with pytest.raises(FileNotFoundError):
        cv.convert(str(tmp_path / "missing"), str(tmp_path / "gone" / "model"))
    with pytest.raises(SystemExit):
        evaluate.main(["--model", model_dir, "--data", str(tmp_path / "missing.tsv"), "--output",
                       str(tmp_path / "gone" / "preds.tsv")])
    assert sorted(os.listdir(tmp_path)) == ["new", "runs"]


# ------------------------------------------------------------- case 8: any path, every tool
def test_every_tool_writes_under_a_space_and_a_non_ascii_name(model_dir, tmp_path):
    folder = tmp_path / "sp ace" / "é"
    converted = str(folder / "conv ért")
    cv.convert(HF_SST2, converted)
    assert run_evaluate(converted, folder / "préds ok.tsv") is None
    tsv = sentiment_tsv(tmp_path / "train.tsv", 32, seed=0)
    trained = str(folder / "tráined model")
    train.main(["--train", tsv, "--output", trained, "--epochs", "1", "--batch-size", "16", *TINY_MODEL])
    from albert_min.export import main as export_main, read_metadata
    export_main([trained, str(folder / "modèle 1.mindir"), "--batch", "1", "--seq", "8"])
    assert read_metadata(str(folder / "modèle 1.mindir"))["producer"] == "albert_min"
    assert sorted(os.listdir(folder)) == [".préds ok.tsv.albert_min.json", "conv ért", "modèle 1.mindir", "préds ok.tsv",
                                          "tráined model", "tráined model.state"]


# ------------------------------------------------------------- issue 44: a read-only output folder
@contextlib.contextmanager
def read_only(folder, how, monkeypatch):
    """``folder`` read-only for root too: a read-only bind mount (skipped where this process may not mount),
    or the kernel's EROFS simulated for os.open and os.mkdir below it."""
    if how == "simulated":
        def refuse(real):
            def call(path, *args, **kwargs):
                if os.path.abspath(path).startswith(str(folder) + os.sep):
                    raise OSError(errno.EROFS, os.strerror(errno.EROFS), path)
                return real(path, *args, **kwargs)
            return call
        for name in ("open", "mkdir"):
            monkeypatch.setattr(os, name, refuse(getattr(os, name)))
        yield
        return
    mounted = subprocess.run(["mount", "--bind", str(folder), str(folder)], capture_output=True)
    if mounted.returncode:
        pytest.skip(f"no bind mount here: {mounted.stderr.decode(errors='replace').strip()}")
    try:
        if subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], capture_output=True).returncode:
            pytest.skip("no read-only remount here")
        yield
    finally:
        subprocess.run(["umount", str(folder)], capture_output=True)


@pytest.mark.parametrize("how", ["simulated", "mount"])
def test_a_read_only_output_folder_is_named_not_the_lock_file(model_dir, tmp_path, monkeypatch, how):
    """Issue 44: the error named albert_min's own lock file (``.p.tsv.lock: Read-only file system``)."""
    folder = tmp_path / "ro"
    folder.mkdir()
    with read_only(folder, how, monkeypatch):
        for output in (folder / "p.tsv", folder / "new" / "dir" / "p.tsv"):
            assert run_evaluate(model_dir, output) == \
                f"error: {folder}: read-only file system, so {output} cannot be written"
        with pytest.raises(OutputError, match=f"^{folder}: read-only file system, so {folder}/model cannot be"):
            cv.convert(HF_SST2, str(folder / "model"))
    assert os.listdir(folder) == [] and sorted(os.listdir(tmp_path)) == ["ro"]
