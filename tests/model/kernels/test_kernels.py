"""albert_min/model/kernels: each compiled gradient against MindSpore's autodiff of the plain ops,
``accelerate`` (what it swaps, the same gradients), the build (cache, fallback, off switch). The parity
suite (tests/model/test_*.py) runs on the plain and the accelerated model (helpers/reference_model.py)."""

import glob
import os
import re
import subprocess
import sys

import numpy as np
import mindspore as ms
import pytest
from mindspore import ops

from albert_min.model import kernels
from albert_min.model.folder import load_arrays
from albert_min.model.config import AlbertConfig
from albert_min.model.kernels import build
from albert_min.model.kernels.layers import (Activation, AttentionProbabilities, AttentionProbabilitiesWithKernels,
                                             BatchMatMul, BatchMatMulWithKernels, GeluNewWithKernels, LayerNorm,
                                             LayerNormWithKernels, Linear, LinearWithKernels, Softmax,
                                             SoftmaxWithKernels, SwapMiddleAxes, SwapMiddleAxesWithKernels)
from albert_min.model.modeling import Dense, additive_attention_mask, gelu, gelu_new
from albert_min.model.heads import AlbertForSequenceClassification
from helpers.paths import FIXTURES, ROOT
from helpers.reference_model import accelerates, tiny_classifier


def gradients(cell, *inputs, seed=0):
    """d/d(inputs) of sum(cell(*inputs) * dy) for a fixed random dy, as numpy arrays (jit-compiled)."""
    out_shape = cell(*inputs).shape
    dy = ms.Tensor(np.random.default_rng(seed).standard_normal(out_shape).astype(np.float32))

    def loss(*args):
        return (cell(*args) * dy).sum()
    return [g.asnumpy() for g in ms.jit(ms.grad(loss, tuple(range(len(inputs)))))(*inputs)]


def assert_close(ours, expected, rtol=1e-5, scale=None):
    """Elementwise within rtol of ``scale`` (default: each expected gradient's largest magnitude):
    float32 sums over up to 2048 rows round differently in any other order."""
    for a, b in zip(ours, expected, strict=True):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=0, atol=rtol * (scale or float(np.abs(b).max())))


def randn(rng, *shape, scale=1.0):
    return ms.Tensor((scale * rng.standard_normal(shape)).astype(np.float32))


@pytest.mark.parametrize("x_shape, out_features", [((64, 32, 128), 512), ((64, 32, 512), 128), ((7, 5, 24), 24),
                                                   ((64, 128), 2), ((3, 16), 1)])
def test_dense_gradient_matches_mindspore_autodiff(library, x_shape, out_features):
    rng = np.random.default_rng(1)
    inputs = (randn(rng, *x_shape), randn(rng, out_features, x_shape[-1], scale=0.05), randn(rng, out_features))
    plain, fast = Linear(), LinearWithKernels(library)
    assert_close([fast(*inputs).asnumpy()], [plain(*inputs).asnumpy()])          # the forward: sgemm
    assert_close(gradients(fast, *inputs), gradients(plain, *inputs))


@pytest.mark.parametrize("x_shape, eps", [((64, 32, 128), 1e-12), ((5, 9, 24), 1e-5), ((4, 768), 1e-12)])
def test_layer_norm_gradient_matches_mindspore_autodiff(library, x_shape, eps):
    rng = np.random.default_rng(2)
    x = ms.Tensor((3.0 + 2.0 * rng.standard_normal(x_shape)).astype(np.float32))   # off-centre, not unit variance
    inputs = (x, randn(rng, x_shape[-1]), randn(rng, x_shape[-1]))
    plain, fast = LayerNorm(eps), LayerNormWithKernels(eps, library)
    np.testing.assert_allclose(fast(*inputs).asnumpy(), plain(*inputs).asnumpy(), rtol=0, atol=1e-5)
    assert_close(gradients(fast, *inputs), gradients(plain, *inputs))


