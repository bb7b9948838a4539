"""bf16 matrix products for training on CPU: a step applied to a built model that swaps its
compiled-kernel matrix products for ones multiplying bfloat16 operands.

    from albert_min.model import kernels
    report = kernels.use_bf16_gemms(model)       # in place; train.py --amp bf16
    print(report.line())

Each ``LinearWithKernels`` (x W^T + b of a Dense layer) and ``BatchMatMulWithKernels`` (attention's
q k^T and p v) found anywhere in ``model`` becomes ``LinearBf16`` / ``BatchMatMulBf16``, and each
``KernelAttention`` a ``Bf16Attention`` (bf16_attention.py: in training the same two products on the
heads where they lie, without the transposes around them): in training,
their forward and gradient products round both operands to bfloat16 (round to nearest even) and
multiply them with oneDNN's ``dnnl_gemm_bf16bf16f32`` (``bf16.cc``), accumulating in float32. The
tensors between layers, the weights (the optimizer's float32 master copy), the bias and its
gradient, LayerNorm, softmax, GELU, dropout and the loss all stay float32: nothing else changes.
In prediction (``set_train(False)``: the dev evaluation during training) the same cells compute in
float32, as ``evaluate.py`` runs the saved float32 model.

Where it cannot run (no compiled kernels: switched off, no compiler, another device, inside
``mindspore_ops()``; or a libdnnl without the bf16 gemm) ``use_bf16_gemms`` changes nothing, and its
report says why (one notice line).

Layer: ``albert_min.model.kernels``, above ``accelerate`` (it swaps what accelerate built).
"""

import ctypes
import sys
from dataclasses import dataclass

import numpy as np
from mindspore import ops

from .accelerate import KernelAttention
from .bf16_attention import Bf16Attention
from .layers import (BatchMatMulWithKernels, LinearWithKernels, batch_matmul_tn_shape, dense_backward_shapes,
                     dense_backward_types, forward_kernel, like_first)
from .swap import swap_cells

# The library's bf16 functions (bf16.cc): listed in kernels.FUNCTIONS too, so a foreign library is refused.
FUNCTIONS = ("dense_forward_bf16", "dense_backward_bf16", "batch_matmul_nn_bf16", "batch_matmul_nt_bf16",
             "batch_matmul_tn_bf16", "attention_scores_bf16", "attention_context_bf16", "attention_context_tn_bf16",
             "bf16_available", "round_to_bf16")


class LinearBf16(LinearWithKernels):
    """``LinearWithKernels`` whose products, in training, take bfloat16 operands: ``dense_forward_bf16``
    (x and W rounded, float32 accumulation, the bias added in float32) and ``dense_backward_bf16``
    (dx = dy W and dW = dy^T x from rounded operands, db summed in float32)."""

    def __init__(self, library):
        super().__init__(library)
        self.forward_bf16 = forward_kernel(library, "dense_forward_bf16", ("x", "weight", "bias"))
        self.backward_bf16 = ops.Custom(f"{library}:dense_backward_bf16", func_type="aot",
                                        out_shape=dense_backward_shapes, out_dtype=dense_backward_types)

    def construct(self, x, weight, bias):
        if self.training:
            return self.forward_bf16(x, weight, bias)
        return self.forward(x, weight, bias)

    def bprop(self, x, weight, bias, out, dout):
        return self.backward_bf16(x, weight, dout)


class BatchMatMulBf16(BatchMatMulWithKernels):
    """``BatchMatMulWithKernels`` whose products, in training, forward and gradient, take bfloat16
    operands (``batch_matmul_nn/nt/tn_bf16``: one bf16 gemm per matrix of the batch)."""

    def __init__(self, library, transpose_b=False):
        super().__init__(library, transpose_b)
        self.nn_bf16 = forward_kernel(library, "batch_matmul_nn_bf16", ("a", "b"))
        self.nt_bf16 = forward_kernel(library, "batch_matmul_nt_bf16", ("a", "b"))
        self.tn_bf16 = ops.Custom(f"{library}:batch_matmul_tn_bf16", func_type="aot",
                                  out_shape=batch_matmul_tn_shape, out_dtype=like_first)

    def construct(self, a, b):
        if not self.training:
            return self.nt(a, b) if self.transpose_b else self.nn(a, b)
        if self.transpose_b:
            return self.nt_bf16(a, b)
        return self.nn_bf16(a, b)

    def bprop(self, a, b, out, dout):
        if self.transpose_b:                                 # out = a b^T: da = dout b, db = dout^T a
            return self.nn_bf16(dout, b), self.tn_bf16(dout, a)
        return self.nt_bf16(dout, b), self.tn_bf16(a, dout)  # out = a b: da = dout b^T, db = a^T dout


