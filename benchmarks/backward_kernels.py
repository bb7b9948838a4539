"""The compiled kernels (albert_min/model/kernels) against MindSpore's own ops, side by side in one run.

    python3 benchmarks/backward_kernels.py            # sst2-small train step + single layers (about 1 min)
    python3 benchmarks/backward_kernels.py --base     # also the albert-base-v2 fine-tuning step (about 3 min more)

Both implementations are built in the same process (``kernels.accelerate``
reads ALBERT_MIN_KERNELS) from the same weights and inputs,
and timed alternately, so both see the same machine load; ``uptime`` is
printed before and after. Rows: a whole train step (forward, backward,
clipping to norm 1, AdamW; weights/sst2-small's config at batch 64, seq 32,
the same shape pre-training with MLM + SOP at batch 64, seq 64 as README's
pre-training command, and with --base albert-base-v2's at batch 8, seq 128), and the gradient of a
single Dense, LayerNorm, attention softmax and GELU at the small model's shapes. Each time is the
median of --repeats calls; ratio = MindSpore's ops / kernels (above 1: the
kernels are faster). The loss and gradients of the two agree to float32
rounding (tests/model/kernels/test_kernels.py checks them).
"""

import argparse
import contextlib
import os
import subprocess
import sys
import time

import numpy as np

os.environ.setdefault("GLOG_v", "3")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

MODEL = os.path.join(ROOT, "weights", "sst2-small")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=15, help="timed calls per implementation; the median is reported")
    p.add_argument("--base", action="store_true", help="also time the albert-base-v2 fine-tuning step")
    p.add_argument("--ms-threads", type=int, default=1, help="MindSpore kernel threads (train.py uses 1)")
    p.add_argument("--kernel-threads", default="1,2",
                   help="thread counts to time the kernels at (their helper thread; each oneDNN sgemm runs on its calling thread)")
    p.add_argument("--only", default="", help="time only the rows whose name contains this text")
    return p.parse_args()


@contextlib.contextmanager
def kernels_switched(on):
    """Models accelerated inside (``kernels.accelerate``) use the compiled kernels (on) or stay plain (off)."""
    saved = os.environ.get("ALBERT_MIN_KERNELS")
    os.environ["ALBERT_MIN_KERNELS"] = "on" if on else "off"
    try:
        yield
    finally:
        if saved is None:
            del os.environ["ALBERT_MIN_KERNELS"]
        else:
            os.environ["ALBERT_MIN_KERNELS"] = saved


def seeded(make, state):
    """``make()`` built after ms.set_seed(0), its weights then replaced by ``state`` (the other path's) if given."""
    import mindspore as ms
    ms.set_seed(0)
    cell = make()
    for p in cell.get_parameters() if state is not None else ():
        p.set_data(ms.Tensor(state[p.name]))
    return cell


def weights(cell):
    return {p.name: p.asnumpy().copy() for p in cell.get_parameters()}


def train_step(config, batch, seq, state=None):
    """(zero-argument train step on fixed random inputs, initial weights). ``state``: weights to start from."""
    import mindspore as ms
    from mindspore import ops
    from encoder_throughput import make_inputs
    from albert_min.model import kernels
    from albert_min.model.heads import AlbertForSequenceClassification
    from albert_min.training.step import linear_warmup_decay, make_optimizer, make_train_step
    model = seeded(lambda: kernels.accelerate(AlbertForSequenceClassification(config)), state)
    model.set_train(True)
    optimizer = make_optimizer(model, linear_warmup_decay(2e-5, 1000, 0.1), 0.01)

    def loss_fn(input_ids, token_type_ids, attention_mask, labels):
        return ops.cross_entropy(model(input_ids, token_type_ids, attention_mask), labels)

    step = make_train_step(loss_fn, optimizer, 1.0)
    tensors = [ms.Tensor(x) for x in make_inputs(config, batch, seq, seed=1)]
    return (lambda: step(*tensors).asnumpy()), weights(model)


