"""Compiled CPU kernels for the train step's backward pass, and the one place
that chooses them (see README.md in this folder).

``linear()``, ``layer_norm(eps)``, ``softmax()``, ``batch_matmul()`` and ``activation(name, fn)``
return what a layer computes with:
MindSpore's own ops, or the same forward whose gradient comes from
``backward.cc``, compiled on first use (``build.py``). Without a compiler or
BLAS the layers use MindSpore's ops, after a one-line notice;
``ALBERT_MIN_KERNELS=off`` asks for them.
"""

import ctypes
import os
import sys

from .build import KernelBuildError, library_path
from .layers import (Activation, BatchMatMul, BatchMatMulWithKernels, GeluNewWithKernels, LayerNorm,
                     LayerNormWithKernels, Linear, LinearWithKernels, Softmax, SoftmaxWithKernels)

_LIBRARY = {}      # compile-cache root -> library path, or None where it could not be built
# OpenBLAS's sgemm rounds differently on 1 and 2 threads, so the count is fixed (not
# the machine's cores) for runs to repeat bit for bit. One thread measured faster on
# the shared 2-core machine, where a second BLAS thread waits on a busy core
# (benchmarks/backward_kernels.py times both).
BLAS_THREADS = 1
# The kernels' own use of the second core (helper.h: a helper thread that sleeps between
# calls, each output computed by one thread, so any count gives the same bits).
KERNEL_THREADS = min(2, len(os.sched_getaffinity(0)))


def enabled() -> bool:
    """False when ``ALBERT_MIN_KERNELS`` is off / 0 / false / no."""
    return os.environ.get("ALBERT_MIN_KERNELS", "on").strip().lower() not in ("off", "0", "false", "no")


def library():
    """Path of the compiled kernels, or None: switched off, or not buildable here (noticed once)."""
    if not enabled():
        return None
    from ..classify import default_compile_cache      # local import: classify is not needed otherwise
    root = default_compile_cache()
    if root not in _LIBRARY:
        try:
            path = library_path(root)
            loaded = ctypes.CDLL(path)                 # fails here, not inside a graph, if it cannot load
            loaded.set_blas_threads(BLAS_THREADS)
            loaded.set_kernel_threads(KERNEL_THREADS)
        except (KernelBuildError, OSError) as err:
            print(f"albert_min: kernels not built ({err}); using MindSpore's ops", file=sys.stderr)
            path = None
        _LIBRARY[root] = path
    return _LIBRARY[root]


def set_blas_threads(threads):
    """OpenBLAS's thread count for the kernels (the whole process's OpenBLAS)."""
    path = library()
    if path:
        ctypes.CDLL(path).set_blas_threads(int(threads))


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


def activation(name, fn):
    """``fn``, the activation called ``name`` in the config, or a Cell computing it whose gradient
    comes from the kernels (``gelu_new``, the one the ALBERT models use)."""
    path = library()
    return GeluNewWithKernels(fn, path) if path and name == "gelu_new" else fn


__all__ = ["KernelBuildError", "enabled", "library", "linear", "layer_norm", "softmax", "batch_matmul", "activation",
           "set_blas_threads", "set_kernel_threads"]
