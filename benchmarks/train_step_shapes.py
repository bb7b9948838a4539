"""Why ``python train.py`` spends most of a short run compiling, and what MindSpore 2.10 offers against it.

    python3 benchmarks/train_step_shapes.py                 # sst2-small, batch 64, 4 lengths twice
    python3 benchmarks/train_step_shapes.py --ways static   # one of them

The train step (``training.step.make_train_step``: forward, backward, clipping, AdamW) of
weights/sst2-small's config on random ids of 4 padded lengths (24/32/40/48: what ``data.train_length``
gives SST-2 batches at --max-length 64), the 4 lengths twice, each way in a fresh process:

* static: ``mindspore.jit`` as train.py runs it: one graph per length (the first call of a length
  compiles; MindSpore's "has been compiled again" warning);
* dynamic: the same step under ``mindspore.enable_dynamic`` with (B, S) free: one graph for all lengths;
* cached: static with MindSpore's compile cache (``enable_compile_cache``) in a fresh folder, run
  twice: the second process loads the 4 graphs the first one wrote.

Prints seconds per call (the first of each length includes its compile) and the loss, or the
error a way ends with. ``uptime`` before and after: the machine is shared.
"""

import argparse
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LENGTHS = (32, 40, 48, 24)

CHILD = r"""
import sys, time
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/benchmarks"]
import mindspore as ms
from mindspore import ops
from albert_min.common.device import use_device
from albert_min.model import kernels
use_device("CPU", cpu_setup=kernels.prepare_cpu)
from albert_min.model.config import AlbertConfig
from albert_min.model.heads import AlbertForSequenceClassification
from albert_min.training.step import linear_warmup_decay, make_optimizer, make_train_step
from encoder_throughput import make_inputs
way, cache = sys.argv[2], sys.argv[3]
if cache:
    ms.set_context(enable_compile_cache=True, compile_cache_path=cache)
config = AlbertConfig.from_json_file(sys.argv[1] + "/weights/sst2-small/config.json")
ms.set_seed(0)
model = kernels.accelerate(AlbertForSequenceClassification(config))   # as the Trainer builds it
model.set_train(True)
optimizer = make_optimizer(model, linear_warmup_decay(2e-5, 1000, 0.1), 0.01)


def loss_fn(a, b, c, d):
    return ops.cross_entropy(model(a, b, c), d)


step = make_train_step(loss_fn, optimizer, 1.0, use_jit=way != "dynamic")
if way == "dynamic":
    inner, ids = step, ms.Tensor(shape=[None, None], dtype=ms.int32)

    @ms.enable_dynamic(a=ids, b=ids, c=ids, d=ms.Tensor(shape=[None], dtype=ms.int32))
    @ms.jit
    def step(a, b, c, d):
        return inner(a, b, c, d)
for seq in [int(n) for n in sys.argv[4].split(",")] * 2:
    batch = [ms.Tensor(x) for x in make_inputs(config, 64, seq, seed=1)]
    start = time.perf_counter()
    loss = float(step(*batch).asnumpy())
    print(f"  seq {seq}: {time.perf_counter() - start:6.2f} s, loss {loss:.6f}", flush=True)
"""


def run(script, way, cache=""):
    proc = subprocess.run([sys.executable, script, ROOT, way, cache, ",".join(map(str, LENGTHS))],
                          capture_output=True, text=True, env=dict(os.environ, GLOG_v="3"))
    print(proc.stdout, end="")
    if proc.returncode:
        errors = [line for line in proc.stderr.splitlines() if "Error" in line]
        print(f"  failed: {errors[-1] if errors else proc.stderr[-300:]}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ways", default="static,dynamic,cached", help="which ways (default: %(default)s)")
    ways = p.parse_args().ways.split(",")
    uptime = lambda: subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()   # noqa: E731
    print("uptime before:", uptime())
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "train_step.py")   # a file: MindSpore compiles no `python -c` source
        with open(script, "w") as f:
            f.write(CHILD)
        for way in ways:
            if way == "cached":
                for which in ("writes", "loads"):
                    print(f"cached ({which} the compile cache):")
                    run(script, "static", os.path.join(tmp, "cache"))
            else:
                print(f"{way}:")
                run(script, way)
    print("uptime after:", uptime())


if __name__ == "__main__":
    main()
