"""benchmarks/speed.py's int8 and bf16 rows (base size; skipped by --quick): our int8 prediction against
torch's ``quantize_dynamic`` and our fp32 graph, our ``--amp bf16`` fine-tuning step against torch's
autocast bf16; each timed in turns with the others so that all see the same load."""

import time

import numpy as np

from gemm_peak import encoder_flops   # (speed.py puts benchmarks/ and the repository on the path)


# ------------------------------------------------------------------------ int8
INT8_BATCH, INT8_SEQ = 32, 128          # issue 43's shape for the int8 goals
INT8_ROWS = (f"base int8 predict vs torch int8, batch {INT8_BATCH}, seq {INT8_SEQ}",
             f"base int8 predict vs our fp32, batch {INT8_BATCH}, seq {INT8_SEQ}")


def int8_rows(args, rows):
    """Steady-state prediction of a random albert-base-sized classifier after ``kernels.quantize_int8``
    against the same HF model after torch's ``quantize_dynamic`` (at its best thread count) and
    against our float32 graph (benchmarks/int8_speed.py builds all three), timed alternately."""
    import torch
    from albert_min.model.config import AlbertConfig
    from int8_speed import as_numpy, int8_forwards
    config = AlbertConfig.preset("base")
    forwards, inputs, _ = int8_forwards(config, INT8_BATCH, INT8_SEQ, args.torch_threads[0])

    def run(name, threads=None):
        def call():
            if threads is not None:
                torch.set_num_threads(threads)
            as_numpy(forwards[name](*inputs))
        return call

    timed = {"int8": run("int8"), "float32": run("float32"),
             **{n: run("torch int8", n) for n in args.torch_threads}}
    seconds = median_alternating(timed, args.repeats)
    best = min(args.torch_threads, key=lambda n: seconds[n])
    flops = encoder_flops(config, [INT8_SEQ] * INT8_BATCH) / 1e9
    for what, reference, threads, dtypes in ((INT8_ROWS[0], seconds[best], best, ("int8", "int8")),
                                             (INT8_ROWS[1], seconds["float32"], "ours fp32", ("int8", "fp32"))):
        if args.only in what:
            rows.append({"what": what, "unit": "sent/s", "ours": INT8_BATCH / seconds["int8"],
                         "reference": INT8_BATCH / reference, "ratio": reference / seconds["int8"],
                         "torch_threads": threads, "gflop": flops, "dtypes": dict(zip(("ours", "reference"), dtypes)),
                         "seconds": {"ours": seconds["int8"], "reference": reference}})


# ------------------------------------------------------------------------ bf16
BF16_ROW = "base fine-tuning step, --amp bf16 vs torch autocast bf16, batch 8, seq 128"


def bf16_rows(args, rows):
    """The base fine-tuning step with ``train.py --amp bf16``'s products (``kernels.use_bf16_gemms``)
    against the same step under ``torch.autocast("cpu", torch.bfloat16)`` (benchmarks/amp_speed.py
    builds both), torch at each of --torch-threads, timed alternately."""
    from albert_min.model.config import AlbertConfig
    from amp_speed import base_steps
    timed = {}
    for threads in args.torch_threads:
        ours_fn, ref_fn = base_steps(True, threads)
        timed.setdefault("ours", ours_fn)
        timed[threads] = ref_fn
    seconds = median_alternating(timed, args.repeats)
    best = min(args.torch_threads, key=lambda n: seconds[n])
    flops = encoder_flops(AlbertConfig.preset("base"), [128] * 8, train=True, classifier=True) / 1e9
    rows.append({"what": BF16_ROW, "unit": "steps/s", "ours": 1 / seconds["ours"], "reference": 1 / seconds[best],
                 "ratio": seconds[best] / seconds["ours"], "torch_threads": best, "gflop": flops, "dtype": "bf16",
                 "seconds": {"ours": seconds["ours"], "reference": seconds[best]}})


def median_alternating(timed, repeats):
    """{name: median seconds} of the zero-argument callables ``timed`` ({name: callable}), run in turn
    ``repeats`` times after one warm-up call each, so that all see the same load."""
    for fn in timed.values():
        fn()
    times = {name: [] for name in timed}
    for _ in range(repeats):
        for name, fn in timed.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: float(np.median(t)) for name, t in times.items()}
