"""``accelerate(model)``: the compiled kernels swapped into a built model, in place.

    model = AlbertForSequenceClassification.from_pretrained(folder)    # plain: MindSpore's ops
    kernels.accelerate(model)                                          # the same numbers, faster on CPU

``modeling.py`` and ``heads.py`` compute with MindSpore's ops, written out. This step takes the
built model and swaps each layer that has a kernel for a cell computing the same function through
an op cell of ``layers.py`` (the kernels' forward and gradient) or ``philox_dropout.py``:

    plain cell (modeling, heads)        swapped for      its op cells
    Dense                               KernelDense      linear: LinearWithKernels
    LayerNorm                           KernelLayerNorm  normalize: LayerNormWithKernels
    AlbertAttention                     KernelAttention  matmul_qk, matmul_pv: BatchMatMulWithKernels,
                                                         probabilities: AttentionProbabilitiesWithKernels,
                                                         swap_heads: SwapMiddleAxesWithKernels
    AlbertMLMHead                       KernelMLMHead    decoder: LinearWithKernels
    the gelu_new function (activation)  GeluNewWithKernels
    nn.Dropout                          DropoutWithKernels

A swapped cell adopts the plain cell's Parameter objects under their names, and its child cells
(a ``KernelAttention`` holds the same query, key, value Dense cells, swapped themselves), so the
optimizer, the checkpoints and ``trainable_params`` see the same parameters. A cell held in several
places (``cross_layer_sharing`` puts one sub-block under every loop) is swapped once and its one
replacement put in every place; ALBERT's one layer, looped L times, is one cell anyway.

The op cells stay children of the swapped cells, so that a later step swaps them by type:
``use_mindspore_ops`` (mixed precision) puts MindSpore's op cells (``layers.Linear``, ...) in their
place, and gives a plain model the same layout with MindSpore's op cells (``swap_layers(model, None)``).

Where the kernels cannot run (``ALBERT_MIN_KERNELS=off``, MindSpore on GPU or Ascend, no compiler or
oneDNN: ``built()`` is None, after its one-line notice) ``accelerate`` leaves the model as it is.

Who calls it: not ``from_pretrained`` (``modeling`` and ``heads`` import no kernels:
``.importlinter``), so a loaded model is plain. ``pipeline()`` (albert_min.predict), evaluate.py
and the ``Trainer`` (before it builds its optimizer, train step and dropout lists) accelerate the
model they run. MindIR export never does: a MindIR holds MindSpore's ops only.

Layer: ``albert_min.model.kernels``, above ``heads`` and ``modeling`` (it knows their classes).
"""

from mindspore import nn, ops

from ..heads import AlbertMLMHead
from ..modeling import AlbertAttention, Dense, LayerNorm, gelu_new
from .layers import (Activation, AttentionProbabilities, AttentionProbabilitiesWithKernels, BatchMatMul,
                     BatchMatMulWithKernels, GeluNewWithKernels, LayerNormWithKernels, Linear, LinearWithKernels,
                     Softmax, SoftmaxWithKernels, SwapMiddleAxes, SwapMiddleAxesWithKernels)
from .layers import LayerNorm as LayerNormOp
from .philox_dropout import DropoutWithKernels
from .swap import swap_cells


class OpCells:
    """The op cells a swapped layer computes with: the compiled kernels' (``library``: their path),
    or with ``library`` None MindSpore's own (``layers.py``), where there is no dropout and no
    activation to swap (the plain ``nn.Dropout`` and function stay)."""

    def __init__(self, library):
        self.library = library

    def linear(self):
        return LinearWithKernels(self.library) if self.library else Linear()

    def layer_norm(self, eps):
        return LayerNormWithKernels(eps, self.library) if self.library else LayerNormOp(eps)

    def softmax(self):
        return SoftmaxWithKernels(self.library) if self.library else Softmax()

    def attention_probabilities(self, scale):
        if self.library:
            return AttentionProbabilitiesWithKernels(scale, self.softmax(), self.library)
        return AttentionProbabilities(scale, self.softmax())

    def batch_matmul(self, transpose_b=False):
        return BatchMatMulWithKernels(self.library, transpose_b) if self.library else BatchMatMul(transpose_b)

    def swap_middle_axes(self):
        return SwapMiddleAxesWithKernels(self.library) if self.library else SwapMiddleAxes()

    def gelu_new(self):
        return GeluNewWithKernels(gelu_new, self.library) if self.library else None

    def dropout(self, p):
        return DropoutWithKernels(p, self.library) if self.library else None


