"""The kernels' dropout (albert_min/model/kernels/dropout.cc, philox_dropout.py): Philox4x32-10 against its
published answers, masks against a NumPy Philox, the keep rate, masks that change with the step and
the call and are the same at 1 and 2 threads (MindSpore's and the kernels'), the gradient, the
fallback, and the resume that refuses another thread count or kernels setting by name."""

import ctypes
import json
import os
import subprocess
import sys

import numpy as np
import mindspore as ms
import pytest
from mindspore import nn

from albert_min.model import kernels
from albert_min.model.kernels.philox_dropout import COUNTER, DropoutWithKernels, current_state, key, start_step
from albert_min.training.state import CheckpointError, check_same_cpu_setup
from helpers.paths import ROOT
from helpers.reference_model import tiny_classifier
from helpers.tiny_runs import TINY_MODEL, sentiment_tsv

M32 = 0xFFFFFFFF


def philox(counter, k0, k1):
    """Philox4x32-10 in NumPy: counter (4, n) uint32 words -> (4, n) uint32 words."""
    c0, c1, c2, c3 = (np.asarray(c, np.uint64) for c in counter)
    k0, k1 = np.uint64(k0), np.uint64(k1)
    for r in range(10):
        if r:
            k0, k1 = (k0 + np.uint64(0x9E3779B9)) & np.uint64(M32), (k1 + np.uint64(0xBB67AE85)) & np.uint64(M32)
        p0, p1 = np.uint64(0xD2511F53) * c0, np.uint64(0xCD9E8D57) * c2
        c0, c1, c2, c3 = (p1 >> np.uint64(32)) ^ c1 ^ k0, p1 & np.uint64(M32), (p0 >> np.uint64(32)) ^ c3 ^ k1, \
            p0 & np.uint64(M32)
    return np.stack([c0, c1, c2, c3]).astype(np.uint32)


def reference_mask(n, state, keep):
    """Which of n elements a call with ``state`` (key0, key1, step, call) keeps, as dropout.cc defines it."""
    k0, k1, step, call = (int(v) for v in state)
    blocks = np.arange((n + 3) // 4, dtype=np.uint64)
    words = philox([blocks & np.uint64(M32), blocks >> np.uint64(32), np.full_like(blocks, call),
                    np.full_like(blocks, step)], k0, k1)
    draws = words.T.reshape(-1)[:n]                                  # element 4 b + w: word w of block b
    return draws < np.uint32(int(float(np.float32(keep)) * 4294967296.0))


def test_philox_gives_random123s_known_answers(library):
    block = ctypes.CDLL(library).philox4x32_10_block
    cases = [([0, 0, 0, 0], [0, 0], [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]),
             ([M32] * 4, [M32] * 2, [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]),
             ([0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344], [0xA4093822, 0x299F31D0],
              [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1])]
    for counter, k, expected in cases:
        arrays = [np.array(counter, np.uint32), np.array(k, np.uint32), np.zeros(4, np.uint32)]
        block(*[ctypes.c_void_p(a.ctypes.data) for a in arrays])
        assert list(arrays[2]) == expected
        assert list(philox(np.array(counter, np.uint32)[:, None], *k)[:, 0]) == expected   # the NumPy reference too


@pytest.mark.parametrize("shape, p", [((64, 4, 32, 32), 0.1), ((3, 7, 5), 0.5), ((1,), 0.3), ((65, 33), 0.9)])
def test_the_mask_is_philox_of_seed_step_call_and_element(library, shape, p):
    cell = DropoutWithKernels(p, library)
    cell.set_train(True)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32) + 5.0     # no zeros of its own
    start_step(seed=11, step=4)
    outputs = [cell(ms.Tensor(x)).asnumpy() for _ in range(2)]
    k0, k1 = key(11)
    assert list(current_state()) == [k0, k1, 4, 2]                       # two calls counted
    scale = np.float32(1.0) / np.float32(1.0 - p)
    for call, y in enumerate(outputs):
        mask = reference_mask(x.size, (k0, k1, 4, call), 1.0 - p).reshape(shape)
        assert np.array_equal(y, np.where(mask, x * scale, np.float32(0.0)))
    assert not np.array_equal(outputs[0] != 0, outputs[1] != 0)         # another call, another mask


