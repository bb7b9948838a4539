"""Wall and CPU seconds of one pre-training held-out evaluation, all batches against a
worker's half, side by side in one process.

    python3 benchmarks/heldout_eval.py                  # weights/pretrained-small, about 1.5 minutes

Data-parallel pre-training gives each worker every 2nd held-out batch. That helps only
if one process does not already use every core: the printed CPU / wall ratio says how
many cores one evaluation keeps busy (2.0 on a 2-core machine: nothing left for a
second worker).
"""

import argparse
import os
import random
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
DATA = os.path.join(os.path.dirname(ROOT), "shared", "data")


def timed(run):
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    return time.perf_counter() - wall, time.process_time() - cpu


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=os.path.join(ROOT, "weights", "pretrained-small"),
                   help="a pre-trained model folder (with its MLM and SOP heads)")
    p.add_argument("--text", default=os.path.join(DATA, "pretrain", "movie_reviews.txt"))
    args = p.parse_args()
    print(f"machine load before: {os.getloadavg()[0]:.2f} (1-min average), {os.cpu_count()} CPUs", flush=True)
    os.environ.setdefault("GLOG_v", "3")
    from albert_min.common.device import use_device
    from albert_min.model import kernels
    use_device("CPU", cpu_setup=kernels.prepare_cpu)   # as train.py
    from albert_min.tasks.pretraining import features as pretraining_features
    from albert_min.tasks.pretraining import metric as pretraining_metric
    from albert_min.tasks.pretraining import reading as pretraining_reading
    from albert_min.model.heads import AlbertForPreTraining
    from tokenizer import AlbertTokenizer
    tokenizer = AlbertTokenizer(os.path.join(args.model, "spiece.model"))
    # train.py's held-out documents and pairs (seed 42, --max-length 64, --batch-size 64)
    _, heldout_docs = pretraining_reading.split_documents(pretraining_reading.read_documents(args.text), 0.05, random.Random(42))
    ids = [[tokenizer.encode_ids(s) for s in d] for d in heldout_docs]
    heldout = pretraining_metric.HeldOut(ids, pretraining_features.PretrainingBatcher(tokenizer, 64), 64, 64, 42)
    model = kernels.accelerate(AlbertForPreTraining.from_pretrained(args.model))
    heldout.counts(model, progress=False)   # warm-up: first calls of each shape
    whole = timed(lambda: heldout.counts(model, progress=False))
    half = timed(lambda: heldout.counts(model, 0, 2, progress=False))
    print("held-out batches | wall s | CPU s | CPU / wall")
    for name, (wall, cpu) in (("all", whole), ("every 2nd (one of 2 workers)", half)):
        print(f"{name} | {wall:.1f} | {cpu:.1f} | {cpu / wall:.2f}")
    print(f"ratio, all / every 2nd: wall {whole[0] / half[0]:.2f}x")


if __name__ == "__main__":
    main()
