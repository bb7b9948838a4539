"""int8 inference (albert_min/model/kernels/int8.py, int8.cc): the integer gemm exact, the quantized Dense
within its quantization bound, ALBERT's shared layer quantized once, whole-model logits near float32,
and the paths that cannot run it (one notice line, float32)."""

import os

import numpy as np
import pytest
import mindspore as ms
from mindspore import nn

from helpers.paths import FIXTURES, ROOT
from albert_min.model import kernels
from albert_min.model.config import AlbertConfig
from albert_min.model.heads import AlbertForSequenceClassification
from albert_min.model.kernels import int8
from albert_min.tasks import prediction_engine

SST2_SMALL = os.path.join(ROOT, "weights", "sst2-small")
TINY = os.path.join(FIXTURES, "tiny_classifier")


@pytest.fixture(scope="module")
def int8_library(library):
    if not int8.has_int8_gemm(library):
        pytest.skip("MindSpore's oneDNN lacks dnnl_gemm_u8s8s32 here")
    return library


def dense_with(weight, bias):
    layer = nn.Dense(weight.shape[1], weight.shape[0])
    layer.weight.set_data(ms.Tensor(weight.astype(np.float32)))
    layer.bias.set_data(ms.Tensor(bias.astype(np.float32)))
    return layer


def random_ids(rng, batch, length, vocab):
    ids = rng.integers(5, vocab, (batch, length)).astype(np.int32)
    mask = np.ones_like(ids)
    for row, keep in enumerate(rng.integers(3, length + 1, batch)):   # padded rows too
        ids[row, keep:], mask[row, keep:] = 0, 0
    return [ms.Tensor(x) for x in (ids, np.zeros_like(ids), mask)]


# ------------------------------------------------------------------ the integer product
@pytest.mark.parametrize("m, n, k", [(1, 1, 1), (37, 29, 515), (64, 48, 3072)])
def test_int8_gemm_is_numpys_int64_product_exactly(int8_library, m, n, k):
    rng = np.random.default_rng(m + n + k)
    a = rng.integers(0, 256, (m, k)).astype(np.uint8)
    w = rng.integers(-128, 128, (n, k)).astype(np.int8)
    a[0], w[0] = 255, -128                              # the extremes: 255 * -128 * 3072 stays in int32
    zero_points = rng.integers(0, 256, m).astype(np.int32)
    row_sums = w.sum(axis=1, dtype=np.int32)
    got = int8.int8_matmul_exact(int8_library, a, zero_points, w, row_sums)
    expected = (a.astype(np.int64) - zero_points[:, None]) @ w.astype(np.int64).T
    np.testing.assert_array_equal(got.astype(np.int64), expected)


@pytest.mark.parametrize("low, k", [(0, 64), (-128, 64), (-128, 37), (0, 5)])
def test_the_custom_op_on_integer_inputs_is_exact(int8_library, low, k):
    """Rows spanning exactly 255 (0..255, or -128..127: zero point 128) quantize to themselves (scale 1),
    weights whose rows peak at 127 too: y is the integer product plus the bias, exactly. k = 37, 5: rows
    that end in a part vector (int8.cc's for_lanes), the extremes placed in it too."""
    rng = np.random.default_rng(1 - low + k)
    x = rng.integers(low, low + 256, (2, 5, k)).astype(np.float32)
    x[..., 0], x[..., -1] = low, low + 255
    w = rng.integers(-127, 128, (24, k)).astype(np.float32)
    w[:, 0] = 127
    bias = rng.integers(-8, 8, 24).astype(np.float32)
    y = kernels.DenseInt8(dense_with(w, bias), int8_library)(ms.Tensor(x)).asnumpy()
    np.testing.assert_array_equal(y, (x.astype(np.int64) @ w.astype(np.int64).T + bias).astype(np.float32))