def test_the_keep_rate_and_masks_differ_across_steps_calls_and_ranks(library):
    cell = DropoutWithKernels(0.1, library)
    cell.set_train(True)
    ones = ms.Tensor(np.ones((64, 32, 512), np.float32))                # 2**20 elements
    masks = {}
    for seed, step, rank in ((7, 0, 0), (7, 1, 0), (8, 0, 0), (7, 0, 1)):
        start_step(seed, step, rank)
        masks[seed, step, rank] = [cell(ones).asnumpy() != 0 for _ in range(2)]
    n = masks[7, 0, 0][0].size
    for first, second in masks.values():
        for mask in (first, second):
            assert abs(mask.mean() - 0.9) < 5 * np.sqrt(0.9 * 0.1 / n)   # 5 standard deviations: 0.0015
        assert 0.80 < (first == second).mean() < 0.84                     # independent calls agree 0.82
    flat = [m for pair in masks.values() for m in pair]
    assert all(not np.array_equal(a, b) for i, a in enumerate(flat) for b in flat[i + 1:])
    start_step(7, 1, 0)                                                  # a step again: its masks again
    assert np.array_equal(cell(ones).asnumpy() != 0, masks[7, 1, 0][0])


def test_inference_and_p_zero_leave_the_input_and_the_counter_alone(library):
    x = ms.Tensor(np.ones((4, 8), np.float32))
    start_step(1, 2)
    cell = DropoutWithKernels(0.5, library)
    cell.set_train(False)
    assert np.array_equal(cell(x).asnumpy(), x.asnumpy())
    off = DropoutWithKernels(0.0, library)
    off.set_train(True)
    assert np.array_equal(off(x).asnumpy(), x.asnumpy())
    assert current_state()[3] == 0
    with pytest.raises(ValueError, match=r"dropout probability 1.0 is not in \[0, 1\)"):
        DropoutWithKernels(1.0, library)


@pytest.mark.parametrize("jit", [True, False])
def test_the_gradient_applies_the_forwards_mask(library, jit):
    """d/dx sum(dropout(x) * dy) = dy * mask / keep, against MindSpore's autodiff of x * mask / keep."""
    rng = np.random.default_rng(3)
    x = ms.Tensor(rng.standard_normal((16, 32, 128)).astype(np.float32))
    dy = ms.Tensor(rng.standard_normal((16, 32, 128)).astype(np.float32))
    cell = DropoutWithKernels(0.2, library)
    cell.set_train(True)

    def loss(x):
        return (cell(x) * dy).sum()
    grad = ms.grad(loss)
    start_step(5, 9)
    ours = (ms.jit(grad) if jit else grad)(x).asnumpy()
    assert current_state()[3] == 1                                       # the backward took no call of its own
    mask = reference_mask(x.size, (*key(5), 9, 0), 0.8).reshape(x.shape)
    scaled = ms.Tensor(mask.astype(np.float32) * (np.float32(1.0) / np.float32(0.8)))

    def plain(x):
        return (x * scaled * dy).sum()
    np.testing.assert_allclose(ours, ms.grad(plain)(x).asnumpy(), rtol=0, atol=1e-6)


def test_a_float16_input_is_masked_in_float32(library):
    x = np.random.default_rng(4).standard_normal((8, 64)).astype(np.float16)
    cell = DropoutWithKernels(0.5, library)
    cell.set_train(True)
    start_step(2, 0)
    y = cell(ms.Tensor(x))
    assert y.dtype == ms.float16
    mask = reference_mask(x.size, (*key(2), 0, 0), 0.5).reshape(x.shape)
    assert np.array_equal(y.asnumpy(), np.where(mask, (x.astype(np.float32) * 2.0).astype(np.float16), 0))


def run_worker(threads, kernel_threads=None, **env):
    command = [sys.executable, os.path.join("tests", "helpers", "dropout_worker.py")] + ([str(kernel_threads)]
                                                                             if kernel_threads else [])
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300,
                            env=dict(os.environ, ALBERT_MIN_CPU_THREADS=str(threads), **env))
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_masks_and_train_steps_are_the_same_at_one_and_two_threads(library):
    """MindSpore's CPU kernels at 1 and 2 threads (ALBERT_MIN_CPU_THREADS), the kernels' own helper
    thread off and on: the same masks, and three train steps of a small model to the same bits."""
    one = run_worker(1, kernel_threads=1)
    two = run_worker(2, kernel_threads=2)
    assert (one["threads"], two["threads"]) == (1, 2) and one["dropout"] == "DropoutWithKernels"
    assert abs(one["kept"] - 0.9) < 0.003
    for name in ("masks", "weights", "losses"):
        assert one[name] == two[name], name


def test_without_the_kernels_mindspores_dropout_at_one_thread():
    code = ("from albert_min.common.device import cpu_threads, use_device; from albert_min.model import kernels; "
            "use_device('CPU', cpu_setup=kernels.prepare_cpu); "
            "from albert_min.model.config import AlbertConfig; from albert_min.model.heads import AlbertForMaskedLM; "
            "model = kernels.accelerate(AlbertForMaskedLM(AlbertConfig(vocab_size=40, embedding_size=8, "
            "hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=24))); "
            "print(cpu_threads(), type(model.albert.embeddings.dropout).__name__)")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                            env=dict(os.environ, ALBERT_MIN_KERNELS="off", ALBERT_MIN_CPU_THREADS="2"))
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["1", "Dropout"]
    dropout = kernels.accelerate(tiny_classifier()).dropout
    assert type(dropout) is (DropoutWithKernels if kernels.library() else nn.Dropout) and dropout.p == 0.1


