"""Compiled CPU kernels for ALBERT's layers (forward, gradient and dropout), and the step that
swaps them into a built model (see README.md in this folder).

``accelerate(model)`` (``accelerate.py``) swaps the layers of a model built by ``albert_min.model``
(MindSpore's ops) in place for cells computing the same functions with the kernels, forward and
gradient (``layers.py``, ``philox_dropout.py``; the C++ a file per op: ``dense.cc``, ``layer_norm.cc``, ...),
compiled on first use (``build.py``; a cached
library that is not what its build recorded is built again, after a one-line notice). Their
matrix products are oneDNN's ``dnnl_sgemm``, from the library MindSpore ships. Without a compiler
or that library, or with a library that does not load or lacks a kernel, the model stays on
MindSpore's ops, after a one-line notice; ``ALBERT_MIN_KERNELS=off`` asks for that, and so does
a device other than the CPU (``albert_min.common.device``). A model exported to MindIR is never
accelerated. ``use_mindspore_ops(model)`` swaps the kernels back out (mixed precision).

``quantize_int8(model)`` (``int8.py``, ``int8.cc``) is a step applied to a built model for
prediction: its Dense layers in int8, each weight quantized once. ``use_bf16_gemms(model)``
(``bf16.py``, ``bf16_attention.py``, ``bf16.cc``) is one for training (``train.py --amp bf16``): its
matrix products from bfloat16 operands (the attention's on the heads where they lie), everything else
float32.

Layer: ``albert_min.model``, above ``common`` (the layers: ``albert_min/__init__.py``); inside it, above
``heads`` and ``modeling``, whose cells ``accelerate`` swaps (they import no kernels: ``.importlinter``).
"""

import ctypes
import os
import sys

from ...common.environment import SWITCH, choice, variable
from ...common.errors import os_error_text
from .build import KernelBuildError, library_path
from .accelerate import (KernelAttention, KernelDense, KernelLayerNorm, KernelMLMHead, accelerate,
                         use_mindspore_ops)
from .philox_dropout import DropoutWithKernels
from .int8 import DenseInt8, Int8Error, Int8Report, quantize_int8
from .bf16 import FUNCTIONS as BF16_FUNCTIONS, Bf16Report, use_bf16_gemms, uses_bf16_gemms
from .layers import (AttentionProbabilitiesWithKernels, BatchMatMulWithKernels, GeluNewWithKernels,
                     LayerNormWithKernels, LinearWithKernels, SoftmaxWithKernels)

_LIBRARY = {}      # compile-cache root -> library path, or None where it could not be built
# Every function the layers call in the library (layers.py, philox_dropout.py) and the loader's:
# a library that lacks one (a foreign file in the cache) is not used.
FUNCTIONS = ("dense_forward", "dense_backward", "layer_norm_forward", "layer_norm_backward", "softmax_backward",
             "masked_softmax_backward", "gelu_new_forward", "gelu_new_backward", "batch_matmul_nn", "batch_matmul_nt",
             "batch_matmul_tn", "swap_middle_axes", "dropout_apply", "set_kernel_threads", "flush_denormals",
             "dense_int8_forward", "qkv_int8_forward", "dense_int8_heads_forward", "masked_softmax", "int8_available",
             *BF16_FUNCTIONS)


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


def enabled() -> bool:
    """False when ``ALBERT_MIN_KERNELS`` is off / 0 / false / no, True when unset or on / 1 / true / yes;
    another value is a SettingError naming it."""
    return variable("ALBERT_MIN_KERNELS", choice(SWITCH), default=True, unset_means="on", wrong="not on or off")


def library():
    """Path of the compiled kernels, or None: switched off, MindSpore runs on GPU or Ascend (the
    kernels are CPU code: ``device.applies_cpu_only_parts``), or not buildable here (noticed once).
    The same as ``built()``."""
    return built()


def built():
    """The kernels' path where this process can use them, else None (``library()``)."""
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


def uses_kernels(model) -> bool:
    """Does any layer of ``model`` compute with the compiled kernels (dropout included)?"""
    kinds = (LinearWithKernels, LayerNormWithKernels, SoftmaxWithKernels, AttentionProbabilitiesWithKernels,
             BatchMatMulWithKernels, GeluNewWithKernels, DropoutWithKernels, DenseInt8)
    return any(isinstance(cell, kinds) for _, cell in model.cells_and_names())


__all__ = ["KernelBuildError", "enabled", "library", "built", "accelerate", "uses_kernels", "prepare_cpu",
           "flush_denormals", "set_kernel_threads", "use_mindspore_ops", "quantize_int8", "DenseInt8", "Int8Error",
           "Int8Report", "KernelDense", "KernelLayerNorm", "KernelAttention", "KernelMLMHead",
           "use_bf16_gemms", "uses_bf16_gemms", "Bf16Report"]
