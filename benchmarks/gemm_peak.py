"""The GEMM peak of the BLAS albert_min's kernels call, and a model's matmul FLOPs.

    python3 benchmarks/gemm_peak.py           # sgemm GFLOP/s at 1 and 2 threads, per shape

The peak is scipy-openblas32's ``sgemm`` (the library albert_min/model/kernels links),
called through ctypes on float32 C-contiguous arrays, best of the shapes below at
each thread count, median of --repeats calls per shape. benchmarks/speed.py calls
``peak_gflops`` in its own run and reports every row as a fraction of it: the
useful matmul FLOPs of the row (``encoder_flops``) per second over the peak. A
fraction near 1 means the row is GEMM-bound at the BLAS's speed; the rest of the
time is everything else (element-wise kernels, framework overhead).
"""

import argparse
import ctypes
import os
import time

import numpy as np

# (M, K, N): the small model's Dense shapes (2048 tokens x 128 -> 512, 512 -> 128, 128 -> 128),
# albert-base's (1024 tokens x 768 -> 3072) and a large square.
SHAPES = [(2048, 128, 512), (2048, 512, 128), (2048, 128, 128), (1024, 768, 3072), (1024, 1024, 1024)]
ROW_MAJOR, NO_TRANS = 101, 111


def openblas():
    """scipy-openblas32's shared library (its symbols carry the ``scipy_`` prefix)."""
    import scipy_openblas32
    lib = ctypes.CDLL(os.path.join(scipy_openblas32.get_lib_dir(), f"lib{scipy_openblas32.get_library()}.so"))
    f, i, p = ctypes.c_float, ctypes.c_int, ctypes.c_void_p
    lib.scipy_cblas_sgemm.argtypes = [i, i, i, i, i, i, f, p, i, p, i, f, p, i]
    lib.scipy_cblas_sgemm.restype = None
    return lib


def sgemm_gflops(lib, m, k, n, threads, repeats=9):
    """Median GFLOP/s of C = A(m,k) . B(k,n) on ``threads`` OpenBLAS threads."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    c = np.empty((m, n), np.float32)
    lib.scipy_openblas_set_num_threads(threads)

    def call():
        lib.scipy_cblas_sgemm(ROW_MAJOR, NO_TRANS, NO_TRANS, m, n, k, 1.0, a.ctypes.data, k,
                              b.ctypes.data, n, 0.0, c.ctypes.data, n)

    call()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    assert np.allclose(c[:4, :4], a[:4] @ b[:, :4], rtol=1e-3, atol=1e-3)   # the call computed the product
    return 2.0 * m * k * n / float(np.median(times)) / 1e9


def peak_gflops(threads=(1, 2), repeats=9):
    """{threads: (best GFLOP/s over SHAPES, {shape: GFLOP/s})}."""
    lib = openblas()
    result = {}
    for t in threads:
        per_shape = {shape: sgemm_gflops(lib, *shape, t, repeats) for shape in SHAPES}
        result[t] = (max(per_shape.values()), per_shape)
    lib.scipy_openblas_set_num_threads(1)
    return result


def encoder_flops(config, lengths, train=False, classifier=True):
    """Matmul FLOPs of ALBERT's encoder over sequences of the given token ``lengths``.

    Per sequence of T tokens: the E->H projection 2TEH; per layer the four attention
    projections 8TH^2, the feed-forward 4THI and the attention scores and context
    4T^2H; the pooler 2H^2. A train step counts 3x the forward (the backward's
    input and weight gradients are each about one forward)."""
    e, h, i, layers = config.embedding_size, config.hidden_size, config.intermediate_size, config.num_hidden_layers
    lengths = np.asarray(lengths, np.float64)
    per_layer = 8 * lengths * h * h + 4 * lengths * h * i + 4 * lengths ** 2 * h
    total = np.sum(2 * lengths * e * h + layers * per_layer + (2 * h * h if classifier else 0))
    return float(total * (3 if train else 1))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=9)
    args = p.parse_args()
    print(f"load {os.getloadavg()[0]:.2f}; scipy-openblas32 sgemm, float32, median of {args.repeats}")
    for threads, (best, per_shape) in peak_gflops(repeats=args.repeats).items():
        shapes = ", ".join(f"{m}x{k}x{n}: {g:.0f}" for (m, k, n), g in per_shape.items())
        print(f"{threads} thread(s): peak {best:.0f} GFLOP/s ({shapes})")
    print(f"load after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