class KernelDense(Dense):
    """``Dense`` as its op cell computes it: ``linear(x, weight, bias)`` = x W^T + b (``LinearWithKernels``:
    one sgemm per half of the rows; its gradient ``dense_backward``). Holds the plain cell's weight
    and bias; still an ``nn.Dense`` (``quantize_int8`` swaps it like any Dense)."""

    def __init__(self, dense, linear):
        nn.Cell.__init__(self)      # not Dense.__init__, which makes new parameters: these are dense's
        self.in_channels, self.out_channels, self.has_bias = dense.in_channels, dense.out_channels, dense.has_bias
        self.activation, self.activation_flag = None, False
        self.weight, self.bias = dense.weight, dense.bias
        self.linear = linear

    def construct(self, x):
        return self.linear(x, self.weight, self.bias)


class KernelLayerNorm(LayerNorm):
    """``LayerNorm`` as its op cell computes it: ``normalize(x, weight, bias)`` (``LayerNormWithKernels``;
    its gradient one pass of ``layer_norm_backward``). Holds the plain cell's weight and bias."""

    def __init__(self, norm, normalize):
        nn.Cell.__init__(self)      # not LayerNorm.__init__: the parameters are norm's
        self.eps = norm.eps
        self.weight, self.bias = norm.weight, norm.bias
        self.normalize = normalize

    def construct(self, x):
        return self.normalize(x, self.weight, self.bias)


class KernelAttention(nn.Cell):
    """``AlbertAttention`` (modeling.py, the same steps and shapes) with its products, softmax and head
    split/merge as op cells. Holds the plain cell's Dense, dropout and LayerNorm cells."""

    PARTS = ("query", "key", "value", "attention_dropout", "dense", "output_dropout", "LayerNorm")

    def __init__(self, attention, op_cells):
        super().__init__()
        self.num_heads, self.head_size, self.scale = attention.num_heads, attention.head_size, attention.scale
        self.matmul_qk = op_cells.batch_matmul(transpose_b=True)           # q k^T
        self.matmul_pv = op_cells.batch_matmul()                           # probs v
        self.probabilities = op_cells.attention_probabilities(self.scale)  # softmax(scores * scale + mask)
        self.swap_heads = op_cells.swap_middle_axes()                      # [B, S, N, D] <-> [B, N, S, D]
        for name in self.PARTS:
            setattr(self, name, getattr(attention, name))

    def split_heads(self, x):
        """``[B, S, H]`` -> ``[B, N, S, D]``"""
        B, S, _ = x.shape
        return self.swap_heads(x.reshape(B, S, self.num_heads, self.head_size))

    def construct(self, hidden, additive_mask):
        B, S, H = hidden.shape
        q = self.split_heads(self.query(hidden))
        k = self.split_heads(self.key(hidden))
        v = self.split_heads(self.value(hidden))
        probs = self.attention_dropout(self.probabilities(self.matmul_qk(q, k), additive_mask))  # [B, N, S, S]
        context = self.swap_heads(self.matmul_pv(probs, v)).reshape(B, S, H)
        projected = self.output_dropout(self.dense(context))
        return self.LayerNorm(hidden + projected)


class KernelMLMHead(nn.Cell):
    """``AlbertMLMHead`` (heads.py) with its decoder, x E^T + b on the tied word embeddings E, as an op cell.
    Holds the plain head's dense, activation, LayerNorm and bias."""

    def __init__(self, head, op_cells):
        super().__init__()
        self.dense = head.dense
        self.activation = head.activation
        self.LayerNorm = head.LayerNorm
        self.bias = head.bias
        self.decoder = op_cells.linear()

    def construct(self, sequence_output, word_embeddings):
        x = self.LayerNorm(self.activation(self.dense(sequence_output)))
        return self.decoder(x, word_embeddings, self.bias)


