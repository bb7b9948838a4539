"""bf16 matrix products for training (albert_min/model/kernels/bf16.py, bf16.cc): the rounding, each
product and gradient against numpy's float64 product of the rounded operands, the same products
within bfloat16's bound of float32's, the same bits at one and two kernel threads, the swap of a
built model (a shared layer once; prediction stays float32), and the paths that cannot run it."""

import numpy as np
import pytest
import mindspore as ms

from albert_min.model import kernels
from albert_min.model.heads import AlbertForSequenceClassification
from albert_min.model.kernels import bf16
from albert_min.model.kernels.accelerate import KernelAttention, OpCells
from albert_min.model.kernels.bf16_attention import Bf16Attention, HeadContextBf16, HeadScoresBf16
from albert_min.model.kernels.layers import BatchMatMulWithKernels, LinearWithKernels
from albert_min.model.kernels.swap import swap_cells
from helpers.tiny_runs import tiny_config

EPS32 = 2.0 ** -24          # float32's unit roundoff
EPS_BF16 = 2.0 ** -8        # bfloat16's unit roundoff (8 significant bits, rounded to nearest)


@pytest.fixture(scope="module")
def bf16_library(library):
    if not bf16.has_bf16_gemm(library):
        pytest.skip("MindSpore's oneDNN lacks dnnl_gemm_bf16bf16f32 here")
    return library


def rounded(x):
    """numpy's bfloat16 rounding of float32 ``x`` (nearest, ties to even; subnormals to a signed zero,
    as AVX512-BF16 does), as float32."""
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    out = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16).astype(np.uint32)
    out = np.where(bits & 0x7F800000 == 0, bits & 0x80000000, out)
    return out.astype(np.uint32).view(np.float32)


def accumulation_bound(a, b, k):
    """What float32 accumulation of k products may add to float64's: k eps32 sum|a||b| (the classic
    worst case; oneDNN's blocked sums stay far below it)."""
    return k * EPS32 * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))


def randn(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def train_mode(cell):
    cell.set_train(True)
    return cell


def output_and_gradients(cell, *inputs, seed=0):
    """(cell(*inputs), d/d(inputs) of sum(cell(*inputs) * dy), dy) as numpy, jit-compiled, in training."""
    train_mode(cell)
    tensors = [ms.Tensor(x) for x in inputs]
    out = cell(*tensors)
    dy = randn(np.random.default_rng(seed), *out.shape)

    def loss(*args):
        return (cell(*args) * ms.Tensor(dy)).sum()
    grads = ms.jit(ms.grad(loss, tuple(range(len(inputs)))))(*tensors)
    return out.asnumpy(), [g.asnumpy() for g in grads], dy


def check_product(got, a, b, slack=0.0):
    """``got`` = a b (2-d float32 operands, or a batch of them): the float64 product of the bf16-rounded
    operands within float32 accumulation's bound (plus ``slack``: a bias's rounding), and the float32
    operands' product within bfloat16's bound (each factor off by at most 2^-8 of itself)."""
    ah, bh = rounded(a).astype(np.float64), rounded(b).astype(np.float64)
    k = a.shape[-1]
    exact_rounded = ah @ bh
    assert np.all(np.abs(got - exact_rounded) <= accumulation_bound(a, b, k) + slack)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    bound = (2 * EPS_BF16 + EPS_BF16 ** 2) * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))
    assert np.all(np.abs(got - exact) <= bound + accumulation_bound(a, b, k) + slack)
    return np.abs(got - exact_rounded).max(), np.abs(got - exact).max()