@pytest.mark.parametrize("shape", [(64, 4, 32, 32), (3, 2, 5, 7)])
def test_softmax_gradient_matches_mindspore_autodiff(library, shape):
    rng = np.random.default_rng(5)
    scores = 4.0 * rng.standard_normal(shape).astype(np.float32)
    mask = np.ones((shape[0], shape[-1]), np.int32)
    mask[0, shape[-1] // 2:] = 0                                  # padding keys: probability exactly 0
    scores = ms.Tensor(scores) + additive_attention_mask(ms.Tensor(mask))
    plain, fast = Softmax(), SoftmaxWithKernels(library)
    assert np.array_equal(fast(scores).asnumpy(), plain(scores).asnumpy())
    assert_close(gradients(fast, scores), gradients(plain, scores))


@pytest.mark.parametrize("shape", [(64, 4, 32, 32), (3, 2, 5, 7)])
def test_attention_probabilities_kernel_matches_mindspore_autodiff(library, shape):
    """softmax(scores * scale + mask): in training one masked_softmax pass (exp within about 1 ulp)
    and its gradient; in prediction MindSpore's ops, bit for bit."""
    rng = np.random.default_rng(9)
    scores = ms.Tensor(4.0 * rng.standard_normal(shape).astype(np.float32))
    mask = np.ones((shape[0], shape[-1]), np.int32)
    mask[0, shape[-1] // 2:] = 0                                  # padding keys
    mask = additive_attention_mask(ms.Tensor(mask))                # [B, 1, 1, T]
    plain, fast = AttentionProbabilities(0.125, Softmax()), AttentionProbabilitiesWithKernels(
        0.125, SoftmaxWithKernels(library), library)
    fast.set_train(True)
    ours, theirs = fast(scores, mask).asnumpy(), plain(scores, mask).asnumpy()
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-6)
    assert ours[0, ..., shape[-1] // 2:].max() < 1e-30             # padding keys: (about) no probability
    assert_close(gradients(fast, scores, mask)[:1], gradients(plain, scores, mask)[:1])
    fast.set_train(False)
    assert np.array_equal(fast(scores, mask).asnumpy(), theirs)


@pytest.mark.parametrize("scale", [1.0, 6.0, 1e-5])                 # typical, saturated tails, near x = 0
def test_gelu_new_gradient_matches_mindspore_autodiff(library, scale):
    rng = np.random.default_rng(6)
    x = ms.Tensor((scale * rng.standard_normal((64, 32, 512))).astype(np.float32))
    plain, fast = Activation(gelu_new), GeluNewWithKernels(gelu_new, library)
    ours, theirs = fast(x).asnumpy(), plain(x).asnumpy()
    np.testing.assert_allclose(ours, theirs, rtol=2e-6, atol=1e-7 * scale)
    exact = x.asnumpy().astype(np.float64)
    exact = exact / (1 + np.exp(np.minimum(700.0, -np.sqrt(8 / np.pi) * (exact + 0.044715 * exact ** 3))))
    assert np.abs(ours - exact).max() <= np.abs(theirs - exact).max() * 1.5 + 1e-12   # as close as MindSpore's
    assert_close(gradients(fast, x), gradients(plain, x))


@pytest.mark.parametrize("transpose_b", [True, False])
@pytest.mark.parametrize("jit", [True, False])
def test_batch_matmul_and_its_gradient_match_mindspore(library, transpose_b, jit):
    rng = np.random.default_rng(7)
    a = randn(rng, 6, 4, 9, 8)
    b = randn(rng, 6, 4, 5, 8) if transpose_b else randn(rng, 6, 4, 8, 5)
    a_view = ops.transpose(randn(rng, 6, 9, 4, 8), (0, 2, 1, 3))    # a transposed input, as split_heads makes
    plain, fast = BatchMatMul(transpose_b), BatchMatMulWithKernels(library, transpose_b)
    for training in (True, False):                                  # the kernels in both
        fast.set_train(training)
        for x in (a, a_view):
            call = ms.jit(fast.construct) if jit else fast
            np.testing.assert_allclose(call(x, b).asnumpy(), plain(x, b).asnumpy(), rtol=0, atol=1e-5)
            assert_close(gradients(fast, x, b), gradients(plain, x, b))


@pytest.mark.parametrize("shape", [(3, 5, 4, 6), (64, 40, 4, 32)])   # the second: split over both cores
@pytest.mark.parametrize("jit", [True, False])
def test_swap_middle_axes_and_its_gradient_are_transposes_bit_for_bit(library, shape, jit):
    """Attention's head split/merge: data moved, never computed on, so exactly MindSpore's Transpose."""
    x = randn(np.random.default_rng(8), *shape)
    plain, fast = SwapMiddleAxes(), SwapMiddleAxesWithKernels(library)
    fast.set_train(True)                                            # training: the kernel, forward too
    call = ms.jit(fast.construct) if jit else fast
    assert np.array_equal(call(x).asnumpy(), plain(x).asnumpy())
    assert np.array_equal(gradients(fast, x)[0], gradients(plain, x)[0])
    fast.set_train(False)                                           # inference: MindSpore's Transpose
    assert np.array_equal(fast(x).asnumpy(), plain(x).asnumpy())
    attention = kernels.accelerate(tiny_classifier()).albert.encoder.albert_layer_groups[0].albert_layers[0].attention
    assert isinstance(attention.swap_heads, SwapMiddleAxesWithKernels)


def test_only_gelu_new_has_a_kernel(library):
    layer = kernels.accelerate(tiny_classifier("gelu_new")).albert.encoder.albert_layer_groups[0].albert_layers[0]
    assert isinstance(layer.activation, GeluNewWithKernels) and layer.activation.fn is gelu_new
    layer = kernels.accelerate(tiny_classifier("gelu")).albert.encoder.albert_layer_groups[0].albert_layers[0]
    assert layer.activation is gelu


def classifier_gradients(weights, accelerated):
    """Loss and parameter gradients of the tiny fixture classifier on a fixed batch (dropout off),
    plain or ``accelerated``."""
    model = AlbertForSequenceClassification(
        AlbertConfig.from_json_file(os.path.join(FIXTURES, "tiny_classifier", "config.json")))
    load_arrays(model, weights, "weights.npz")
    if accelerated:
        kernels.accelerate(model)
    model.set_train(False)
    rng = np.random.default_rng(3)
    ids = rng.integers(5, model.config.vocab_size, size=(4, 12)).astype(np.int32)
    mask = np.ones_like(ids)
    mask[1, 7:] = 0
    labels = ms.Tensor(np.array([0, 1, 2, 0], np.int32))

    def loss(input_ids, token_type_ids, attention_mask):
        return ops.cross_entropy(model(input_ids, token_type_ids, attention_mask), labels)
    value, grads = ms.jit(ms.value_and_grad(loss, None, model.trainable_params()))(
        ms.Tensor(ids), ms.Tensor(np.zeros_like(ids)), ms.Tensor(mask))
    return model, float(value.asnumpy()), {p.name: g.asnumpy() for p, g in zip(model.trainable_params(), grads)}


def test_a_models_gradients_are_the_same_on_both_paths(library, hf_weights):
    model, loss, grads = classifier_gradients(hf_weights["classifier"], accelerated=True)
    assert isinstance(model.albert.encoder.embedding_hidden_mapping_in.linear, LinearWithKernels)
    plain_model, plain_loss, plain_grads = classifier_gradients(hf_weights["classifier"], accelerated=False)
    assert type(plain_model.albert.encoder.embedding_hidden_mapping_in) is Dense
    assert abs(loss - plain_loss) <= 1e-6 * abs(plain_loss)       # the forwards agree to float32 rounding
    assert grads.keys() == plain_grads.keys()
    # One scale for all: some gradients are zero but for rounding (the key bias: softmax ignores a
    # constant added to every score of a query), and rounding is all they differ in.
    scale = max(float(np.abs(g).max()) for g in plain_grads.values())
    assert_close([grads[k] for k in grads], [plain_grads[k] for k in grads], scale=scale)


def test_the_kernels_repeat_bit_for_bit(library):
    rng = np.random.default_rng(4)
    x, w, dy = randn(rng, 2048, 128), randn(rng, 512, 128), randn(rng, 2048, 512)
    fast = LinearWithKernels(library)
    first = [a.asnumpy() for a in fast.backward(x, w, dy)]
    again = [a.asnumpy() for a in fast.backward(x, w, dy)]
    assert all(np.array_equal(a, b) for a, b in zip(first, again))


def test_one_and_two_kernel_threads_give_the_same_bits(library):
    """The second core (helper.h) computes whole outputs or whole rows, never part of a sum."""
    rng = np.random.default_rng(5)
    x, w, dy = randn(rng, 2048, 128), randn(rng, 512, 128), randn(rng, 2048, 512)
    scores, probs_grad = randn(rng, 64, 4, 32, 32), randn(rng, 64, 4, 32, 32)
    h, h_grad = randn(rng, 64, 32, 512), randn(rng, 64, 32, 512)
    dense, softmax = LinearWithKernels(library), SoftmaxWithKernels(library)
    gelu_cell, matmul = GeluNewWithKernels(gelu_new, library), BatchMatMulWithKernels(library, transpose_b=True)
    norm, gamma = LayerNormWithKernels(1e-12, library), randn(rng, 512)
    probs, gelu_out = ops.softmax(scores, -1), gelu_new(h)
    attention = AttentionProbabilitiesWithKernels(0.125, softmax, library)
    mask = ms.Tensor(np.zeros((64, 1, 1, 32), np.float32))

    def outputs():
        return [a.asnumpy() for a in (*dense.backward(x, w, dy), dense.forward(x, w, gamma),
                                      softmax.backward(probs, probs_grad), gelu_cell.forward(h),
                                      gelu_cell.backward(h, gelu_out, h_grad), norm(h, gamma, gamma),
                                      matmul.nt(scores, probs_grad), matmul.tn(scores, probs_grad),
                                      matmul.nn(scores, probs_grad), *norm.backward(h, gamma, h_grad, norm.eps_tensor),
                                      attention.fused(scores, mask, attention.scale_tensor),
                                      attention.backward(probs, probs_grad, attention.scale_tensor))]
    try:
        kernels.set_kernel_threads(1)
        one = outputs()
        kernels.set_kernel_threads(2)
        two = outputs()
    finally:
        kernels.set_kernel_threads(kernels.KERNEL_THREADS)
    assert all(np.array_equal(a, b) for a, b in zip(one, two, strict=True))


def test_off_switch_gives_mindspores_own_ops(monkeypatch):
    """ALBERT_MIN_KERNELS=off: accelerate leaves the model as albert_min.model built it."""
    monkeypatch.setenv("ALBERT_MIN_KERNELS", "off")
    assert kernels.library() is None
    model = tiny_classifier()
    before = [(name, type(cell)) for name, cell in model.cells_and_names()]
    assert kernels.accelerate(model) is model
    assert [(name, type(cell)) for name, cell in model.cells_and_names()] == before
    assert not kernels.uses_kernels(model) and type(model.albert.encoder.embedding_hidden_mapping_in) is Dense


def test_the_plain_model_has_no_kernels_and_predicts_as_the_accelerated_one(library):
    """albert_min.export exports the plain model: no kernel, the same outputs to float32 rounding as
    the kernels' forward, which prediction uses."""
    config = AlbertConfig.from_json_file(os.path.join(ROOT, "weights", "sst2-small", "config.json"))
    ms.set_seed(3)
    predicting = kernels.accelerate(AlbertForSequenceClassification(config))
    exporting = AlbertForSequenceClassification(config)
    assert kernels.library() == library
    assert isinstance(predicting.albert.encoder.embedding_hidden_mapping_in.linear, LinearWithKernels)
    assert type(exporting.albert.encoder.embedding_hidden_mapping_in) is Dense
    assert not kernels.uses_kernels(exporting) and kernels.uses_kernels(predicting)
    ms.load_param_into_net(exporting, {p.name: p for p in predicting.get_parameters()})
    ids = np.random.default_rng(0).integers(5, config.vocab_size, (8, 24)).astype(np.int32)
    mask = np.ones_like(ids)
    mask[3:, 17:] = 0
    outputs = []
    for model in (predicting, exporting):
        model.set_train(False)
        outputs.append(ms.jit(model.construct)(ms.Tensor(ids), ms.Tensor(np.zeros_like(ids)),
                                               ms.Tensor(mask)).asnumpy())
    np.testing.assert_allclose(outputs[0], outputs[1], rtol=0, atol=1e-5)


def test_the_dynamic_shape_graph_runs_the_kernels(library):
    """prediction_engine.dynamic_graph (one graph for every batch and length) with the kernels' forward."""
    from albert_min.tasks.prediction_engine import dynamic_graph
    config = AlbertConfig.from_json_file(os.path.join(ROOT, "weights", "sst2-small", "config.json"))
    ms.set_seed(4)
    model = kernels.accelerate(AlbertForSequenceClassification(config))
    assert kernels.uses_kernels(model)
    model.set_train(False)
    forward = dynamic_graph(model)
    rng = np.random.default_rng(1)
    for batch, seq in ((3, 8), (5, 24)):
        ids = rng.integers(5, config.vocab_size, (batch, seq)).astype(np.int32)
        inputs = [ms.Tensor(a) for a in (ids, np.zeros_like(ids), np.ones_like(ids))]
        np.testing.assert_allclose(forward(*inputs).asnumpy(), model(*inputs).asnumpy(), rtol=0, atol=1e-5)


def test_without_a_compiler_the_layers_fall_back_after_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ALBERT_MIN_CACHE", str(tmp_path))            # a cache root not tried yet
    monkeypatch.setenv("CXX", "no-such-compiler-albert-min")
    assert not accelerates()
    assert not accelerates()                                           # noticed once, not per model
    notice = capsys.readouterr().err.strip().splitlines()
    assert notice == ["albert_min: kernels not built (no C++ compiler: no-such-compiler-albert-min not found); "
                      "using MindSpore's ops"]


def test_an_install_without_the_kernel_sources_falls_back_after_one_line(tmp_path, monkeypatch, capsys):
    """A wheel built without setup.cfg's package data: the build was an empty library, and loading it
    raised a traceback (an undefined symbol) from pipeline()."""
    monkeypatch.setenv("ALBERT_MIN_CACHE", str(tmp_path))
    monkeypatch.setattr(build, "SOURCES", build.SOURCES[:1] + [str(tmp_path / "forward.cc")])
    with pytest.raises(build.KernelBuildError, match=r"lacks the kernels' sources forward\.cc: .*reinstall it$"):
        build.library_path(str(tmp_path))
    assert not accelerates()
    notice = capsys.readouterr().err.strip().splitlines()
    assert len(notice) == 1 and notice[0].startswith("albert_min: kernels not built (") and \
        notice[0].endswith("lacks the kernels' sources forward.cc: albert_min was installed without its package "
                           "data; reinstall it); using MindSpore's ops")


def test_an_install_without_any_kernel_source_says_so(tmp_path, monkeypatch):
    """build.py compiles every .cc of its folder: none there (a wheel without its package data) is
    named, not an empty library built."""
    monkeypatch.setattr(build, "SOURCES", [])
    with pytest.raises(build.KernelBuildError, match=r"lacks the kernels' sources \*\.cc: .*reinstall it$"):
        build.library_path(str(tmp_path))


def test_every_source_of_the_folder_is_compiled():
    """One file per op (dense.cc, layer_norm.cc, ...): each .cc and .h beside build.py is in the build and
    its key, and each function the layers call is defined in one of them."""
    assert build.SOURCES == sorted(glob.glob(os.path.join(build.HERE, "*.cc"))) and len(build.SOURCES) > 1
    assert build.HEADERS == sorted(glob.glob(os.path.join(build.HERE, "*.h")))
    text = "".join(open(path, encoding="utf-8").read() for path in build.SOURCES)
    for name in kernels.FUNCTIONS:
        assert re.search(rf'extern "C" \w+ {name}\(', text), name


def test_the_library_is_built_once_into_the_cache(library, tmp_path):
    path = build.library_path(str(tmp_path))
    assert path.startswith(os.path.join(str(tmp_path), "kernels", ""))
    built = os.stat(path).st_mtime_ns
    assert build.library_path(str(tmp_path)) == path and os.stat(path).st_mtime_ns == built   # not rebuilt
    assert sorted(os.listdir(os.path.dirname(path))) == [build.LIBRARY, build.LIBRARY + build.RECORD_SUFFIX]


# Issue 36.11: a truncated cached library killed train.py (SIGBUS, exit 135), a flipped byte SIGSEGV.
@pytest.fixture
def tiny_build(tmp_path, monkeypatch):
    """build.py on a one-function source (built in a fraction of a second): the checks, not the kernels."""
    source = tmp_path / "tiny.cc"
    source.write_text('extern "C" int f() { return 1; }\n')
    monkeypatch.setattr(build, "SOURCES", [str(source)])
    return str(tmp_path / "cache")


def flip(data, at):
    return data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1:]


@pytest.mark.parametrize("damage", ["truncated", "flipped byte", "unreadable record"])
def test_a_damaged_cached_library_is_built_again(library, tiny_build, damage):
    path = build.library_path(tiny_build)
    good, record = open(path, "rb").read(), path + build.RECORD_SUFFIX
    assert build.check_library(path) is None
    if damage == "truncated":
        open(path, "wb").write(good[:len(good) // 2])
        why = f"truncated or damaged: {len(good) // 2} bytes, its build recorded {len(good)}"
    elif damage == "flipped byte":
        open(path, "wb").write(flip(good, len(good) // 3))
        why = "damaged: its sha256 differs from the one its build recorded"
    else:
        open(record, "w").write('{"size": 1')
        why = f"its build record is unreadable ({record}:1: not JSON"
    assert build.check_library(path).startswith(why)
    notices = []
    assert build.library_path(tiny_build, notices.append) == path
    assert len(notices) == 1 and notices[0].startswith(f"{path}: {why}") and notices[0].endswith("; built it again")
    assert open(path, "rb").read() == good and build.check_library(path) is None


def test_a_library_without_a_record_is_built_again_quietly(library, tiny_build):
    path = build.library_path(tiny_build)
    os.remove(path + build.RECORD_SUFFIX)        # an older albert_min's build: nothing to check it against
    notices = []
    assert build.library_path(tiny_build, notices.append) == path and notices == []
    assert build.check_library(path) is None


def test_a_truncated_cached_library_never_reaches_the_loader(library, tmp_path):
    """The real library, truncated in the cache, then loaded as building any model loads it."""
    folder = tmp_path / "kernels" / os.path.basename(os.path.dirname(library))
    folder.mkdir(parents=True)
    good = open(library, "rb").read()
    (folder / build.LIBRARY).write_bytes(good[:len(good) // 2])
    (folder / (build.LIBRARY + build.RECORD_SUFFIX)).write_bytes(open(library + build.RECORD_SUFFIX, "rb").read())
    proc = subprocess.run([sys.executable, "-c", "from albert_min.model import kernels; print(kernels.library())"],
                          cwd=ROOT, env=dict(os.environ, ALBERT_MIN_CACHE=str(tmp_path)), capture_output=True,
                          text=True, timeout=300)
    path = str(folder / build.LIBRARY)
    assert (proc.returncode, proc.stdout.strip()) == (0, path), proc.stderr[-2000:]     # not -7 (SIGBUS)
    assert proc.stderr.strip().splitlines() == [f"albert_min: kernels: {path}: truncated or damaged: "
                                                f"{len(good) // 2} bytes, its build recorded {len(good)}; "
                                                "built it again"]
    assert (folder / build.LIBRARY).read_bytes() == good


KILLED_BUILD = """
import os, subprocess, sys, types
import albert_min
kernels = types.ModuleType("albert_min.model.kernels")      # build.py alone, without MindSpore
kernels.__path__ = [os.path.join(os.path.dirname(albert_min.__file__), "model", "kernels")]
sys.modules["albert_min.model.kernels"] = kernels
from albert_min.model.kernels import build
build.SOURCES = [sys.argv[2]]
real_run = subprocess.run
def run_then_die(command, **kwargs):
    done = real_run(command, **kwargs)
    if "-o" in command:
        os.kill(os.getpid(), 9)                  # killed once g++ has written the library's temporary
    return done
build.subprocess.run = run_then_die
build.library_path(sys.argv[1])
"""


def test_a_killed_builds_temporary_is_removed_by_the_next_build(library, tiny_build):
    killed = subprocess.run([sys.executable, "-c", KILLED_BUILD, tiny_build, build.SOURCES[0]], cwd=ROOT, timeout=300)
    assert killed.returncode == -9
    folder = next(os.scandir(os.path.join(tiny_build, "kernels"))).path
    left = os.listdir(folder)
    assert len(left) == 1 and left[0].startswith(f".{build.LIBRARY}.tmp-")
    alive = os.path.join(folder, f".{build.LIBRARY}.tmp-{os.getpid()}-building")   # a live build's: kept
    open(alive, "w").close()
    path = build.library_path(tiny_build)
    assert sorted(os.listdir(folder)) == sorted([build.LIBRARY, build.LIBRARY + build.RECORD_SUFFIX,
                                                 os.path.basename(alive)])
    assert build.check_library(path) is None


def test_a_failed_build_names_the_error_and_leaves_nothing(library, tmp_path, monkeypatch):
    broken = tmp_path / "broken.cc"
    broken.write_text("extern \"C\" int f( {\n")
    monkeypatch.setattr(build, "SOURCES", [str(broken)])
    with pytest.raises(build.KernelBuildError, match="failed on broken.cc"):
        build.library_path(str(tmp_path / "cache"))
    assert all(not files for _, _, files in os.walk(tmp_path / "cache"))


def test_the_key_changes_with_the_sources(library, tmp_path, monkeypatch):
    cxx, version = build.compiler()
    before = build.build_key(cxx, version, build.onednn())
    changed = tmp_path / "changed.cc"
    changed.write_text("// another kernel\n")
    monkeypatch.setattr(build, "SOURCES", build.SOURCES + [str(changed)])
    assert build.build_key(cxx, version, build.onednn()) != before
