"""Where an int8 albert-base-sized forward spends its time (issue 43 item 3's profile, docs/int8.md).

    python3 benchmarks/int8_profile.py                 # batch 16 x 128, about 2 minutes
    python3 benchmarks/int8_profile.py --batch 8 --skip-graphs

Three parts, ``uptime`` before and after (the machine is shared):

1. The int8 Dense kernel on the base shapes through ctypes (no MindSpore graph): the whole kernel
   (``dense_int8_forward``: quantize the rows, one int8 gemm per half of the rows, dequantize with the
   bias) at 1 and 2 kernel threads, against oneDNN's ``dnnl_gemm_u8s8s32`` alone on the same operands
   (one call, one thread): what the kernel adds to the integer product. Median of --repeats.
2. The int8 classifier's forward (``kernels.quantize_int8`` on the accelerated model, random weights,
   seed 0) under MindSpore's CPU profiler: milliseconds per op kind and input shape, per forward.
3. The same model through ``prediction_engine.dynamic_graph`` (what predict_logits and the speed rows
   run) against ``mindspore.jit`` of its construct (one static graph for the shape), alternating.
"""

import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict

import numpy as np

os.environ.setdefault("GLOG_v", "3")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)


def uptime():
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def call_aot(function, arrays):
    """Call a kernel with MindSpore's AOT signature on numpy ``arrays`` (inputs then outputs)."""
    n = len(arrays)
    params = (ctypes.c_void_p * n)(*[a.ctypes.data for a in arrays])
    ndims = (ctypes.c_int * n)(*[a.ndim for a in arrays])
    shape_arrays = [(ctypes.c_int64 * max(a.ndim, 1))(*a.shape) for a in arrays]
    shapes = (ctypes.POINTER(ctypes.c_int64) * n)(*[ctypes.cast(s, ctypes.POINTER(ctypes.c_int64))
                                                    for s in shape_arrays])
    dtypes = (ctypes.c_char_p * n)(*[b"float32"] * n)
    status = function(ctypes.c_int(n), params, ndims, shapes, dtypes, None, None)
    if status:
        raise RuntimeError(f"kernel returned {status}")


def median_seconds(fn, repeats):
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def kernel_table(path, rows, repeats):
    """Part 1: ms per call of the int8 Dense kernel and of the bare gemm, on the base shapes."""
    from albert_min.model.kernels.build import ONEDNN, onednn
    from albert_min.model.kernels.int8 import quantize_rows
    library = ctypes.CDLL(path)
    dnnl = ctypes.CDLL(os.path.join(onednn(), ONEDNN))
    gemm = dnnl.dnnl_gemm_u8s8s32
    gemm.argtypes = [ctypes.c_char, ctypes.c_char, ctypes.c_char, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                     ctypes.c_float, ctypes.c_void_p, ctypes.c_int64, ctypes.c_uint8, ctypes.c_void_p,
                     ctypes.c_int64, ctypes.c_int8, ctypes.c_float, ctypes.c_void_p, ctypes.c_int64,
                     ctypes.c_void_p]
    rng = np.random.default_rng(0)
    print(f"\n1. int8 Dense kernel, {rows} rows (ms per call, median of {repeats})")
    print(f"{'K -> N':>12} {'gemm alone':>11} {'kernel 1 thr':>13} {'kernel 2 thr':>13} "
          f"{'gemm GFLOP/s':>13} {'kernel - gemm (1 thr)':>22}")
    for K, N in ((768, 768), (768, 2304), (768, 3072), (3072, 768)):
        x = rng.standard_normal((rows, K), dtype=np.float32)
        w, scale, row_sums = quantize_rows(rng.standard_normal((N, K), dtype=np.float32) * 0.02)
        bias = np.zeros(N, np.float32)
        y = np.empty((rows, N), np.float32)
        a = rng.integers(0, 256, (rows, K), dtype=np.uint8)
        acc = np.empty((rows, N), np.int32)
        zero = np.zeros(1, np.int32)
        bare = median_seconds(lambda: gemm(b"N", b"T", b"F", rows, N, K, 1.0, a.ctypes.data, K, 0, w.ctypes.data, K,
                                           0, 0.0, acc.ctypes.data, N, zero.ctypes.data), repeats)
        per_threads = []
        for threads in (1, 2):
            library.set_kernel_threads(threads)
            per_threads.append(median_seconds(
                lambda: call_aot(library.dense_int8_forward, [x, w, scale, row_sums, bias, y]), repeats))
        print(f"{f'{K} -> {N}':>12} {1e3 * bare:11.2f} {1e3 * per_threads[0]:13.2f} {1e3 * per_threads[1]:13.2f} "
              f"{2 * rows * N * K / bare / 1e9:13.0f} {1e3 * (per_threads[0] - bare):22.2f}")
    library.set_kernel_threads(2)


