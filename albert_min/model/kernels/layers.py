"""The layer functions in both implementations: MindSpore's own ops, and the compiled
kernels (a ``.cc`` file per op: ``dense.cc``, ``gelu.cc``, ...), forward and gradient, in training and in prediction.

Each is a Cell without parameters, called with the layer's parameters as inputs
(``linear(x, weight, bias)``), so that a ``bprop`` can return their gradients.
Both compute the same functions to float32 rounding (tests/model/kernels/test_kernels.py; the parity
suite runs on the plain and the accelerated model). ``accelerate.py`` puts the kernels' cells into a
built model, as children of the layers it swaps. Exported MindIR graphs hold MindSpore's ops only:
albert_min.export exports the plain model.
"""

import mindspore as ms
from mindspore import nn, ops
from mindspore.ops import CustomRegOp, DataType


class Linear(nn.Cell):
    """x ``[..., K]``, weight ``[N, K]``, bias ``[N]`` -> x W^T + b ``[..., N]``, as ``nn.Dense`` computes it."""

    def __init__(self):
        super().__init__()
        self.matmul = ops.MatMul(transpose_b=True)
        self.bias_add = ops.BiasAdd()

    def construct(self, x, weight, bias):
        x_shape = x.shape
        y = self.bias_add(self.matmul(x.reshape(-1, x_shape[-1]), weight), bias)     # (rows, N)
        return y.reshape(x_shape[:-1] + (weight.shape[0],))


class LayerNorm(nn.Cell):
    """x ``[..., C]``, weight, bias ``[C]`` -> (x - mean) / sqrt(var + eps) * weight + bias over the last axis."""

    def __init__(self, eps):
        super().__init__()
        self.eps = eps
        self.normalize = ops.LayerNorm(begin_norm_axis=-1, begin_params_axis=-1, epsilon=eps)

    def construct(self, x, weight, bias):
        return self.normalize(x, weight, bias)[0]


class Softmax(nn.Cell):
    """Softmax over the last axis."""

    def construct(self, x):
        return ops.softmax(x, -1)


class AttentionProbabilities(nn.Cell):
    """scores ``[B, N, S, T]``, additive mask ``[B, 1, 1, T]`` -> softmax(scores * scale + mask) over the keys,
    as ``modeling.AlbertAttention`` computes it (``softmax``: a ``Softmax`` cell)."""

    def __init__(self, scale, softmax):
        super().__init__()
        self.scale = scale
        self.softmax = softmax

    def construct(self, scores, additive_mask):
        return self.unfused(scores, additive_mask)

    def unfused(self, scores, additive_mask):
        """MindSpore's ops, one after another (Mul, BroadcastTo, Add, the softmax cell)."""
        scores = scores * self.scale
        # broadcast first: modeling.AlbertAttention says why
        return self.softmax(scores + ops.broadcast_to(additive_mask, scores.shape))


class BatchMatMul(nn.Cell):
    """a ``[..., M, K]``, b ``[..., K, N]`` (or ``[..., N, K]`` with ``transpose_b``) -> a b ``[..., M, N]``."""

    def __init__(self, transpose_b=False):
        super().__init__()
        self.transpose_b = transpose_b
        self.matmul = ops.BatchMatMul(transpose_b=transpose_b)

    def construct(self, a, b):
        return self.matmul(a, b)


class SwapMiddleAxes(nn.Cell):
    """x ``[B, P, Q, D]`` -> ``[B, Q, P, D]``: attention's head split ``[B, S, N, D]`` -> ``[B, N, S, D]`` and merge."""

    def construct(self, x):
        return x.transpose(0, 2, 1, 3)


