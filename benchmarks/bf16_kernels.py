"""Where the bf16 kernels' time goes on albert-base's train-step shapes (batch 8 x seq 128), per kernel
and per phase, through ctypes on the compiled library (no MindSpore graph around them).

    python3 benchmarks/bf16_kernels.py               # about 1 min
    python3 benchmarks/bf16_kernels.py --repeats 3   # a quick look

Each row: one kernel (bf16.cc, as ``kernels.use_bf16_gemms`` runs it in training) on one shape, its
calls per train step (12 loops of the shared layer), ms per call (median of --repeats) and ms per step;
and its phases measured alone: the rounding (``round_to_bf16`` over the same elements, on the kernels'
threads) and oneDNN's ``dnnl_gemm_bf16bf16f32`` on the pre-rounded operands (one call on one
thread: the whole product, for comparison). The float32 kernel of the same product
(dense.cc, batch_matmul.cc) is timed alongside. The kernels run at ``kernels.KERNEL_THREADS`` threads.
"""

import argparse
import ctypes
import os
import subprocess
import sys

import numpy as np

os.environ.setdefault("GLOG_v", "3")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from int8_profile import median_seconds  # noqa: E402  (benchmarks/: the one timing loop)

TOKENS, HIDDEN, FFN, HEADS, SEQ, BATCH, LOOPS = 1024, 768, 3072, 12, 128, 8, 12
HEAD = HIDDEN // HEADS


def dense_cases():
    """(label, K, N, calls per step): albert-base's Dense layers, per train step."""
    return [("q/k/v/out 768->768", HIDDEN, HIDDEN, 4 * LOOPS), ("ffn in 768->3072", HIDDEN, FFN, LOOPS),
            ("ffn out 3072->768", FFN, HIDDEN, LOOPS)]


def attention_cases():
    """(label, kernel suffix, a shape, b shape, calls per step): attention's batched products."""
    q = (BATCH, HEADS, SEQ, HEAD)
    p = (BATCH, HEADS, SEQ, SEQ)
    return [("q k^T (fwd; bwd of p v)", "nt", q, q, 2 * LOOPS), ("p v (fwd; bwd of q k^T)", "nn", p, q, 2 * LOOPS),
            ("dk = dS^T q, dv = p^T dO", "tn", p, q, 2 * LOOPS)]


class Library:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)

    def call(self, name, arrays, outputs):
        """One AOT kernel call: ``arrays`` inputs then ``outputs``, all float32 C-contiguous."""
        tensors = list(arrays) + list(outputs)
        params = (ctypes.c_void_p * len(tensors))(*[t.ctypes.data for t in tensors])
        ndims = (ctypes.c_int * len(tensors))(*[t.ndim for t in tensors])
        shape_arrays = [(ctypes.c_int64 * t.ndim)(*t.shape) for t in tensors]
        shapes = (ctypes.POINTER(ctypes.c_int64) * len(tensors))(
            *[ctypes.cast(s, ctypes.POINTER(ctypes.c_int64)) for s in shape_arrays])
        dtypes = (ctypes.c_char_p * len(tensors))(*[b"float32"] * len(tensors))
        fn = getattr(self.lib, name)
        return lambda: fn(len(tensors), params, ndims, shapes, dtypes, None, None)

    def rounding(self, *arrays):
        out = [np.empty(a.shape, np.uint16) for a in arrays]

        def run():
            for a, o in zip(arrays, out):
                self.lib.round_to_bf16(ctypes.c_void_p(a.ctypes.data), ctypes.c_int64(a.size),
                                       ctypes.c_void_p(o.ctypes.data))
        return run


