"""The two layer functions in both implementations: MindSpore's own ops, and the
same forward with its gradient from the compiled kernels (``backward.cc``).

Each is a Cell without parameters, called with the layer's parameters as inputs
(``linear(x, weight, bias)``), so that a ``bprop`` can return their gradients.
The forward is MindSpore's in both, so predictions, exported graphs and the
evaluate compile cache do not depend on whether the kernels were built.
"""

import mindspore as ms
from mindspore import nn, ops


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


class LinearWithKernels(Linear):
    """``Linear`` whose gradient is one call of ``dense_backward``: two sgemm and the bias's column sum.

    MindSpore differentiates x W^T into MatMul variants with a transposed operand
    and a separate BiasAddGrad, which ran 2-3x slower per call than the forward.
    """

    def __init__(self, library):
        super().__init__()
        self.backward = ops.Custom(f"{library}:dense_backward", func_type="aot",
                                   out_shape=lambda x, w, dy: (x, w, w[:1]),
                                   out_dtype=lambda x, w, dy: (x, w, w))

    def bprop(self, x, weight, bias, out, dout):
        return self.backward(x, weight, dout)


class LayerNormWithKernels(LayerNorm):
    """``LayerNorm`` whose gradient (dx, dweight, dbias) is one pass of ``layer_norm_backward``.

    MindSpore's CPU LayerNormGrad took 8 ms for a [64, 32, 128] input, 20x the forward.
    """

    def __init__(self, eps, library):
        super().__init__(eps)
        self.eps_tensor = ms.Tensor([eps], ms.float32)
        self.backward = ops.Custom(f"{library}:layer_norm_backward", func_type="aot",
                                   out_shape=lambda x, g, dy, eps: (x, g, g),
                                   out_dtype=lambda x, g, dy, eps: (x, g, g))

    def bprop(self, x, weight, bias, out, dout):
        return self.backward(x, weight, dout, self.eps_tensor)