# ------------------------------------------------------------------ the quantized layer
def test_quantized_dense_within_the_bound_of_its_steps(int8_library):
    """|y_int8 - y| <= sum_k |x_k| sw/2 + sum_k |W^_nk| sa/2 (each factor off by at most half its step:
    sw = max|W[n]| / 127 per output channel, sa = (max(x, 0) - min(x, 0)) / 255 per row), plus float32
    rounding of the float computation."""
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((3, 50, 256)) * np.array([0.1, 1.0, 5.0])[:, None, None]).astype(np.float32)
    x[1, :, :8] += 20.0                                  # outliers widen a row's step
    w = (rng.standard_normal((96, 256)) * 0.05).astype(np.float32)
    bias = rng.standard_normal(96).astype(np.float32)
    y = kernels.DenseInt8(dense_with(w, bias), int8_library)(ms.Tensor(x)).asnumpy().reshape(-1, 96)
    rows = x.reshape(-1, 256).astype(np.float64)
    exact = rows @ w.astype(np.float64).T + bias
    q, sw, _ = int8.quantize_rows(w)
    sa = (np.maximum(rows.max(1), 0) - np.minimum(rows.min(1), 0)) / 255
    w_hat = np.abs(q.astype(np.float64) * sw[:, None]).sum(1)
    bound = np.abs(rows).sum(1)[:, None] * sw[None] / 2 + sa[:, None] * w_hat[None] / 2
    error = np.abs(y - exact)
    assert (error <= bound + 1e-5 * (1 + np.abs(exact))).all()
    assert 0 < error.max() and error.max() < 0.5 * bound.max()    # it quantizes, and the bound is not slack


def test_quantize_rows_keeps_each_weight_within_half_a_step():
    rng = np.random.default_rng(2)
    w = rng.standard_normal((16, 40)).astype(np.float32)
    w[3] = 0.0                                           # an all-zero row: scale 1, zeros
    q, scale, row_sums = int8.quantize_rows(w)
    assert q.dtype == np.int8 and q.min() >= -127 and np.abs(q).max(1)[np.arange(16) != 3].min() == 127
    assert (np.abs(w - q * scale[:, None]) <= scale[:, None] / 2 + 1e-7).all()
    np.testing.assert_array_equal(row_sums, q.astype(np.int64).sum(1))


def test_one_and_two_kernel_threads_give_the_same_bits(int8_library):
    """Rows split over two cores (helper.h), each computed by one thread: the same bits either way."""
    rng = np.random.default_rng(5)
    x = ms.Tensor(rng.standard_normal((4, 128, 256)).astype(np.float32))     # 512 x 256 x 128: split
    layer = kernels.DenseInt8(dense_with(rng.standard_normal((128, 256)), rng.standard_normal(128)), int8_library)
    outputs = []
    try:
        for threads in (1, 2):
            kernels.set_kernel_threads(threads)
            outputs.append(layer(x).asnumpy())
    finally:
        kernels.set_kernel_threads(kernels.KERNEL_THREADS)
    np.testing.assert_array_equal(outputs[0], outputs[1])


def test_a_row_with_nan_gives_nan_not_a_plausible_number(int8_library):
    x = np.ones((3, 32), np.float32)
    x[1, 5] = np.nan
    y = kernels.DenseInt8(dense_with(np.ones((4, 32)), np.zeros(4)), int8_library)(ms.Tensor(x)).asnumpy()
    assert np.isnan(y[1]).all() and np.isfinite(y[[0, 2]]).all()


