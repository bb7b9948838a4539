"""The operating-system calls that differ between the platforms MindSpore installs on (Linux, macOS,
Windows), each with the alternative where one is missing: nothing here fails at import.

- ``lock_nowait`` / ``unlock``: an exclusive lock on an open file that the OS drops when its holder
  dies (``fcntl.flock`` on Linux and macOS, ``msvcrt.locking`` of one byte on Windows);
- ``read_at`` / ``write_at``: ``os.pread`` / ``os.pwrite``, or a seek and a read / write;
- ``OPEN_NOFOLLOW`` / ``OPEN_CLOEXEC``: those ``os.open`` flags, 0 where the platform has none;
- ``process_alive``: whether a PID names a running process (``os.kill(pid, 0)``; on Windows, where
  ``os.kill`` with 0 would send Ctrl-C, ``OpenProcess`` through ctypes);
- ``fsync_folder``: a rename made durable (on Windows, which cannot open a folder, a no-op: NTFS
  journals its metadata).

Tests simulate each absence (tests/common/test_portable.py); docs/platforms.md says what ran where.

Layer: ``albert_min.common``, the bottom one (the layers: ``albert_min/__init__.py``).
"""

import os

try:
    import fcntl
except ImportError:      # Windows
    fcntl = None
try:
    import msvcrt
except ImportError:      # everywhere but Windows
    msvcrt = None

WINDOWS = os.name == "nt"
OPEN_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
OPEN_CLOEXEC = getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOINHERIT", 0) | getattr(os, "O_BINARY", 0)
LOCKED_BYTE = 4096   # msvcrt locks a byte range: one past the PID the holder writes at offset 0, so it stays readable


class NoFileLocks(OSError):
    """Neither fcntl nor msvcrt: this platform has no file lock albert_min knows."""


def lock_nowait(fd):
    """Take an exclusive lock on the open file ``fd``; False if another process holds it."""
    if fcntl is not None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True
    if msvcrt is not None:
        os.lseek(fd, LOCKED_BYTE, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:      # PermissionError (EACCES) / EDEADLOCK: held by another process
            return False
        return True
    raise NoFileLocks("this platform has neither fcntl nor msvcrt file locks")


def unlock(fd):
    """Release ``lock_nowait``'s lock before ``fd`` is closed (flock's goes with the descriptor)."""
    if fcntl is None and msvcrt is not None:
        os.lseek(fd, LOCKED_BYTE, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
        except OSError:
            pass             # not held (any more): closing releases what is left


def read_at(fd, size, offset):
    if hasattr(os, "pread"):
        return os.pread(fd, size, offset)
    os.lseek(fd, offset, os.SEEK_SET)
    return os.read(fd, size)


def write_at(fd, data, offset):
    if hasattr(os, "pwrite"):
        return os.pwrite(fd, data, offset)
    os.lseek(fd, offset, os.SEEK_SET)
    return os.write(fd, data)


def process_alive(pid):
    """Whether ``pid`` is a running process (True for another user's, which we may not signal)."""
    if WINDOWS:
        return _windows_process_alive(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True    # PermissionError: alive, another user's; OverflowError: not a PID we can ask about
    return True


def _windows_process_alive(pid):
    import ctypes
    kernel32 = ctypes.windll.kernel32
    query_limited_information, still_active, access_denied = 0x1000, 259, 5
    handle = kernel32.OpenProcess(query_limited_information, False, pid)
    if not handle:
        return kernel32.GetLastError() == access_denied   # exists, another user's; else no such process
    try:
        code = ctypes.c_ulong()
        return bool(kernel32.GetExitCodeProcess(handle, ctypes.byref(code))) and code.value == still_active
    finally:
        kernel32.CloseHandle(handle)


def fsync_folder(folder):
    """Make a rename in ``folder`` durable: fsync the folder (where a folder can be opened)."""
    if not hasattr(os, "O_DIRECTORY"):
        return         # Windows: no folder descriptor to sync; NTFS journals the rename
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
