"""Safe output: the one place for every rule about what albert_min writes.

The rules, for every output (model folders, training states, predictions,
MindIR files):

1. **Nothing but albert_min's own output is replaced.** An existing output is
   refused unless the user passes ``--force`` (``force`` / ``overwrite``), and
   even then it is replaced only if albert_min wrote it:
   - a folder must carry albert_min's manifest (``MANIFEST_FILE``) and hold
     nothing the manifest does not list: a file, folder (an empty one too),
     symlink, fifo or socket it does not list is the user's, and the folder is
     refused (``check_replaceable``);
   - a file must be a regular file of the output's ``FileKind`` that albert_min
     wrote, recognised from a bounded part of it (``check_file_target``); a
     symlink, a folder or a special file is never replaced.
2. **An input is never an output.** An output is never the same file as an
   input of the run (compared by inode, so symlinks and hard links are seen
   through), never a folder that is or contains an input or the current
   folder, and a file is never written inside an input folder or inside a
   folder albert_min wrote (a model folder holds only what its manifest lists).
3. **Atomic.** Folders are built in ``.NAME.tmp-PID-*`` and renamed into place
   (``atomic_directory``), files are written to ``.NAME.tmp-PID-*`` beside the
   target, fsynced and ``os.replace``d (``atomic_file``): a reader sees the old
   output or the new one, never half of one.
4. **One writer.** ``output_lock`` (module ``output_lock``: an ``fcntl.flock``,
   or ``msvcrt.locking`` on Windows, on ``.NAME.lock`` beside the output) keeps a second albert_min process off an
   output for the whole run; the second one gets ``OutputInUse``. Leftovers of
   a crashed run are cleaned only under the lock, and never a temporary whose
   owner (the PID in its name) is alive.
5. **Missing parent folders are created** (as ``mkdir -p`` does), for files and
   folders alike, in every tool (train.py --output, convert's DST, evaluate.py
   --output, export), and removed again if the output is not written. An
   existing path on the way that is not a folder is an error naming it.
6. **Written files get the user's umask** (0644 under umask 022), whatever mode
   the writer left (MindSpore's writers leave 0400).
7. **What was written is recorded, and checked before it is read or replaced.**
   ``atomic_directory(..., checksums=NAMES, contents=JSON_NAMES)`` records the
   sha256 of those files in the manifest (``"sha256": {name: hex}``) and the
   content of those JSON files (``"contents": {name: value}``): readers refuse
   a file whose sha256 is not the recorded one (``check_recorded_sha256``: a
   model folder's weights and tokenizer) and name what changed in a JSON file
   (``recorded_content``); ``record_folder`` records a folder again as it is
   now. A file output whose ``FileKind`` is ``recorded`` (evaluate.py's
   predictions) gets a record beside it, ``.NAME.albert_min.json`` with its
   sha256 (``output_record_path``), and ``--force`` replaces only a file that
   still has it: neither a user's file that merely looks like one, nor one the
   user edited since. The records and the checks against them: module ``records``.

This module knows nothing of models: ``model.folder`` (the model-folder format),
``training.state`` (the training state), ``export`` and the scripts build on it.
Layer: ``albert_min.common``, the bottom one (the layers: ``albert_min/__init__.py``).
"""

import contextlib
import dataclasses
import json
import os
import re
import shutil
import stat
import tempfile
from typing import Callable

from .checksums import sha256_of
from .portable import fsync_folder, process_alive
from .output_lock import OutputError, OutputInUse, check_ancestors, lock_path, output_lock  # noqa: F401 (re-exported)
from .records import (MANIFEST_FILE, check_recorded_sha256, dump_manifest, files_named, foreign_entries,  # noqa: F401 (re-exported)
                      manifest_of, output_record, output_record_path, read_manifest, recorded_content,
                      recorded_sha256, why_not_recorded, write_manifest)


MODEL_KIND = "model"
STATE_KIND = "training-state"


