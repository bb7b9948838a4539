"""The machine's GEMM peaks (float32, bfloat16, int8), per core and on both cores, and a model's matmul FLOPs.

    python3 benchmarks/gemm_peak.py                  # every library, dtype and thread count
    python3 benchmarks/gemm_peak.py --repeats 3 --shapes small    # a quick check

Measured through ctypes on the libraries themselves, float32 C-contiguous arrays:

* fp32: oneDNN's ``dnnl_sgemm`` (the ``libdnnl.so.3`` MindSpore ships, which albert_min's
  kernels call), OpenBLAS's ``sgemm`` with the environment as it is (``OPENBLAS_CORETYPE=Haswell``
  on the developers' and CI's machines: its AVX2 kernels), and OpenBLAS again in a
  subprocess with every ``OPENBLAS_*`` variable unset (what a user's machine runs; said so in
  the output). OpenBLAS is scipy-openblas32 where installed, else the one numpy bundles.
* bf16: ``dnnl_gemm_bf16bf16f32`` (bfloat16 operands, float32 accumulation and result).
* int8: ``dnnl_gemm_u8s8s32`` (uint8 x int8, int32 result: exact).

"1 thread" is one call on the calling thread (each library held to one thread); "2 threads"
is two threads each calling it on half the rows (the caller and one started before the timing;
ctypes releases the GIL), as the kernels split their work over the two cores. Each figure is the best over SHAPES of the median
of --repeats calls. benchmarks/speed.py calls ``machine_peaks`` in its own run and reports every
row as a fraction of the fp32 peak (a bf16 or int8 row of its dtype's).
"""

import argparse
import ctypes
import glob
import importlib.util
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

# (M, K, N): the small model's Dense shapes (2048 tokens x 128 -> 512, 512 -> 128, 128 -> 128),
# albert-base's (1024 tokens x 768 -> 3072) and a large square.
SHAPES = [(2048, 128, 512), (2048, 512, 128), (2048, 128, 128), (1024, 768, 3072), (1024, 1024, 1024)]
SMALL_SHAPES = [(256, 128, 128)]          # --shapes small: checks that every call works, in seconds
ISA_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile", "amx_bf16", "amx_int8")
ROW_MAJOR, NO_TRANS = 101, 111
i64, f32, ptr = ctypes.c_int64, ctypes.c_float, ctypes.c_void_p


def onednn():
    """MindSpore's oneDNN, found without importing MindSpore, its three GEMMs typed."""
    spec = importlib.util.find_spec("mindspore")
    lib = ctypes.CDLL(os.path.join(os.path.dirname(spec.origin), "lib", "libdnnl.so.3"))
    c, u8, s8 = ctypes.c_char, ctypes.c_uint8, ctypes.c_int8
    lib.dnnl_sgemm.argtypes = [c, c, i64, i64, i64, f32, ptr, i64, ptr, i64, f32, ptr, i64]
    lib.dnnl_gemm_bf16bf16f32.argtypes = [c, c, i64, i64, i64, f32, ptr, i64, ptr, i64, f32, ptr, i64]
    lib.dnnl_gemm_u8s8s32.argtypes = [c, c, c, i64, i64, i64, f32, ptr, i64, u8, ptr, i64, s8, f32, ptr, i64, ptr]
    for name in ("dnnl_sgemm", "dnnl_gemm_bf16bf16f32", "dnnl_gemm_u8s8s32"):
        getattr(lib, name).restype = ctypes.c_int
    return lib


