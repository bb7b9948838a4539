"""int8 prediction (``kernels.quantize_int8``) against float32 (the compiled kernels), side by side.

    python3 benchmarks/int8_speed.py                        # albert-base-sized, random weights, batch 8 x 128
    python3 benchmarks/int8_speed.py --batch 32 --repeats 5 # the issue's 32 x 128
    .refenv/bin/python benchmarks/int8_speed.py --torch     # and torch's quantize_dynamic (docs/speed.md's .refenv)

One process builds the classifier twice with the same random weights (the config's preset, 2 labels),
quantizes one, and times both alternately through evaluate.py's path (``prediction_engine.dynamic_graph``, one
compiled graph each, a warm-up call first), so both see the same load; ``uptime`` is printed before and
after. Each time is the median of --repeats; ratio = float32 seconds / int8 seconds (above 1: int8 is
faster). Also printed: the bytes the Dense layers keep (int8 against float32), and how the int8 logits
follow float32 on these inputs (cosine, argmax agreement, largest difference). With --torch, a third
row: transformers' ``AlbertForSequenceClassification`` with the same weights after torch's
``torch.ao.quantization.quantize_dynamic`` (its Linear layers, qint8), timed in the same loop.
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
    p.add_argument("--torch", action="store_true", help="also torch's quantize_dynamic (needs torch, transformers)")
    p.add_argument("--torch-threads", type=int, default=2, help="torch's thread count (default: %(default)s)")
    return p.parse_args()


def main():
    args = parse_args()
    print("load before:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    from albert_min.common.device import use_device
    from albert_min.model import kernels
    use_device("CPU", cpu_setup=kernels.prepare_cpu)
    from albert_min.model.config import AlbertConfig

    forwards, inputs, report = int8_forwards(AlbertConfig.preset(args.config), args.batch, args.seq,
                                             args.torch_threads if args.torch else None)
    logits, times = {}, {name: [] for name in forwards}
    for name, forward in forwards.items():
        logits[name] = as_numpy(forward(*inputs))           # compile, warm up
    for _ in range(args.repeats):
        for name, forward in forwards.items():
            start = time.perf_counter()
            as_numpy(forward(*inputs))
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
    if args.torch:
        print(f"int8 against torch's quantize_dynamic: "
              f"{statistics.median(times['torch int8']) / statistics.median(times['int8']):.2f}x")
    for name in forwards:
        if name != "float32":
            a, b = logits["float32"].ravel(), logits[name].ravel()
            cosine = float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))
            agree = float((logits["float32"].argmax(1) == logits[name].argmax(1)).mean())
            print(f"{name} logits against our float32: cosine {cosine:.5f}, argmax agreement {agree:.3f}, "
                  f"largest difference {np.abs(a - b).max():.2e}")
    print(f"Dense layers: {report.cells} quantized, {report.int8_bytes / 1e6:.2f} MB int8 against "
          f"{report.float32_bytes / 1e6:.2f} MB float32 ({report.float32_bytes / report.int8_bytes:.2f}x smaller)")


def paired_models(config):
    """(float32, int8, the ``quantize_int8`` report): the classifier of ``config`` (given 2 labels) built
    with random weights (seed 0) and accelerated, as evaluate.py runs it, and a copy with the same
    weights after ``kernels.quantize_int8``. The process's device must be set."""
    import mindspore as ms
    from albert_min.model import kernels
    from albert_min.model.heads import AlbertForSequenceClassification
    config.num_labels = 2
    ms.set_seed(0)
    plain = kernels.accelerate(AlbertForSequenceClassification(config))   # float32: the compiled kernels
    plain.set_train(False)
    quantized = kernels.accelerate(AlbertForSequenceClassification(config))
    for source, target in zip(plain.get_parameters(), quantized.get_parameters()):
        target.set_data(source.data.copy())
    report = kernels.quantize_int8(quantized)
    if report.reason:
        sys.exit(f"error: int8 cannot run here: {report.reason}")
    return plain, quantized, report


def int8_forwards(config, batch, seq, torch_threads=None):
    """The models this benchmark times, as callables of the input tensors (``forward(*inputs)`` ->
    logits, a Tensor or numpy): ``{"float32": ..., "int8": ...}`` (and ``"torch int8"`` with
    ``torch_threads``), all with the same random weights; returns (forwards, inputs, the
    ``quantize_int8`` report). ``config`` gets 2 labels; the process's device must be set."""
    import mindspore as ms
    from albert_min.tasks.prediction_engine import dynamic_graph
    from encoder_throughput import make_inputs
    plain, quantized, report = paired_models(config)
    arrays = make_inputs(config, batch, seq)[:3]
    inputs = [ms.Tensor(x) for x in arrays]
    forwards = {"float32": dynamic_graph(plain), "int8": dynamic_graph(quantized)}
    if torch_threads is not None:
        forwards["torch int8"] = torch_quantized(config, plain, arrays, torch_threads)
    return forwards, inputs, report


def as_numpy(output):
    return output.asnumpy() if hasattr(output, "asnumpy") else output


def torch_quantized(config, plain, arrays, threads):
    """transformers' classifier with ``plain``'s weights (our names are HF's), Linear layers through torch's
    ``quantize_dynamic``: a function of the three id arrays returning the logits as numpy."""
    import torch
    import transformers
    from encoder_throughput import reference_model
    torch.set_num_threads(threads)
    model, _ = reference_model(config, transformers.AlbertForSequenceClassification)
    state = {p.name: torch.from_numpy(p.asnumpy()) for p in plain.get_parameters()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected and all("position_ids" in m for m in missing), (missing, unexpected)
    model.eval()
    model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    ids, types, mask = (torch.from_numpy(x.astype(np.int64)) for x in arrays)

    def forward(*_):
        with torch.no_grad():
            return model(input_ids=ids, token_type_ids=types, attention_mask=mask).logits.numpy()
    return forward


if __name__ == "__main__":
    main()
