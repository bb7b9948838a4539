"""Dropout whose mask is a pure function of (seed, step, call, element): the same at any thread count.

MindSpore's CPU Dropout draws from one random engine shared by the threads it launches, so its
masks depend on scheduling, and its state lives inside the kernel, where a run cannot save it.
Here element ``e`` of a call is kept when word ``e % 4`` of Philox4x32-10 (``dropout.cc``) of

    counter = (e // 4, call, step),  key = (key0, key1) from (seed, data-parallel rank)

is below ``keep * 2**32``. ``call`` numbers the dropout calls of one train step in the order the
forward runs them (ALBERT's shared layer calls its dropouts once per loop), counted by the
graph itself in ``DropoutCounter``; the Trainer sets (key, step, 0) before every step
(``start_step``). So a resumed run draws the masks the uninterrupted run drew, with no
recompile, and the gradient recomputes the forward's mask from the same four numbers.
"""

import numpy as np
import mindspore as ms
from mindspore import Parameter, nn, ops


@ms.jit_class
class DropoutCounter:
    """(key0, key1, step, call) as one int32 Parameter, outside every model: not saved with one.

    ``take()`` returns the current state and counts one call, inside a compiled graph too
    (MindSpore orders the read before the increment, and the calls in program order).
    """

    def __init__(self):
        self.state = Parameter(ms.Tensor(np.zeros(4, np.int32)), name="albert_min_dropout_counter",
                               requires_grad=False)
        self.one_call = ms.Tensor(np.array([0, 0, 0, 1], np.int32))

    def take(self):
        current = self.state + 0                 # a copy: the value before this call's increment
        ops.assign_add(self.state, self.one_call)
        return current


COUNTER = DropoutCounter()


def key(seed, rank=0):
    """The Philox key of a run: two words from (seed, rank) (rank 0: the single-process masks)."""
    entropy = [int(seed)] + ([int(rank)] if rank else [])
    return np.random.SeedSequence(entropy).generate_state(2, np.uint32)


def start_step(seed, step, rank=0):
    """Before a train step: the masks of step ``step`` of the run seeded ``seed`` (this ``rank``'s)
    follow. An in-place assign: a compiled graph reads the same Parameter memory (``set_data``
    would give the Parameter new memory the compiled graph does not see)."""
    k0, k1 = key(seed, rank)
    state = np.array([k0, k1, np.uint32(step & 0xFFFFFFFF), 0], np.uint32).view(np.int32)
    ops.assign(COUNTER.state, ms.Tensor(state))


def current_state():
    """(key0, key1, step, call) as uint32, e.g. to check a count of calls."""
    return COUNTER.state.asnumpy().view(np.uint32)


def dropout_apply_shape(x, state, keep):
    return x


class DropoutMask(nn.Cell):
    """``(x, state, keep) -> x * mask / keep``; its gradient is the same kernel on ``dout``, with the
    forward's state, so no mask is kept between the passes."""

    def __init__(self, library):
        super().__init__()
        self.apply_mask = ops.Custom(f"{library}:dropout_apply", func_type="aot", out_shape=dropout_apply_shape,
                                     out_dtype=dropout_apply_shape)

    def construct(self, x, state, keep):
        return self.apply_mask(x, state, keep)

    def bprop(self, x, state, keep, out, dout):
        return self.apply_mask(dout, state, keep), ops.zeros_like(state), ops.zeros_like(keep)


class DropoutWithKernels(nn.Cell):
    """``nn.Dropout(p)`` with the masks of ``dropout.cc`` (identity in inference and for p = 0).

    float32 inside: a float16 input (mixed precision) is cast up and the result back down.
    """

    def __init__(self, p, library):
        super().__init__()
        if not 0 <= p < 1:
            raise ValueError(f"dropout probability {p} is not in [0, 1)")
        self.p = float(p)
        self.keep = ms.Tensor([1.0 - self.p], ms.float32)
        self.masked = DropoutMask(library)

    def construct(self, x):
        if not self.training or self.p == 0:
            return x
        state = COUNTER.take()
        if x.dtype == ms.float32:
            return self.masked(x, state, self.keep)
        return self.masked(x.astype(ms.float32), state, self.keep).astype(x.dtype)

    def extend_repr(self):
        return f"p={self.p}"