def openblas():
    """(name, sgemm(m, n, k, a, b, c), set_threads(n)) of scipy-openblas32, else numpy's own OpenBLAS."""
    try:
        import scipy_openblas32 as sob
        lib = ctypes.CDLL(os.path.join(sob.get_lib_dir(), f"lib{sob.get_library()}.so"))
        name, sgemm, set_threads, index = "scipy-openblas32", lib.scipy_cblas_sgemm, lib.scipy_openblas_set_num_threads, \
            ctypes.c_int
    except ImportError:
        found = sorted(glob.glob(os.path.join(os.path.dirname(np.__file__) + ".libs", "libopenblas*.so*")) +
                       glob.glob(os.path.join(os.path.dirname(np.__file__) + ".libs", "libscipy_openblas*.so*")))
        if not found:
            return None
        lib = ctypes.CDLL(found[0])
        suffix = "64_" if hasattr(lib, "cblas_sgemm64_") else ""
        name, sgemm, set_threads = f"numpy's OpenBLAS ({os.path.basename(found[0])})", \
            getattr(lib, "cblas_sgemm" + suffix), getattr(lib, "openblas_set_num_threads" + suffix)
        index = ctypes.c_int64 if suffix else ctypes.c_int
    sgemm.argtypes = [ctypes.c_int] * 3 + [index] * 3 + [f32, ptr, index, ptr, index, f32, ptr, index]
    sgemm.restype = None

    def call(m, n, k, a, b, c):
        sgemm(ROW_MAJOR, NO_TRANS, NO_TRANS, m, n, k, 1.0, a, k, b, n, 0.0, c, n)
    return name, call, set_threads


def operands(kind, m, k, n, rng):
    """A (m, k), B (k, n), C (m, n) for ``kind`` (fp32, bf16: float32 truncated to its high half, int8)."""
    if kind == "int8":
        return (rng.integers(0, 256, (m, k), dtype=np.uint8), rng.integers(-128, 128, (k, n), dtype=np.int8),
                np.empty((m, n), np.int32))
    a, b = rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32)
    if kind == "bf16":
        a, b = ((x.view(np.uint32) >> 16).astype(np.uint16) for x in (a, b))
    return a, b, np.empty((m, n), np.float32)


def gemm_call(kind, lib, blas=None):
    """call(rows, a, b, c) computing rows [begin, end) of C = A B for ``kind``."""
    zero = ctypes.c_int32(0)

    def call(begin, end, a, b, c):
        m, (k, n) = end - begin, b.shape
        pa, pb, pc = a[begin:].ctypes.data, b.ctypes.data, c[begin:].ctypes.data
        if kind == "fp32":
            status = lib.dnnl_sgemm(b"N", b"N", m, n, k, 1.0, pa, k, pb, n, 0.0, pc, n)
        elif kind == "bf16":
            status = lib.dnnl_gemm_bf16bf16f32(b"N", b"N", m, n, k, 1.0, pa, k, pb, n, 0.0, pc, n)
        elif kind == "int8":
            status = lib.dnnl_gemm_u8s8s32(b"N", b"N", b"F", m, n, k, 1.0, pa, k, 0, pb, n, 0, 0.0, pc, n,
                                           ctypes.addressof(zero))
        else:
            status = blas(m, n, k, pa, pb, pc)
        assert not status, f"{kind}: status {status}"
    return call


def check(kind, a, b, c):
    """The call computed the product (int8: exactly, in int64)."""
    if kind == "int8":
        assert np.array_equal(c[:8].astype(np.int64), a[:8].astype(np.int64) @ b.astype(np.int64))
        return
    if kind == "bf16":
        a, b = ((x.astype(np.uint32) << 16).view(np.float32) for x in (a, b))
    np.testing.assert_allclose(c[:8], a[:8] @ b, rtol=1e-3, atol=1e-3 * np.sqrt(a.shape[1]))


