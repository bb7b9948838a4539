"""Peak resident memory of the README's SQuAD example against its step count, with MindSpore's CPU
memory pool in 0.25 GB blocks (albert_min's, ``common.device.set_cpu_memory_pool``) and in
MindSpore's own (2 GB), side by side.

    python3 benchmarks/squad_training_memory.py                       # 12 and 200 steps, about 30 min
    python3 benchmarks/squad_training_memory.py --steps 12,28 --variants ours   # about 5 min

Each run is the README's command as written (``--max-length 384``, article 1 trained, article 25
the dev set) with ``--epochs 15``, so that ``--max-steps`` is what stops it (14 steps an epoch,
the dev set evaluated after each), in a fresh process whose own peak resident memory
(``getrusage``, as ``/usr/bin/time -v`` reads it) it prints at exit. Prints, per variant, each
run's peak, its ratio to the variant's shortest run, and its last record's steps/s and dev
evaluation seconds (``steps_per_s``, ``eval_s``).
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SQUAD = os.path.join(ROOT, "..", "shared", "data", "squad", "dev-v1.1.json")


VARIANTS = ("ours", "mindspore")


def one_run(variant, argv):
    """Runs in its own process: train.py's main with the memory pool as ``variant`` says, then one JSON
    line."""
    sys.path.insert(0, ROOT)
    os.chdir(ROOT)
    from albert_min.common import device
    if variant == "mindspore":
        device.set_cpu_memory_pool = lambda: None   # use_device leaves MindSpore's pool as it is
    sys.argv[0] = os.path.join(ROOT, "train.py")
    import train
    train.main(argv)
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9   # KiB -> GB
    print("PEAK " + json.dumps({"peak_gb": peak_gb}), flush=True)


def measure(variant, steps, output):
    argv = ["--task", "squad", "--train", SQUAD + ":1-1", "--dev", SQUAD + ":25-25", "--output", output,
            "--max-length", "384", "--max-steps", str(steps), "--epochs", "15", "--force", "--quiet"]
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", variant, "--", *argv],
                         capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"error: the run at {steps} steps, {variant} pool, exited {out.returncode}: "
                 + (out.stderr.strip().splitlines() or ["(no output)"])[-1])
    lines = out.stdout.splitlines()
    peak = json.loads(next(l for l in lines if l.startswith("PEAK "))[5:])["peak_gb"]
    records = [json.loads(l) for l in lines if l.startswith("{")]
    return peak, records[-1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", default="12,200", help="comma-separated --max-steps values (default 12,200)")
    parser.add_argument("--variants", default="ours,mindspore",
                        help="memory pools, comma-separated (default ours,mindspore)")
    args = parser.parse_args()
    try:
        steps = [int(s) for s in args.steps.split(",")]
    except ValueError:
        sys.exit(f"error: --steps takes whole numbers separated by commas, got {args.steps!r}")
    variants = args.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        sys.exit(f"error: --variants: unknown {', '.join(unknown)} (known: {', '.join(VARIANTS)})")
    if not os.path.isfile(SQUAD):
        sys.exit(f"error: {SQUAD}: not found (the shared data folder)")
    print(f"load average at the start: {os.getloadavg()[0]:.2f}")
    print("| pool | steps | peak GB | vs shortest | steps/s | eval_s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as tmp:
        for variant in variants:
            first = None
            for n in steps:
                peak, last = measure(variant, n, os.path.join(tmp, f"squad-{variant}-{n}"))
                first = first or peak
                print(f"| {variant} | {last['step']} | {peak:.2f} | {peak / first:.2f} | {last['steps_per_s']:.3f} "
                      f"| {last['eval_s']:.1f} |", flush=True)
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:   # a run of measure(): --one VARIANT -- train.py's arguments
        one_run(sys.argv[2], sys.argv[4:])
    else:
        main()