def pretraining_step(config, batch, seq, state=None):
    """(zero-argument MLM + SOP train step on fixed random inputs, initial weights), as train.py --task sop."""
    import mindspore as ms
    from encoder_throughput import make_inputs
    from albert_min.model import kernels
    from albert_min.model.heads import AlbertForPreTraining
    from albert_min.tasks.pretraining.features import MASK_PROB
    from albert_min.tasks.pretraining.loss import make_loss_fn
    from albert_min.training.step import linear_warmup_decay, make_optimizer, make_train_step
    model = seeded(lambda: kernels.accelerate(AlbertForPreTraining(config)), state)
    model.set_train(True)
    optimizer = make_optimizer(model, linear_warmup_decay(1e-3, 1000, 0.02), 0.01)
    step = make_train_step(make_loss_fn(model, "sop"), optimizer, 1.0)
    rng = np.random.default_rng(2)
    P = max(1, int(round(seq * MASK_PROB)))                               # prediction slots per row
    ids, types, mask, labels = make_inputs(config, batch, seq, seed=2)
    positions = (np.arange(batch)[:, None] * seq + rng.integers(1, seq // 4, size=(batch, P))).reshape(-1)
    mlm_ids = rng.integers(5, config.vocab_size, size=batch * P).astype(np.int32)
    mlm_weights = np.ones(batch * P, np.float32)
    tensors = [ms.Tensor(a) for a in (ids, types, mask, positions.astype(np.int32), mlm_ids, mlm_weights, labels)]
    return (lambda: step(*tensors).asnumpy()), weights(model)


def layer_gradients(cell, shape, seed=0):
    """Zero-argument call of the jit-compiled gradient of sum(cell(x) * dy) w.r.t. x and its parameters,
    in training mode (LayerNorm's forward is then the kernel's too)."""
    import mindspore as ms
    cell.set_train(True)
    rng = np.random.default_rng(seed)
    x = ms.Tensor(rng.standard_normal(shape).astype(np.float32))
    out_shape = cell(x).shape
    dy = ms.Tensor(rng.standard_normal(out_shape).astype(np.float32))

    def loss(x):
        return (cell(x) * dy).sum()
    grad = ms.jit(ms.grad(loss, 0, cell.trainable_params()))
    return lambda: grad(x)[0].asnumpy()


def matmul_gradients(matmul, shape):
    """Zero-argument call of the jit-compiled gradient of sum(matmul(a, b) * dy) w.r.t. a and b, in training mode."""
    import mindspore as ms
    rng = np.random.default_rng(0)
    a, b, dy = (ms.Tensor(rng.standard_normal(shape).astype(np.float32)) for _ in range(3))
    matmul.set_train(True)

    def loss(a, b):
        return (matmul(a, b) * dy).sum()
    grad = ms.jit(ms.grad(loss, (0, 1)))
    return lambda: grad(a, b)[0].asnumpy()


def cases(args):
    """(name, builder) pairs; builder(on, state) -> (call, state)."""
    from albert_min.model.config import AlbertConfig
    from albert_min.model import kernels
    from albert_min.model.kernels.accelerate import KernelDense, KernelLayerNorm, OpCells
    from albert_min.model.kernels.layers import Activation
    from albert_min.model.modeling import Dense, LayerNorm, gelu_new

    def op_cells():                                     # the kernels' op cells, or MindSpore's where switched off
        return OpCells(kernels.library())

    def dense(n_in, n_out, config):
        return KernelDense(Dense(n_in, n_out, config), op_cells().linear())

    def layer_norm(dim, eps):
        return KernelLayerNorm(LayerNorm(dim, eps), op_cells().layer_norm(eps))

    def as_cell(fn):                                    # MindSpore's path: the plain function
        return fn if isinstance(fn, Activation) else Activation(fn)
    small = AlbertConfig.from_json_file(os.path.join(MODEL, "config.json"))
    H, I = small.hidden_size, small.intermediate_size
    rows = [("sst2-small train step, batch 64, seq 32", lambda state: train_step(small, 64, 32, state)),
            ("small pre-training step (sop), batch 64, seq 64", lambda state: pretraining_step(small, 64, 64, state))]
    for name, make, shape in ((f"Dense {H}->{I} gradient, x [64, 32, {H}]", lambda: dense(H, I, small), (64, 32, H)),
                              (f"Dense {I}->{H} gradient, x [64, 32, {I}]", lambda: dense(I, H, small), (64, 32, I)),
                              (f"Dense {H}->{H} gradient, x [64, 32, {H}]", lambda: dense(H, H, small), (64, 32, H)),
                              (f"LayerNorm({H}) forward + gradient, x [64, 32, {H}]",
                               lambda: layer_norm(H, small.layer_norm_eps), (64, 32, H)),
                              ("softmax gradient, x [64, 4, 32, 32]", lambda: op_cells().softmax(), (64, 4, 32, 32)),

                              (f"gelu_new gradient, x [64, 32, {I}]",
                               lambda: as_cell(op_cells().gelu_new() or gelu_new), (64, 32, I))):
        rows.append((name, lambda state, make=make, shape=shape: layer_cell(make, shape, state)))
    for name, transpose_b in (("attention q k^T", True), ("attention probs v", False)):
        rows.append((f"{name} (training) + gradient, [64, 4, 32, 32]",
                     lambda state, t=transpose_b: (matmul_gradients(op_cells().batch_matmul(t), (64, 4, 32, 32)), {})))
    if args.base:
        base = AlbertConfig.preset("base")
        rows.append(("base fine-tuning step, batch 8, seq 128", lambda state: train_step(base, 8, 128, state)))
    return rows


def layer_cell(make, shape, state):
    cell = seeded(make, state)
    return layer_gradients(cell, shape), weights(cell)


def medians(plain, fast, repeats, kernel_threads):
    """(wall ms, process CPU ms) per call, medians: MindSpore's ops, then the kernels at each
    thread count, all alternating. CPU time counts every thread of this process and
    moves less than wall time when other jobs share the cores."""
    from albert_min.model import kernels
    runs = [(plain, None)] + [(fast, n) for n in kernel_threads]
    walls, cpus = [[] for _ in runs], [[] for _ in runs]
    for rep in range(repeats + 2):                      # the first two compile and warm up
        for (fn, threads), wall, cpu in zip(runs, walls, cpus):
            if threads is not None:
                kernels.set_kernel_threads(threads)
            start, start_cpu = time.perf_counter(), time.process_time()
            fn()
            if rep >= 2:
                wall.append(time.perf_counter() - start)
                cpu.append(time.process_time() - start_cpu)
    return [(1000 * float(np.median(w)), 1000 * float(np.median(c))) for w, c in zip(walls, cpus)]


def uptime():
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main():
    args = parse_args()
    import mindspore as ms
    from albert_min.model import kernels
    from albert_min.common.device import use_device
    use_device("CPU", cpu_threads=args.ms_threads)
    with kernels_switched(True):
        if kernels.library() is None:
            sys.exit("error: the kernels could not be built here (see the notice above)")
    print(f"MindSpore {ms.__version__}, {args.ms_threads} kernel thread(s), median of {args.repeats}, "
          f"{os.cpu_count()} cores (shared: timings move with the load)\nuptime before: {uptime()}")
    kernel_threads = [int(n) for n in args.kernel_threads.split(",")]
    columns = ["MindSpore"] + [f"kernels@{n}" for n in kernel_threads]
    print(f"{'':<48}" + "".join(f" {c:>18}" for c in columns) + "   ratio(s)\n"
          f"{'ms per call':<48}" + " {:>8} {:>9}".format("wall", "CPU") * len(columns)
          + "   wall (CPU)\n(kernels@n: the kernels on n threads; ratio: MindSpore's time / the kernels')")
    for name, build in cases(args):
        if args.only not in name:
            continue
        with kernels_switched(False):
            plain, state = build(None)
        with kernels_switched(True):
            fast, _ = build(state)
        (wall, cpu), *fast_times = medians(plain, fast, args.repeats, kernel_threads)
        cells = "".join(f" {w:>8.2f} {c:>9.2f}" for w, c in [(wall, cpu)] + fast_times)
        ratios = "  ".join(f"{wall / w:.2f} ({cpu / c:.2f})" for w, c in fast_times)
        print(f"{name:<48}{cells}   {ratios}", flush=True)
    print(f"uptime after: {uptime()}")


if __name__ == "__main__":
    main()