class Activation(nn.Cell):
    """``fn(x)``, for an elementwise activation function ``fn`` of albert_min.model.modeling."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def construct(self, x):
        return self.fn(x)


# Output shapes and dtypes of the kernels, from their inputs' (named functions: MindSpore's
# graph parser reads a lambda's source line, and a lambda continued over lines fails it).
# The forward kernels' shapes come from C++ instead (``forward_kernel``), for graphs with
# dynamic input shapes (prediction_engine.dynamic_graph); the gradients run in training, at static shapes.
def dense_backward_shapes(x, weight, dy):
    return x, weight, weight[:1]                 # dx, dweight, dbias


def dense_backward_types(x, weight, dy):
    return x, weight, weight


def layer_norm_backward_outputs(x, gamma, dy, eps):
    return x, gamma, gamma                       # dx, dgamma, dbeta


def batch_matmul_tn_shape(a, b):
    return a[:-2] + [a[-1], b[-1]]


def swap_middle_shape(x):
    return [x[0], x[2], x[1], x[3]]


def like_first(first, *others):
    return first


def forward_kernel(library, name, inputs):
    """``ops.Custom`` of kernel ``name`` taking float32 ``inputs`` (their names), one float32 output,
    whose shape comes from ``<name>InferShape`` (beside the kernel in its .cc file): the form a graph with dynamic input
    shapes accepts (with a Python ``out_shape``, or without the registration, its compile fails with
    "The pointer[value] is null")."""
    info = CustomRegOp(name)
    for i, input_name in enumerate(inputs):
        info = info.input(i, input_name)
    info = info.output(0, "y").dtype_format(*[DataType.F32_Default] * (len(inputs) + 1)).target("CPU")
    return ops.Custom(f"{library}:{name}", func_type="aot", out_shape=None, out_dtype=like_first,
                      reg_info=info.get_op_info())


class LinearWithKernels(Linear):
    """``Linear`` as ``dense_forward`` (sgemm, then the bias, rows over both cores) whose gradient is
    one call of ``dense_backward``: two sgemm and the bias's column sum.

    MindSpore's CPU MatMul ran ALBERT's shapes at 0.13-0.31 of the sgemm peak, and it
    differentiates x W^T into MatMul variants with a transposed operand and a separate
    BiasAddGrad, which ran 2-3x slower per call than the forward.
    """

    def __init__(self, library):
        super().__init__()
        self.forward = forward_kernel(library, "dense_forward", ("x", "weight", "bias"))
        self.backward = ops.Custom(f"{library}:dense_backward", func_type="aot",
                                   out_shape=dense_backward_shapes, out_dtype=dense_backward_types)

    def construct(self, x, weight, bias):
        return self.forward(x, weight, bias)

    def bprop(self, x, weight, bias, out, dout):
        return self.backward(x, weight, dout)


class LayerNormWithKernels(LayerNorm):
    """``LayerNorm`` as ``layer_norm_forward`` whose gradient (dx, dweight, dbias) is one pass of
    ``layer_norm_backward``.

    MindSpore's CPU LayerNormGrad took 8 ms for a [64, 32, 128] input, 20x the forward, and the
    forward ~1 ms.
    """

    def __init__(self, eps, library):
        super().__init__(eps)
        self.eps_tensor = ms.Tensor([eps], ms.float32)
        self.forward = forward_kernel(library, "layer_norm_forward", ("x", "gamma", "beta", "eps"))
        self.backward = ops.Custom(f"{library}:layer_norm_backward", func_type="aot",
                                   out_shape=layer_norm_backward_outputs, out_dtype=layer_norm_backward_outputs)

    def construct(self, x, weight, bias):
        return self.forward(x, weight, bias, self.eps_tensor)

    def bprop(self, x, weight, bias, out, dout):
        return self.backward(x, weight, dout, self.eps_tensor)


class SoftmaxWithKernels(Softmax):
    """``Softmax`` whose gradient is one pass of ``softmax_backward`` over the forward's output.

    MindSpore expands it into Mul, ReduceSum and Sub; the ReduceSum alone took 1.4 ms on [64, 4, 32, 32].
    """

    def __init__(self, library):
        super().__init__()
        self.backward = ops.Custom(f"{library}:softmax_backward", func_type="aot",
                                   out_shape=like_first, out_dtype=like_first)

    def bprop(self, x, out, dout):
        return (self.backward(out, dout),)


class AttentionProbabilitiesWithKernels(AttentionProbabilities):
    """``AttentionProbabilities`` whose forward in training is one pass of ``masked_softmax`` (scale, mask
    and softmax; MindSpore ran Mul, BroadcastTo, Add and Softmax: 30 ms of the base train step, 3 ms
    here) and whose gradient is one pass of ``masked_softmax_backward`` (the scale folded in). In
    prediction the forward is ``AttentionProbabilities``' MindSpore ops (``softmax``:
    ``SoftmaxWithKernels``), as before: the evaluated numbers do not change. The additive mask is a
    constant of the batch (from the attention mask): its gradient is returned as zeros."""

    def __init__(self, scale, softmax, library):
        super().__init__(scale, softmax)
        self.scale_tensor = ms.Tensor([scale], ms.float32)
        self.fused = masked_softmax_kernel(library)
        self.backward = ops.Custom(f"{library}:masked_softmax_backward", func_type="aot",
                                   out_shape=like_first, out_dtype=like_first)

    def construct(self, scores, additive_mask):
        if self.training:
            return self.fused(scores, additive_mask, self.scale_tensor)
        return self.unfused(scores, additive_mask)

    def bprop(self, scores, additive_mask, out, dout):
        return self.backward(out, dout, self.scale_tensor), ops.zeros_like(additive_mask)


class GeluNewWithKernels(Activation):
    """``Activation(gelu_new)`` as one pass of ``gelu_new_forward`` whose gradient is one pass of
    ``gelu_new_backward`` (MindSpore runs x * sigmoid(s) as six elementwise kernels on [B, S, I],
    and its autodiff a dozen)."""

    def __init__(self, fn, library):
        super().__init__(fn)
        self.forward = forward_kernel(library, "gelu_new_forward", ("x",))
        self.backward = ops.Custom(f"{library}:gelu_new_backward", func_type="aot",
                                   out_shape=like_first, out_dtype=like_first)

    def construct(self, x):
        return self.forward(x)

    def bprop(self, x, out, dout):
        return (self.backward(x, out, dout),)


class BatchMatMulWithKernels(BatchMatMul):
    """``BatchMatMul`` as one sgemm per matrix (``batch_matmul_nn/nt/tn``), forward and gradient.

    MindSpore's CPU BatchMatMul ran the attention products ([64, 4, 32, 32]) at 1-1.4 ms per call.
    """

    def __init__(self, library, transpose_b=False):
        super().__init__(transpose_b)
        self.nn = forward_kernel(library, "batch_matmul_nn", ("a", "b"))
        self.nt = forward_kernel(library, "batch_matmul_nt", ("a", "b"))
        self.tn = ops.Custom(f"{library}:batch_matmul_tn", func_type="aot",
                             out_shape=batch_matmul_tn_shape, out_dtype=like_first)

    def construct(self, a, b):
        if self.transpose_b:
            return self.nt(a, b)
        return self.nn(a, b)

    def bprop(self, a, b, out, dout):
        if self.transpose_b:                       # out = a b^T: da = dout b, db = dout^T a
            return self.nn(dout, b), self.tn(dout, a)
        return self.nt(dout, b), self.tn(a, dout)  # out = a b: da = dout b^T, db = a^T dout


class SwapMiddleAxesWithKernels(SwapMiddleAxes):
    """``SwapMiddleAxes`` as ``swap_middle_axes`` (rows of D floats copied) in training, forward and
    gradient (the same swap); in inference MindSpore's Transpose (exported graphs hold no custom op).

    The data is moved, never computed on: the same numbers either way. MindSpore's CPU Transpose
    keeps an 8-byte index per element for the life of its graph, so each new batch shape kept
    another 32 of them (1.07 GB at batch 64 x 384, the small model): docs/training.md.
    """

    def __init__(self, library):
        super().__init__()
        self.swap = ops.Custom(f"{library}:swap_middle_axes", func_type="aot",
                               out_shape=swap_middle_shape, out_dtype=like_first)

    def construct(self, x):
        if not self.training:
            return x.transpose(0, 2, 1, 3)
        return self.swap(x)

    def bprop(self, x, out, dout):
        return (self.swap(dout),)


def masked_softmax_kernel(library):
    """``ops.Custom`` of ``masked_softmax`` (softmax.cc): scores, mask, scale (float32) -> probabilities
    (``AttentionProbabilitiesWithKernels`` in training, int8.py's ``Int8Attention`` in prediction)."""
    return forward_kernel(library, "masked_softmax", ("scores", "mask", "scale"))
