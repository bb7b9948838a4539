"""int8 inference: a step applied to a built model that swaps each Dense layer for ``DenseInt8``.

    from albert_min.model import kernels
    report = kernels.quantize_int8(model)        # in place; prediction only
    print(report.line())

Each Dense weight W ``[out, in]`` is quantized ONCE, per output channel (row n of W: symmetric int8,
scale max|W[n]| / 127), and only the int8 copy is kept: the float32 weight leaves the model. The
activations are quantized per row at run time inside the kernel (``int8.cc``: uint8 with a zero point
per row), multiplied in int32 by oneDNN's ``dnnl_gemm_u8s8s32`` and dequantized with the bias, so the
layer still takes and gives float32 and nothing else in the model changes (LayerNorm, softmax, GELU,
attention products, the MLM decoder tied to the word embeddings: float32).

ALBERT's shared layer is one ``AlbertLayer`` looped L times, so its six Dense cells are the same
objects in every loop: a cell is quantized once whatever number of places hold it (the swap keeps
one ``DenseInt8`` per distinct Dense), and the model holds one int8 copy of the shared weights.

The attention cell (``AlbertAttention`` or ``accelerate``'s ``KernelAttention``) is swapped first, once per
distinct cell, for ``Int8Attention``: q, k and v as ONE int8 product over their concatenated ``[3H, H]``
weight (``QKVInt8``: the input quantized once, not three times; per-output-channel weights make it the
same bits as three ``DenseInt8``), written in the heads' layout; the probabilities in one pass
(``masked_softmax``); the output projection reading the heads' layout (``DenseInt8Heads``). The
profile that chose these: docs/int8.md.

Where it cannot run (no compiled kernels: switched off, no compiler, another device; or a libdnnl
without the int8 gemm) ``quantize_int8`` prints one notice line
and leaves the model in float32. A quantized model refuses training (``set_train(True)`` raises
``Int8Error``): there is no gradient through a rounded weight.

``quantize_int8(model, weights_only=True)`` swaps in ``DenseInt8Weights`` instead: the same int8 weights,
dequantized in the graph by MindSpore's own ops, for a MindIR file (``albert_min.export --int8``), which
can hold no custom op (docs/export.md).

It swaps the Dense layers of a plain or an accelerated model alike (``accelerate``'s ``KernelDense``
is an ``nn.Dense``).

Layer: ``albert_min.model.kernels`` (it knows Dense layers as ``nn.Dense``).
"""

import ctypes
import sys
from dataclasses import dataclass

import numpy as np
import mindspore as ms
from mindspore import Parameter, nn, ops
from mindspore.ops import CustomRegOp, DataType

from ...common.errors import AlbertMinError
from ..modeling import AlbertAttention
from .accelerate import KernelAttention
from .layers import masked_softmax_kernel
from .swap import swap_cells

TRAINING_REFUSED = "an int8 model predicts only; train the float32 model and quantize it after"


class Int8Error(AlbertMinError):
    """A quantized model asked to train."""


def quantize_rows(weight):
    """W ``[N, K]`` float -> (int8 ``[N, K]``, scale ``[N]`` float32, row sums ``[N]`` int32):
    W[n] ~ scale[n] * q[n] with q in [-127, 127] (symmetric: no zero point, so -128 is unused),
    scale = max|W[n]| / 127 (1 for an all-zero row). Rounding to nearest: |W - scale q| <= scale / 2."""
    weight = np.asarray(weight, np.float32)
    peak = np.abs(weight).max(axis=1)
    scale = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    q = np.clip(np.rint(weight / scale[:, None]), -127, 127).astype(np.int8)
    return q, scale, q.sum(axis=1, dtype=np.int32)


def like_first(first, *others):
    return first