def gflops(call, kind, m, k, n, threads, repeats):
    """Median GFLOP/s of C = A(m,k) B(k,n): one call, or two threads on half the rows each."""
    a, b, c = operands(kind, m, k, n, np.random.default_rng(0))
    helper = ThreadPoolExecutor(max_workers=1) if threads == 2 else None   # started once, as helper.h's

    def once():
        if helper is None:
            call(0, m, a, b, c)
            return
        second = helper.submit(call, m // 2, m, a, b, c)
        call(0, m // 2, a, b, c)
        second.result()
    once()
    check(kind, a, b, c)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        once()
        times.append(time.perf_counter() - start)
    if helper:
        helper.shutdown()
    return 2.0 * m * k * n / float(np.median(times)) / 1e9


def measure(kinds, threads=(1, 2), repeats=9, shapes=SHAPES):
    """{kind: {threads: (best GFLOP/s over shapes, {shape: GFLOP/s})}}; kind "openblas" is OpenBLAS's
    fp32 in this process's environment (absent without an OpenBLAS)."""
    lib, blas = onednn(), openblas()
    result = {}
    for kind in kinds:
        if kind == "openblas":
            if blas is None:
                continue
            blas[2](1)                       # one OpenBLAS thread per call: the second core is the second call
        call = gemm_call(kind, lib, blas and blas[1])
        result[kind] = {}
        for t in threads:
            per_shape = {shape: gflops(call, kind, *shape, t, repeats) for shape in shapes}
            result[kind][t] = (max(per_shape.values()), per_shape)
    return result


def openblas_unset(repeats, shapes):
    """OpenBLAS's fp32 peaks measured in a subprocess with every OPENBLAS_* variable unset, or None."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENBLAS_")}
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--repeats", str(repeats), "--shapes",
                           "small" if shapes is SMALL_SHAPES else "all", "--only-openblas-json"],
                          env=env, capture_output=True, text=True)
    if proc.returncode:
        print(f"OpenBLAS with OPENBLAS_* unset: failed ({proc.stderr.strip().splitlines()[-1:]})")
        return None
    return {int(t): best for t, best in json.loads(proc.stdout.strip().splitlines()[-1]).items()}


def machine_peaks(repeats=5, shapes=SHAPES):
    """{"fp32": {1: GFLOP/s, 2: GFLOP/s}, "bf16": ..., "int8": ..., "openblas": ..., "openblas_unset": ...}:
    the best of each library and dtype at one thread and on both cores (oneDNN unless named)."""
    peaks = {kind: {t: best for t, (best, _) in per.items()}
             for kind, per in measure(("fp32", "bf16", "int8", "openblas"), repeats=repeats, shapes=shapes).items()}
    unset = openblas_unset(repeats, shapes)
    if unset:
        peaks["openblas_unset"] = unset
    return peaks


def isa_flags():
    """{flag: present} for the instruction sets that decide the peaks (/proc/cpuinfo; {} elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            flags = set(next((line for line in f if line.startswith("flags")), "").split())
    except OSError:
        return {}
    return {flag: flag in flags for flag in ISA_FLAGS}


def isa_text():
    flags = isa_flags()
    return ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in flags.items()) or "unknown (no /proc/cpuinfo)"


def openblas_variables():
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith("OPENBLAS_")}


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


NAMES = {"fp32": "fp32  dnnl_sgemm (MindSpore's oneDNN)", "bf16": "bf16  dnnl_gemm_bf16bf16f32",
         "int8": "int8  dnnl_gemm_u8s8s32 (exact)", "openblas": "fp32  OpenBLAS sgemm, environment as set"}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=9)
    p.add_argument("--shapes", choices=("all", "small"), default="all", help="small: one tiny shape (a quick check)")
    p.add_argument("--only-openblas-json", action="store_true", help=argparse.SUPPRESS)   # openblas_unset's child
    args = p.parse_args()
    shapes = SMALL_SHAPES if args.shapes == "small" else SHAPES
    if args.only_openblas_json:
        measured = measure(("openblas",), repeats=args.repeats, shapes=shapes).get("openblas", {})
        print(json.dumps({t: best for t, (best, _) in measured.items()}))
        return
    blas = openblas()
    print(f"load {os.getloadavg()[0]:.2f}; median of {args.repeats}; GFLOP/s (int8: GOP/s); ISA {isa_text()}")
    print(f"OpenBLAS: {blas[0] if blas else 'none found'}; environment: "
          f"{' '.join(f'{k}={v}' for k, v in openblas_variables().items()) or 'no OPENBLAS_* variable set'}")
    for kind, per_threads in measure(("fp32", "bf16", "int8", "openblas"), repeats=args.repeats,
                                     shapes=shapes).items():
        for threads, (best, per_shape) in per_threads.items():
            shown = ", ".join(f"{m}x{k}x{n}: {g:.0f}" for (m, k, n), g in per_shape.items())
            print(f"{NAMES[kind]:<44} {threads} thread(s): peak {best:6.0f} ({shown})")
    if blas:
        unset = openblas_unset(args.repeats, shapes)
        for threads, best in (unset or {}).items():
            print(f"{'fp32  OpenBLAS sgemm, OPENBLAS_* UNSET':<44} {threads} thread(s): peak {best:6.0f} "
                  "(a subprocess without the variables, as on a user's machine)")
    print(f"load after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
