"""ALBERT in pure MindSpore, readable top to bottom.

ALBERT ("A Lite BERT", Lan et al. 2019) is BERT with two parameter savings:

1. Factorized embeddings: tokens are embedded in a small space E (V x E),
   then projected up to the transformer width H (E x H). For V=30000,
   E=128, H=4096 that is 4.4M parameters instead of 123M.
2. Cross-layer sharing: ONE transformer block (attention + feed-forward) is
   applied L times in a loop, so depth costs compute but no parameters.

plus the sentence-order prediction (SOP) objective that replaces BERT's NSP.

Shapes use: B = batch, S = sequence length, E = embedding_size,
H = hidden_size, I = intermediate_size, N = attention heads, D = H / N.

Parameter names follow Hugging Face's ``AlbertModel`` (``albert.embeddings.
word_embeddings.weight`` ...), so the converter maps HF checkpoints almost
one to one and Dense weights keep PyTorch's ``[out, in]`` layout.

This file is the backbone, ``AlbertModel``; the heads on it (MLM, SOP, classification, QA,
tagging, multiple choice) are ``heads.py``. Every layer computes with MindSpore's own ops, written
out here; a speed step (compiled C++ for the CPU, int8) takes a built model and swaps its cells
(``albert_min/model/README.md``: where each layer is, and who swaps what).

Layer: ``albert_min.model``, above ``common`` (the layers: ``albert_min/__init__.py``).
"""

import math
import os

import numpy as np
import mindspore as ms
from mindspore import nn, ops, Parameter
from mindspore.common.initializer import initializer, TruncatedNormal

from .folder import BACKBONE_PREFIX, CheckpointError, folder_tokenizer, load_model_dir
from ..common.other_checkpoints import unconverted_checkpoint
from .config import AlbertConfig, load_config


# ----------------------------------------------------------------- activations
def tanh(x):
    """tanh to float32 precision: (1 - e^-2|x|) / (1 + e^-2|x|), with the sign put back.

    MindSpore's CPU tanh kernel is a fast approximation off by up to 1e-4,
    which alone would break agreement with the reference at 1e-5. expm1 keeps
    the small-|x| end exact and e^-2|x| cannot overflow. Used once per
    sentence (the pooler), so its five ops cost nothing that matters.
    """
    e = ops.expm1(-2.0 * ops.abs(x))
    return ops.sign(x) * (-e / (e + 2.0))


def gelu(x):
    """Exact GELU, x * Phi(x), as in BERT's paper."""
    return 0.5 * x * (1.0 + ops.erf(x / math.sqrt(2.0)))


def gelu_new(x):
    """The tanh approximation of GELU that the ALBERT v2 checkpoints use:
    0.5 x (1 + tanh z) with z = sqrt(2/pi) (x + 0.044715 x^3).

    Computed as x * sigmoid(2z), the same function (1 + tanh z = 2 sigmoid(2z)).
    MindSpore's CPU sigmoid is accurate to 1e-6 (its tanh is not, see above),
    and one sigmoid kernel runs on the [B, S, I] tensor instead of the five of
    the exact tanh: 1.5x faster small-model inference.
    """
    z2 = math.sqrt(8.0 / math.pi) * (x + 0.044715 * x * x * x)    # 2z
    return x * ops.sigmoid(z2)


ACT2FN = {"gelu": gelu, "gelu_new": gelu_new, "relu": ops.relu, "tanh": tanh}


# --------------------------------------------------------- small building blocks
class Dense(nn.Dense):
    """x W^T + b over the last axis: ``[..., in]`` -> ``[..., out]``, weight ``[out, in]`` (PyTorch's
    layout), initialised as in the reference (truncated normal, zero bias)."""

    def __init__(self, in_features, out_features, config):
        super().__init__(in_features, out_features,
                         weight_init=TruncatedNormal(config.initializer_range), bias_init="zeros")

    def construct(self, x):
        x_shape = x.shape
        rows = x.reshape(-1, x_shape[-1])                                    # [rows, in]
        y = self.bias_add(self.matmul(rows, self.weight), self.bias)         # x W^T + b: [rows, out]
        return y.reshape(x_shape[:-1] + (self.out_channels,))


class Embedding(nn.Cell):
    """Lookup table. ids ``[B, S]`` (int) -> vectors ``[B, S, dim]``.

    Written out (rather than nn.Embedding) so the parameter is called
    ``weight`` like every other checkpoint format calls it.
    """

    def __init__(self, num_embeddings, dim, init_range):
        super().__init__()
        self.weight = Parameter(initializer(TruncatedNormal(init_range), (num_embeddings, dim), ms.float32),
                                name="weight")

    def construct(self, ids):
        return ops.gather(self.weight, ids, 0)


