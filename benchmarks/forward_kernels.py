"""Prediction with albert_min's forward kernels (dense.cc, gelu.cc, ...) against MindSpore's own ops, side by side.

    python3 benchmarks/forward_kernels.py             # SST-2 dev prediction + sst2-small encoder (about 2 min)
    python3 benchmarks/forward_kernels.py --base      # also the albert-base-v2 encoder, batch 32, seq 128

Both models are built in one process (kernels.accelerate reads ALBERT_MIN_KERNELS) with
the same weights, and timed alternately, so both see the same machine load; ``uptime`` is printed
before and after. Rows: SST-2 dev predicted as evaluate.py predicts it (weights/sst2-small,
``prediction_engine.predict_logits``: one dynamic-shape graph, length-sorted batches of 64; the time of a
second prediction, graphs compiled), the sst2-small encoder (``AlbertModel``, eval mode, batch 64,
seq 32, ``mindspore.jit``) and with --base albert-base-v2's (batch 32, seq 128). Each time is the
median of --repeats; ratio = MindSpore's ops / the kernels' (above 1: the kernels are faster). The
largest difference between the two outputs is printed too (float32 rounding).
"""

import argparse
import os
import subprocess
import sys
import time

import numpy as np

os.environ.setdefault("GLOG_v", "3")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

MODEL = os.path.join(ROOT, "weights", "sst2-small")
DEV = os.path.join(os.path.dirname(ROOT), "shared", "data", "sst2", "dev.tsv")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=7, help="timed calls per implementation; the median is reported")
    p.add_argument("--base", action="store_true", help="also the albert-base-v2 encoder")
    return p.parse_args()


def build(cls, config, kernels_on, state=None):
    """``cls(config)`` with the kernels on (``kernels.accelerate``) or off (plain), its weights ``state`` when given."""
    import mindspore as ms
    from albert_min.model import kernels
    saved = os.environ.get("ALBERT_MIN_KERNELS")
    os.environ["ALBERT_MIN_KERNELS"] = "on" if kernels_on else "off"
    try:
        ms.set_seed(0)
        model = kernels.accelerate(cls(config))
    finally:
        if saved is None:
            del os.environ["ALBERT_MIN_KERNELS"]
        else:
            os.environ["ALBERT_MIN_KERNELS"] = saved
    for p in model.get_parameters() if state is not None else ():
        p.set_data(ms.Tensor(state[p.name]))
    model.set_train(False)
    return model


def prediction_case():
    """(name, make) for SST-2 dev: make(on) -> zero-argument call returning the logits."""
    from albert_min.model.heads import AlbertForSequenceClassification
    from albert_min.tasks.prediction_engine import predict_logits
    from albert_min.model.folder import load_model_dir
    from albert_min.model.config import load_config
    from albert_min.tasks import get_task
    from tokenizer import AlbertTokenizer
    tokenizer = AlbertTokenizer.from_pretrained(MODEL)
    texts = get_task("sst2").read(DEV).texts

    def make(on):
        model = build(AlbertForSequenceClassification, load_config(MODEL), on)
        load_model_dir(model, MODEL)
        return lambda: predict_logits(model, tokenizer, texts, None, 64, 64, progress=False)[0]
    return f"SST-2 dev prediction ({len(texts)} sentences, sst2-small)", make


def encoder_case(name, config, batch, seq):
    import mindspore as ms
    from encoder_throughput import make_inputs
    from albert_min.model.modeling import AlbertModel
    tensors = [ms.Tensor(x) for x in make_inputs(config, batch, seq)[:3]]
    state = {}

    def make(on):
        model = build(AlbertModel, config, on, state or None)
        state.update({p.name: p.asnumpy() for p in model.get_parameters()})
        forward = ms.jit(model.construct)
        return lambda: forward(*tensors)[0].asnumpy()
    return f"{name} encoder, batch {batch}, seq {seq}", make


def uptime():
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main():
    args = parse_args()
    import mindspore as ms
    from albert_min.model import kernels
    from albert_min.model.config import AlbertConfig
    from albert_min.common.device import cpu_threads, use_device
    use_device("CPU", cpu_setup=kernels.prepare_cpu)
    if kernels.library() is None:
        sys.exit("error: the kernels could not be built here (see the notice above)")
    print(f"MindSpore {ms.__version__}, {cpu_threads()} kernel thread(s), median of {args.repeats}, "
          f"{os.cpu_count()} cores (shared: timings move with the load)\nuptime before: {uptime()}")
    print(f"{'ms per call':<52} {'MindSpore':>10} {'kernels':>10} {'ratio':>6}  max |difference|")
    small = AlbertConfig.from_json_file(os.path.join(MODEL, "config.json"))
    cases = [prediction_case(), encoder_case("sst2-small", small, 64, 32)]
    if args.base:
        cases.append(encoder_case("base", AlbertConfig.preset("base"), 32, 128))
    for name, make in cases:
        plain, fast = make(False), make(True)
        outputs = [plain(), fast()]                      # compile, warm up
        times = [[], []]
        for _ in range(args.repeats):
            for i, fn in enumerate((plain, fast)):
                start = time.perf_counter()
                fn()
                times[i].append(time.perf_counter() - start)
        ms_plain, ms_fast = (1000 * float(np.median(t)) for t in times)
        difference = float(np.abs(outputs[0] - outputs[1]).max())
        print(f"{name:<52} {ms_plain:>10.1f} {ms_fast:>10.1f} {ms_plain / ms_fast:>6.2f}  {difference:.1e}",
              flush=True)
    print(f"uptime after: {uptime()}")


if __name__ == "__main__":
    main()
