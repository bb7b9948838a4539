"""The attention of ``--amp bf16`` training: ``KernelAttention`` whose two products read and write each
head in place, so the heads are never transposed (``use_bf16_gemms`` swaps it in).

``KernelAttention`` (accelerate.py) moves q, k and v from the Dense layers' layout [B, S, H] = [B, S, N, D]
into [B, N, S, D] before its products and the context back after them: four transposes forward and
four in the gradient, 37 ms of the 1.7 s base bf16 train step. Here the products take q, k, v as
[B, S, N, D] (a reshape: no data moves) and write the context so; each head's matrix is read with rows
N * D apart (``attention_scores_bf16``, ``attention_context_bf16`` and, for the gradients,
``attention_context_tn_bf16`` in bf16.cc). The products are bf16.cc's (operands rounded to bfloat16,
float32 accumulation), one gemm per (batch, head) as ``BatchMatMulBf16``'s.

In prediction (``set_train(False)``: the dev evaluation during training) it is ``KernelAttention``:
float32, as ``evaluate.py`` runs the saved model.

Layer: ``albert_min.model.kernels``, above ``accelerate`` (it extends ``KernelAttention``).
"""

from mindspore import nn, ops

from .accelerate import KernelAttention
from .layers import like_first


def scores_shape(q, k):
    return [q[0], q[2], q[1], k[1]]              # q (B, S, N, D), k (B, T, N, D) -> (B, N, S, T)


def context_shape(probs, v):
    return [probs[0], probs[2], v[2], v[3]]      # p (B, N, S, T), v (B, T, N, D) -> (B, S, N, D)


def context_tn_shape(probs, x):
    return [probs[0], probs[3], x[2], x[3]]      # p (B, N, S, T), x (B, S, N, D) -> (B, T, N, D)


class HeadProducts(nn.Cell):
    """The three per-head bf16 products, as ``ops.Custom`` of bf16.cc (shared by both product cells)."""

    def __init__(self, library):
        super().__init__()
        self.scores = ops.Custom(f"{library}:attention_scores_bf16", func_type="aot", out_shape=scores_shape,
                                 out_dtype=like_first)
        self.context = ops.Custom(f"{library}:attention_context_bf16", func_type="aot", out_shape=context_shape,
                                  out_dtype=like_first)
        self.context_tn = ops.Custom(f"{library}:attention_context_tn_bf16", func_type="aot",
                                     out_shape=context_tn_shape, out_dtype=like_first)


class HeadScoresBf16(HeadProducts):
    """q ``[B, S, N, D]``, k ``[B, T, N, D]`` -> q kᵀ per head ``[B, N, S, T]``; gradient dq = dS k, dk = dSᵀ q."""

    def construct(self, q, k):
        return self.scores(q, k)

    def bprop(self, q, k, out, dout):
        return self.context(dout, k), self.context_tn(dout, q)


class HeadContextBf16(HeadProducts):
    """probs ``[B, N, S, T]``, v ``[B, T, N, D]`` -> probs v per head ``[B, S, N, D]``; gradient
    dprobs = dC vᵀ, dv = probsᵀ dC."""

    def construct(self, probs, v):
        return self.context(probs, v)

    def bprop(self, probs, v, out, dout):
        return self.scores(dout, v), self.context_tn(probs, dout)


class Bf16Attention(KernelAttention):
    """``KernelAttention`` (its cells, adopted) whose training forward multiplies the heads in place."""

    def __init__(self, attention, library):
        nn.Cell.__init__(self)      # not KernelAttention.__init__, which makes new op cells: these are attention's
        self.num_heads, self.head_size, self.scale = attention.num_heads, attention.head_size, attention.scale
        for name in self.PARTS + ("matmul_qk", "matmul_pv", "probabilities", "swap_heads"):
            setattr(self, name, getattr(attention, name))
        self.head_scores = HeadScoresBf16(library)
        self.head_context = HeadContextBf16(library)

    def construct(self, hidden, additive_mask):
        if not self.training:
            return super().construct(hidden, additive_mask)
        B, S, H = hidden.shape
        heads = (B, S, self.num_heads, self.head_size)
        q = self.query(hidden).reshape(heads)                             # [B, S, N, D]: a view, no transpose
        k = self.key(hidden).reshape(heads)
        v = self.value(hidden).reshape(heads)
        probs = self.attention_dropout(self.probabilities(self.head_scores(q, k), additive_mask))   # [B, N, S, S]
        context = self.head_context(probs, v).reshape(B, S, H)            # [B, S, N, D] -> [B, S, H]
        projected = self.output_dropout(self.dense(context))
        return self.LayerNorm(hidden + projected)