def test_one_mindspore_thread_by_default_and_the_variable_only_with_the_kernels(monkeypatch):
    """1 thread unless ALBERT_MIN_CPU_THREADS asks for more (a second was measured slower under load);
    the variable counts only where the kernels' dropout makes any count give the same run."""
    from albert_min.common.device import DeviceError, default_cpu_threads
    monkeypatch.delenv("ALBERT_MIN_CPU_THREADS", raising=False)
    assert default_cpu_threads(True) == 1 and default_cpu_threads(False) == 1
    monkeypatch.setenv("ALBERT_MIN_CPU_THREADS", "2")
    assert default_cpu_threads(True) == 2 and default_cpu_threads(False) == 1
    monkeypatch.setenv("ALBERT_MIN_CPU_THREADS", "0")
    with pytest.raises(DeviceError, match=r"^ALBERT_MIN_CPU_THREADS=0: not a thread count"):
        default_cpu_threads(True)


def test_a_bad_thread_count_is_refused_by_name(library):
    data = os.path.join(ROOT, "tests", "fixtures", "tiny_sst2_hf", "dev64.tsv")   # there: a missing one is said first
    result = subprocess.run([sys.executable, "train.py", "--train", data, "--output", "never"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120, env=dict(os.environ, ALBERT_MIN_CPU_THREADS="two"))
    assert result.returncode == 2 and result.stderr.startswith("error: ALBERT_MIN_CPU_THREADS=two: not a thread count")


def test_a_resume_at_another_thread_count_or_kernels_setting_is_refused_by_name(library, tmp_path):
    train_tsv = sentiment_tsv(tmp_path / "train.tsv", 32, seed=5)
    output = str(tmp_path / "model")
    args = ["--train", train_tsv, "--epochs", "2", "--max-steps", "2", "--batch-size", "16", "--dropout", "0.1",
            *TINY_MODEL, "--output", output]
    env = dict(os.environ, ALBERT_MIN_CPU_THREADS="2")
    first = subprocess.run([sys.executable, "train.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]
    with open(os.path.join(output + ".state", "state.json")) as f:
        assert json.load(f)["cpu"] == {"threads": 2, "kernels": True}
    for variable, value, named in (("ALBERT_MIN_CPU_THREADS", "1", "ALBERT_MIN_CPU_THREADS=2"),
                                   ("ALBERT_MIN_KERNELS", "off", "unset ALBERT_MIN_KERNELS")):
        resumed = subprocess.run([sys.executable, "train.py", *args, "--resume", "--max-steps", "3"], cwd=ROOT,
                                 env=dict(env, **{variable: value}), capture_output=True, text=True, timeout=300)
        assert resumed.returncode != 0
        [line] = [line for line in resumed.stderr.splitlines() if line.startswith("error:")]
        assert named in line and "to resume it exactly" in line, line


def test_the_cpu_setup_check_names_what_changed(tmp_path):
    check_same_cpu_setup({"threads": 2, "kernels": True}, {"threads": 2, "kernels": True}, "s")
    check_same_cpu_setup(None, {"threads": 2, "kernels": True}, "s")         # older state, or trained off CPU
    check_same_cpu_setup({"threads": 2, "kernels": True}, None, "s")         # resumed off CPU
    with pytest.raises(CheckpointError, match=r"^s/state.json: the run trained with MindSpore at 2 CPU kernel "
                                              r"threads and this process has 1; set ALBERT_MIN_CPU_THREADS=2"):
        check_same_cpu_setup({"threads": 2, "kernels": True}, {"threads": 1, "kernels": True}, "s")
    with pytest.raises(CheckpointError, match=r"MindSpore's ops \(ALBERT_MIN_KERNELS=off\) and this process has "
                                              r"albert_min's compiled kernels; set ALBERT_MIN_KERNELS=off"):
        check_same_cpu_setup({"threads": 1, "kernels": False}, {"threads": 2, "kernels": True}, "s")


def test_the_counter_is_not_a_parameter_of_any_model(library):
    from albert_min.model.config import AlbertConfig
    from albert_min.model.heads import AlbertForSequenceClassification
    model = AlbertForSequenceClassification(AlbertConfig(vocab_size=40, embedding_size=8, hidden_size=16,
                                                         num_hidden_layers=1, num_attention_heads=2,
                                                         intermediate_size=24))
    assert all(p is not COUNTER.state for p in model.get_parameters())
    assert all("dropout" not in p.name for p in model.get_parameters())