def dropout_rate(cell):
    """p of an ``nn.Dropout`` (built with ``p``, or with the older ``keep_prob``)."""
    return 1.0 - cell.keep_prob if cell.p is None else cell.p


def _swaps(op_cells):
    """(which child cells, what replaces one) in the order they are swapped: the leaves first, so that
    the attention and the MLM head adopt their swapped children."""
    return (
        (lambda c: isinstance(c, Dense) and not isinstance(c, KernelDense), lambda c: KernelDense(c, op_cells.linear())),
        (lambda c: isinstance(c, LayerNorm) and not isinstance(c, KernelLayerNorm),
         lambda c: KernelLayerNorm(c, op_cells.layer_norm(c.eps))),
        (lambda c: type(c) is nn.Dropout and op_cells.library, lambda c: op_cells.dropout(dropout_rate(c))),
        (lambda c: isinstance(c, AlbertAttention), lambda c: KernelAttention(c, op_cells)),
        (lambda c: isinstance(c, AlbertMLMHead), lambda c: KernelMLMHead(c, op_cells)),
    )


def swap_layers(model, library):
    """Swap the plain layers of ``model`` (table above) in place for ones computing with the kernels'
    op cells (``library``: their path) or, with ``library`` None, MindSpore's; each distinct cell
    once. The parameters keep their objects and names. Returns how many distinct cells were swapped."""
    op_cells = OpCells(library)
    names = [(p, p.name) for p in model.get_parameters()]    # setattr prefixes them with the attribute name
    count = 0
    for wanted, make in _swaps(op_cells)[:3]:
        count += swap_cells(model, wanted, make)
    activation = op_cells.gelu_new()
    for _, cell in list(model.cells_and_names()):
        if activation is not None and cell.__dict__.get("activation") is gelu_new:
            setattr(cell, "activation", activation)         # no parameters: one cell may serve every layer
            count += 1
    for wanted, make in _swaps(op_cells)[3:]:
        count += swap_cells(model, wanted, make)
    for param, name in names:
        param.name = name
    return count


def accelerate(model):
    """``model`` with its layers computing through the compiled kernels (the module's docstring), in place;
    returns ``model``. Where the kernels cannot run it is left as it is (``built()`` prints why, once);
    a model already accelerated is left as it is too."""
    from . import built
    library = built()
    if library:
        swap_layers(model, library)
    return model


def use_mindspore_ops(model):
    """Every compiled-kernel op cell inside ``model`` swapped for the MindSpore-ops cell with the same
    forward, and a plain model's layers given the same layout (op cells: what mixed precision casts,
    albert_min.training.mixed_precision). The kernels compute in float32 only (oneDNN's ``sgemm``).
    The dropout kernel stays: it casts a float16 input to float32 and back, and its masks do not
    depend on MindSpore's thread count."""
    swap_layers(model, None)
    # by kind: the bf16 cells (bf16.py, bf16_attention.py: above this module) extend these
    plain = {LinearWithKernels: lambda c: Linear(), LayerNormWithKernels: lambda c: LayerNormOp(c.eps),
             SoftmaxWithKernels: lambda c: Softmax(),
             AttentionProbabilitiesWithKernels: lambda c: AttentionProbabilities(c.scale, Softmax()),
             BatchMatMulWithKernels: lambda c: BatchMatMul(c.transpose_b),
             GeluNewWithKernels: lambda c: Activation(c.fn), SwapMiddleAxesWithKernels: lambda c: SwapMiddleAxes(),
             KernelAttention: lambda c: KernelAttention(c, OpCells(None))}

    def wanted(cell):       # every op cell of the kernels; an attention only if it computes otherwise (bf16's)
        return isinstance(cell, tuple(plain)) and type(cell) is not KernelAttention
    swap_cells(model, wanted, lambda c: next(make for kind, make in plain.items() if isinstance(c, kind))(c))
    return model