@dataclasses.dataclass(frozen=True)
class FileKind:
    """What an output file holds, so that ``--force`` can tell a file albert_min wrote from a user's.

    E.g. evaluate.py's predictions: ``FileKind("a predictions file evaluate.py wrote",
    starts_with(b"index\\tprediction\\n"))``; a JSON output can start with
    ``{"written_by": "albert_min", ...`` and be recognised by that prefix.
    """
    name: str                        # for messages: "a predictions file evaluate.py wrote"
    is_ours: Callable[[str], bool]   # path -> whether albert_min wrote it; reads a bounded part, never a whole big file
    recorded: bool = False           # the writer records the file's sha256 beside it (output_record_path), and
    #                                  --force replaces only a file that still has it


def starts_with(header: bytes):
    """An ``is_ours`` for files whose first bytes albert_min always writes (e.g. a TSV header)."""
    def is_ours(path):
        with open(path, "rb") as f:
            return f.read(len(header)) == header
    return is_ours


# ------------------------------------------------------------------ small helpers
def _umask():
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


def _is_inside(path, folder):
    """Whether ``path`` is ``folder`` or lies below it (real paths)."""
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _owner_alive(entry, prefix):
    """Whether the process named in a temporary's name (``PREFIX<pid>-...``) is alive; False for
    names without a PID (written before owners were recorded: their writer is long gone)."""
    match = re.match(r"(\d+)-", entry[len(prefix):])
    if not match:
        return False
    return process_alive(int(match.group(1)))


def _temp_prefix(target, tag, ascii_only=False):
    """``.NAME.tag-`` beside ``target``; ``ascii_only`` for files handed to writers that refuse other names."""
    name = os.path.basename(target)
    if ascii_only:
        name = re.sub(r"[^0-9A-Za-z_.-]", "_", name)
    return f".{name}.{tag}-"


def _finish_written(path):
    """fsync a written file or folder tree and give it the user's umask (MindSpore leaves 0400)."""
    umask = _umask()
    paths = [path]
    if os.path.isdir(path):
        paths += [os.path.join(root, n) for root, dirs, names in os.walk(path) for n in dirs + names]
    for p in paths:
        st = os.lstat(p)
        if stat.S_ISREG(st.st_mode):
            os.chmod(p, 0o666 & ~umask)
            with open(p, "rb") as f:
                os.fsync(f.fileno())
        elif stat.S_ISDIR(st.st_mode):
            os.chmod(p, 0o777 & ~umask)


def _fsync_folder(folder):
    fsync_folder(folder)   # the rename itself reaches the disk


# ------------------------------------------------------------------ folders
def record_folder(directory, checksums, contents=(), kind=MODEL_KIND):
    """Record ``directory`` as it is now: the sha256 of the files ``checksums`` names and the content of
    the JSON files ``contents`` names, in its manifest (written beside it and renamed over it, under
    ``output_lock``). The files and folders the manifest listed stay listed, plus ``checksums``; a
    folder without a manifest gets one listing those files only (what else it holds stays the user's,
    so ``--force`` will not replace the folder). Returns the sha256 map recorded before ({} if none)."""
    directory = os.path.abspath(directory)
    with output_lock(directory):
        old = read_manifest(directory)
        new = manifest_of(directory, (old or {}).get("kind", kind), True, checksums, contents)
        listed = set(old["files"]) if old else set()
        new["files"] = sorted((listed | set(files_named(directory, checksums))) & set(new["files"]))
        if old is None:   # the model files lie at the top: none of its folders is albert_min's
            new["folders"] = []
        elif "folders" not in old:   # a manifest from before folders were listed stays so
            del new["folders"]
        else:
            new["folders"] = old["folders"]
        fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(MANIFEST_FILE, "tmp") + f"{os.getpid()}-", dir=directory)
        os.close(fd)
        try:
            dump_manifest(new, tmp)
            _finish_written(tmp)
            os.replace(tmp, os.path.join(directory, MANIFEST_FILE))
            _fsync_folder(directory)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.remove(tmp)
            raise
    recorded = (old or {}).get("sha256")
    return recorded if isinstance(recorded, dict) else {}