def dnnl_gemm():
    import mindspore
    lib = ctypes.CDLL(os.path.join(os.path.dirname(mindspore.__file__), "lib", "libdnnl.so.3"))
    fn = lib.dnnl_gemm_bf16bf16f32
    fn.argtypes = [ctypes.c_char, ctypes.c_char] + [ctypes.c_int64] * 3 + [ctypes.c_float, ctypes.c_void_p,
                   ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_float, ctypes.c_void_p, ctypes.c_int64]

    def gemm(ta, tb, m, n, k, lda, ldb, count=1):
        a = np.zeros(m * k * count, np.uint16)
        b = np.zeros(k * n * count, np.uint16)
        c = np.empty(m * n * count, np.float32)

        def run():
            for i in range(count):
                fn(ta, tb, m, n, k, 1.0, a.ctypes.data + 2 * i * m * k, lda, b.ctypes.data + 2 * i * k * n, ldb, 0.0,
                   c.ctypes.data + 4 * i * m * n, n)
        return run
    return gemm


def median_ms(fn, repeats):
    return 1e3 * median_seconds(fn, repeats)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=9)
    args = p.parse_args()
    from albert_min.common.device import use_device
    from albert_min.model import kernels
    use_device("CPU", cpu_setup=kernels.prepare_cpu)
    lib = Library(kernels.library())
    gemm = dnnl_gemm()
    rng = np.random.default_rng(0)
    r = lambda *shape: rng.standard_normal(shape).astype(np.float32)   # noqa: E731
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    print(f"kernels at {kernels.KERNEL_THREADS} threads, median of {args.repeats}; ms per call (per step)")
    print(f"{'kernel, shape':<44}{'calls':>6}{'bf16':>15}{'fp32':>15}{'rounding':>15}{'gemm 1 thread':>16}")
    rows = []

    def row(label, calls, bf16, fp32, rounding, gemms):
        t = [median_ms(f, args.repeats) for f in (bf16, fp32, rounding, gemms)]
        rows.append((label, calls, t))
        print(f"{label:<44}{calls:>6}" + "".join(f"{x:>7.2f} ({x * calls:>5.0f})" for x in t[:3])
              + f"{t[3]:>8.2f} ({t[3] * calls:>5.0f})")

    for label, K, N, calls in dense_cases():
        x, w, b, dy = r(TOKENS, K), r(N, K), r(N), r(TOKENS, N)
        y, dx, dw, db = np.empty((TOKENS, N), np.float32), np.empty_like(x), np.empty_like(w), np.empty_like(b)
        row(f"dense_forward_bf16 {label}", calls, lib.call("dense_forward_bf16", (x, w, b), (y,)),
            lib.call("dense_forward", (x, w, b), (y,)), lib.rounding(x, w),
            gemm(b"N", b"T", TOKENS, N, K, K, K))
        row(f"dense_backward_bf16 {label}", calls, lib.call("dense_backward_bf16", (x, w, dy), (dx, dw, db)),
            lib.call("dense_backward", (x, w, dy), (dx, dw, db)), lib.rounding(x, w, dy),
            lambda g1=gemm(b"N", b"N", TOKENS, K, N, N, K), g2=gemm(b"T", b"N", N, K, TOKENS, N, K): (g1(), g2()))
    for label, kind, a_shape, b_shape, calls in attention_cases():
        a, b = r(*a_shape), r(*b_shape)
        M = a_shape[-1] if kind == "tn" else a_shape[-2]
        K = a_shape[-2] if kind == "tn" else a_shape[-1]
        N = b_shape[-2] if kind == "nt" else b_shape[-1]
        out = np.empty(a_shape[:-2] + (M, N), np.float32)
        count = BATCH * HEADS
        ta, tb = (b"T" if kind == "tn" else b"N"), (b"T" if kind == "nt" else b"N")
        row(f"batch_matmul_{kind}_bf16 {label}", calls, lib.call(f"batch_matmul_{kind}_bf16", (a, b), (out,)),
            lib.call(f"batch_matmul_{kind}", (a, b), (out,)), lib.rounding(a, b),
            gemm(ta, tb, M, N, K, a_shape[-1], b_shape[-1], count))
    total = [sum(t[i] * calls for _, calls, t in rows) for i in range(4)]
    print(f"{'total per step, ms':<50}" + "".join(f"{x:>15.0f}" for x in total[:3]) + f"{total[3]:>16.0f}")
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
