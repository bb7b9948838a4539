"""Compiled CPU kernels for ALBERT's layers (forward, gradient and dropout), and the one place
that chooses them (see README.md in this folder).

``linear()``, ``layer_norm(eps)``, ``softmax()``, ``batch_matmul()``, ``swap_middle_axes()``,
``activation(name, fn)`` and ``dropout(p)`` return what a layer computes with:
MindSpore's own ops, or the same forward whose gradient comes from
the op's ``.cc`` (``dense.cc``, ...), compiled on first use (``build.py``; a cached library that is not
what its build recorded is built again, after a one-line notice). Their matrix products are
oneDNN's ``dnnl_sgemm``, from the library MindSpore ships. Without a compiler or that
library, or with a library that does not load or lacks a kernel, the layers use MindSpore's
ops, after a one-line notice;
``ALBERT_MIN_KERNELS=off`` asks for them, and so does ``mindspore_ops()`` for the
layers built inside it (a model exported to MindIR); they are used on CPU only
(``albert_min.common.device``).

``quantize_int8(model)`` (``int8.py``, ``int8.cc``) is a step applied to a built model for
prediction: its Dense layers in int8, each weight quantized once.

Layer: ``albert_min.model``, above ``common`` (the layers: ``albert_min/__init__.py``).
"""

import contextlib
import ctypes
import os
import sys

from mindspore import nn

from ...common.environment import SWITCH, choice, variable
from ...common.errors import os_error_text
from .build import KernelBuildError, library_path
from .philox_dropout import DropoutWithKernels
from .int8 import DenseInt8, Int8Error, Int8Report, quantize_int8
from .layers import (Activation, BatchMatMul, BatchMatMulWithKernels, GeluNewWithKernels, LayerNorm,
                     LayerNormWithKernels, Linear, LinearWithKernels, Softmax, SoftmaxWithKernels, SwapMiddleAxes,
                     SwapMiddleAxesWithKernels)

_LIBRARY = {}      # compile-cache root -> library path, or None where it could not be built
# Every function the layers call in the library (layers.py, philox_dropout.py) and the loader's:
# a library that lacks one (a foreign file in the cache) is not used.
FUNCTIONS = ("dense_forward", "dense_backward", "layer_norm_forward", "layer_norm_backward", "softmax_backward",
             "gelu_new_forward", "gelu_new_backward", "batch_matmul_nn", "batch_matmul_nt", "batch_matmul_tn",
             "swap_middle_axes", "dropout_apply", "set_kernel_threads", "flush_denormals",
             "dense_int8_forward", "int8_available")


def usable_cpus():
    """The CPUs this process may run on (its affinity where the OS has one: Linux), else the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):            # macOS, Windows
        return os.cpu_count() or 1


# The kernels' own use of the second core (helper.h: a helper thread that sleeps between
# calls, each output computed by one thread, so any count gives the same bits). oneDNN's
# sgemm runs on the calling thread: this build of it has no thread pool of its own.
KERNEL_THREADS = min(2, usable_cpus())
_MINDSPORE_OPS = False   # True inside mindspore_ops()


def enabled() -> bool:
    """False when ``ALBERT_MIN_KERNELS`` is off / 0 / false / no, True when unset or on / 1 / true / yes;
    another value is a SettingError naming it."""
    return variable("ALBERT_MIN_KERNELS", choice(SWITCH), default=True, unset_means="on", wrong="not on or off")


@contextlib.contextmanager
def mindspore_ops():
    """Layers built inside use MindSpore's own ops and never build or load the kernels: a graph
    exported to MindIR (albert_min.export) must run where albert_min's library is not."""
    global _MINDSPORE_OPS
    saved, _MINDSPORE_OPS = _MINDSPORE_OPS, True
    try:
        yield
    finally:
        _MINDSPORE_OPS = saved


def library():
    """Path of the compiled kernels, or None: switched off, inside ``mindspore_ops()``, MindSpore
    runs on GPU or Ascend (the kernels are CPU code: ``device.applies_cpu_only_parts``), or not
    buildable here (noticed once)."""
    if _MINDSPORE_OPS:
        return None
    return built()


def built():
    """``library()`` ignoring ``mindspore_ops()``: the kernels' path where this process can use them."""
    from ...common.device import (applies_cpu_only_parts, cache_not_usable, current_device,  # local import
                                  default_compile_cache, under)
    if not enabled() or not applies_cpu_only_parts(current_device()):
        return None
    root = default_compile_cache()
    if root not in _LIBRARY:
        try:
            path = library_path(root, notice=lambda line: print(f"albert_min: kernels: {line}", file=sys.stderr))
        except (KernelBuildError, OSError) as err:
            if under(getattr(err, "filename", None), root):   # the cache folder: evaluate's graphs cannot go there either
                cache_not_usable(root, err, "kernels not built (MindSpore's ops used), no compiled graphs kept")
            else:
                print(f"albert_min: kernels not built ({os_error_text(err)}); using MindSpore's ops", file=sys.stderr)
            path = None
        if path and not _loads(path):
            path = None
        _LIBRARY[root] = path
    return _LIBRARY[root]


