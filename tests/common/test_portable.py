"""albert_min.common.portable: each Linux-only call's alternative, with the call made absent (these
tests run on Linux: Windows and macOS are simulated, docs/platforms.md)."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from helpers.paths import ROOT
from albert_min.common import portable

# A Windows-like Python in a child process: no fcntl, a msvcrt whose locking() locks a byte range the
# way Windows does (per process, dropped when the process dies: POSIX record locks underneath), no
# os.pread / os.pwrite, no O_NOFOLLOW / O_CLOEXEC / O_DIRECTORY.
WINDOWS_LIKE = textwrap.dedent("""
    import fcntl as _posix, os, sys, types
    sys.path.insert(0, {root!r})
    msvcrt = types.ModuleType("msvcrt")
    msvcrt.LK_UNLCK, msvcrt.LK_NBLCK = 0, 2
    def locking(fd, mode, nbytes):
        start = os.lseek(fd, 0, os.SEEK_CUR)
        if mode == msvcrt.LK_UNLCK:
            _posix.lockf(fd, _posix.LOCK_UN, nbytes, start, 0)
            return
        try:
            _posix.lockf(fd, _posix.LOCK_EX | _posix.LOCK_NB, nbytes, start, 0)
        except OSError:
            raise PermissionError(13, "Permission denied") from None
    msvcrt.locking = locking
    sys.modules["msvcrt"], sys.modules["fcntl"] = msvcrt, None
    for name in ("pread", "pwrite", "O_NOFOLLOW", "O_CLOEXEC", "O_DIRECTORY"):
        delattr(os, name)
    from albert_min.common import portable
    assert portable.fcntl is None and portable.msvcrt is msvcrt
    from albert_min.common.output_lock import OutputInUse, output_lock
    target = sys.argv[1]
    try:
        with output_lock(target):
            print("locked", flush=True)
            if sys.argv[2] == "hold":
                sys.stdin.read()
    except OutputInUse as err:
        print("in use:", err, flush=True)
""")


def windows_like(target, mode, **kwargs):
    return subprocess.Popen([sys.executable, "-c", WINDOWS_LIKE.format(root=ROOT), target, mode],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            **kwargs)


def test_output_lock_without_fcntl_keeps_its_message_and_its_stale_lock_rule(tmp_path):
    target = str(tmp_path / "runs" / "model")
    holder = windows_like(target, "hold")
    assert holder.stdout.readline() == "locked\n", holder.stderr.read()
    second = windows_like(target, "try")
    out, err = second.communicate(timeout=60)
    assert out == f"in use: {target}: in use by another albert_min process (pid {holder.pid})\n", err
    os.kill(holder.pid, signal.SIGKILL)                 # a crashed holder: the OS drops its lock
    holder.wait(timeout=60)
    third = windows_like(target, "try")
    out, err = third.communicate(timeout=60)
    assert out == "locked\n", err
    assert not os.path.exists(os.path.join(str(tmp_path / "runs"), ".model.lock"))   # removed on release


def test_no_lock_at_all_is_an_error_not_a_silent_pass(monkeypatch, tmp_path):
    monkeypatch.setattr(portable, "fcntl", None)
    monkeypatch.setattr(portable, "msvcrt", None)
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    try:
        with pytest.raises(portable.NoFileLocks, match="neither fcntl nor msvcrt"):
            portable.lock_nowait(fd)
    finally:
        os.close(fd)


def test_read_and_write_at_an_offset_without_pread(monkeypatch, tmp_path):
    monkeypatch.delattr(os, "pread")
    monkeypatch.delattr(os, "pwrite")
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    try:
        portable.write_at(fd, b"hello world", 0)
        portable.write_at(fd, b"W", 6)
        assert portable.read_at(fd, 5, 6) == b"World"
    finally:
        os.close(fd)


def test_fsync_folder_without_folder_descriptors(monkeypatch, tmp_path):
    monkeypatch.delattr(os, "O_DIRECTORY")
    portable.fsync_folder(str(tmp_path))               # Windows: nothing to open, nothing to sync


class FakeKernel32:
    """OpenProcess / GetLastError / GetExitCodeProcess / CloseHandle of one simulated process table."""
    def __init__(self, processes):
        self.processes, self.error, self.closed = processes, 0, []

    def OpenProcess(self, access, inherit, pid):
        if self.processes.get(pid) == "denied":
            self.error = 5
            return 0
        if pid not in self.processes:
            self.error = 87   # ERROR_INVALID_PARAMETER: no such process
            return 0
        return 1000 + pid

    def GetLastError(self):
        return self.error

    def GetExitCodeProcess(self, handle, code_ref):
        code_ref._obj.value = self.processes[handle - 1000]
        return 1

    def CloseHandle(self, handle):
        self.closed.append(handle)


def test_process_alive_on_windows_never_signals(monkeypatch):
    """Windows' os.kill(pid, 0) would send Ctrl-C (CTRL_C_EVENT is 0): the Windows path asks OpenProcess."""
    import ctypes
    kernel32 = FakeKernel32({10: 259, 11: 0, 12: "denied"})   # 259: STILL_ACTIVE; 0: exited
    monkeypatch.setattr(ctypes, "windll", type("windll", (), {"kernel32": kernel32}), raising=False)
    monkeypatch.setattr(portable, "WINDOWS", True)
    monkeypatch.setattr(os, "kill", lambda *a: pytest.fail("os.kill called on Windows"))
    assert [portable.process_alive(pid) for pid in (10, 11, 12, 13)] == [True, False, True, False]
    assert kernel32.closed == [1010, 1011]


def test_process_alive_here():
    assert portable.process_alive(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    time.sleep(0.1)
    assert not portable.process_alive(child.pid)


def test_export_without_proc_self_fd(monkeypatch, tmp_path):
    """macOS and Windows have no /proc: a MindIR under a name MindSpore refuses is written from its folder."""
    from albert_min.export import main
    from albert_min.export import read_metadata
    real_isdir = os.path.isdir
    monkeypatch.setattr(os.path, "isdir", lambda p: False if p == "/proc/self/fd" else real_isdir(p))
    cwd = os.getcwd()
    path = str(tmp_path / "sp ace é" / "x.mindir")
    main([os.path.join(ROOT, "weights", "sst2-small"), path, "--batch", "1", "--seq", "8"])
    assert read_metadata(path)["kind"] == "classifier"
    assert os.listdir(os.path.dirname(path)) == ["x.mindir"] and os.getcwd() == cwd