def check_replaceable(target, overwrite=False, protect=()):
    """Raise unless writing the folder ``target`` can lose nothing albert_min did not write.

    Refused: a path that is or contains a ``protect`` path (e.g. the conversion
    source) or the current directory; a regular file or symlink; with
    ``overwrite``, a folder without albert_min's manifest or holding anything
    the manifest does not list (files, folders, symlinks, fifos). Without
    ``overwrite`` any existing path is refused (``FileExistsError``).
    """
    target = os.path.abspath(target)
    for path in protect:
        if _is_inside(path, target):
            raise OutputError(f"{target}: refusing to write here, it is or contains {os.path.abspath(path)}")
    if _is_inside(os.getcwd(), target):
        raise OutputError(f"{target}: refusing to write here, it is or contains the current directory")
    if not os.path.lexists(target):
        check_ancestors(target)
        return
    if not os.path.isdir(target) or os.path.islink(target):
        raise OutputError(f"{target}: exists and is not a folder; refusing to replace it")
    if not overwrite:
        raise FileExistsError(f"{target} already exists (pass --force to replace it)")
    if os.listdir(target) and read_manifest(target) is None:
        raise OutputError(f"{target}: not a folder written by albert_min (no {MANIFEST_FILE}); "
                          "refusing to replace it - remove it yourself or choose another path")
    foreign = foreign_entries(target)
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise OutputError(f"{target}: holds files albert_min did not write ({shown}); refusing to replace it")


def _leftovers(target, tag):
    """Our ``.NAME.tmp-*`` / ``.NAME.old-*`` siblings of ``target`` whose owner is dead: folders,
    empty or with our manifest."""
    parent = os.path.dirname(os.path.abspath(target))
    prefix = _temp_prefix(target, tag)
    found = []
    for entry in os.listdir(parent) if os.path.isdir(parent) else ():
        path = os.path.join(parent, entry)
        if entry.startswith(prefix) and os.path.isdir(path) and not os.path.islink(path) \
                and not _owner_alive(entry, prefix):
            if not os.listdir(path) or read_manifest(path) is not None:
                found.append(path)
    return found


def recover_directory(target):
    """Finish or undo a swap that a crash interrupted, then remove our leftovers (under the lock).

    ``atomic_directory`` writes ``.NAME.tmp-*``, marks it complete in its
    manifest, renames ``NAME`` to ``.NAME.old-*``, renames the temporary folder to
    ``NAME`` and deletes the old one. If ``NAME`` is missing, the newest complete
    temporary folder becomes ``NAME`` (the swap is completed), else the old one
    comes back (rolled back). Incomplete temporary folders and old folders are
    then deleted. A leftover whose owner (the PID in its name) is alive is never
    touched. Returns a short description of what was done, or None.
    """
    target = os.path.abspath(target)
    if not os.path.isdir(os.path.dirname(target)):
        return None
    with output_lock(target):
        done = None
        if not os.path.lexists(target):
            complete = [p for p in _leftovers(target, "tmp") if (read_manifest(p) or {}).get("complete")]
            old = [p for p in _leftovers(target, "old") if read_manifest(p) is not None]
            if complete:
                newest = max(complete, key=lambda p: os.path.getmtime(os.path.join(p, MANIFEST_FILE)))
                os.rename(newest, target)
                done = f"completed an interrupted save of {target}"
            elif old:
                os.rename(max(old, key=os.path.getmtime), target)
                done = f"rolled back an interrupted save of {target}"
        for path in _leftovers(target, "tmp") + _leftovers(target, "old"):
            shutil.rmtree(path, ignore_errors=True)
        return done