def int8_kernel(library, name="dense_int8_forward"):
    """``ops.Custom`` of ``dense_int8_forward`` (int8.cc; or ``qkv_int8_forward``): x f32, W i8, scale f32,
    row sums i32, bias f32 -> y f32, its shape from ``<name>InferShape`` (for the dynamic-shape graph)."""
    info = (CustomRegOp(name).input(0, "x").input(1, "weight").input(2, "scale")
            .input(3, "row_sums").input(4, "bias").output(0, "y")
            .dtype_format(DataType.F32_Default, DataType.I8_Default, DataType.F32_Default, DataType.I32_Default,
                          DataType.F32_Default, DataType.F32_Default)
            .target("CPU").get_op_info())
    return ops.Custom(f"{library}:{name}", func_type="aot", out_shape=None, out_dtype=like_first,
                      reg_info=info)


class DenseInt8(nn.Cell):
    """A Dense layer (``nn.Dense`` without activation: x W^T + b, W ``[out, in]``) computed in int8.

    Holds W as int8 with its per-row scale and row sums (``quantize_rows``; what the kernel needs to
    take the activations' zero points off) and the float32 bias; none of them trainable."""

    def __init__(self, dense, library):
        super().__init__()
        q, scale, row_sums = quantize_rows(dense.weight.asnumpy())
        bias = dense.bias.asnumpy() if dense.has_bias else np.zeros(q.shape[0], np.float32)
        name = dense.weight.name.rsplit(".", 1)[0] + "." if "." in dense.weight.name else ""
        self.weight = Parameter(ms.Tensor(q), name=name + "weight", requires_grad=False)           # (out, in) int8
        self.scale = Parameter(ms.Tensor(scale), name=name + "weight_scale", requires_grad=False)  # (out,)
        self.row_sums = Parameter(ms.Tensor(row_sums), name=name + "weight_row_sums", requires_grad=False)
        self.bias = Parameter(ms.Tensor(bias.astype(np.float32)), name=name + "bias", requires_grad=False)
        self.forward = int8_kernel(library) if library else None

    def add_flags_recursive(self, **flags):
        """``set_train(True)`` on a model holding this cell is refused here, before any graph is compiled:
        the kernel has no gradient, and a graph would silently train the rest of the model around it."""
        if flags.get("training"):
            raise Int8Error(TRAINING_REFUSED)
        return super().add_flags_recursive(**flags)

    def construct(self, x):
        return self.forward(x, self.weight, self.scale, self.row_sums, self.bias)


class QKVInt8(DenseInt8):
    """Attention's query, key and value Dense layers as ONE int8 product (``qkv_int8_forward``): their
    weights concatenated ``[3H, H]`` and quantized per output channel as ``DenseInt8`` quantizes each
    (a row's scale is its own, so concatenating changes no bit), the input quantized once instead of
    three times, and q, k, v written straight in the heads' layout: x ``[B, S, H]`` -> ``[3, B, N, S, D]``,
    the same numbers as the three ``DenseInt8`` followed by the head split (tests/model/kernels/test_int8.py)."""

    def __init__(self, query, key, value, num_heads, library):
        parts = (query, key, value)
        weight = np.concatenate([d.weight.asnumpy() for d in parts])                     # (3H, H)
        bias = np.concatenate([d.bias.asnumpy() if d.has_bias else np.zeros(d.weight.shape[0], np.float32)
                               for d in parts])
        fused = nn.Dense(weight.shape[1], weight.shape[0])
        fused.weight.set_data(ms.Tensor(weight))
        fused.bias.set_data(ms.Tensor(bias.astype(np.float32)))
        name = query.weight.name.rsplit(".", 2)[0] + "." if query.weight.name.count(".") > 1 else ""
        fused.weight.name = name + "qkv.weight"
        super().__init__(fused, library)
        head_size = weight.shape[0] // 3 // num_heads
        self.weight.set_data(ms.Tensor(self.weight.asnumpy().reshape(3, num_heads, head_size, weight.shape[1])))
        self.forward = int8_kernel(library, "qkv_int8_forward")


class DenseInt8Heads(DenseInt8):
    """Attention's output projection as ``DenseInt8`` from the heads' layout: x ``[B, N, S, D]`` -> ``[B, S, out]``
    (``dense_int8_heads_forward`` gathers each position's N heads as it quantizes the row: no Transpose
    before it); the same numbers as the head merge followed by ``DenseInt8``."""

    def __init__(self, dense, library):
        super().__init__(dense, library)
        self.forward = int8_kernel(library, "dense_int8_heads_forward")