class LayerNorm(nn.Cell):
    """Layer normalisation over the last axis. ``[..., dim]`` -> ``[..., dim]``.

    (x - mean) / sqrt(var + eps) * weight + bias, with the biased variance like
    the reference. MindSpore's fused LayerNorm primitive computes exactly that
    (to float32 rounding, and 13% faster for the whole base encoder than the
    formula written out); ``mint.nn.LayerNorm`` has no CPU version. The
    parameters are named ``weight``/``bias`` as in every checkpoint format.
    """

    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = Parameter(initializer("ones", (dim,), ms.float32), name="weight")
        self.bias = Parameter(initializer("zeros", (dim,), ms.float32), name="bias")
        self.layer_norm = ops.LayerNorm(begin_norm_axis=-1, begin_params_axis=-1, epsilon=eps)

    def construct(self, x):
        normalized, _, _ = self.layer_norm(x, self.weight, self.bias)       # and the mean and 1/std, unused
        return normalized


# ------------------------------------------------------------------ embeddings
class AlbertEmbeddings(nn.Cell):
    """Token + position + segment embeddings in the small space E.

    input_ids, token_type_ids ``[B, S]`` -> ``[B, S, E]``. The E -> H projection
    lives in the encoder, as in the reference, so this output is still E wide.
    """

    def __init__(self, config: AlbertConfig):
        super().__init__()
        E = config.embedding_size
        self.word_embeddings = Embedding(config.vocab_size, E, config.initializer_range)
        self.position_embeddings = Embedding(config.max_position_embeddings, E, config.initializer_range)
        self.token_type_embeddings = Embedding(config.type_vocab_size, E, config.initializer_range)
        self.LayerNorm = LayerNorm(E, config.layer_norm_eps)
        self.dropout = nn.Dropout(p=config.hidden_dropout_prob)

    def construct(self, input_ids, token_type_ids):
        seq_len = input_ids.shape[1]
        position_ids = ops.arange(seq_len).reshape(1, seq_len)
        x = (self.word_embeddings(input_ids)
             + self.position_embeddings(position_ids)
             + self.token_type_embeddings(token_type_ids))
        return self.dropout(self.LayerNorm(x))


# ------------------------------------------------------------------- attention
class AlbertAttention(nn.Cell):
    """Multi-head self-attention, then output projection, residual and LayerNorm.

    hidden ``[B, S, H]``, additive mask ``[B, 1, 1, S]`` -> ``[B, S, H]``.
    """

    def __init__(self, config: AlbertConfig):
        super().__init__()
        H = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.head_size = config.head_size
        self.scale = 1.0 / math.sqrt(self.head_size)
        # q k^T with the transpose folded into the product: no Transpose op, forward or backward
        self.matmul_qk = ops.BatchMatMul(transpose_b=True)
        self.matmul_pv = ops.BatchMatMul()
        self.query = Dense(H, H, config)
        self.key = Dense(H, H, config)
        self.value = Dense(H, H, config)
        self.attention_dropout = nn.Dropout(p=config.attention_probs_dropout_prob)
        self.dense = Dense(H, H, config)
        self.output_dropout = nn.Dropout(p=config.hidden_dropout_prob)
        self.LayerNorm = LayerNorm(H, config.layer_norm_eps)

    def split_heads(self, x):
        """``[B, S, H]`` -> ``[B, N, S, D]``"""
        B, S, _ = x.shape
        return x.reshape(B, S, self.num_heads, self.head_size).transpose(0, 2, 1, 3)

    def construct(self, hidden, additive_mask):
        B, S, H = hidden.shape
        q = self.split_heads(self.query(hidden))
        k = self.split_heads(self.key(hidden))
        v = self.split_heads(self.value(hidden))
        scores = self.matmul_qk(q, k) * self.scale                       # q k^T / sqrt(D): [B, N, S, S]
        # padding keys -> -inf. Broadcast first: MindSpore's CPU Add, broadcasting [B, 1, 1, S] itself,
        # keeps two 8-byte indices per score for the life of each compiled graph (docs/training.md)
        scores = scores + ops.broadcast_to(additive_mask, scores.shape)
        probs = self.attention_dropout(ops.softmax(scores, -1))          # over the keys: [B, N, S, S]
        context = self.matmul_pv(probs, v)                                # probs v: [B, N, S, D]
        context = context.transpose(0, 2, 1, 3).reshape(B, S, H)          # heads merged: [B, S, H]
        projected = self.output_dropout(self.dense(context))
        return self.LayerNorm(hidden + projected)


