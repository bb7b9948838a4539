"""Steps per minute of one train.py process against 2 data-parallel workers, side by side in one run.

    python3 benchmarks/data_parallel.py                 # pre-training, 3 min each (about 9 min in all)
    python3 benchmarks/data_parallel.py --job sst2      # SST-2 fine-tuning from weights/pretrained-small
    python3 benchmarks/data_parallel.py --minutes 5

Each job runs twice with the same flags and the same global batch: once as
one process, once as 2 workers under ``msrun`` with ``--data-parallel``, each
stopped by ``--max-minutes``. Prints the steps each made and train.py's
steps/s, and their ratio (above 1: the 2 workers take more steps in the same
time). The model folders go to a temporary folder that is removed after.

Why it can help on 2 cores: train.py ran MindSpore with one kernel thread
(reproducible dropout masks; 2 since the kernels' dropout, issue 38), and one process keeps
the second core only partly busy. Two workers split each batch and keep both
busy. In pre-training each worker also scores its share of the held-out
batches, so the evaluation after the last step (``eval_s`` in its record) is
timed too. On 2 cores it does not get faster: one process's evaluation
already keeps both cores busy (its CPU time is twice its wall time). In
fine-tuning every worker evaluates the whole dev set.
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from albert_min import arguments as num  # noqa: E402  (after the path, as train.py's flag types)

DATA = os.path.join(os.path.dirname(ROOT), "shared", "data")
WORKERS = 2


def job_flags(job):
    """train.py flags of the committed recipes (README): pre-training, or SST-2 fine-tuning from it."""
    if job == "pretrain":
        return ["--task", "sop", "--text", os.path.join(DATA, "pretrain", "movie_reviews.txt"),
                "--tokenizer", os.path.join(ROOT, "weights", "pretrained-small", "spiece.model"),
                "--embedding-size", "128", "--hidden-size", "128", "--layers", "4", "--heads", "4",
                "--intermediate-size", "512", "--dropout", "0", "--max-length", "64", "--batch-size", "64",
                "--lr", "1e-3", "--warmup", "0.02", "--epochs", "100", "--max-steps", "4500",
                "--eval-every", "100000"]
    return ["--init", os.path.join(ROOT, "weights", "pretrained-small"),
            "--train", os.path.join(DATA, "sst2", "train.tsv"), "--dev", os.path.join(DATA, "sst2", "dev.tsv"),
            "--dropout", "0.2", "--eval-every", "100000"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def last_line(text):
    return (text.strip().splitlines() or ["no output"])[-1]


def last_metrics(text, where):
    """The last JSON line train.py printed (its final evaluation, with step and steps_per_s)."""
    lines = [line for line in text.replace("\r", "\n").splitlines() if line.startswith("{")]
    if not lines:
        sys.exit(f"error: the {where} run printed no metrics: {last_line(text)}")
    return json.loads(lines[-1])


def run(flags, minutes, workdir, parallel):
    output = os.path.join(workdir, "dp" if parallel else "single")
    train = [os.path.join(ROOT, "train.py"), *flags, "--max-minutes", str(minutes), "--output", output]
    if not parallel:
        out = subprocess.run([sys.executable, *train], capture_output=True, text=True, cwd=ROOT)
        if out.returncode:
            sys.exit(f"error: the single-process run failed: {last_line(out.stderr)}")
        return last_metrics(out.stdout, "single-process")
    msrun = shutil.which("msrun")
    if msrun is None:
        sys.exit("error: msrun (MindSpore's launcher) is not on PATH")
    logs = os.path.join(workdir, "logs")
    out = subprocess.run([msrun, "--worker_num", str(WORKERS), "--local_worker_num", str(WORKERS),
                          "--master_port", str(free_port()), "--log_dir", logs, "--join", "True",
                          *train, "--data-parallel"], capture_output=True, text=True, cwd=ROOT)
    try:
        with open(os.path.join(logs, "worker_0.log")) as f:
            log = f.read()
    except OSError:
        log = ""
    if out.returncode:
        sys.exit(f"error: the {WORKERS}-worker run failed (msrun exit {out.returncode}): "
                 f"{last_line(log or out.stderr)}")
    return last_metrics(log, f"{WORKERS}-worker")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--job", choices=("pretrain", "sst2"), default="pretrain",
                   help="pretrain: README's pre-training command; sst2: its fine-tuning command")
    p.add_argument("--minutes", type=num.positive_float, default=3.0,
                   help="--max-minutes of each run (compile included)")
    args = p.parse_args()
    print(f"machine load before: {os.getloadavg()[0]:.2f} (1-min average), {os.cpu_count()} CPUs", flush=True)
    workdir = tempfile.mkdtemp(prefix="albert_min_dp_")
    try:
        flags = job_flags(args.job)
        single = run(flags, args.minutes, workdir, parallel=False)
        parallel = run(flags, args.minutes, workdir, parallel=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"job {args.job}, {args.minutes:g} min each | steps | steps/s")
    print(f"1 process | {single['step']} | {single['steps_per_s']:.3f}")
    print(f"{WORKERS} workers (msrun --data-parallel) | {parallel['step']} | {parallel['steps_per_s']:.3f}")
    print(f"ratio, {WORKERS} workers / 1 process: steps {parallel['step'] / single['step']:.2f}x, "
          f"steps/s {parallel['steps_per_s'] / single['steps_per_s']:.2f}x")
    print(f"final evaluation: {single['eval_s']:.1f} s (1 process), {parallel['eval_s']:.1f} s ({WORKERS} workers), "
          f"ratio {single['eval_s'] / parallel['eval_s']:.2f}x (above 1: the workers evaluate faster)")


if __name__ == "__main__":
    main()
