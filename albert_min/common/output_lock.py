"""One writer per output: ``output_lock``, and the parent folders an output needs.

Part of the rules in ``albert_min.common.safe_output`` (which re-exports these names):
a second albert_min process asking for an output another one holds gets
``OutputInUse``; missing parent folders are created (as ``mkdir -p`` does) when
the lock is taken, and removed again at its release if nothing was written in
them.

Layer: ``albert_min.common``, the bottom one (the layers: ``albert_min/__init__.py``).
"""

import contextlib
import errno
import os

from .errors import AlbertMinError
from .portable import OPEN_CLOEXEC, OPEN_NOFOLLOW, lock_nowait, read_at, unlock, write_at


class OutputError(AlbertMinError):
    """An output path albert_min refuses to write: it would replace something albert_min did not write."""


class OutputInUse(OutputError):
    """Another albert_min process holds the output's lock."""


# ------------------------------------------------------------------ parent folders
def check_ancestors(target):
    """Raise unless every existing ancestor of ``target`` is a folder (the missing ones will be created)."""
    folder = os.path.dirname(os.path.abspath(target))
    while not os.path.lexists(folder):
        folder = os.path.dirname(folder)
    if not os.path.isdir(folder):
        raise OutputError(f"{folder}: not a folder, so {os.path.abspath(target)} cannot be written below it")
    return folder


def _make_parents(folder, target=None):
    """Create ``folder`` and its missing ancestors; returns those created, deepest first. Where one
    cannot be made in a folder that refuses writes, an OutputError names that folder and ``target``."""
    created = []
    while not os.path.isdir(folder):
        created.append(folder)
        folder = os.path.dirname(folder)
    for path in reversed(created):
        try:
            os.mkdir(path)
        except FileExistsError:   # another process made it meanwhile
            pass
        except OSError as err:
            _remove_if_empty(created[created.index(path) + 1:])
            raise _not_writable(err, os.path.dirname(path), target or path) or err
    return created


def _not_writable(err, folder, target):
    """An OutputError naming ``folder`` (not a file albert_min meant to make in it) where ``err`` says the
    folder refuses writes: read-only file system, or no permission; else None."""
    reasons = {errno.EROFS: "read-only file system", errno.EACCES: "folder not writable",
               errno.EPERM: "folder not writable"}
    if err.errno not in reasons:
        return None
    return OutputError(f"{folder}: {reasons[err.errno]}, so {os.path.abspath(target)} cannot be written")


def _remove_if_empty(folders):
    for folder in folders:
        try:
            os.rmdir(folder)
        except OSError:
            return   # not empty (someone else writes there now) or gone: keep it and its parents


# ------------------------------------------------------------------ the lock
_held = {}   # lock file -> how many times this process holds it (the lock is per open file description)


def lock_path(target):
    """The lock file of an output: ``.NAME.lock`` beside it (not inside: the folder is replaced by a rename)."""
    parent, name = os.path.split(os.path.abspath(target))
    return os.path.join(os.path.realpath(parent), f".{name}.lock")


def _acquire(path, target):
    """Open and lock ``path`` (``portable.lock_nowait``); returns the descriptor. The file a releasing process unlinks is
    not the lock any more: retry until the locked file is the one at ``path``."""
    for _ in range(1000):
        _make_parents(os.path.dirname(path), target)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | OPEN_NOFOLLOW | OPEN_CLOEXEC, 0o666)
        except FileNotFoundError:
            continue   # its folder was just removed by the previous holder: make it again
        except OSError as err:    # the lock file is ours: the folder is what the user must fix
            raise _not_writable(err, os.path.dirname(path), target) or err from None
        if not lock_nowait(fd):
            holder = read_at(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise OutputInUse(f"{os.path.abspath(target)}: in use by another albert_min process (pid {holder})") \
                from None
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path, follow_symlinks=False))
        except FileNotFoundError:
            same = False
        if same:
            os.ftruncate(fd, 0)
            write_at(fd, f"{os.getpid()}\n".encode("ascii"), 0)
            return fd
        unlock(fd)
        os.close(fd)
    raise OutputError(f"{path}: could not lock it (it keeps being replaced)")


@contextlib.contextmanager
def output_lock(target):
    """Hold an exclusive lock on the output ``target`` for the ``with`` block.

    A second albert_min process asking for the same output gets ``OutputInUse``
    ("<target>: in use by another albert_min process (pid N)"). Re-entrant
    within a process: ``atomic_directory`` and ``atomic_file`` take it again
    inside a run that holds it. The lock is an ``fcntl.flock`` on ``.NAME.lock``
    (``msvcrt.locking`` on Windows: ``portable.lock_nowait``), so the OS drops it when its holder dies: a crashed run never leaves the
    output locked. The lock file is removed on release, and so are the parent
    folders the lock had to create if nothing else was written in them.
    """
    path = lock_path(target)
    if path in _held:
        _held[path] += 1
        try:
            yield
        finally:
            _held[path] -= 1
        return
    check_ancestors(target)
    created = _make_parents(os.path.dirname(path), target)
    try:
        fd = _acquire(path, target)
    except BaseException:
        _remove_if_empty(created)
        raise
    _held[path] = 1
    try:
        yield
    finally:
        del _held[path]
        removed = True
        try:
            os.unlink(path)   # while still locked: a process waiting on the old file sees it is gone and retries
        except FileNotFoundError:
            pass
        except PermissionError:
            removed = False   # Windows: an open file cannot be removed; it is, once unlocked and closed
        unlock(fd)
        os.close(fd)
        if not removed:
            with contextlib.suppress(OSError):
                os.unlink(path)
        _remove_if_empty(created)