@pytest.mark.parametrize("accelerated", [False, True])
def test_fused_qkv_is_the_three_separate_products_bit_for_bit(int8_library, accelerated):
    """QKVInt8 (one product over the concatenated [3H, H] weight, the input quantized once, written in the
    heads' layout) against three DenseInt8 and the head split: every bit the same, at 1 and 2 threads;
    DenseInt8Heads against the merge and DenseInt8, bit for bit; the whole Int8Attention near the
    attention with four DenseInt8."""
    ms.set_seed(0)
    config = tiny_config(hidden_size=64, num_attention_heads=4)
    model = AlbertForSequenceClassification(config)
    if accelerated:
        kernels.accelerate(model)
    model.set_train(False)
    attention = model.albert.encoder.albert_layer_groups[0].albert_layers[0].attention
    rng = np.random.default_rng(7)
    hidden = ms.Tensor((rng.standard_normal((3, 70, 64)) * [[[0.5]], [[2.0]], [[8.0]]]).astype(np.float32))
    mask = np.zeros((3, 1, 1, 70), np.float32)
    mask[1, ..., 50:] = -1e4
    mask = ms.Tensor(mask)
    separate = [kernels.DenseInt8(getattr(attention, part), int8_library) for part in ("query", "key", "value")]
    expected = np.stack([d(hidden).asnumpy().reshape(3, 70, 4, 16).transpose(0, 2, 1, 3) for d in separate])
    fused = int8.Int8Attention(attention, int8_library)
    outputs = []
    try:
        for threads in (1, 2):
            kernels.set_kernel_threads(threads)
            outputs.append(fused.qkv(hidden).asnumpy())
    finally:
        kernels.set_kernel_threads(kernels.KERNEL_THREADS)
    for got in outputs:
        assert got.shape == (3, 3, 4, 70, 16)
        np.testing.assert_array_equal(got, expected)
    # the output projection from the heads' layout: DenseInt8 on the merged heads, bit for bit
    context = ms.Tensor(rng.standard_normal((3, 4, 70, 16)).astype(np.float32))
    merged = ms.Tensor(context.asnumpy().transpose(0, 2, 1, 3).reshape(3, 70, 64))
    np.testing.assert_array_equal(fused.dense(context).asnumpy(),
                                  kernels.DenseInt8(attention.dense, int8_library)(merged).asnumpy())
    # the whole attention against the one with three DenseInt8 (its softmax MindSpore's: a few ulp apart,
    # which may move a row's activation across a rounding step of the int8 projection)
    attention.query, attention.key, attention.value = separate
    attention.dense = kernels.DenseInt8(attention.dense, int8_library)
    np.testing.assert_allclose(fused(hidden, mask).asnumpy(), attention(hidden, mask).asnumpy(), rtol=0, atol=2e-2)


def test_masked_softmax_is_softmax_of_scaled_scores_plus_mask(int8_library):
    rng = np.random.default_rng(9)
    scores = (rng.standard_normal((2, 3, 5, 77)) * 6).astype(np.float32)
    mask = np.zeros((2, 1, 1, 77), np.float32)
    mask[1, ..., 40:] = -1e4                                        # padded keys
    scale = np.float32(0.125)
    got = int8.masked_softmax_kernel(int8_library)(ms.Tensor(scores), ms.Tensor(mask),
                                                    ms.Tensor([scale])).asnumpy()
    z = scores.astype(np.float64) * scale + mask
    expected = np.exp(z - z.max(-1, keepdims=True))
    expected /= expected.sum(-1, keepdims=True)
    np.testing.assert_allclose(got, expected, rtol=2e-6, atol=1e-9)
    assert (got[1, ..., 40:] < 1e-37).all()                          # e^x is clamped at the smallest normal


def test_fused_qkv_gives_nan_for_a_row_with_nan(int8_library):
    query, key, value = (dense_with(np.ones((8, 8)), np.zeros(8)) for _ in range(3))
    x = np.ones((2, 3, 8), np.float32)
    x[1, 2, 5] = np.inf
    got = int8.QKVInt8(query, key, value, 2, int8_library)(ms.Tensor(x)).asnumpy()    # (3, B, N, S, D)
    assert np.isnan(got[:, 1, :, 2]).all() and np.isfinite(got[:, 0]).all() and np.isfinite(got[:, 1, :, :2]).all()