# ------------------------------------------------------------------ the rounding
def test_rounding_is_to_the_nearest_bfloat16_ties_to_even(bf16_library):
    rng = np.random.default_rng(0)
    special = np.float32([1 + 2 ** -8, 1 + 3 * 2 ** -8, -(1 + 2 ** -8), np.finfo(np.float32).max, 1e-40, -1e-40,
                          0.0, -0.0, np.inf, -np.inf])
    x = np.concatenate([special, randn(rng, 4099) * 10.0 ** rng.integers(-30, 30, 4099), special]).astype(np.float32)
    got = bf16.round_to_bf16(bf16_library, x)                # 16 at a time (AVX512-BF16), the last 7 one by one
    assert np.array_equal(got.view(np.uint32), rounded(x).view(np.uint32))
    for values in (got[:10], got[-10:]):
        assert list(values[:4]) == [1.0, 1 + 2 ** -6, -1.0, np.inf]          # ties to even; overflow to inf
        assert values[4] == 0 and values[5] == 0 and np.signbit(values[5])    # subnormals: signed zeros
    normal = np.isfinite(x) & (np.abs(x) >= np.finfo(np.float32).tiny) & (np.abs(x) < 3e38)
    x, got = x[normal], got[normal]
    down = (x.view(np.uint32) & 0xFFFF0000).view(np.float32).astype(np.float64)       # the two bfloat16 around x
    up = ((x.view(np.uint32) & 0xFFFF0000) + 0x10000).view(np.float32).astype(np.float64)
    assert np.all(np.abs(got.astype(np.float64) - x) == np.minimum(np.abs(x - down), np.abs(up - x)))
    assert np.all(np.abs(got.astype(np.float64) - x) <= EPS_BF16 * np.abs(x))
    assert np.isnan(bf16.round_to_bf16(bf16_library, np.full(17, np.nan, np.float32))).all()


# ------------------------------------------------------------------ the products and their gradients
@pytest.mark.parametrize("x_shape, out_features", [((3, 5, 64), 48), ((256, 128), 128), ((2, 1, 7), 3)])
def test_dense_and_its_gradient_from_bfloat16_operands(bf16_library, x_shape, out_features):
    rng = np.random.default_rng(sum(x_shape) + out_features)
    x, w, b = randn(rng, *x_shape), randn(rng, out_features, x_shape[-1]), randn(rng, out_features)
    y, (dx, dw, db), dy = output_and_gradients(bf16.LinearBf16(bf16_library), x, w, b)
    x2, dy2 = x.reshape(-1, x_shape[-1]), dy.reshape(-1, out_features)
    y2 = y.reshape(-1, out_features)
    check_product(y2.astype(np.float64) - b, x2, w.T, slack=np.spacing(np.abs(y2)))   # y = fl(x W^T + b)
    check_product(dx.reshape(-1, x_shape[-1]), dy2, w)
    check_product(dw, dy2.T, x2)
    np.testing.assert_allclose(db, dy2.astype(np.float64).sum(0), rtol=0, atol=dy2.shape[0] * 4 * EPS32 *
                               np.abs(dy2).sum(0).max())   # the bias's gradient: float32 sums, no rounding


@pytest.mark.parametrize("transpose_b", [False, True])
def test_batch_matmul_and_its_gradient_from_bfloat16_operands(bf16_library, transpose_b):
    rng = np.random.default_rng(int(transpose_b))
    a = randn(rng, 2, 3, 16, 24)
    b = randn(rng, 2, 3, 20, 24) if transpose_b else randn(rng, 2, 3, 24, 20)
    out, (da, db), dout = output_and_gradients(bf16.BatchMatMulBf16(bf16_library, transpose_b), a, b)
    b_t = np.swapaxes(b, -1, -2)
    check_product(out, a, b_t if transpose_b else b)
    check_product(da, dout, b if transpose_b else b_t)
    if transpose_b:
        check_product(db, np.swapaxes(dout, -1, -2), a)
    else:
        check_product(db, np.swapaxes(a, -1, -2), dout)


def heads(x):
    """[B, S, N, D] -> [B, N, S, D]: the Dense layers' layout to the transposed heads'."""
    return np.swapaxes(x, 1, 2)


