"""Whole processes, imports included, as a user times them: albert_min's scripts against what a
transformers + torch user runs instead (benchmarks/hf_reference.py), side by side in one run.

    /work/refenv/bin/python benchmarks/whole_process.py               # both rows, 3 repeats
    /work/refenv/bin/python benchmarks/whole_process.py --only train  # the train row

Rows (ratio = the reference's seconds / ours: above 1 means we are faster):

* ``python evaluate.py --model weights/sst2-small --data SST-2 dev --json`` against
  ``pipeline("text-classification", batch_size=64)`` on the same model written by
  ``python -m albert_min.convert --to hf``. Ours twice: "cold" with an empty compile cache
  (the kernels' library already built, as after any first run on a machine) and "warm" with the
  graphs the cold run left.
* ``python train.py --init weights/sst2-small --train T --epochs 1 --batch-size 64 --max-length 64``
  on T = the first --train-steps * 64 rows of SST-2 train (one epoch of --train-steps steps, the
  model and state written at the end) against the same loop in torch, saving the model at the end.

The processes alternate (ours, the reference, ours, ...), --repeats times each; medians are
printed with ``uptime`` before and after. Run it with an interpreter that has torch and
transformers (the reference processes use it); ours run with the same interpreter.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(ROOT, "weights", "sst2-small")
DATA = os.path.join(os.path.dirname(ROOT), "shared", "data", "sst2")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=3, help="runs of each process; the median is reported")
    p.add_argument("--train-steps", type=int, default=20, help="train steps of the train row (batch 64)")
    p.add_argument("--only", default="", help="only the rows whose name contains this text")
    p.add_argument("--json", action="store_true")
    return p.parse_args(argv)


def timed(command, env=None, output=True):
    """Seconds of one whole process, and (``output``) the JSON object that ends its output."""
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=ROOT, env=dict(os.environ, **(env or {})), capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode:
        sys.exit(f"error: {' '.join(command)} failed:\n{proc.stderr[-2000:]}")
    start = proc.stdout.find("{")          # evaluate.py --json and hf_reference.py end with one JSON object
    return seconds, json.loads(proc.stdout[start:]) if output else None


def evaluate_rows(args, tmp, rows):
    hf = os.path.join(tmp, "sst2-small-hf")
    subprocess.run([sys.executable, "-m", "albert_min.convert", "--to", "hf", MODEL, hf], cwd=ROOT, check=True,
                   capture_output=True)
    cache = os.path.join(tmp, "cache")
    dev = os.path.join(DATA, "dev.tsv")
    ours = [sys.executable, "evaluate.py", "--model", MODEL, "--data", dev, "--json"]
    timed(ours, {"ALBERT_MIN_CACHE": cache})          # builds the kernels' library once, as any first run would
    times = {"cold": [], "warm": [], "reference": []}
    accuracy = {}
    for _ in range(args.repeats):
        for entry in os.listdir(cache):               # the compiled graphs go; the kernels' library stays
            if entry != "kernels":
                shutil.rmtree(os.path.join(cache, entry))
        for name in ("cold", "warm"):
            seconds, out = timed(ours, {"ALBERT_MIN_CACHE": cache})
            times[name].append(seconds)
            accuracy["ours"] = out["accuracy"]
        seconds, out = timed([sys.executable, os.path.join(HERE, "hf_reference.py"), "evaluate", hf, dev])
        times["reference"].append(seconds)
        accuracy["reference"] = out["accuracy"]
    ref = float(np.median(times["reference"]))
    for name in ("cold", "warm"):
        ours_s = float(np.median(times[name]))
        rows.append({"what": f"python evaluate.py whole process, {name} cache", "ours": ours_s, "reference": ref,
                     "ratio": ref / ours_s, "accuracy": accuracy})


def train_rows(args, tmp, rows):
    hf = os.path.join(tmp, "sst2-small-hf")
    if not os.path.isdir(hf):
        subprocess.run([sys.executable, "-m", "albert_min.convert", "--to", "hf", MODEL, hf], cwd=ROOT, check=True,
                       capture_output=True)
    train = os.path.join(tmp, "train.tsv")
    with open(os.path.join(DATA, "train.tsv"), encoding="utf-8") as src, open(train, "w", encoding="utf-8") as dst:
        for i, line in enumerate(src):
            if i > args.train_steps * 64:
                break
            dst.write(line)
    times = {"ours": [], "reference": []}
    losses = {}
    for rep in range(args.repeats):
        out_ours, out_ref = os.path.join(tmp, f"ours{rep}"), os.path.join(tmp, f"ref{rep}")
        seconds, _ = timed([sys.executable, "train.py", "--init", MODEL, "--train", train, "--epochs", "1",
                            "--batch-size", "64", "--max-length", "64", "--lr", "2e-5", "--output", out_ours,
                            "--quiet"], {"ALBERT_MIN_CACHE": os.path.join(tmp, "cache")}, output=False)
        times["ours"].append(seconds)
        seconds, out = timed([sys.executable, os.path.join(HERE, "hf_reference.py"), "train", hf, train, out_ref,
                              "--steps", str(args.train_steps), "--batch-size", "64", "--max-length", "64"])
        times["reference"].append(seconds)
        losses["reference"] = out["loss"]
        with open(os.path.join(out_ours + ".state", "state.json"), encoding="utf-8") as f:
            state = json.load(f)
        assert state["step"] == args.train_steps, state["step"]
        losses["ours"] = state["history"][-1]["train_loss"]
    ours_s, ref = float(np.median(times["ours"])), float(np.median(times["reference"]))
    rows.append({"what": f"python train.py whole process, {args.train_steps} steps", "ours": ours_s,
                 "reference": ref, "ratio": ref / ours_s, "mean_loss": losses})


def uptime():
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def whole_process_rows(args, rows):
    """Append the rows (dicts: what, ours, reference seconds, ratio) that ``args.only`` selects."""
    with tempfile.TemporaryDirectory() as tmp:
        if args.only in "python evaluate.py whole process":
            evaluate_rows(args, tmp, rows)
        if args.only in f"python train.py whole process, {args.train_steps} steps":
            train_rows(args, tmp, rows)


def main(argv=None):
    args = parse_args(argv)
    before = uptime()
    rows = []
    whole_process_rows(args, rows)
    if args.json:
        print(json.dumps({"uptime_before": before, "uptime_after": uptime(), "rows": rows}, indent=2))
        return
    print(f"uptime before: {before}\nmedian of {args.repeats}, seconds per whole process (imports included)")
    print(f"{'what':<52} {'ours':>8} {'torch':>8} {'ratio':>6}  ours / torch")
    for r in rows:
        check = r.get("accuracy") or r.get("mean_loss")
        shown = f"{'accuracy' if 'accuracy' in r else 'mean loss'} {check['ours']:.4f} / {check['reference']:.4f}"
        print(f"{r['what']:<52} {r['ours']:>8.2f} {r['reference']:>8.2f} {r['ratio']:>6.2f}  {shown}")
    print(f"uptime after: {uptime()}")


if __name__ == "__main__":
    main()