def classifier(batch, seq):
    import mindspore as ms
    from albert_min.model import kernels
    from albert_min.model.config import AlbertConfig
    from albert_min.model.heads import AlbertForSequenceClassification
    from encoder_throughput import make_inputs
    config = AlbertConfig.preset("base")
    config.num_labels = 2
    ms.set_seed(0)
    model = kernels.accelerate(AlbertForSequenceClassification(config))
    report = kernels.quantize_int8(model)
    if report.reason:
        sys.exit(f"error: int8 cannot run here: {report.reason}")
    return model, [ms.Tensor(x) for x in make_inputs(config, batch, seq)[:3]]


def op_table(forward, inputs, steps, title="int8 forward (dynamic graph)"):
    """Part 2: MindSpore's CPU profiler over ``steps`` calls of ``forward``: ms per forward by op and
    first input shape."""
    from mindspore.profiler import ProfilerActivity, profile, tensorboard_trace_handler
    from profile_ops import profiler_lines, stdout_to_stderr
    forward(*inputs).asnumpy()
    with tempfile.TemporaryDirectory() as tmp, stdout_to_stderr():
        with profile(activities=[ProfilerActivity.CPU], on_trace_ready=tensorboard_trace_handler(tmp)) as prof:
            start = time.perf_counter()
            for _ in range(steps):
                forward(*inputs).asnumpy()
                prof.step()
            wall = (time.perf_counter() - start) / steps
        runs = []
        for line in profiler_lines(tmp, "cpu_op_execute_timestamp_*.txt"):
            name, _, *items = line.replace(";", " ").split()
            runs += [(int(start), float(took), name) for start, took, _ in (item.split(",") for item in items)]
        runs.sort()
        info = [line.rstrip(";").split(";") for line in profiler_lines(tmp, "cpu_framework_*.txt")]
    totals, counts = defaultdict(float), defaultdict(int)
    for (_, took, name), (op, *rest) in zip(runs, info):
        shapes = [s.split(":", 1)[1] for s in rest[2:] if ":" in s and s.split(":", 1)[1].startswith("[")]
        scope = name.rsplit("/", 2)[-2] if "/" in name else ""
        key = f"{op} {scope.split('-')[0]} {' x '.join(shapes[:2])}"
        totals[key] += took / steps
        counts[key] += 1 / steps
    total = sum(totals.values())
    print(f"\n2. {title} under MindSpore's profiler: {1e3 * wall:.0f} ms per forward (wall, profiled), "
          f"ops sum {total:.0f} ms")
    print(f"{'ms/forward':>10} {'calls':>6}  op, its cell, input shapes")
    for key, ms_ in sorted(totals.items(), key=lambda kv: -kv[1])[:25]:
        print(f"{ms_:10.1f} {counts[key]:6.0f}  {key}")


def graph_table(model, inputs, repeats):
    """Part 3: the dynamic-shape graph against a static one, alternating."""
    import mindspore as ms
    from albert_min.tasks.prediction_engine import dynamic_graph
    forwards = {"dynamic graph": dynamic_graph(model), "static graph": ms.jit(model.construct)}
    times = {name: [] for name in forwards}
    for forward in forwards.values():
        forward(*inputs).asnumpy()
    for _ in range(repeats):
        for name, forward in forwards.items():
            start = time.perf_counter()
            forward(*inputs).asnumpy()
            times[name].append(time.perf_counter() - start)
    print(f"\n3. int8 forward, s per batch (median of {repeats}, alternating)")
    for name, t in times.items():
        print(f"{name:14} {statistics.median(t):7.3f}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--skip-graphs", action="store_true", help="part 1 only")
    p.add_argument("--static", action="store_true", help="part 2 for the static graph too")
    args = p.parse_args()
    print("load before:", uptime())
    from albert_min.common.device import use_device
    from albert_min.model import kernels
    use_device("CPU", cpu_setup=kernels.prepare_cpu)
    path = kernels.library()
    if not path:
        sys.exit("error: the compiled kernels are not available here")
    kernel_table(path, args.batch * args.seq, args.repeats)
    if not args.skip_graphs:
        model, inputs = classifier(args.batch, args.seq)
        import mindspore as ms
        from albert_min.tasks.prediction_engine import dynamic_graph
        op_table(dynamic_graph(model), inputs, 2)
        if args.static:
            op_table(ms.jit(model.construct), inputs, 2, "int8 forward (static graph)")
        graph_table(model, inputs, 3)
    print("\nload after: ", uptime())


if __name__ == "__main__":
    main()
