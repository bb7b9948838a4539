"""Data-parallel training under MindSpore's launcher ``msrun``: which rows of
each batch this worker trains on, and the few collectives that keep the workers in step.

Every worker holds the whole model, draws the same shuffled global batches
(same seed) and trains on its slice ``[rank*b : (rank+1)*b]`` of each, with
``b = global batch / workers``; ``nn.DistributedGradReducer`` inside the
compiled step averages the gradients, so all workers apply the same update
and stay identical without ever broadcasting weights. ``SingleProcess`` is
the same interface for an ordinary run, so the trainer has no special cases.

Layer: ``albert_min.common``, the bottom one (the layers: ``albert_min/__init__.py``).
"""

import math
import os
import re
import zlib

import numpy as np

from .environment import variable, whole_number
from .errors import AlbertMinError
from .worker_watch import WorkerWatch

# Set by msrun in every worker's environment (MS_WORKER_NUM = workers in the whole job, all hosts).
MSRUN_VARIABLES = ("MS_WORKER_NUM", "MS_SCHED_HOST", "MS_SCHED_PORT", "MS_ROLE")

# How long a CPU collective waits for a lagging worker (MindSpore's default, ~30 s, is shorter than
# rank 0 saving a large model while the others already wait in the next step's AllReduce).
COMM_TIMEOUT_S = 600


class ParallelError(AlbertMinError):
    """The workers of a data-parallel job disagree, or the job is set up wrongly."""


class WorkersLost(ParallelError):
    """A data-parallel job that lost workers (killed or crashed), as msrun's scheduler reports it.
    ``ranks``: the rank that died first where it is known (``first``), else the ranks MindSpore's
    scheduler stopped hearing from; ``hint``: what to do next (the trainer's words: how to --resume)."""

    def __init__(self, ranks, first=False, hint=None):
        self.ranks, self.first = ranks, first
        if first:
            text = (f"the data-parallel job lost rank {ranks[0]} (killed or crashed: see its log in msrun's "
                    "--log_dir; msrun then stopped the other workers)")
        else:
            text = (f"the data-parallel job lost a worker: MindSpore's scheduler stopped hearing from "
                    f"rank{'s' * (len(ranks) != 1)} {', '.join(map(str, ranks))} (killed or crashed, or stopped by "
                    "msrun once another one died: see the logs in msrun's --log_dir)")
        super().__init__(text + (f"; {hint}" if hint else ""))


# What MindSpore's scheduler raises when workers stop answering: "The total number of timed out node is 1.
# Timed out node list is: [const vector]{1}, worker 1 is the first one timed out, please check its log."
# A worker msrun started is a node whose id is its rank. Which ones it names depends on timing
# (see worker_watch), so the rank a WorkerWatch saw die first is named where there is one.
_TIMED_OUT = re.compile(r"Timed out node list is: [^{]*\{([0-9, ]*)\}")


def join_job(init, watch=None):
    """Call MindSpore's ``init`` (joining the job, or on the scheduler serving it to its end); the
    scheduler's error for lost workers becomes WorkersLost: the rank ``watch`` (a WorkerWatch) saw
    die first, else the ranks MindSpore names."""
    try:
        init()
    except RuntimeError as err:
        lost = _TIMED_OUT.search(str(err))
        if lost is None:
            raise
        if watch is not None and watch.died:
            raise WorkersLost(watch.died[:1], first=True) from None
        raise WorkersLost(sorted(int(n) for n in lost.group(1).replace(" ", "").split(",") if n)) from None
    finally:
        if watch is not None:
            watch.stop()


def msrun_workers():
    """Number of workers msrun started (``MS_WORKER_NUM``), or None outside msrun. ParallelError
    naming MS_WORKER_NUM where it is not a worker count."""
    if not all(name in os.environ for name in MSRUN_VARIABLES):
        return None
    return variable("MS_WORKER_NUM", whole_number(1, 1 << 20), unset_means="a run outside msrun",
                    wrong="not msrun's worker count", error=ParallelError)


class SingleProcess:
    """One process: the whole batch, no collectives."""

    rank, size, writes = 0, 1, True

    def shard(self, rows):
        """The rows of a batch of ``rows`` examples this worker trains on (a slice), or None to skip it."""
        return slice(0, rows)

    def steps(self, examples, batch_size):
        """Train steps in an epoch of ``examples`` (the batches ``shard`` does not skip)."""
        return math.ceil(examples / batch_size)

    def grad_reducer(self, parameters):
        return None

    def any(self, flag):
        """True if ``flag`` is true on any worker: one decision (e.g. out of time) for all."""
        return bool(flag)

    def sum(self, counts):
        """Element-wise sum of ``counts`` (integers below 2**24) over the workers, e.g. held-out hits per worker."""
        return np.asarray(counts)

    def barrier(self):
        pass

    def check_same(self, what, data: bytes):
        pass


class DataParallel(SingleProcess):
    """A worker of an msrun job: ``init()``, MindSpore's DATA_PARALLEL mode, rank and size.

    Only rank 0 ``writes`` (model folder, training state, progress). The device (``--device``)
    must be set before (``device.use_device``): ``init()`` picks the collectives by it.
    """

    def __init__(self):
        import mindspore as ms
        from mindspore.communication import get_group_size, get_rank, init
        os.environ.setdefault("MS_CPU_COMM_OP_TIMEOUT", str(COMM_TIMEOUT_S))
        # On msrun's scheduler (train.py run once more, MS_ROLE=MS_SCHED) init() serves the job to its end.
        watch = WorkerWatch() if os.environ.get("MS_ROLE") == "MS_SCHED" else None
        join_job(init, watch)   # CPU: MindSpore's own collectives; GPU: NCCL; Ascend: HCCL. Blocks until every worker has joined
        ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True)
        self.rank, self.size = get_rank(), get_group_size()
        self.writes = self.rank == 0

    def shard(self, rows):
        """Equal shards: a last partial batch is cut to a multiple of the workers (its
        last ``rows % size`` examples are left out), a batch of fewer rows than workers is skipped."""
        b = rows // self.size
        return slice(self.rank * b, (self.rank + 1) * b) if b else None

    def steps(self, examples, batch_size):
        return examples // batch_size + (examples % batch_size >= self.size)

    def grad_reducer(self, parameters):
        from mindspore import nn
        return nn.DistributedGradReducer(parameters, mean=True, degree=self.size)

    def sum(self, counts):
        """Sum over the workers (MindSpore's CPU AllReduce only sums), float32: exact for integers < 2**24."""
        import mindspore as ms
        from mindspore import ops
        return ops.AllReduce()(ms.Tensor(np.asarray(counts, np.float32))).asnumpy()

    def any(self, flag):
        return bool(self.sum([float(bool(flag))])[0] > 0)

    def barrier(self):
        self.any(False)

    def check_same(self, what, data: bytes):
        """Stop with ParallelError, on every worker, unless ``data`` (e.g. the tokenizer file) is the same on all."""
        crc = zlib.crc32(data)
        halves = np.array([crc >> 16, crc & 0xFFFF], np.float32)   # sums of 16-bit halves stay exact in float32
        differs = not np.array_equal(self.sum(halves), halves * self.size)   # equal to n x mine only if all equal
        if self.any(differs):
            raise ParallelError(f"the data-parallel workers have different {what}; "
                                "give them the same files, seed and flags")