# ------------------------------------------------------------------ the model
def tiny_config(**changes):
    config = AlbertConfig(vocab_size=99, embedding_size=16, hidden_size=32, num_hidden_layers=3,
                          num_attention_heads=4, intermediate_size=37, max_position_embeddings=64, num_labels=3)
    for name, value in changes.items():
        setattr(config, name, value)
    return config


def dense_cells(model):
    return {id(c): c for _, c in model.cells_and_names() if isinstance(c, nn.Dense)}


def test_the_shared_layer_is_quantized_once(int8_library):
    ms.set_seed(0)
    model = AlbertForSequenceClassification(tiny_config())
    cells = dense_cells(model)                           # E->H, 6 in the shared layer, pooler, classifier
    distinct = len(cells)
    shapes = [c.weight.shape for c in cells.values()]
    report = kernels.quantize_int8(model, notice=False)
    assert report.cells == distinct == 9
    int8_weights = [p for p in model.get_parameters() if p.dtype == ms.int8]
    # q, k and v as one int8 product [3, N, D, H]: 7 int8 tensors holding the 9 weights, each once
    assert len(int8_weights) == 7 and not dense_cells(model)
    assert sum(p.size for p in int8_weights) == sum(n * k for n, k in shapes)
    names = [p.name for p in model.get_parameters()]                  # the model's names, each once
    assert len(set(names)) == len(names) and all(n.startswith(("albert.", "classifier.")) for n in names)
    attention = "albert.encoder.albert_layer_groups.0.albert_layers.0.attention."
    assert {attention + n for n in ("qkv.weight", "qkv.weight_scale", "dense.weight", "dense.bias")} <= set(names)
    assert report.float32_bytes == sum(4 * (n * k + n) for n, k in shapes)
    assert report.int8_bytes == sum(n * k + 3 * 4 * n for n, k in shapes)   # weight, scale, row sums, bias


def test_a_sub_block_shared_across_loops_is_one_quantized_cell(int8_library):
    """cross_layer_sharing="attention": one layer per loop, all holding loop 0's attention: its four
    Dense cells are quantized once, the same object in every loop; each loop's feed-forward its own."""
    ms.set_seed(0)
    model = AlbertForSequenceClassification(tiny_config(cross_layer_sharing="attention"))
    distinct = len(dense_cells(model))
    report = kernels.quantize_int8(model, notice=False)
    assert report.cells == distinct == 1 + 4 + 2 * 3 + 2
    layers = [g.albert_layers[0] for g in model.albert.encoder.albert_layer_groups]
    assert len({id(layer.attention) for layer in layers}) == 1          # q, k, v: one fused int8 cell
    assert isinstance(layers[0].attention, int8.Int8Attention)
    for part in ("qkv", "dense"):
        cells = {id(getattr(layer.attention, part)) for layer in layers}
        assert len(cells) == 1 and isinstance(getattr(layers[0].attention, part), kernels.DenseInt8)
    assert len({id(layer.ffn) for layer in layers}) == 3
    # q, k and v one int8 tensor: two fewer than the Dense layers quantized
    assert len([p for p in model.get_parameters() if p.dtype == ms.int8]) == report.cells - 2


@pytest.mark.parametrize("folder", [SST2_SMALL, TINY])
def test_int8_logits_follow_float32(int8_library, folder):
    # accelerated, as pipeline() and evaluate.py quantize it: the layers around the int8 Dense compute alike
    # in PyNative and in a graph, so that each row's activations quantize to the same int8 in both
    model = kernels.accelerate(AlbertForSequenceClassification.from_pretrained(folder))
    model.set_train(False)
    inputs = random_ids(np.random.default_rng(3), 48, 40, model.config.vocab_size)
    reference = model(*inputs).asnumpy()
    kernels.quantize_int8(model, notice=False)
    got = model(*inputs).asnumpy()
    cosine = (got * reference).sum() / np.linalg.norm(got) / np.linalg.norm(reference)
    assert cosine >= 0.999
    margin = np.sort(reference, 1)[:, -1] - np.sort(reference, 1)[:, -2]
    clear = margin > 0.05                                 # rows whose float32 top two are not a tie
    assert (got.argmax(1) == reference.argmax(1))[clear].all()
    # each row's activations are quantized on their own: a row's logits do not depend on its batch
    one = model(*[t[5:6] for t in inputs]).asnumpy()
    np.testing.assert_array_equal(one, got[5:6])
    # the dynamic-shape graph (evaluate.py's) computes the same
    np.testing.assert_allclose(prediction_engine.dynamic_graph(model)(*inputs).asnumpy(), got, rtol=0, atol=1e-6)