def test_attention_products_read_and_write_the_heads_in_place(bf16_library):
    """Bf16Attention's products: q, k, v and the context as [B, S, N, D], each head's product and
    gradients as the transposed heads' (check_product), the scores and probabilities [B, N, S, T]."""
    rng = np.random.default_rng(6)
    q, k = randn(rng, 2, 9, 3, 8), randn(rng, 2, 7, 3, 8)
    scores, (dq, dk), dscores = output_and_gradients(HeadScoresBf16(bf16_library), q, k)
    assert scores.shape == (2, 3, 9, 7) and dq.shape == q.shape and dk.shape == k.shape
    check_product(scores, heads(q), np.swapaxes(heads(k), -1, -2))
    check_product(heads(dq), dscores, heads(k))
    check_product(heads(dk), np.swapaxes(dscores, -1, -2), heads(q))
    probs, v = randn(rng, 2, 3, 9, 7), randn(rng, 2, 7, 3, 8)
    context, (dprobs, dv), dcontext = output_and_gradients(HeadContextBf16(bf16_library), probs, v)
    assert context.shape == (2, 9, 3, 8) and dprobs.shape == probs.shape and dv.shape == v.shape
    check_product(heads(context), probs, heads(v))
    check_product(dprobs, heads(dcontext), np.swapaxes(heads(v), -1, -2))
    check_product(heads(dv), np.swapaxes(probs, -1, -2), heads(dcontext))


def transposing(attention):
    """``KernelAttention`` around a ``Bf16Attention``'s cells: the heads transposed, then BatchMatMulBf16."""
    cell = KernelAttention(attention, OpCells(None))
    for name in ("matmul_qk", "matmul_pv", "probabilities", "swap_heads"):
        setattr(cell, name, getattr(attention, name))
    return cell.set_train(attention.training)


def loss_and_gradients(model, ids, mask, labels):
    """The classifier's cross-entropy and its gradients for every trainable parameter (jit), as numpy."""
    def loss(ids, mask, labels):
        return ms.ops.cross_entropy(model(ids, None, mask), labels)
    value, grads = ms.jit(ms.value_and_grad(loss, None, model.trainable_params()))(ids, mask, labels)
    return value.asnumpy(), [g.asnumpy() for g in grads]


def test_the_bf16_attention_computes_the_transposing_paths_bits(bf16_library):
    """The heads read in place give the loss and every gradient of the transposing path, bit for bit
    (the same gemms on the same rounded numbers, only their rows' stride differs)."""
    rng = np.random.default_rng(7)
    ids = ms.Tensor(rng.integers(5, 40, (3, 10)).astype(np.int32))
    mask = ms.Tensor(np.ones((3, 10), np.int32))
    labels = ms.Tensor(np.array([0, 1, 1], np.int32))
    results = []
    for in_place in (True, False):
        ms.set_seed(0)
        model = kernels.accelerate(AlbertForSequenceClassification(tiny_config(
            num_labels=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, classifier_dropout_prob=0.0)))
        kernels.use_bf16_gemms(model)
        model.set_train(True)
        assert count(model, Bf16Attention) == 1                  # the shared layer's, once
        if not in_place:
            swap_cells(model, lambda cell: type(cell) is Bf16Attention, transposing)
            assert count(model, Bf16Attention) == 0
        value, grads = loss_and_gradients(model, ids, mask, labels)
        results.append([value, *grads])
    assert all(np.array_equal(a, b) for a, b in zip(*results, strict=True))


def test_the_products_differ_from_float32_by_bfloat16s_rounding_only(bf16_library):
    """Far from float32's result (so it did run in bf16), near the rounded operands' exact product."""
    rng = np.random.default_rng(3)
    x, w, b = randn(rng, 64, 256), randn(rng, 96, 256), np.zeros(96, np.float32)
    y, _, _ = output_and_gradients(bf16.LinearBf16(bf16_library), x, w, b)
    to_rounded, to_float32 = check_product(y, x, w.T)
    print(f"max |y - rounded operands' product| {to_rounded:.2e}, |y - float32 operands' product| {to_float32:.2e}")
    assert to_rounded < 1e-2 * to_float32


def test_one_and_two_kernel_threads_give_the_same_bits(bf16_library):
    rng = np.random.default_rng(4)
    x, w, b = randn(rng, 512, 256), randn(rng, 192, 256), randn(rng, 192)
    a, bm = randn(rng, 16, 4, 64, 32), randn(rng, 16, 4, 64, 32)
    results = []
    for threads in (1, 2):
        kernels.set_kernel_threads(threads)
        try:
            results.append([*output_and_gradients(bf16.LinearBf16(bf16_library), x, w, b)[:2],
                            *output_and_gradients(bf16.BatchMatMulBf16(bf16_library, True), a, bm)[:2],
                            *output_and_gradients(HeadScoresBf16(bf16_library), a, bm)[:2]])
        finally:
            kernels.set_kernel_threads(kernels.KERNEL_THREADS)
    flat = [[r[0], *r[1], r[2], *r[3], r[4], *r[5]] for r in results]
    for one, two in zip(*flat):
        assert np.array_equal(one, two)