class Int8Attention(nn.Cell):
    """``AlbertAttention`` (modeling.py) or ``KernelAttention`` (accelerate.py), the same steps, with q, k
    and v from one ``QKVInt8`` (in the heads' layout), the probabilities in one pass (``masked_softmax``:
    scores * scale + mask, softmax over the keys, where MindSpore ran four ops), and the output projection
    read from the heads' layout (``DenseInt8Heads``). The products, dropouts and LayerNorm are the
    attention's own cells."""

    PARTS = ("attention_dropout", "output_dropout", "LayerNorm", "matmul_qk", "matmul_pv")

    def __init__(self, attention, library):
        super().__init__()
        qkv = QKVInt8(attention.query, attention.key, attention.value, attention.num_heads, library)
        dense = DenseInt8Heads(attention.dense, library)
        names = [(p, p.name) for cell in (qkv, dense) for p in cell.get_parameters()]
        self.qkv, self.dense = qkv, dense       # setattr renames their parameters "qkv.scale", ...: keep the
        for param, name in names:               # model's ("...attention.qkv.weight_scale", as DenseInt8 names them)
            param.name = name
        for name in self.PARTS:
            setattr(self, name, getattr(attention, name))
        self.scale = ms.Tensor([attention.scale], ms.float32)       # 1 / sqrt(D)
        self.probabilities = masked_softmax_kernel(library)
        self.unstack = ops.Unstack(0)     # q, k, v: three contiguous blocks (StridedSlice took 45 ms each)

    def construct(self, hidden, additive_mask):
        qkv = self.qkv(hidden)                                            # [3, B, N, S, D]
        q, k, v = self.unstack(qkv)
        probs = self.attention_dropout(self.probabilities(self.matmul_qk(q, k), additive_mask, self.scale))
        projected = self.output_dropout(self.dense(self.matmul_pv(probs, v)))   # [B, N, S, D] -> [B, S, H]
        return self.LayerNorm(hidden + projected)


def fusable_attention(cell):
    """An attention cell whose query, key, value and output projection are plain Dense layers of the same
    square shape (what ``Int8Attention`` takes)."""
    if not isinstance(cell, (AlbertAttention, KernelAttention)):
        return False
    parts = (cell.query, cell.key, cell.value, cell.dense)
    shapes = {tuple(d.weight.shape) for d in parts}
    return (all(isinstance(d, nn.Dense) and not isinstance(d, DenseInt8) and not d.activation_flag for d in parts)
            and len(shapes) == 1 and len(set(shapes.pop())) == 1)


def has_int8_gemm(path):
    """Whether the kernels' library at ``path`` found ``dnnl_gemm_u8s8s32`` (int8.cc's weak reference)."""
    return bool(ctypes.CDLL(path).int8_available())


class DenseInt8Weights(DenseInt8):
    """``DenseInt8``'s int8 weight, scale and bias, computed in float32 with MindSpore's own ops: W
    dequantized (int8 * scale), then x W^T + b. For a MindIR (albert_min.export --int8), which can
    hold no custom op: the file keeps the int8 weights, the arithmetic stays float32."""

    def __init__(self, dense, library=None):
        super().__init__(dense, library)
        self.matmul = ops.MatMul(transpose_b=True)

    def construct(self, x):
        weight = ops.cast(self.weight, ms.float32) * ops.expand_dims(self.scale, 1)    # (out, in)
        x_shape = x.shape
        y = ops.bias_add(self.matmul(x.reshape(-1, x_shape[-1]), weight), self.bias)    # (rows, out)
        return y.reshape(x_shape[:-1] + (weight.shape[0],))


def unavailable(path):
    """Why int8 cannot run with the kernels' library at ``path`` (None: not built), or None if it can."""
    if not path:
        return "the compiled kernels are not in use (see the line above, ALBERT_MIN_KERNELS or --device)"
    if not has_int8_gemm(path):
        return ("the kernels were built without oneDNN's dnnl_gemm_u8s8s32 "
                "(mindspore/lib/libdnnl.so.3 missing or without it)")
    return None