def _loads(path):
    """Does the library at ``path`` load, with every function in ``FUNCTIONS``? Fails here, not
    inside a graph; a library that does not (a foreign one in the cache: its record matches but
    it is not albert_min's) is noticed once and not used."""
    try:
        loaded = ctypes.CDLL(path)
        missing = [name for name in FUNCTIONS if not hasattr(loaded, name)]
        if missing:
            more = f" and {len(missing) - 1} more of the kernels' functions" if len(missing) > 1 else ""
            raise AttributeError(f"it lacks {missing[0]}{more}: not albert_min's kernels")
        loaded.set_kernel_threads(KERNEL_THREADS)
    except Exception as err:                    # noqa: BLE001 - whatever the loader raises: MindSpore's ops
        print(f"albert_min: kernels not used ({path}: {os_error_text(err)}); using MindSpore's ops", file=sys.stderr)
        return False
    return True


def prepare_cpu(threads=None):
    """What ``albert_min.common.device.use_device`` runs on CPU before it sets MindSpore's thread count
    (its ``cpu_setup``; ``threads``: the count asked for, None for ``default_cpu_threads``): builds the
    kernels, and where MindSpore will run more than one kernel thread, flushes denormals on this
    thread as its pool threads do. At one thread the process's floating-point mode is left alone: it
    is the user's process too (numpy, hypothesis and the like see subnormals). True where the kernels
    are built: their dropout makes a run's bits the same at any MindSpore thread count."""
    if not built():
        return False
    from ...common.device import default_cpu_threads
    if (default_cpu_threads(True) if threads is None else threads) > 1:
        flush_denormals()
    return True


def flush_denormals():
    """Denormals read and written as zero on this thread and on the threads started from it from now
    on (``cpu_state.cc``); ``prepare_cpu`` calls it before MindSpore starts its threads, so that
    a computation gives the same bits on whichever thread runs it. Returns False (and changes
    nothing) where the kernels are not built."""
    path = built()
    if not path:
        return False
    import numpy as np
    for dtype in (np.float16, np.float32, np.float64, np.longdouble):
        np.finfo(dtype)   # NumPy measures (and caches) each type's smallest subnormal: before, not after
    ctypes.CDLL(path).flush_denormals()
    return True


def set_kernel_threads(threads):
    """How many threads (1 or 2) the kernels split their work over; results do not depend on it."""
    path = library()
    if path:
        ctypes.CDLL(path).set_kernel_threads(int(threads))


def linear():
    """The Cell computing ``(x, weight, bias) -> x weight^T + bias`` for a Dense layer."""
    path = library()
    return LinearWithKernels(path) if path else Linear()


def layer_norm(eps):
    """The Cell computing ``(x, weight, bias) -> LayerNorm(x)`` over the last axis."""
    path = library()
    return LayerNormWithKernels(eps, path) if path else LayerNorm(eps)


def softmax():
    """The Cell computing softmax over the last axis (attention probabilities)."""
    path = library()
    return SoftmaxWithKernels(path) if path else Softmax()


def batch_matmul(transpose_b=False):
    """The Cell computing ``(a, b) -> a b`` (``a b^T`` with ``transpose_b``) over leading batch dimensions."""
    path = library()
    return BatchMatMulWithKernels(path, transpose_b) if path else BatchMatMul(transpose_b)


def dropout(p):
    """The Cell for dropout with probability ``p``: masks from (seed, step, call, element) through
    ``dropout.cc``, the same at any thread count (``philox_dropout.py``), or ``nn.Dropout``."""
    path = library()
    return DropoutWithKernels(p, path) if path else nn.Dropout(p=p)


def swap_middle_axes():
    """The Cell computing ``x [B, P, Q, D] -> [B, Q, P, D]`` (attention's head split and merge)."""
    path = library()
    return SwapMiddleAxesWithKernels(path) if path else SwapMiddleAxes()


def use_mindspore_ops(model):
    """Swap every compiled-kernel layer inside ``model`` for the MindSpore-ops layer with the same
    forward. The kernels compute in float32 only (oneDNN's ``sgemm``), so mixed precision runs
    on MindSpore's ops (albert_min.training.mixed_precision). The dropout kernel stays: it casts a float16
    input to float32 and back, and its masks do not depend on MindSpore's thread count."""
    plain = {LinearWithKernels: lambda c: Linear(), LayerNormWithKernels: lambda c: LayerNorm(c.eps),
             SoftmaxWithKernels: lambda c: Softmax(), BatchMatMulWithKernels: lambda c: BatchMatMul(c.transpose_b),
             GeluNewWithKernels: lambda c: Activation(c.fn), SwapMiddleAxesWithKernels: lambda c: SwapMiddleAxes()}
    for _, cell in list(model.cells_and_names()):
        for name, child in list(cell.name_cells().items()):
            if type(child) in plain:
                setattr(cell, name, plain[type(child)](child))
    return model


def uses_kernels(model) -> bool:
    """Does any layer of ``model`` compute with the compiled kernels (dropout included)?"""
    kinds = (LinearWithKernels, LayerNormWithKernels, SoftmaxWithKernels, BatchMatMulWithKernels,
             GeluNewWithKernels, DropoutWithKernels, DenseInt8)
    return any(isinstance(cell, kinds) for _, cell in model.cells_and_names())


def activation(name, fn):
    """``fn``, the activation called ``name`` in the config, or a Cell computing it whose gradient
    comes from the kernels (``gelu_new``, the one the ALBERT models use)."""
    path = library()
    return GeluNewWithKernels(fn, path) if path and name == "gelu_new" else fn


__all__ = ["KernelBuildError", "enabled", "mindspore_ops", "library", "built", "linear", "layer_norm", "softmax",
           "batch_matmul", "swap_middle_axes", "activation", "dropout", "uses_kernels", "prepare_cpu", "flush_denormals",
           "set_kernel_threads", "use_mindspore_ops", "quantize_int8", "DenseInt8", "Int8Error",
           "Int8Report"]
