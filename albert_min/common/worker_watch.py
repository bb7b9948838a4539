"""Which worker of an msrun job died first, as msrun's scheduler process sees it on its host.

msrun runs train.py once more as the job's scheduler (MS_ROLE=MS_SCHED), whose ``init()`` serves the
job until it ends. When a worker dies, msrun kills every other worker on the host at once (SIGKILL,
within its 1 s poll), and some 30 s later MindSpore's scheduler raises that nodes timed out: the
worker killed first, the ones msrun killed, or only some of them (a run killed rank 1 and the
scheduler named rank 0 alone). So ``WorkerWatch``, started on the scheduler, looks every 0.2 s at
msrun's other children (the workers on this host: their /proc entries, MS_ROLE and RANK_ID) and
keeps the order in which they died, from a small process of its own (``init()`` holds the GIL). Workers on other hosts are not seen (``died`` stays empty).

Layer: ``albert_min.common``, the bottom one (the layers: ``albert_min/__init__.py``).
"""

import os
import signal
import subprocess
import sys
import time

INTERVAL_S = 0.2


def _parent_and_state(pid):
    """(parent pid, state letter) of process ``pid`` from /proc, or None where it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return int(fields[1]), fields[0].decode()
    except (OSError, ValueError, IndexError):
        return None


def _worker_rank(pid):
    """The rank of process ``pid`` where it is an msrun worker (MS_ROLE=MS_WORKER, RANK_ID), else None."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            environment = dict(item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item)
    except OSError:
        return None
    rank = environment.get(b"RANK_ID", b"")
    return int(rank) if environment.get(b"MS_ROLE") == b"MS_WORKER" and rank.isdigit() else None


class Deaths:
    """The ranks of ``launcher``'s worker children in the order they die, one ``look`` at a time."""

    def __init__(self, launcher):
        self.launcher = launcher
        self.ranks = {}       # pid -> rank of the workers seen
        self.died = []        # ranks, first death first

    def look(self):
        """New workers, then the ones dead (gone, or zombies msrun has not reaped yet); returns the newly dead."""
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) not in self.ranks:
                seen = _parent_and_state(entry)
                if seen and seen[0] == self.launcher and seen[1] != "Z":
                    rank = _worker_rank(entry)
                    if rank is not None:
                        self.ranks[int(entry)] = rank
        new = []
        for pid, rank in self.ranks.items():
            seen = _parent_and_state(pid)
            if rank not in self.died and (seen is None or seen[1] == "Z"):
                self.died.append(rank)
                new.append(rank)
        return new


class WorkerWatch:
    """``Deaths`` of msrun's workers on this host, kept by a small process of its own (this file run as a
    script): MindSpore's ``init()`` holds the GIL for the whole job on the scheduler, so no thread of
    this process would run. ``died`` (read once the job failed) stops it and tells what it saw."""

    def __init__(self, launcher=None):
        launcher = os.getppid() if launcher is None else launcher   # msrun, the workers' parent
        self._process = subprocess.Popen([sys.executable, os.path.abspath(__file__), str(launcher), str(os.getpid())],
                                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self._died = None

    @property
    def died(self):
        """The ranks seen to die, first death first ([] where none, or /proc could not be read)."""
        if self._died is None:
            self.stop()
            self._died = [int(line) for line in self._process.stdout.read().split() if line.isdigit()]
        return self._died

    def stop(self):
        if self._process.poll() is None:
            self._process.terminate()
        self._process.wait()


def _watch(launcher, parent):
    """The watching process: each newly dead rank on a line of stdout, until ``parent`` is gone."""
    deaths = Deaths(launcher)
    while os.getppid() == parent:
        try:
            new = deaths.look()
        except OSError:
            return
        if new:
            print("\n".join(map(str, new)), flush=True)
        time.sleep(INTERVAL_S)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))   # stopped: what was printed stays in the pipe
    _watch(int(sys.argv[1]), int(sys.argv[2]))
