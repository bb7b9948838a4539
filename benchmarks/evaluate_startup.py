"""Where evaluate.py's start-up goes, and which graph shapes compile fastest: side by side in one run.

    python3 benchmarks/evaluate_startup.py                  # all variants, median of 3, cold and warm cache
    python3 benchmarks/evaluate_startup.py --repeats 5 --variants buckets,dynamic

Each run is a fresh process (``--worker``) doing what evaluate.py does on SST-2
dev with weights/sst2-small (read, build and load the model, tokenise, predict,
metrics), timing each phase; "cold" starts with an empty compile cache, "warm"
reuses the one the cold run left. Variants differ only in the graph shapes the
prediction compiles:

* dynamic:     evaluate.py's path (``prediction_engine.predict_logits``): one graph with dynamic
               batch and length (``prediction_engine.dynamic_graph``, ``mindspore.enable_dynamic``),
               batches of 64 sorted rows padded to a multiple of 8
* set-inputs:  the same through ``Cell.set_inputs(Tensor(shape=[None, None]))`` on the model
* dynamic-buckets: the dynamic graph fed the bucketed batches below
* buckets:     the path before: rows padded to 16/32/64 tokens, short buckets in bigger
               batches (``batching.bucketed_eval_batches``; 3 static graphs)
* buckets-32:  rows padded to 32/64 (2 graphs)
* bucket-64:   every row padded to 64 (1 graph)
* auto:        ``mindspore.jit(dynamic=1)`` on the bucketed batches (MindSpore compiles
               a static graph, then a dynamic one when the shape changes)
* pynative:    no graph: the model called op by op (``predict_logits(use_jit=False)``), batches
               as in "dynamic"; nothing to compile, every op launched from Python

``--rows N,M,...`` runs every variant on the first N rows of SST-2 dev, then M, ..., so the
choice between compiling a graph and PyNative can be made by data size.

Variants run alternately (cold, then warm, per variant, per repeat) so they share
the machine's load, which is printed with ``uptime`` before and after. "steady" is
a second prediction in the same process (cold and warm runs); "max |dp|" is the
largest difference of any probability from the buckets variant's (padding must
change none beyond rounding).
MindSpore runs with --threads kernel threads (1, as benchmarks/speed.py).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

MODEL = os.path.join(ROOT, "weights", "sst2-small")
DEV = os.path.join(os.path.dirname(ROOT), "shared", "data", "sst2", "dev.tsv")
VARIANTS = ("dynamic", "buckets", "set-inputs", "dynamic-buckets", "buckets-32", "bucket-64", "auto", "pynative")
PHASES = ("read", "build", "load", "tokenizer", "tokenise", "first_calls", "predict", "metrics")


# ------------------------------------------------------------------ the worker
def batches_and_graph(variant, model, ids, batch_size, max_length):
    """(batches as (indices, rows, num_rows, length), the forward callable, the shapes keying the cache)."""
    import mindspore as ms
    from albert_min.tasks.prediction_engine import DYNAMIC_SHAPE, compiled, dynamic_graph
    from albert_min.tasks.batching import bucketed_eval_batches, eval_batches
    if variant in ("dynamic", "set-inputs", "dynamic-buckets", "pynative"):
        if variant == "pynative":
            forward = model
        elif variant == "set-inputs":
            dynamic = ms.Tensor(shape=[None, None], dtype=ms.int32)
            model.set_inputs(dynamic, dynamic, dynamic)
            forward = ms.jit(model.construct)
        else:
            forward = dynamic_graph(model)
        if variant == "dynamic-buckets":
            batches = list(bucketed_eval_batches(ids, batch_size, max_length))
        else:
            batches = [(idx, rows, None, None) for idx, rows in eval_batches(ids, batch_size)]
        return batches, forward, ([] if variant == "pynative" else [list(DYNAMIC_SHAPE)])
    smallest = {"buckets-32": 32, "bucket-64": 64}.get(variant, 16)
    batches = list(bucketed_eval_batches(ids, batch_size, max_length, smallest=smallest))
    forward = ms.jit(model.construct, dynamic=1) if variant == "auto" else compiled(model)
    return batches, forward, [list(s) for s in dict.fromkeys((b[2], b[3]) for b in batches)]


def worker(variant, model_dir, data, cache, threads, logits_path, rows):
    """One evaluate.py-like run, timed by phase; prints one JSON object."""
    clock = time.perf_counter()
    times = {}

    def lap(name):
        nonlocal clock
        now = time.perf_counter()
        times[name] = now - clock
        clock = now

    import numpy as np
    import mindspore as ms
    ms.set_device("CPU")
    from albert_min.common.device import set_cpu_threads
    set_cpu_threads(threads)
    from albert_min.tasks.glue import metric as glue_metric
    from albert_min.model.folder import load_model_dir, training_max_length
    from albert_min.tasks.prediction_engine import compile_cache, predict_logits
    from albert_min.model.config import load_config
    from albert_min.tasks.batching import encode_examples, pad_with_types
    from albert_min.model.heads import AlbertForSequenceClassification
    from albert_min.tasks import get_task
    from tokenizer import AlbertTokenizer
    lap("imports")
    start = clock
    registered = get_task("sst2")
    examples = registered.read(data)
    if rows:
        import dataclasses
        examples = dataclasses.replace(examples, **{f: list(getattr(examples, f))[:rows] for f in
                                                    ("texts", "text_pairs", "labels", "index")
                                                    if getattr(examples, f) is not None})
    lap("read")
    model = AlbertForSequenceClassification(load_config(model_dir))   # as evaluate.py builds it
    lap("build")
    load_model_dir(model, model_dir)
    from albert_min.model import kernels
    kernels.accelerate(model)                                          # as evaluate.py runs it
    lap("load")
    tokenizer = AlbertTokenizer.from_pretrained(model_dir)
    lap("tokenizer")
    max_length = min(training_max_length(model_dir), model.config.max_position_embeddings)
    batch_size = 64
    model.set_train(False)
    ids, types = encode_examples(tokenizer, examples.texts, examples.text_pairs, max_length)
    lap("tokenise")
    batches, forward, shapes = batches_and_graph(variant, model, ids, batch_size, max_length)
    logits = np.zeros((len(ids), model.config.num_labels), np.float32)

    def run_batches(record):
        seen = set()
        for idx, rows, num_rows, length in batches:
            t0 = time.perf_counter()
            batch = pad_with_types(rows, [types[i] for i in idx], tokenizer.pad_token_id,
                                   length=length, num_rows=num_rows)
            logits[idx] = forward(*[ms.Tensor(x) for x in batch]).asnumpy()[:len(idx)]
            shape = batch[0].shape
            record["first_calls" if shape not in seen else "predict"] += time.perf_counter() - t0
            seen.add(shape)
        return record

    with compile_cache(cache, model, shapes):
        times.update(run_batches({"first_calls": 0.0, "predict": 0.0}))
    clock = time.perf_counter()
    metrics = glue_metric.evaluation_metrics(registered.spec, examples.labels, logits)
    lap("metrics")
    end_to_end = clock - start
    np.save(logits_path, logits)
    t0 = time.perf_counter()
    run_batches({"first_calls": 0.0, "predict": 0.0})
    steady = time.perf_counter() - t0
    if variant == "dynamic":    # the library's own path must compute the same
        again, _ = predict_logits(model, tokenizer, examples.texts, None, batch_size, max_length, progress=False)
        assert np.abs(again - logits).max() == 0.0, np.abs(again - logits).max()
    print(json.dumps({"end_to_end": end_to_end, "steady": steady, "examples": len(ids),
                      "graphs": 2 if variant == "auto" else len(shapes),
                      "batch_shapes": len({(b[2] or len(b[1]), b[3] or -(-max(map(len, b[1])) // 8) * 8)
                                           for b in batches}),
                      "accuracy": metrics["accuracy"], **times}))


# ------------------------------------------------------------------ the driver
def run_worker(variant, cache, threads, logits_path, rows):
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", variant, MODEL, DEV, cache,
                           str(threads), logits_path, str(rows)], cwd=ROOT, capture_output=True, text=True,
                          env=dict(os.environ, GLOG_v="3"))
    if proc.returncode:
        sys.exit(f"error: variant {variant} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def uptime():
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def measure(variants, repeats, threads, rows, tmp):
    """({variant: {"cold": [run, ...], "warm": [...]}}, each variant's max |dp| from the reference variant,
    the reference: "buckets" where it runs, else the first variant)."""
    import numpy as np
    results = {v: {"cold": [], "warm": []} for v in variants}
    for rep in range(repeats):
        for variant in variants:
            cache = os.path.join(tmp, f"cache-{variant}-{rows}-{rep}")
            for state in ("cold", "warm"):
                path = os.path.join(tmp, f"{variant}-{rows}.npy")
                results[variant][state].append(run_worker(variant, cache, threads, path, rows))
    reference = "buckets" if "buckets" in variants else variants[0]
    ref = np.load(os.path.join(tmp, f"{reference}-{rows}.npy"))
    diffs = {v: float(np.abs(softmax(np.load(os.path.join(tmp, f"{v}-{rows}.npy"))) - softmax(ref)).max())
             for v in variants}
    return results, diffs, reference


def print_tables(results, diffs, reference, repeats, threads, rows):
    import numpy as np
    med = lambda runs, key: float(np.median([r[key] for r in runs]))    # noqa: E731
    some = next(iter(results.values()))["cold"][0]
    print(f"\n{some['examples']} rows of SST-2 dev{'' if rows else ' (all)'}: median of {repeats}, MindSpore "
          f"{threads} kernel thread(s), seconds unless said; max |dp| against {reference}")
    print(f"{'variant':<16} {'graphs':>6} {'shapes':>6} {'cold':>6} {'warm':>6} {'cold 1st':>8} {'warm 1st':>8} "
          f"{'steady ex/s':>11} {'max |dp|':>9} {'accuracy':>8}")
    for variant, runs in results.items():
        cold, warm = runs["cold"], runs["warm"]
        print(f"{variant:<16} {cold[0]['graphs']:>6} {cold[0]['batch_shapes']:>6} {med(cold, 'end_to_end'):>6.2f} "
              f"{med(warm, 'end_to_end'):>6.2f} {med(cold, 'first_calls'):>8.2f} {med(warm, 'first_calls'):>8.2f} "
              f"{warm[0]['examples'] / med(warm + cold, 'steady'):>11.0f} {diffs[variant]:>9.1e} "
              f"{cold[0]['accuracy']:>8.4f}")
    for state in ("cold", "warm"):
        print(f"\n{state} run by phase ('{state}' above is their sum without imports):")
        print(f"{'variant':<16} " + " ".join(f"{k:>11}" for k in ("imports",) + PHASES))
        for variant, runs in results.items():
            print(f"{variant:<16} " + " ".join(f"{med(runs[state], k):>11.3f}" for k in ("imports",) + PHASES))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=3, help="runs per variant and cache state; medians reported")
    p.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated, from: " + ", ".join(VARIANTS))
    p.add_argument("--threads", type=int, default=1, help="MindSpore kernel threads (default: %(default)s)")
    p.add_argument("--rows", default="0", help="comma-separated data sizes: the first N rows of SST-2 dev "
                                               "(0: all 872; default: %(default)s)")
    p.add_argument("--worker", nargs=7, metavar=("VARIANT", "MODEL", "DATA", "CACHE", "THREADS", "LOGITS", "ROWS"),
                   help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        variant, model_dir, data, cache, threads, logits_path, rows = args.worker
        return worker(variant, model_dir, data, cache, int(threads), logits_path, int(rows))
    variants = args.variants.split(",")
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        sys.exit(f"error: --variants: unknown {', '.join(unknown)} (known: {', '.join(VARIANTS)})")
    sizes = args.rows.split(",")
    if not all(size.isdigit() for size in sizes):
        sys.exit(f"error: --rows {args.rows!r}: give whole numbers of rows, comma-separated (0: all)")
    print("before:", uptime())
    with tempfile.TemporaryDirectory() as tmp:
        tables = [(int(rows), measure(variants, args.repeats, args.threads, int(rows), tmp)) for rows in sizes]
    print("after: ", uptime())
    for rows, (results, diffs, reference) in tables:
        print_tables(results, diffs, reference, args.repeats, args.threads, rows)


def softmax(x):
    import numpy as np
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


if __name__ == "__main__":
    main()