def test_a_quantized_model_refuses_training(int8_library):
    model = AlbertForSequenceClassification(tiny_config())
    kernels.quantize_int8(model, notice=False)
    with pytest.raises(kernels.Int8Error, match="predicts only"):
        model.set_train(True)         # before a train step's graph is compiled: there it would not raise


def test_the_compile_cache_keys_int8_apart(int8_library, tmp_path):
    model = AlbertForSequenceClassification(tiny_config())
    before = prediction_engine._cache_folder(str(tmp_path), model, [prediction_engine.DYNAMIC_SHAPE])
    kernels.quantize_int8(model, notice=False)
    assert prediction_engine._cache_folder(str(tmp_path), model, [prediction_engine.DYNAMIC_SHAPE]) != before


# ------------------------------------------------------------------ where it cannot run
@pytest.mark.parametrize("why", ["no int8 gemm", "kernels off", "another device"])
def test_without_the_int8_gemm_one_notice_and_float32(library, monkeypatch, capsys, why):
    model = AlbertForSequenceClassification.from_pretrained(TINY)
    model.set_train(False)
    inputs = random_ids(np.random.default_rng(4), 4, 12, model.config.vocab_size)
    reference = model(*inputs).asnumpy()
    capsys.readouterr()                       # loading's own notes (a checkpoint without a recorded sha256)
    if why == "no int8 gemm":
        monkeypatch.setattr(int8, "has_int8_gemm", lambda path: False)
        report = kernels.quantize_int8(model)
    elif why == "kernels off":
        monkeypatch.setenv("ALBERT_MIN_KERNELS", "off")
        report = kernels.quantize_int8(model)
    else:                                     # the kernels are CPU code (was: inside mindspore_ops(), gone)
        from albert_min.common import device
        monkeypatch.setattr(device, "current_device", lambda: "GPU")
        report = kernels.quantize_int8(model)
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("albert_min: int8 not available (")
    assert lines[0].endswith("computing in float32") and report.cells == 0
    assert not int8.quantized(model)
    np.testing.assert_array_equal(model(*inputs).asnumpy(), reference)
    if why == "no int8 gemm":
        assert "dnnl_gemm_u8s8s32" in lines[0]


def test_a_library_whose_onednn_lacks_the_int8_gemm_has_no_int8_and_says_so(library, monkeypatch, capsys):
    """int8.cc's reference to dnnl_gemm_u8s8s32 is weak: the library built against MindSpore's oneDNN
    finds it (``int8_available``), and where it would not, quantize_int8 gives its one notice line and
    leaves the model in float32. (Without oneDNN at all the kernels are not built: test_kernel_build.)"""
    assert int8.has_int8_gemm(library)
    monkeypatch.setattr(int8, "has_int8_gemm", lambda path: False)
    model = AlbertForSequenceClassification(tiny_config())
    capsys.readouterr()
    assert kernels.quantize_int8(model, path=library).cells == 0 and not int8.quantized(model)
    assert capsys.readouterr().err.strip().splitlines() == [
        "albert_min: int8 not available (the kernels were built without oneDNN's dnnl_gemm_u8s8s32 "
        "(mindspore/lib/libdnnl.so.3 missing or without it)); computing in float32"]