@dataclass
class Int8Report:
    """What ``quantize_int8`` did: ``cells`` distinct Dense cells quantized (one per weight, however many
    loops or parents use it), ``int8_bytes`` what they keep now (int8 weights, scales, row sums, biases)
    against ``float32_bytes`` (their float32 weights and biases)."""
    cells: int = 0
    int8_bytes: int = 0
    float32_bytes: int = 0
    reason: str = None        # why nothing was quantized, or None

    def line(self):
        if self.reason:
            return f"albert_min: int8 not available ({self.reason}); computing in float32"
        return (f"albert_min: int8: {self.cells} Dense layers quantized, each once (a shared layer's once for "
                f"all its loops): {self.int8_bytes / 1e6:.2f} MB against {self.float32_bytes / 1e6:.2f} MB float32")


def quantize_int8(model, path=None, notice=True, weights_only=False):
    """Swap every Dense layer (``nn.Dense`` without activation) inside ``model`` for ``DenseInt8``, in place,
    quantizing each distinct cell once (``Int8Report``); the model is set to prediction (``set_train(False)``).
    ``path``: the kernels' library (default: ``kernels.library()``). Where int8 cannot run, nothing changes
    and the report says why. ``notice``: print the report's line on stderr. ``weights_only``:
    ``DenseInt8Weights`` instead (int8 weights, float32 arithmetic in MindSpore's ops; no library needed)."""
    from . import library
    if weights_only:
        path, report = None, Int8Report()
    else:
        path = library() if path is None else path
        report = Int8Report(reason=unavailable(path))
    if report.reason is None:
        def count(dense):
            w = dense.weight.shape
            report.float32_bytes += 4 * (w[0] * w[1] + w[0])
            report.int8_bytes += w[0] * w[1] + 4 * 3 * w[0]

        def quantized_cell(dense):                    # called once per distinct Dense: shared cells once
            count(dense)
            return (DenseInt8Weights if weights_only else DenseInt8)(dense, path)

        def fused_attention(attention):               # once per distinct attention cell: its 4 Dense once
            for dense in (attention.query, attention.key, attention.value, attention.dense):
                count(dense)
            return Int8Attention(attention, path)
        if not weights_only:                          # a MindIR keeps the attention as it is (DenseInt8Weights)
            report.cells = 4 * swap_cells(model, fusable_attention, fused_attention)
        report.cells += swap_cells(
            model, lambda c: isinstance(c, nn.Dense) and not isinstance(c, DenseInt8) and not c.activation_flag,
            quantized_cell)
    model.set_train(False)
    if notice:
        print(report.line(), file=sys.stderr)
    return report


def quantized(model):
    """What ``quantize_int8`` made of ``model``: "int8" (the int8 kernel), "int8 weights" (``weights_only``),
    or "" (nothing: float32)."""
    kinds = {type(cell) for _, cell in model.cells_and_names()}
    return "int8" if DenseInt8 in kinds else "int8 weights" if DenseInt8Weights in kinds else ""


def int8_matmul_exact(path, a, zero_points, weight, row_sums):
    """The kernel's integer part through ctypes (tests): ``sum_k (a[m, k] - zp[m]) w[n, k]`` as int32.
    ``a`` uint8 ``[M, K]``, ``zero_points`` int32 ``[M]``, ``weight`` int8 ``[N, K]``, ``row_sums`` int32 ``[N]``."""
    a, w = np.ascontiguousarray(a, np.uint8), np.ascontiguousarray(weight, np.int8)
    zp, rs = np.ascontiguousarray(zero_points, np.int32), np.ascontiguousarray(row_sums, np.int32)
    out = np.empty((a.shape[0], w.shape[0]), np.int32)
    pointer = ctypes.c_void_p
    status = ctypes.CDLL(path).int8_matmul_exact(
        ctypes.c_int64(a.shape[0]), ctypes.c_int64(w.shape[0]), ctypes.c_int64(a.shape[1]),
        pointer(a.ctypes.data), pointer(zp.ctypes.data), pointer(w.ctypes.data), pointer(rs.ctypes.data),
        pointer(out.ctypes.data))
    if status:
        raise RuntimeError(f"dnnl_gemm_u8s8s32 returned status {status}")
    return out