def has_bf16_gemm(path):
    """Whether the kernels' library at ``path`` found ``dnnl_gemm_bf16bf16f32`` (bf16.cc's weak reference)."""
    return bool(ctypes.CDLL(path).bf16_available())


def unavailable(path):
    """Why bf16 products cannot run with the kernels' library at ``path`` (None: not built), or None if they can."""
    if not path:
        return ("the compiled kernels are not in use: ALBERT_MIN_KERNELS=off, a device other than CPU, or not built "
                "(a line above says why)")
    if not has_bf16_gemm(path):
        return ("the kernels were built without oneDNN's dnnl_gemm_bf16bf16f32 "
                "(mindspore/lib/libdnnl.so.3 missing or without it)")
    return None


@dataclass
class Bf16Report:
    """What ``use_bf16_gemms`` did: ``cells`` distinct matrix-product cells swapped (a shared layer's once)."""
    cells: int = 0
    reason: str = None        # why nothing was swapped, or None

    def line(self):
        if self.reason:
            return f"albert_min: bf16 GEMMs not available ({self.reason}); computing in float32"
        return (f"albert_min: bf16 GEMMs: {self.cells} matrix-product layers multiply bfloat16 operands in "
                "training (float32 accumulation, weights and everything else float32)")


def use_bf16_gemms(model, path=None, notice=True):
    """Swap every ``LinearWithKernels`` and ``BatchMatMulWithKernels`` inside ``model`` for ``LinearBf16`` /
    ``BatchMatMulBf16``, in place; a cell held in several places (ALBERT's shared layer) becomes one
    swapped cell. ``path``: the kernels' library (default: ``kernels.library()``). Where bf16 cannot run,
    nothing changes and the report says why. ``notice``: print the report's line on stderr when
    nothing could be swapped."""
    from . import library
    path = library() if path is None else path
    report = Bf16Report(reason=unavailable(path))
    if report.reason is None:
        make = {LinearWithKernels: lambda cell: LinearBf16(path),
                BatchMatMulWithKernels: lambda cell: BatchMatMulBf16(path, cell.transpose_b)}

        def bf16_cell(cell):
            swapped = make[type(cell)](cell)
            swapped.set_train(cell.training)          # as the model was set, until set again
            return swapped
        # the exact types: a bf16 cell is left as it is
        report.cells = swap_cells(model, lambda cell: type(cell) in make, bf16_cell)
        swap_cells(model, lambda cell: type(cell) is KernelAttention,
                   lambda cell: Bf16Attention(cell, path).set_train(cell.training))
        if not report.cells and not uses_bf16_gemms(model):   # a plain model: nothing to swap, so say so
            report.reason = "the model has no compiled-kernel products: kernels.accelerate(model) first"
    if notice and report.reason:
        print(report.line(), file=sys.stderr)
    return report


def uses_bf16_gemms(model) -> bool:
    """Does any matrix product of ``model`` multiply bfloat16 operands in training (``use_bf16_gemms``)?"""
    return any(isinstance(cell, (LinearBf16, BatchMatMulBf16)) for _, cell in model.cells_and_names())


def round_to_bf16(path, values):
    """The kernels' rounding through ctypes (tests): float32 ``values`` -> bfloat16 values as float32."""
    src = np.ascontiguousarray(values, np.float32)
    bits = np.empty(src.shape, np.uint16)
    ctypes.CDLL(path).round_to_bf16(ctypes.c_void_p(src.ctypes.data), ctypes.c_int64(src.size),
                                    ctypes.c_void_p(bits.ctypes.data))
    return (bits.astype(np.uint32) << 16).view(np.float32)