@contextlib.contextmanager
def atomic_directory(target, overwrite=False, protect=(), kind=MODEL_KIND, checksums=(), contents=()):
    """Yield a temporary folder; on success it replaces ``target`` (two renames), under ``output_lock``.

    Checks first that nothing but an albert_min folder would be replaced
    (``check_replaceable``; ``protect``: paths, e.g. the conversion source, that
    ``target`` must neither be nor contain). The finished folder gets the
    user's umask and a manifest (``MANIFEST_FILE``) listing its files, folders
    and ``kind``, the sha256 of the files named in ``checksums`` (relative paths the
    block must write) and the content of the JSON files named in ``contents``. On an
    exception the temporary folder is removed and ``target`` is untouched; after a crash, ``recover_directory`` (run here first)
    completes or rolls back the swap.
    """
    target = os.path.abspath(target)
    parent = os.path.dirname(target)
    check_replaceable(target, overwrite, protect)   # before the lock creates any folder
    with output_lock(target):
        recover_directory(target)
        check_replaceable(target, overwrite, protect)
        tmp = tempfile.mkdtemp(prefix=_temp_prefix(target, "tmp") + f"{os.getpid()}-", dir=parent)
        try:
            write_manifest(tmp, kind, complete=False)   # ours from the start, so a crash leaves a folder we may clean
            yield tmp
            _finish_written(tmp)
            write_manifest(tmp, kind, complete=True, checksums=checksums, contents=contents)
            old = None
            if os.path.exists(target):
                old = tempfile.mkdtemp(prefix=_temp_prefix(target, "old") + f"{os.getpid()}-", dir=parent)
                os.rmdir(old)   # mkdtemp only reserved a unique name
                os.rename(target, old)
            try:
                os.rename(tmp, target)
            except BaseException:
                if old:
                    os.rename(old, target)   # put the previous version back
                raise
            _fsync_folder(parent)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        if old:
            shutil.rmtree(old, ignore_errors=True)


# ------------------------------------------------------------------ files
def _write_output_record(path, hashes):
    """Write the record of ``path`` (its accepted sha256 values) atomically, beside it. A failure (a full
    disk) is an OSError naming ``path``: the record is part of that output."""
    record = {"written_by": "albert_min", "file": os.path.basename(path), "sha256": hashes,
              "note": "what albert_min wrote; --force replaces the file only while it still has this sha256"}
    fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(path, "tmp", ascii_only=True) + f"{os.getpid()}-",
                               suffix=".record", dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(record, f, indent=1)
            f.write("\n")
        _finish_written(tmp)
        os.replace(tmp, output_record_path(path))
    except BaseException as err:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        if isinstance(err, OSError) and err.strerror:
            raise OSError(err.errno, err.strerror, path) from err
        raise


def check_file_target(path, kind, force=False, protect=()):
    """Raise ``OutputError`` unless writing the file ``path`` can lose nothing albert_min did not write.

    Refused whatever ``force`` says: the same file as a ``protect`` path (an
    input of the run; compared by inode, so through symlinks and hard links),
    a path inside a ``protect`` folder or inside a folder albert_min wrote, a
    folder, and an existing path on the way that is not a folder. An existing
    file is refused without ``force``; with it, it is replaced only if it is a
    regular file (not a symlink, fifo or device) that ``kind`` recognises as
    albert_min's (a ``recorded`` kind: also that its record beside it, see
    ``output_record_path``, holds its sha256: albert_min wrote it, nobody changed
    it since). A user's own file, e.g. notes.txt, is never replaced: remove
    it or choose another path. Missing parent folders are fine: they are
    created when the file is written.
    """
    path = os.path.abspath(path)
    for p in protect:
        if os.path.lexists(path) and os.path.exists(p) and os.path.samefile(path, p):
            same = "" if os.path.abspath(p) == path else f" (the same file as {os.path.abspath(p)})"
            raise OutputError(f"{path}: is an input of this run{same}; refusing to replace it")
        if os.path.isdir(p) and _is_inside(path, p):
            raise OutputError(f"{path}: lies inside {os.path.abspath(p)}, an input of this run; "
                              "write it elsewhere")
    folder = os.path.dirname(os.path.realpath(path))
    while folder != os.path.dirname(folder):
        if read_manifest(folder) is not None:
            raise OutputError(f"{path}: lies inside {folder}, a folder albert_min wrote (it holds only what its "
                              f"{MANIFEST_FILE} lists); write it elsewhere")
        folder = os.path.dirname(folder)
    if os.path.isdir(path):
        raise OutputError(f"{path}: is a folder, not a file")
    if not os.path.lexists(path):
        existing = check_ancestors(path)
        if not os.access(existing, os.W_OK | os.X_OK):
            raise OutputError(f"{existing}: folder not writable, so {path} cannot be written")
        return
    if not force:
        raise OutputError(f"{path} already exists (--force replaces only {kind.name})")
    mode = os.lstat(path).st_mode
    if not stat.S_ISREG(mode):
        what = "a symlink" if stat.S_ISLNK(mode) else "not a regular file"
        raise OutputError(f"{path}: is {what}; refusing to replace it - remove it yourself or choose another path")
    why_not = why_not_recorded(path, kind) if kind.recorded else None
    if why_not is None and not kind.is_ours(path):
        why_not = f"not {kind.name}"
    if why_not:
        raise OutputError(f"{path}: {why_not}; refusing to replace it - remove it yourself or choose another path")