# ------------------------------------------------------------------ the layer
class AlbertLayer(nn.Cell):
    """One transformer block: attention, then a position-wise feed-forward net.

    ``[B, S, H]`` -> ``[B, S, H]``. ALBERT applies the same instance L times.
    """

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.attention = AlbertAttention(config)
        self.ffn = Dense(config.hidden_size, config.intermediate_size, config)
        self.activation = ACT2FN[config.hidden_act]
        self.ffn_output = Dense(config.intermediate_size, config.hidden_size, config)
        self.dropout = nn.Dropout(p=config.hidden_dropout_prob)
        self.full_layer_layer_norm = LayerNorm(config.hidden_size, config.layer_norm_eps)

    def construct(self, hidden, additive_mask):
        attention_output = self.attention(hidden, additive_mask)
        ffn = self.ffn_output(self.activation(self.ffn(attention_output)))       # [B, S, I] -> [B, S, H]
        return self.full_layer_layer_norm(attention_output + self.dropout(ffn))


class AlbertLayerGroup(nn.Cell):
    """``inner_group_num`` distinct layers applied in sequence (1 in every released model)."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.albert_layers = nn.CellList([AlbertLayer(config) for _ in range(config.inner_group_num)])

    def construct(self, hidden, additive_mask):
        for layer in self.albert_layers:
            hidden = layer(hidden, additive_mask)
        return hidden


def loop_group(i, num_layers, num_groups, formula="hf"):
    """The parameter group that runs loop ``i`` of ``num_layers``, as the checkpoint's origin computes it.

    Both references divide in floating point, and each rounds differently from
    the exact ``i * G // L`` for some shapes, so a checkpoint must be run with
    the formula it was trained with:

    * ``"hf"`` (Hugging Face): ``int(i / (L / G))``; e.g. L=18, G=14, loop 9 -> group 6.
    * ``"google"`` (google-research/albert): ``int(i / L * G)``; the same loop -> group 7.
    """
    if formula == "google":
        return int(i / num_layers * num_groups)
    return int(i / (num_layers / num_groups))


class AlbertEncoder(nn.Cell):
    """E -> H projection, then the shared block looped ``num_hidden_layers`` times.

    embeddings ``[B, S, E]`` -> tuple of hidden states, each ``[B, S, H]``:
    the projected input followed by the output of every loop (L + 1 in all).
    Only the last one is needed for inference; the rest are for inspection.

    With ``num_hidden_groups = G > 1`` the L loops are split into G runs,
    each with its own parameters (G = L gives BERT's unshared stack); which
    group runs which loop follows ``config.group_mapping`` (see ``loop_group``).

    ``cross_layer_sharing`` other than ``"all"`` (the paper's Table 4) builds one
    layer per loop and then makes every loop reuse loop 0's attention sub-block
    (``"attention"``) or feed-forward sub-block (``"ffn"``), or nothing (``"none"``).
    A reused sub-block is the same Cell, so its parameters exist once, under
    loop 0's names.
    """

    FFN_PARTS = ("ffn", "ffn_output", "full_layer_layer_norm")   # AlbertLayer's feed-forward sub-block

    def __init__(self, config: AlbertConfig):
        super().__init__()
        sharing = config.cross_layer_sharing
        self.num_hidden_layers = config.num_hidden_layers
        self.num_hidden_groups = config.num_hidden_groups if sharing == "all" else config.num_hidden_layers
        self.embedding_hidden_mapping_in = Dense(config.embedding_size, config.hidden_size, config)
        self.albert_layer_groups = nn.CellList([AlbertLayerGroup(config) for _ in range(self.num_hidden_groups)])
        shared_parts = {"attention": ("attention",), "ffn": self.FFN_PARTS}.get(sharing, ())
        first_layer = self.albert_layer_groups[0].albert_layers[0]
        for group in self.albert_layer_groups[1:]:
            for part in shared_parts:
                setattr(group.albert_layers[0], part, getattr(first_layer, part))
        # Worked out once here: plain ints, so a compiled graph sees constants.
        self.loop_groups = tuple(loop_group(i, config.num_hidden_layers, self.num_hidden_groups,
                                            config.group_mapping) for i in range(config.num_hidden_layers))

    def group_of_loop(self, i):
        """Which parameter group runs loop i."""
        return self.loop_groups[i]

    def construct(self, embeddings, additive_mask):
        hidden = self.embedding_hidden_mapping_in(embeddings)
        all_hidden = (hidden,)
        for i in range(self.num_hidden_layers):
            hidden = self.albert_layer_groups[self.group_of_loop(i)](hidden, additive_mask)
            all_hidden = all_hidden + (hidden,)
        return all_hidden


def additive_attention_mask(attention_mask):
    """``[B, S]`` of 1 (keep) / 0 (padding) -> ``[B, 1, 1, S]`` of 0 / float32-min.

    Added to the attention scores so that softmax gives padding keys zero weight. Selected rather
    than computed as (1 - mask) * min: under float16 mixed precision min becomes -inf, and 0 * -inf
    is NaN for every kept key.
    """
    keep = attention_mask.reshape(attention_mask.shape[0], 1, 1, attention_mask.shape[1]) != 0
    zeros = ops.zeros(keep.shape, ms.float32)
    return ops.select(keep, zeros, zeros + float(np.finfo(np.float32).min))


class PreTrainedMixin:
    """``from_pretrained(dir)``: build from ``config.json`` and load ``model.ckpt`` (or ``model.safetensors``)."""

    @classmethod
    def from_pretrained(cls, model_dir, config: AlbertConfig = None, allow_missing=()):
        """``allow_missing``: name prefixes that may be absent, e.g. ``("classifier.",)``."""
        if not os.path.isdir(model_dir):
            raise FileNotFoundError(f"model directory not found: {model_dir}")
        if unconverted_checkpoint(model_dir):   # before config.json: a TF release has albert_config.json instead
            raise CheckpointError(unconverted_checkpoint(model_dir))
        model = cls(config or load_config(model_dir))
        load_model_dir(model, model_dir, allow_missing)
        folder_tokenizer(model_dir, model.config.vocab_size)   # its ids must fit the embedding table
        return model


# --------------------------------------------------------------- the backbone
class AlbertModel(PreTrainedMixin, nn.Cell):
    """The ALBERT backbone.

    input_ids, token_type_ids, attention_mask ``[B, S]`` ->
    (sequence_output ``[B, S, H]``, pooled_output ``[B, H]``).
    The pooled output is tanh(W h_[CLS] + b), the sentence vector the heads use.
    Heads that read every token (MLM, QA, token classification) build the
    backbone ``with_pooler=False``, as the reference does, so their checkpoints
    need no pooler; the pooled output is then None.
    """

    checkpoint_prefix = BACKBONE_PREFIX   # its parameters are ``albert.*`` in a model folder, as inside the heads

    def __init__(self, config: AlbertConfig, with_pooler=True):
        super().__init__()
        self.config = config
        self.embeddings = AlbertEmbeddings(config)
        self.encoder = AlbertEncoder(config)
        self.pooler = Dense(config.hidden_size, config.hidden_size, config) if with_pooler else None

    def hidden_states(self, input_ids, token_type_ids=None, attention_mask=None):
        """Every hidden state: (projected embeddings, loop 1, ..., loop L), each ``[B, S, H]``."""
        if token_type_ids is None:
            token_type_ids = ops.zeros_like(input_ids)
        if attention_mask is None:
            attention_mask = ops.ones_like(input_ids)
        embeddings = self.embeddings(input_ids, token_type_ids)
        return self.encoder(embeddings, additive_attention_mask(attention_mask))

    def construct(self, input_ids, token_type_ids=None, attention_mask=None):
        sequence_output = self.hidden_states(input_ids, token_type_ids, attention_mask)[-1]
        if self.pooler is None:
            return sequence_output, None
        pooled_output = tanh(self.pooler(sequence_output[:, 0]))
        return sequence_output, pooled_output


# ------------------------------------------------------------ parameter counts
def count_parameters(cell: nn.Cell) -> int:
    """Number of scalar parameters of a built model (shared ones counted once)."""
    return sum(int(np.prod(p.shape)) for p in cell.trainable_params())


def parameter_table(names=("base", "large", "xlarge", "xxlarge", "bert-base", "bert-large")) -> str:
    """The paper's Table 1 as text: preset, shape, parameter count."""
    rows = [f"{'model':<11} {'L':>3} {'H':>5} {'E':>5} {'shared':>7} {'params':>9}"]
    for name in names:
        c = AlbertConfig.preset(name)
        shared = "all" if c.num_hidden_groups == 1 else "none"
        rows.append(f"{name:<11} {c.num_hidden_layers:>3} {c.hidden_size:>5} {c.embedding_size:>5} "
                    f"{shared:>7} {c.parameter_count() / 1e6:>8.1f}M")
    return "\n".join(rows)


if __name__ == "__main__":
    print(parameter_table())
