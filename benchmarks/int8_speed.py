"""int8 prediction (``kernels.quantize_int8``) against float32 (the compiled kernels), side by side.

    python3 benchmarks/int8_speed.py                        # albert-base-sized, random weights, batch 8 x 128
    python3 benchmarks/int8_speed.py --batch 32 --repeats 5 # the issue's 32 x 128

One process builds the classifier twice with the same random weights (the config's preset, 2 labels),
quantizes one, and times both alternately through evaluate.py's path (``classify.dynamic_graph``, one
compiled graph each, a warm-up call first), so both see the same load; ``uptime`` is printed before and
after. Each time is the median of --repeats; ratio = float32 seconds / int8 seconds (above 1: int8 is
faster). Also printed: the bytes the Dense layers keep (int8 against float32), and how the int8 logits
follow float32 on these inputs (cosine, argmax agreement, largest difference).
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np

os.environ.setdefault("GLOG_v", "3")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="base", help="preset name (default: %(default)s)")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--repeats", type=int, default=3, help="timed calls per model; the median is reported")
    return p.parse_args()


def main():
    args = parse_args()
    print("load before:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    import mindspore as ms
    from albert_min.common.device import use_device
    from albert_min.model import kernels
    use_device("CPU", cpu_setup=kernels.prepare_cpu)
    from albert_min.model.config import AlbertConfig
    from albert_min.model.heads import AlbertForSequenceClassification
    from albert_min.tasks.classify import dynamic_graph
    from encoder_throughput import make_inputs

    config = AlbertConfig.preset(args.config)
    config.num_labels = 2
    ms.set_seed(0)
    plain = AlbertForSequenceClassification(config)
    plain.set_train(False)
    quantized = AlbertForSequenceClassification(config)
    for source, target in zip(plain.get_parameters(), quantized.get_parameters()):
        target.set_data(source.data.copy())
    report = kernels.quantize_int8(quantized)
    if report.reason:
        sys.exit(f"error: int8 cannot run here: {report.reason}")
    inputs = [ms.Tensor(x) for x in make_inputs(config, args.batch, args.seq)[:3]]
    forwards = {"float32": dynamic_graph(plain), "int8": dynamic_graph(quantized)}
    logits, times = {}, {name: [] for name in forwards}
    for name, forward in forwards.items():
        logits[name] = forward(*inputs).asnumpy()          # compile, warm up
    for _ in range(args.repeats):
        for name, forward in forwards.items():
            start = time.perf_counter()
            forward(*inputs).asnumpy()
            times[name].append(time.perf_counter() - start)
    print("load after: ", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    print(f"\n{args.config}-sized classifier, random weights, batch {args.batch} x {args.seq}, "
          f"median of {args.repeats}, ALBERT_MIN_CPU_THREADS={os.environ.get('ALBERT_MIN_CPU_THREADS', 'unset')}")
    print(f"{'':10} {'s per batch':>12} {'sentences/s':>12}")
    for name in forwards:
        seconds = statistics.median(times[name])
        print(f"{name:10} {seconds:12.3f} {args.batch / seconds:12.2f}")
    ratio = statistics.median(times["float32"]) / statistics.median(times["int8"])
    print(f"int8 speed-up: {ratio:.2f}x")
    a, b = logits["float32"].ravel(), logits["int8"].ravel()
    cosine = float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))
    agree = float((logits["float32"].argmax(1) == logits["int8"].argmax(1)).mean())
    print(f"logits: cosine {cosine:.5f}, argmax agreement {agree:.3f}, "
          f"largest difference {np.abs(a - b).max():.2e}")
    print(f"Dense layers: {report.cells} quantized, {report.int8_bytes / 1e6:.2f} MB int8 against "
          f"{report.float32_bytes / 1e6:.2f} MB float32 ({report.float32_bytes / report.int8_bytes:.2f}x smaller)")


if __name__ == "__main__":
    main()
