"""The sst2-small train step at MindSpore's 1 and 2 CPU kernel threads, side by side in one run.

    python3 benchmarks/cpu_threads.py                          # kernels at 1 and 2 threads, kernels off
    python3 benchmarks/cpu_threads.py --before /tmp/main-copy  # and an older checkout (its own defaults)

MindSpore's thread count is fixed once per process, so each column is a process of its own (a
worker reading commands on stdin), and the parent asks them for one step each in turn: every
column sees the same machine load. Each worker builds weights/sst2-small's config (batch 64,
seq 32, dropout as in the config) with AdamW, compiles, warms up twice, then times --repeats
steps; the median wall time per step and the process CPU time are printed, and the ratio of
each column to the first. ``uptime`` is printed before and after.

Columns: ``before`` (with --before: that checkout's train step, e.g. the main branch: 1 thread,
MindSpore's Dropout), ``kernels@1`` and ``kernels@2`` (this checkout, ALBERT_MIN_CPU_THREADS=1 / 2:
the kernels' dropout), ``ops@1`` (ALBERT_MIN_KERNELS=off: MindSpore's ops and Dropout, 1 thread).
"""

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

def worker(code_root):
    """One column: build the step from ``code_root``'s albert_min, then one timed step per line of stdin."""
    sys.path.insert(0, code_root)
    os.environ.setdefault("GLOG_v", "3")
    import numpy as np
    try:                                            # the package in layer folders
        from albert_min.common import device
        from albert_min.model import kernels
        device.use_device("CPU", cpu_setup=kernels.prepare_cpu)
        from albert_min.training import step as training
        from albert_min.model.config import AlbertConfig
        from albert_min.model.heads import AlbertForSequenceClassification
        cpu_threads = device.cpu_threads
    except ImportError:                             # an older checkout (--before): the flat package
        from albert_min.device import use_device
        use_device("CPU")
        from albert_min import kernels, training
        from albert_min.config import AlbertConfig
        from albert_min.modeling import AlbertForSequenceClassification
        cpu_threads = getattr(training, "cpu_threads", lambda: 1)   # older checkouts: 1
    import mindspore as ms
    from mindspore import ops
    config = AlbertConfig.from_json_file(os.path.join(ROOT, "weights", "sst2-small", "config.json"))
    ms.set_seed(0)
    model = AlbertForSequenceClassification(config)
    getattr(kernels, "accelerate", lambda m: m)(model)          # older checkouts built the kernels in
    model.set_train(True)
    optimizer = training.make_optimizer(model, training.linear_warmup_decay(2e-5, 1000, 0.1), 0.01)

    def loss_fn(ids, types, mask, labels):
        return ops.cross_entropy(model(ids, types, mask), labels)
    step = training.make_train_step(loss_fn, optimizer, 1.0)
    rng = np.random.default_rng(1)
    ids = rng.integers(5, config.vocab_size, (64, 32)).astype(np.int32)
    mask = np.ones_like(ids)
    mask[::2, 24:] = 0
    tensors = [ms.Tensor(a) for a in (ids, np.zeros_like(ids), mask, rng.integers(0, 2, 64).astype(np.int32))]
    training.reseed_dropout(model, 42, 0)
    if os.environ.get("KERNEL_THREADS"):              # the kernels' own helper thread (helper.h) on or off
        kernels.set_kernel_threads(int(os.environ["KERNEL_THREADS"]))
    threads = cpu_threads()
    print(json.dumps({"ready": True, "threads": threads}), flush=True)
    for n, _ in enumerate(sys.stdin):
        if hasattr(training, "start_dropout_step"):
            training.start_dropout_step(42, n)
        start, cpu = time.perf_counter(), time.process_time()
        loss = float(step(*tensors).asnumpy())
        print(json.dumps({"wall": time.perf_counter() - start, "cpu": time.process_time() - cpu, "loss": loss}),
              flush=True)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=15, help="timed steps per column; the median is reported")
    p.add_argument("--before", help="an older checkout (a folder with albert_min/) to time as the first column")
    p.add_argument("--worker", help=argparse.SUPPRESS)   # a column's process: the albert_min folder to import
    p.add_argument("--columns", default="kernels@1;kernels@2;ops@1",
                   help="this checkout's columns, of kernels@1, kernels@2, ops@1 and 'kernels@1,helper off', "
                        "'kernels@2,helper off' (the kernels' own helper thread off)")
    return p.parse_args()


def start(code_root, env):
    process = subprocess.Popen([sys.executable, __file__, "--worker", code_root], env=dict(os.environ, **env),
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    first = json.loads(process.stdout.readline())
    assert first["ready"]
    return process, first["threads"]


def step(process):
    process.stdin.write("step\n")
    process.stdin.flush()
    return json.loads(process.stdout.readline())


def uptime():
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main():
    args = parse_args()
    if args.worker:
        return worker(args.worker)
    environments = {"kernels@1": {"ALBERT_MIN_CPU_THREADS": "1"}, "kernels@2": {"ALBERT_MIN_CPU_THREADS": "2"},
                    "ops@1": {"ALBERT_MIN_KERNELS": "off"},
                    "kernels@1,helper off": {"ALBERT_MIN_CPU_THREADS": "1", "KERNEL_THREADS": "1"},
                    "kernels@2,helper off": {"ALBERT_MIN_CPU_THREADS": "2", "KERNEL_THREADS": "1"}}
    columns = ([("before", args.before, {})] if args.before else []) + \
        [(name, ROOT, environments[name]) for name in args.columns.split(";")]
    print(f"uptime before: {uptime()}")
    workers = []
    for name, code, env in columns:               # one at a time: compiles do not overlap
        process, threads = start(code, env)
        workers.append((name, process, threads))
    times = {name: [] for name, _, _ in workers}
    losses = {}
    for rep in range(args.repeats + 2):            # the first two warm up
        for name, process, _ in workers:
            result = step(process)
            losses.setdefault(name, result["loss"])
            if rep >= 2:
                times[name].append((result["wall"], result["cpu"]))
    for _, process, _ in workers:
        process.stdin.close()
        process.wait()
    first = None
    print(f"sst2-small train step, batch 64, seq 32, median of {args.repeats} (ms per step)")
    print(f"{'column':<22} {'threads':>7} {'wall':>9} {'CPU':>9} {'first/this':>11}  first loss")
    for name, _, threads in workers:
        wall = 1000 * sorted(w for w, _ in times[name])[len(times[name]) // 2]
        cpu = 1000 * sorted(c for _, c in times[name])[len(times[name]) // 2]
        first = first or wall
        print(f"{name:<22} {threads:>7} {wall:>9.1f} {cpu:>9.1f} {first / wall:>11.2f}  {losses[name]:.6f}")
    print(f"uptime after: {uptime()}")


if __name__ == "__main__":
    main()
