"""Mixed precision (train.py --amp) against float32 on CPU, side by side in one run.

    python3 benchmarks/amp_speed.py               # sst2-small's train step, batch 64, seq 32 (about 2 min)
    /work/refenv/bin/python benchmarks/amp_speed.py --base-vs-torch    # --amp bf16 against torch's autocast

--base-vs-torch: a random albert-base-sized classifier's fine-tuning step (batch 8, seq 128, padded
rows; cross-entropy, clipping to norm 1, AdamW), the same weights in both frameworks: ours in float32
and with ``--amp bf16`` (``kernels.use_bf16_gemms``: the compiled kernels' products from bfloat16
operands), torch in float32 and under ``torch.autocast("cpu", torch.bfloat16)``, all four alternated.
torch runs at --torch-threads (default 2, as measured in issue 43); ratio = torch's time / ours.
torch and transformers are dev-time tools, never imported by albert_min.

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
    p.add_argument("--base-vs-torch", action="store_true",
                   help="albert-base-sized step, batch 8 x 128: ours float32 / --amp bf16 against torch float32 / "
                        "autocast bf16 (needs torch and transformers: /work/refenv/bin/python)")
    p.add_argument("--torch-threads", type=int, default=2, help="--base-vs-torch: torch's thread count")
    return p.parse_args()


def base_steps(bf16, torch_threads, batch=8, seq=128):
    """(ours float32 or --amp bf16 step, torch float32 or autocast bf16 step) on one random base-sized
    classifier, the same weights and random padded batch in both: zero-argument callables."""
    import mindspore as ms
    import torch
    import transformers
    from mindspore import ops
    from encoder_throughput import make_inputs, reference_model
    from albert_min.model import kernels
    from albert_min.model.config import AlbertConfig
    from albert_min.model.heads import AlbertForSequenceClassification
    from albert_min.training.step import linear_warmup_decay, make_optimizer, make_train_step
    config = AlbertConfig.preset("base")
    inputs = make_inputs(config, batch, seq, seed=1)
    ms.set_seed(0)
    ours = kernels.accelerate(AlbertForSequenceClassification(config))   # as the Trainer builds it
    ref, _ = reference_model(config, transformers.AlbertForSequenceClassification)
    ref.load_state_dict({p.name: torch.from_numpy(p.asnumpy().copy()) for p in ours.get_parameters()}, strict=False)
    if bf16:
        report = kernels.use_bf16_gemms(ours)
        if report.reason:
            sys.exit(f"error: {report.line()}")
    ours.set_train(True)
    optimizer = make_optimizer(ours, linear_warmup_decay(2e-5, 1000, 0.1), 0.01)

    def loss_fn(input_ids, token_type_ids, attention_mask, labels):
        return ops.cross_entropy(ours(input_ids, token_type_ids, attention_mask), labels)
    step = make_train_step(loss_fn, optimizer, 1.0)
    tensors = [ms.Tensor(x) for x in inputs]
    t = [torch.from_numpy(x.astype(np.int64)) for x in inputs]
    ref.train()
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=2e-5, weight_decay=0.01)

    def ours_fn():
        step(*tensors).asnumpy()

    def ref_fn():
        torch.set_num_threads(torch_threads)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = ref(input_ids=t[0], token_type_ids=t[1], attention_mask=t[2]).logits
        loss = torch.nn.functional.cross_entropy(logits.float(), t[3])
        ref_opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(ref.parameters(), 1.0)
        ref_opt.step()
    return ours_fn, ref_fn


def base_vs_torch(args):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # encoder_throughput
    from albert_min.common.device import use_device
    from albert_min.model import kernels
    use_device("CPU", cpu_setup=kernels.prepare_cpu)
    names = ["ours float32 (compiled kernels)", "torch float32", "ours --amp bf16", "torch autocast bf16"]
    fns = [fn for bf16 in (False, True) for fn in base_steps(bf16, args.torch_threads)]
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    for fn in fns:             # compile / warm up
        fn()
    times = [[] for _ in fns]
    for _ in range(args.repeats):
        for i, fn in enumerate(fns):
            start = time.perf_counter()
            fn()
            times[i].append(time.perf_counter() - start)
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    print(f"albert-base-sized fine-tuning step, batch 8, seq 128, AdamW + clipping, median of {args.repeats}; "
          f"torch at {args.torch_threads} threads, albert_min's kernels at {kernels.KERNEL_THREADS}:")
    seconds = [float(np.median(t)) for t in times]
    for name, s in zip(names, seconds):
        print(f"  {name:34s} {s * 1e3:8.1f} ms   {1 / s:6.3f} steps/s")
    print(f"  ours/torch (torch's time / ours): float32 {seconds[1] / seconds[0]:.2f}, "
          f"bf16 {seconds[3] / seconds[2]:.2f}; ours bf16 / ours float32 speed-up {seconds[0] / seconds[2]:.2f}")


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
    if args.base_vs_torch:
        return base_vs_torch(args)
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
