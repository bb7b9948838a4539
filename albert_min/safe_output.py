"""Safe output: albert_min replaces only what albert_min wrote, and a reader never sees half of it.

Every folder albert_min writes (model folders, training states) is built in a
temporary sibling ``.NAME.tmp-*`` and renamed into place once complete; a
manifest (``MANIFEST_FILE``) marks it as ours and lists its files, so that a
later ``--force`` can tell our files from a user's. ``recover_directory``
finishes or undoes a swap that a crash interrupted. ``output_lock`` keeps a
second albert_min process off an output while the first one writes it.

This module knows nothing of models: ``checkpoint`` (the model-folder format)
and ``training`` (the training state) build on it.
"""

import contextlib
import fcntl
import json
import os
import shutil
import tempfile

from .errors import AlbertMinError


class OutputError(AlbertMinError):
    """An output path albert_min refuses to write: it would replace something albert_min did not write."""


class OutputInUse(OutputError):
    """Another albert_min process holds the output's lock."""


MANIFEST_FILE = ".albert_min.json"    # marks a folder albert_min wrote, and lists its files
MODEL_KIND = "model"
STATE_KIND = "training-state"


def read_manifest(directory):
    """The manifest of a folder albert_min wrote (a dict), or None if it has none or it is unreadable."""
    try:
        with open(os.path.join(directory, MANIFEST_FILE), encoding="utf-8") as f:
            manifest = json.load(f)
    except (OSError, ValueError):
        return None
    ok = (isinstance(manifest, dict) and manifest.get("written_by") == "albert_min"
          and isinstance(manifest.get("files"), list) and all(isinstance(n, str) for n in manifest["files"]))
    return manifest if ok else None


def _write_manifest(directory, kind, complete):
    files = sorted(os.path.relpath(os.path.join(root, name), directory)
                   for root, _, names in os.walk(directory) for name in names if name != MANIFEST_FILE)
    manifest = {"written_by": "albert_min", "kind": kind, "complete": complete, "files": files}
    with open(os.path.join(directory, MANIFEST_FILE), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())


def _foreign_files(directory):
    """Files in ``directory`` that its manifest does not list (all of them without a manifest)."""
    manifest = read_manifest(directory)
    listed = set(manifest["files"]) if manifest else set()
    listed.add(MANIFEST_FILE)
    return sorted(os.path.relpath(os.path.join(root, name), directory)
                  for root, _, names in os.walk(directory) for name in names
                  if os.path.relpath(os.path.join(root, name), directory) not in listed)


def _is_inside(path, folder):
    """Whether ``path`` is ``folder`` or lies below it (real paths)."""
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def check_replaceable(target, overwrite=False, protect=()):
    """Raise unless writing the folder ``target`` can lose nothing albert_min did not write.

    Refused: a path that is or contains a ``protect`` path (e.g. the conversion
    source) or the current directory; a regular file; with ``overwrite``, a
    folder without albert_min's manifest or holding files the manifest does not
    list. Without ``overwrite`` any existing path is refused.
    """
    target = os.path.abspath(target)
    for path in protect:
        if _is_inside(path, target):
            raise OutputError(f"{target}: refusing to write here, it is or contains {os.path.abspath(path)}")
    if _is_inside(os.getcwd(), target):
        raise OutputError(f"{target}: refusing to write here, it is or contains the current directory")
    if not os.path.lexists(target):
        return
    if not os.path.isdir(target) or os.path.islink(target):
        raise OutputError(f"{target}: exists and is not a folder; refusing to replace it")
    if not overwrite:
        raise FileExistsError(f"{target} already exists (pass overwrite / --force to replace it)")
    if os.listdir(target) and read_manifest(target) is None:
        raise OutputError(f"{target}: not a folder written by albert_min (no {MANIFEST_FILE}); "
                              "refusing to replace it - remove it yourself or choose another path")
    foreign = _foreign_files(target)
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise OutputError(f"{target}: holds files albert_min did not write ({shown}); refusing to replace it")


def _leftovers(target, tag):
    """Our ``.NAME.tmp-*`` / ``.NAME.old-*`` siblings of ``target``: folders, empty or with our manifest."""
    parent, name = os.path.split(os.path.abspath(target))
    prefix = f".{name}.{tag}-"
    found = []
    for entry in os.listdir(parent) if os.path.isdir(parent) else ():
        path = os.path.join(parent, entry)
        if entry.startswith(prefix) and os.path.isdir(path) and not os.path.islink(path):
            if not os.listdir(path) or read_manifest(path) is not None:
                found.append(path)
    return found


def recover_directory(target):
    """Finish or undo a swap that a crash interrupted, then remove our leftovers.

    ``atomic_directory`` writes ``.NAME.tmp-*``, marks it complete in its
    manifest, renames ``NAME`` to ``.NAME.old-*``, renames the temporary folder to
    ``NAME`` and deletes the old one. If ``NAME`` is missing, the newest complete
    temporary folder becomes ``NAME`` (the swap is completed), else the old one
    comes back (rolled back). Incomplete temporary folders and old folders are
    then deleted. Returns a short description of what was done, or None.
    """
    target = os.path.abspath(target)
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
def atomic_directory(target, overwrite=False, protect=(), kind=MODEL_KIND):
    """Yield a temporary folder; on success it replaces ``target`` (two renames).

    Checks first that nothing but an albert_min folder would be replaced
    (``check_replaceable``; ``protect``: paths, e.g. the conversion source, that
    ``target`` must neither be nor contain). The finished folder gets a manifest
    (``MANIFEST_FILE``) listing its files and its ``kind``. On an exception the
    temporary folder is removed and ``target`` is untouched; after a crash,
    ``recover_directory`` (run here first) completes or rolls back the swap.
    """
    target = os.path.abspath(target)
    parent = os.path.dirname(target)
    os.makedirs(parent, exist_ok=True)
    recover_directory(target)
    check_replaceable(target, overwrite, protect)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(target)}.tmp-", dir=parent)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)   # mkdtemp makes it private; the result is an ordinary folder
        _write_manifest(tmp, kind, complete=False)   # ours from the start, so a crash leaves a folder we may clean
        yield tmp
        _write_manifest(tmp, kind, complete=True)
        old = None
        if os.path.exists(target):
            old = tempfile.mkdtemp(prefix=f".{os.path.basename(target)}.old-", dir=parent)
            os.rmdir(old)   # mkdtemp only reserved a unique name
            os.rename(target, old)
        try:
            os.rename(tmp, target)
        except BaseException:
            if old:
                os.rename(old, target)   # put the previous version back
            raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if old:
        shutil.rmtree(old, ignore_errors=True)


def lock_path(target):
    """The lock file of an output: ``.NAME.lock`` beside it (not inside: the folder is replaced by a rename)."""
    parent, name = os.path.split(os.path.abspath(target))
    return os.path.join(parent, f".{name}.lock")


@contextlib.contextmanager
def output_lock(target):
    """Hold an exclusive lock on the output ``target`` for the ``with`` block.

    A second albert_min process asking for the same output gets ``OutputInUse``
    naming the holder's pid. The lock is an ``fcntl.flock`` on ``.NAME.lock``, so
    the kernel drops it when its holder dies: a crashed run never leaves the
    output locked. The lock file itself stays (deleting it would race with a
    process that has just opened it).
    """
    path = lock_path(target)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            raise OutputInUse(f"{os.path.abspath(target)}: in use by another albert_min process (pid {holder})") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        yield
    finally:
        os.close(fd)   # closing the descriptor releases the flock
