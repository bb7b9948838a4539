"""Mixed precision (train.py --amp) against float32 on CPU, side by side in one run.

    python3 benchmarks/amp_speed.py               # sst2-small's train step, batch 64, seq 32 (about 2 min)

Four train steps of weights/sst2-small's config from the same weights and batch, timed
alternately so they see the same machine load (``uptime`` printed before and after):
float32 with the compiled kernels (train.py's default), float32 on MindSpore's own ops (what
--amp runs on), and --amp O1 / O2 in float16 with the dynamic loss scale. Each time is the
median of --repeats steps; ratio = the float32 default's time / this one's (above 1: faster).
"""

import argparse
import os
import subprocess
import sys
import time

import numpy as np

os.environ.setdefault("GLOG_v", "3")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

MODEL = os.path.join(ROOT, "weights", "sst2-small")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=15, help="timed steps per variant; the median is reported")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--seq", type=int, default=32)
    return p.parse_args()


def build_step(variant, batch):
    """(step function, its batch) for ``variant`` = (name, amp level, kernels on)."""
    import mindspore as ms
    from mindspore import ops
    from albert_min.model import kernels
    from albert_min.training.mixed_precision import make_loss_scaler, mixed_precision_network
    from albert_min.model.heads import AlbertForSequenceClassification
    from albert_min.training.step import linear_warmup_decay, make_optimizer, make_train_step
    _, level, use_kernels = variant
    os.environ["ALBERT_MIN_KERNELS"] = "on" if use_kernels else "off"
    kernels._LIBRARY.clear()   # pylint: disable=protected-access  (accelerate reads the switch)
    model = kernels.accelerate(AlbertForSequenceClassification.from_pretrained(MODEL))
    model.set_train(True)
    optimizer = make_optimizer(model, linear_warmup_decay(1e-5, 10000, 0.1), 0.01)
    network = mixed_precision_network(model, level, "float16")

    def loss_fn(input_ids, token_type_ids, attention_mask, labels):
        return ops.cross_entropy(network(input_ids, token_type_ids, attention_mask), labels)
    step = make_train_step(loss_fn, optimizer, 1.0, loss_scaler=make_loss_scaler(level, "float16", 2.0 ** 16))
    return step, [ms.Tensor(a) for a in batch]


def main():
    args = parse_args()
    from albert_min.common.device import use_device
    use_device("CPU", cpu_threads=1)
    rng = np.random.default_rng(0)
    batch = (rng.integers(5, 8000, (args.batch_size, args.seq)).astype(np.int32),
             np.zeros((args.batch_size, args.seq), np.int32), np.ones((args.batch_size, args.seq), np.int32),
             rng.integers(0, 2, args.batch_size).astype(np.int32))
    variants = [("float32, compiled kernels (default)", "O0", True), ("float32, MindSpore ops", "O0", False),
                ("--amp O1 float16", "O1", False), ("--amp O2 float16", "O2", False)]
    steps = [build_step(v, batch) for v in variants]
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    for step, tensors in steps:   # compile, and let the loss scale settle
        for _ in range(2):
            step(*tensors)
    times = [[] for _ in variants]
    for _ in range(args.repeats):
        for i, (step, tensors) in enumerate(steps):
            start = time.perf_counter()
            out = step(*tensors)
            (out[0] if isinstance(out, tuple) else out).asnumpy()
            times[i].append(time.perf_counter() - start)
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    base = np.median(times[0])
    print(f"train step, sst2-small config, batch {args.batch_size}, seq {args.seq}, median of {args.repeats}:")
    for (name, _, _), t in zip(variants, times):
        print(f"  {name:38s} {np.median(t) * 1e3:8.1f} ms   ratio {base / np.median(t):.2f}")


if __name__ == "__main__":
    main()
