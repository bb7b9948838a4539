"""Compiled CPU kernels for the train step's backward pass, and the one place
that chooses them (see README.md in this folder).

``linear()``, ``layer_norm(eps)``, ``softmax()``, ``batch_matmul()``, ``swap_middle_axes()`` and
``activation(name, fn)``
return what a layer computes with:
MindSpore's own ops, or the same forward whose gradient comes from
``backward.cc``, compiled on first use (``build.py``). Without a compiler or
BLAS the layers use MindSpore's ops, after a one-line notice;
``ALBERT_MIN_KERNELS=off`` asks for them, and so does ``forward_only()`` for the
layers built inside it (a model that only predicts); they are used on CPU only
(``albert_min.device``).
"""

import contextlib
import ctypes
import os
import sys

from .build import KernelBuildError, library_path
from .layers import (Activation, BatchMatMul, BatchMatMulWithKernels, GeluNewWithKernels, LayerNorm,
                     LayerNormWithKernels, Linear, LinearWithKernels, Softmax, SoftmaxWithKernels, SwapMiddleAxes,
                     SwapMiddleAxesWithKernels)

_LIBRARY = {}      # compile-cache root -> library path, or None where it could not be built
# OpenBLAS's sgemm rounds differently on 1 and 2 threads, so the count is fixed (not
# the machine's cores) for runs to repeat bit for bit. One thread measured faster on
# the shared 2-core machine, where a second BLAS thread waits on a busy core
# (benchmarks/backward_kernels.py times both).
BLAS_THREADS = 1
# The kernels' own use of the second core (helper.h: a helper thread that sleeps between
# calls, each output computed by one thread, so any count gives the same bits).
KERNEL_THREADS = min(2, len(os.sched_getaffinity(0)))
_FORWARD_ONLY = False   # True inside forward_only()


def enabled() -> bool:
    """False when ``ALBERT_MIN_KERNELS`` is off / 0 / false / no."""
    return os.environ.get("ALBERT_MIN_KERNELS", "on").strip().lower() not in ("off", "0", "false", "no")


@contextlib.contextmanager
def forward_only():
    """Layers built inside use MindSpore's own ops and never build or load the kernels.

    In inference the kernel layers run MindSpore's own forward (layers.py: the kernels are
    the gradients, and LayerNorm's forward in training), so a model that only predicts
    (evaluate.py) would pay for nothing:
    on a machine's first run, a g++ build of 4-8 s (docs/speed.md, "evaluate.py start-up").
    """
    global _FORWARD_ONLY
    saved, _FORWARD_ONLY = _FORWARD_ONLY, True
    try:
        yield
    finally:
        _FORWARD_ONLY = saved


def library():
    """Path of the compiled kernels, or None: switched off, inside ``forward_only()``, MindSpore
    runs on GPU or Ascend (the kernels are CPU code: ``device.applies_cpu_only_parts``), or not
    buildable here (noticed once)."""
    from ..device import applies_cpu_only_parts, current_device   # local import, as below
    if not enabled() or _FORWARD_ONLY or not applies_cpu_only_parts(current_device()):
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


def swap_middle_axes():
    """The Cell computing ``x [B, P, Q, D] -> [B, Q, P, D]`` (attention's head split and merge)."""
    path = library()
    return SwapMiddleAxesWithKernels(path) if path else SwapMiddleAxes()


def use_mindspore_ops(model):
    """Swap every compiled-kernel layer inside ``model`` for the MindSpore-ops layer with the same
    forward. The kernels compute in float32 only (OpenBLAS ``sgemm``), so mixed precision runs
    on MindSpore's ops (albert_min.mixed_precision)."""
    plain = {LinearWithKernels: lambda c: Linear(), LayerNormWithKernels: lambda c: LayerNorm(c.eps),
             SoftmaxWithKernels: lambda c: Softmax(), BatchMatMulWithKernels: lambda c: BatchMatMul(c.transpose_b),
             GeluNewWithKernels: lambda c: Activation(c.fn), SwapMiddleAxesWithKernels: lambda c: SwapMiddleAxes()}
    for _, cell in list(model.cells_and_names()):
        for name, child in list(cell.name_cells().items()):
            if type(child) in plain:
                setattr(cell, name, plain[type(child)](child))
    return model


def activation(name, fn):
    """``fn``, the activation called ``name`` in the config, or a Cell computing it whose gradient
    comes from the kernels (``gelu_new``, the one the ALBERT models use)."""
    path = library()
    return GeluNewWithKernels(fn, path) if path and name == "gelu_new" else fn


__all__ = ["KernelBuildError", "enabled", "forward_only", "library", "linear", "layer_norm", "softmax", "batch_matmul",
           "swap_middle_axes", "activation", "set_blas_threads", "set_kernel_threads", "use_mindspore_ops"]