def remove_dead_temp_files(path):
    """Remove the temporaries ``replace_file`` made beside ``path`` (``.NAME.tmp-PID-*``) whose owner
    (the process named in them) is dead: what a killed writer left."""
    parent = os.path.dirname(path)
    prefix = _temp_prefix(path, "tmp", ascii_only=True)
    for entry in os.listdir(parent):
        full = os.path.join(parent, entry)
        if entry.startswith(prefix) and re.match(r"\d+-", entry[len(prefix):]) and not _owner_alive(entry, prefix) \
                and stat.S_ISREG(os.lstat(full).st_mode):
            os.remove(full)


@contextlib.contextmanager
def atomic_file(path, kind, force=False, protect=(), suffix=""):
    """Yield a temporary path beside ``path``; when the block ends without error, the file written
    there replaces ``path`` (fsync, the user's umask, ``os.replace``), under ``output_lock``.

    ``check_file_target`` decides first what may be replaced (``kind``: what the
    file holds and how to recognise one albert_min wrote; ``protect``: the run's
    inputs). The temporary name is ``.NAME.tmp-PID-*SUFFIX`` in ASCII, for
    writers (MindSpore's) that refuse other names. On an exception it is
    removed and ``path`` is untouched.
    """
    path = os.path.abspath(path)
    check_file_target(path, kind, force, protect)   # before the lock creates any folder
    with output_lock(path):
        check_file_target(path, kind, force, protect)
        remove_dead_temp_files(path)
        with replace_file(path, suffix, record=kind.recorded) as tmp:
            yield tmp


@contextlib.contextmanager
def replace_file(path, suffix="", record=False):
    """Yield a fresh temporary path beside ``path`` (``.NAME.tmp-PID-*SUFFIX``, a name no user file
    has); when the block ends without error, the file written there replaces ``path`` (fsync, the
    user's umask, ``os.replace``); on an exception it is removed and ``path`` is untouched. No
    checks and no lock: ``atomic_file`` adds them; callers that already hold a checked, locked
    output (a task's prediction files) use this directly.

    ``record``: also record the new file's sha256 beside it (``output_record_path``; a ``recorded``
    ``FileKind``). The record accepts the old file's sha256 too until the new file is in place, so
    after a crash at any point the file there, old or new, is still recognised as albert_min's."""
    path = os.path.abspath(path)
    parent = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(path, "tmp", ascii_only=True) + f"{os.getpid()}-",
                               suffix=suffix, dir=parent)
    os.close(fd)
    try:
        yield tmp
        _finish_written(tmp)
        if record:
            new = sha256_of(tmp)
            old = [h for h in output_record(path) if os.path.isfile(path) and h == sha256_of(path)]
            _write_output_record(path, old + [new])
        os.replace(tmp, path)
        if record:
            _write_output_record(path, [new])
        _fsync_folder(parent)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        raise
