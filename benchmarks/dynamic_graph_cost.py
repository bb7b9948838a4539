"""What the dynamic-shape prediction graph costs per call against one static graph per shape.

    python3 benchmarks/dynamic_graph_cost.py                       # the compiled kernels
    ALBERT_MIN_KERNELS=off python3 benchmarks/dynamic_graph_cost.py   # MindSpore's own ops

weights/sst2-small on SST-2 dev in evaluate.py's batches (sorted by length, 64 rows, padded to a
multiple of 8: 7 shapes), through ``prediction_engine.dynamic_graph`` (one graph, (B, S) free: what
evaluate.py runs) and through ``mindspore.jit`` of the model (one graph per shape), every shape
compiled and run once first; then the whole dev set --repeats times, the two alternating, and one
batch shape called 14 times in a row. ``uptime`` before and after: the machine is shared.
"""

import argparse
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
MODEL = os.path.join(ROOT, "weights", "sst2-small")
DEV = os.path.join(os.path.dirname(ROOT), "shared", "data", "sst2", "dev.tsv")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    uptime = lambda: subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()   # noqa: E731
    print("uptime before:", uptime())
    import mindspore as ms
    from albert_min.common.device import use_device
    from albert_min.model import kernels
    use_device("CPU", cpu_setup=kernels.prepare_cpu)
    from albert_min import tasks
    from albert_min.model.heads import AlbertForSequenceClassification
    from albert_min.tasks import prediction_engine
    from albert_min.tasks.batching import encode_examples, eval_batches, pad_with_types
    from tokenizer import AlbertTokenizer
    model = kernels.accelerate(AlbertForSequenceClassification.from_pretrained(MODEL))
    model.set_train(False)
    tokenizer = AlbertTokenizer.from_pretrained(MODEL)
    texts = tasks.get_task("sst2").read(DEV).texts
    ids, types = encode_examples(tokenizer, texts, None, 64)
    batches = [[ms.Tensor(x) for x in pad_with_types(rows, [types[i] for i in idx], tokenizer.pad_token_id)]
               for idx, rows in eval_batches(ids, 64)]
    forwards = {"dynamic graph": prediction_engine.dynamic_graph(model), "static graphs": ms.jit(model.construct)}
    logits = {name: np.concatenate([f(*b).asnumpy() for b in batches]) for name, f in forwards.items()}
    seconds = {name: [] for name in forwards}
    for _ in range(args.repeats):
        for name, forward in forwards.items():
            start = time.perf_counter()
            for batch in batches:
                forward(*batch).asnumpy()
            seconds[name].append(time.perf_counter() - start)
    one = batches[len(batches) // 2]
    per_call = {}
    for name, forward in forwards.items():
        start = time.perf_counter()
        for _ in range(14):
            forward(*one).asnumpy()
        per_call[name] = (time.perf_counter() - start) / 14
    print("uptime after: ", uptime())
    print(f"{len(texts)} rows, {len(batches)} batches of shapes {sorted({tuple(b[0].shape) for b in batches})}, "
          f"median of {args.repeats}, ALBERT_MIN_KERNELS={os.environ.get('ALBERT_MIN_KERNELS', 'unset')}")
    for name in forwards:
        print(f"{name:14} {len(texts) / np.median(seconds[name]):8.1f} ex/s   "
              f"{per_call[name] * 1000:7.1f} ms per call at {tuple(one[0].shape)}")
    print(f"static / dynamic speed: {np.median(seconds['dynamic graph']) / np.median(seconds['static graphs']):.2f}x; "
          f"largest logit difference {np.abs(logits['dynamic graph'] - logits['static graphs']).max():.2e}")


if __name__ == "__main__":
    main()