# ------------------------------------------------------------------ the entry points
def test_pipeline_int8(int8_library, capsys):
    from albert_min import pipeline
    texts = ["a gorgeous , witty , seductive movie .", "a mess", "the plot is thin but the acting is superb"]
    plain = pipeline(SST2_SMALL)(texts)
    capsys.readouterr()
    quantized = pipeline(SST2_SMALL, int8=True)
    assert "9 Dense layers quantized, each once" in capsys.readouterr().err
    assert int8.quantized(quantized.model)
    results = quantized(texts)
    assert [r["label"] for r in results] == [r["label"] for r in plain]
    assert all(abs(r["score"] - p["score"]) < 0.02 for r, p in zip(results, plain))


def test_evaluate_int8(int8_library, tmp_path, capsys):
    import evaluate
    rows = ["sentence\tlabel", "a gorgeous , witty , seductive movie .\t1", "a mess\t0",
            "the plot is thin but the acting is superb\t1", "a dull , lifeless film\t0"]
    data = tmp_path / "dev.tsv"
    data.write_text("\n".join(rows) + "\n", encoding="utf-8")
    plain = evaluate.main(["--model", SST2_SMALL, "--data", str(data), "--json", "--no-compile-cache"])
    capsys.readouterr()
    quantized = evaluate.main(["--model", SST2_SMALL, "--data", str(data), "--json", "--int8",
                               "--no-compile-cache"])
    assert "int8: 9 Dense layers" in capsys.readouterr().err
    assert quantized["accuracy"] == plain["accuracy"]


def test_the_report_line_names_the_counts_and_bytes():
    report = kernels.Int8Report(cells=2, int8_bytes=1_500_000, float32_bytes=6_000_000)
    assert report.line() == ("albert_min: int8: 2 Dense layers quantized, each once (a shared layer's once for all "
                             "its loops): 1.50 MB against 6.00 MB float32")


# ------------------------------------------------------------------ export
def test_export_int8_stores_the_dense_weights_as_int8_once(tmp_path):
    """A MindIR holds MindSpore's ops only: --int8 stores each Dense weight as int8 + a scale per row
    (the shared layer's once) and the graph dequantizes them. The file is smaller by what the report
    says the Dense layers saved, less the added scales, and predicts as the weights-only model does."""
    from albert_min import export
    plain, small = str(tmp_path / "fp32.mindir"), str(tmp_path / "int8.mindir")
    export.export_mindir(SST2_SMALL, plain)
    export.export_mindir(SST2_SMALL, small, int8=True)
    model = AlbertForSequenceClassification.from_pretrained(SST2_SMALL)
    model.set_train(False)
    inputs = export.make_inputs(SST2_SMALL, ["a gorgeous , witty , seductive movie .", "a mess", "dull"],
                                mindir=small)
    reference = model(*map(ms.Tensor, inputs)).asnumpy()
    report = kernels.quantize_int8(model, notice=False, weights_only=True)   # the plain model, as export's
    assert report.cells == 9 and int8.quantized(model) == "int8 weights"
    saved = report.float32_bytes - report.int8_bytes + 4 * sum(        # row sums: not in the file
        c.weight.shape[0] for _, c in model.cells_and_names() if isinstance(c, kernels.int8.DenseInt8Weights))
    # less a few kB of graph: a Cast, ExpandDims and Mul per Dense call, the 4 loops unrolled
    assert 0.9 * saved < os.path.getsize(plain) - os.path.getsize(small) <= saved
    graph = nn.GraphCell(ms.load(small))
    got = graph(*map(ms.Tensor, inputs)).asnumpy()
    np.testing.assert_allclose(got, model(*map(ms.Tensor, inputs)).asnumpy(), rtol=0, atol=1e-5)
    assert (got.argmax(1) == reference.argmax(1)).all() and np.abs(got - reference).max() < 0.05
    assert "int8" in export.read_metadata(small)["dense_weights"]
