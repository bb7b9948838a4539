"""Memory kept by each recompile of the train step, with and without release_compiled_graphs.

    python3 benchmarks/recompile_memory.py              # weights/sst2-small's config, about 3 min
    python3 benchmarks/recompile_memory.py --rounds 3

With dropout, train.py recompiles its train step after every saved state
(``reseed_dropout``). This does what it does, ``--rounds`` times: reseed, build
the step, run it on batches of 3 lengths (64 x 32 / 48 / 64, as bucketed
fine-tuning batches are), then reads the process's resident memory. It runs
twice, each in a fresh process: once as train.py did before (the old graphs
kept) and once freeing them before each rebuild. Prints the resident memory
after every round and the growth per recompile of each, side by side.
"""

import argparse
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
MODES = ("kept", "released")


def resident_gb():
    with open("/proc/self/status") as f:
        return int(f.read().split("VmRSS:")[1].split()[0]) / 1e6   # kB -> GB


def one_mode(mode, rounds):
    """Runs in its own process; prints one resident-memory reading (GB) per round."""
    os.environ.setdefault("GLOG_v", "3")
    import mindspore as ms
    from albert_min.model.config import load_config
    from albert_min.model.heads import AlbertForSequenceClassification
    from albert_min.training.step import (linear_warmup_decay, make_optimizer, make_train_step, release_compiled_graphs,
                                          reseed_dropout)
    from albert_min.common.device import use_device
    from encoder_throughput import make_inputs
    use_device("CPU")
    config = load_config(os.path.join(ROOT, "weights", "sst2-small"))
    config.hidden_dropout_prob = config.attention_probs_dropout_prob = config.classifier_dropout_prob = 0.1
    from albert_min.model import kernels
    model = kernels.accelerate(AlbertForSequenceClassification(config))   # as the Trainer runs it
    model.set_train(True)
    optimizer = make_optimizer(model, linear_warmup_decay(1e-4, 100, 0.1), 0.01)

    def loss_fn(input_ids, token_type_ids, attention_mask, labels):
        return ms.ops.cross_entropy(model(input_ids, token_type_ids, attention_mask), labels)

    batches = [[ms.Tensor(x) for x in make_inputs(config, 64, seq)] for seq in (32, 48, 64)]
    for round_ in range(rounds):
        if round_ and mode == "released":
            release_compiled_graphs()
        reseed_dropout(model, 42, round_)
        step = make_train_step(loss_fn, optimizer, 1.0)
        for batch in batches:
            step(*batch).asnumpy()
        print(f"{resident_gb():.3f}", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=6, help="train steps built (the first compile, then recompiles)")
    p.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)   # the child process
    args = p.parse_args()
    if args.rounds < 2:
        sys.exit("error: --rounds must be at least 2 (one compile, then recompiles)")
    if args.mode:
        return one_mode(args.mode, args.rounds)
    readings = {}
    for mode in MODES:
        out = subprocess.run([sys.executable, __file__, "--mode", mode, "--rounds", str(args.rounds)],
                             capture_output=True, text=True)
        if out.returncode:
            last = (out.stderr.strip().splitlines() or ["no message"])[-1]
            sys.exit(f"error: the {mode} run failed: {last}")
        readings[mode] = [float(line) for line in out.stdout.split()]
    print("round | " + " | ".join(f"resident GB, graphs {m}" for m in MODES))
    for round_ in range(args.rounds):
        print(f"{round_} | " + " | ".join(f"{readings[m][round_]:.2f}" for m in MODES))
    growth = {m: (r[-1] - r[0]) / (args.rounds - 1) for m, r in readings.items()}
    print("GB kept per recompile: " + ", ".join(f"{m} {g:.3f}" for m, g in growth.items()))


if __name__ == "__main__":
    main()