# ------------------------------------------------------------------ the swap of a built model
def count(model, kind):
    return sum(type(cell) is kind for _, cell in model.cells_and_names())


def test_the_swap_replaces_every_product_once_and_prediction_stays_float32(bf16_library):
    ms.set_seed(0)
    model = kernels.accelerate(AlbertForSequenceClassification(tiny_config(
        num_labels=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, classifier_dropout_prob=0.0)))
    rng = np.random.default_rng(5)
    ids = ms.Tensor(rng.integers(5, 40, (4, 12)).astype(np.int32))
    mask = ms.Tensor(np.ones((4, 12), np.int32))
    model.set_train(False)
    float32_logits = model(ids, None, mask).asnumpy()
    model.set_train(True)
    float32_train = model(ids, None, mask).asnumpy()
    report = kernels.use_bf16_gemms(model)
    # the shared layer's q, k, v, attention output, ffn, ffn output and the two attention products,
    # once for both loops, plus the embedding projection, pooler and classifier
    assert report.reason is None and report.cells == 11, report
    assert count(model, LinearWithKernels) == count(model, BatchMatMulWithKernels) == 0
    assert kernels.uses_bf16_gemms(model) and kernels.uses_kernels(model)
    assert "11 matrix-product layers" in report.line()
    assert kernels.use_bf16_gemms(model).cells == 0          # a second swap finds nothing left to swap
    bf16_train = model(ids, None, mask).asnumpy()
    assert not np.array_equal(bf16_train, float32_train)
    np.testing.assert_allclose(bf16_train, float32_train, atol=0.05)
    model.set_train(False)
    assert np.array_equal(model(ids, None, mask).asnumpy(), float32_logits)
    kernels.use_mindspore_ops(model)                         # and back to MindSpore's ops
    assert not kernels.uses_bf16_gemms(model)


@pytest.mark.parametrize("why", ["no bf16 gemm", "kernels off"])
def test_without_the_bf16_gemm_one_notice_and_float32(library, monkeypatch, capsys, why):
    model = kernels.accelerate(AlbertForSequenceClassification(tiny_config(num_labels=2)))
    if why == "no bf16 gemm":
        monkeypatch.setattr(bf16, "has_bf16_gemm", lambda path: False)
    else:
        monkeypatch.setenv("ALBERT_MIN_KERNELS", "off")
    capsys.readouterr()
    report = kernels.use_bf16_gemms(model)
    assert report.cells == 0 and not kernels.uses_bf16_gemms(model)
    assert count(model, LinearWithKernels) > 0
    reason = ("the kernels were built without oneDNN's dnnl_gemm_bf16bf16f32" if why == "no bf16 gemm" else
              "the compiled kernels are not in use")
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"albert_min: bf16 GEMMs not available ({reason}") and line.endswith("computing in float32")


def test_a_plain_model_is_one_notice_naming_accelerate(bf16_library, capsys):
    """The swap finds the kernels' product cells: on a model that was never accelerated it says so."""
    model = AlbertForSequenceClassification(tiny_config(num_labels=2))
    capsys.readouterr()
    report = kernels.use_bf16_gemms(model)
    assert report.cells == 0 and "kernels.accelerate(model) first" in report.reason
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("albert_min: bf16 GEMMs not available") and not kernels.uses_bf16_gemms(model)


def test_the_library_finds_the_bf16_gemm_and_lists_its_functions(bf16_library):
    """bf16.cc's reference to dnnl_gemm_bf16bf16f32 is weak: the library loads without it; here it has it."""
    import ctypes
    loaded = ctypes.CDLL(bf16_library)
    assert loaded.bf16_available() == 1
    assert all(hasattr(loaded, name) for name in bf16.FUNCTIONS) and set(bf16.FUNCTIONS) <= set(kernels.FUNCTIONS)
