"""Where a train step's time goes, per operator category, in albert_min (MindSpore) and transformers (torch).

    /work/refenv/bin/python benchmarks/profile_ops.py           # sst2-small train step (under 1 min)
    /work/refenv/bin/python benchmarks/profile_ops.py --base    # also the albert-base-v2 step (about 4 min)
    /work/refenv/bin/python benchmarks/profile_ops.py --json    # one JSON object
    /work/refenv/bin/python benchmarks/profile_ops.py --forward # also the forward alone (prediction)

The train step is speed.py's ``step_pair``: forward, backward, clipping to
norm 1 and AdamW, the same random inputs and weights in both frameworks;
weights/sst2-small's config at batch 64, seq 32 and, with --base,
albert-base-v2's (random weights) at batch 8, seq 128. With --forward, also
speed.py's encoder rows: the sst2-small encoder in eval mode at batch 64, seq 32
(and base's at batch 32, seq 128 with --base), the path prediction takes
(albert_min's forward kernels, torch under no_grad). After two warm-up
steps each, --steps steps run without a profiler (wall ms/step, median),
then --steps under each profiler: ``mindspore.profiler.profile`` on CPU
(each kernel run's time, joined with the input shapes it records) and
``torch.profiler.profile`` (each op's self CPU time and parents; not
record_shapes, which slows torch's kernels about 3x).

Categories: matmul (with our BiasAdd: torch's addmm adds the bias), layer
norm forward, backward, bias-add grad (BiasAddGrad vs torch's sum under
AddmmBackward0), softmax (+grad, + the loss's log-softmax), GELU (+grad;
ours: ops on [.., intermediate] inputs, torch: ops in transformers'
activation module and their backward functions), dropout, grad clipping
(ours: ops on parameter-shaped inputs outside the Gradients/ scope; torch:
clip_grad_norm_), optimizer, albert_min kernels (every ``Custom`` op of
albert_min/model/kernels, whichever layer's gradient it computes: --shapes tells
them apart by their inputs), other. "sum of ops" against the wall times
shows the time between ops and what the profilers add. MindSpore runs
albert_min's thread count (``albert_min.common.device``: 1, or $ALBERT_MIN_CPU_THREADS with
the kernels), torch --torch-threads. The machine is
shared: ``uptime`` is printed before and after.
torch and transformers are dev-time tools, never imported by albert_min.
"""

import argparse
import contextlib
import glob
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time
from collections import defaultdict

import numpy as np

os.environ.setdefault("GLOG_v", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from speed import MODEL, step_pair  # noqa: E402  (speed.py puts the repository root on sys.path)

CATEGORIES = ["matmul", "layer norm forward", "layer norm backward", "bias-add grad", "softmax (+grad)",
              "gelu (+grad)", "dropout (+grad)", "grad clipping", "optimizer", "albert_min kernels", "other"]
OURS_TYPES = {"matmul": {"MatMul", "BatchMatMul", "BiasAdd"}, "layer norm forward": {"LayerNorm"},
              "layer norm backward": {"LayerNormGrad"}, "bias-add grad": {"BiasAddGrad"},
              "softmax (+grad)": {"Softmax", "SoftmaxGrad", "LogSoftmax", "LogSoftmaxGrad"},
              "gelu (+grad)": {"Sigmoid", "SigmoidGrad", "GeLU", "GeLUGrad", "FastGeLU", "FastGeLUGrad"},
              "dropout (+grad)": {"Dropout", "DropoutGrad"}, "optimizer": {"AdamWeightDecay", "Adam", "AssignAdd"},
              "albert_min kernels": {"Custom"}}
CLIP_TYPES = {"Square", "ReduceSum", "Mul", "Div"}      # ops.clip_by_global_norm's per-gradient ops
TORCH_TYPES = {"matmul": {"aten::mm", "aten::addmm", "aten::bmm", "aten::matmul", "aten::linear"},
               "layer norm forward": {"aten::layer_norm", "aten::native_layer_norm"},
               "layer norm backward": {"aten::native_layer_norm_backward"},
               "softmax (+grad)": {"aten::softmax", "aten::_softmax", "aten::_softmax_backward_data",
                                   "aten::log_softmax", "aten::_log_softmax", "aten::_log_softmax_backward_data"},
               "dropout (+grad)": {"aten::dropout", "aten::native_dropout", "aten::native_dropout_backward"}}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=5, help="steps timed and profiled per framework")
    p.add_argument("--base", action="store_true", help="also profile the albert-base-v2 fine-tuning step")
    p.add_argument("--forward", action="store_true", help="also profile the encoders' forward (prediction)")
    p.add_argument("--torch-threads", type=int, default=1)
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the tables")
    p.add_argument("--shapes", action="store_true",
                   help="also print our 25 costliest (op, input shapes) pairs, forward and gradient apart")
    return p.parse_args()


def categorise(op, types, shapes=(), intermediate=None):
    """The category of one op by its type, else GELU if its first input is [.., intermediate]."""
    for category, names in types.items():
        if op in names:
            return category
    return "gelu (+grad)" if shapes and shapes[0] and shapes[0][-1] == intermediate else "other"


@contextlib.contextmanager
def stdout_to_stderr():
    """MindSpore's profiler analysis (a subprocess) prints progress on stdout; keep it off --json's."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def profiler_lines(directory, pattern):
    paths = glob.glob(os.path.join(directory, "**", pattern), recursive=True)
    return [line for path in paths for line in pathlib.Path(path).read_text().splitlines()]


def ours_ops(fn, steps, intermediate):
    """([(op type, category, ms)] of every kernel run in ``steps`` calls under MindSpore's CPU
    profiler, wall ms/step under it)."""
    from mindspore.profiler import ProfilerActivity, profile, tensorboard_trace_handler
    with tempfile.TemporaryDirectory() as tmp, stdout_to_stderr():
        with profile(activities=[ProfilerActivity.CPU], on_trace_ready=tensorboard_trace_handler(tmp)) as prof:
            start = time.perf_counter()
            for _ in range(steps):
                fn()
                prof.step()
            wall = 1000 * (time.perf_counter() - start) / steps
        runs = []                                       # (start ns, ms, full op name), one per kernel run
        for line in profiler_lines(tmp, "cpu_op_execute_timestamp_*.txt"):  # name;HostCpuOps;start,ms,0 start,..
            name, _, *items = line.replace(";", " ").split()
            runs += [(int(start), float(took), name) for start, took, _ in (item.split(",") for item in items)]
        runs.sort()
        # One line per run, in the same order: type;name;graph id;input_1:[64, 32];input_2:NoShape;..
        info = [line.rstrip(";").split(";") for line in profiler_lines(tmp, "cpu_framework_*.txt")]
    assert len(info) == len(runs) and all(r[2].endswith("/" + i[1]) for r, i in zip(runs, info)), \
        "MindSpore's op timeline and op shapes do not line up"
    shapes = [[json.loads(s.split(":", 1)[1]) for s in inputs if s.split(":", 1)[1].startswith("[")]
              for _, _, _, *inputs in info]
    # Clipping runs as each gradient is ready, between backward ops: its ops are those on parameter-shaped
    # inputs (AdamWeightDecay's first input is a parameter) outside the Gradients/ scope.
    parameters = {str(s[0]) for (op, *_), s in zip(info, shapes) if op == "AdamWeightDecay"}
    ops = []
    for (_, took, name), (op, *_), s in zip(runs, info, shapes):
        if op in CLIP_TYPES and not name.startswith("Gradients/") and s and str(s[0]) in parameters:
            category = "grad clipping"
        elif "_SoftmaxBackward/" in name:               # the softmax grad, expanded to Mul, ReduceSum, Sub
            category = "softmax (+grad)"
        else:
            category = categorise(op, OURS_TYPES, s, intermediate)
        ops.append((op, category, took, shape_key(op, name, s)))
    return ops, wall


def shape_key(op, name, shapes):
    """``MatMul [2048, 128] x [128, 128] (grad)``: one row of the --shapes table."""
    where = " (grad)" if name.startswith("Gradients/") else ""
    return f"{op} {' x '.join(str(x) for x in shapes[:2])}{where}"


@contextlib.contextmanager
def torch_scopes(hidden_act):
    """transformers' activation module and clip_grad_norm_ run in profiler scopes named for their category."""
    import torch
    import transformers
    targets = [(type(transformers.activations.ACT2FN[hidden_act]), "forward", "gelu (+grad)"),
               (torch.nn.utils, "clip_grad_norm_", "grad clipping")]
    originals = [getattr(owner, attr) for owner, attr, _ in targets]

    def scoped(fn, label):
        def run(*args, **kwargs):
            with torch.autograd.profiler.record_function(label):
                return fn(*args, **kwargs)
        return run
    for (owner, attr, label), fn in zip(targets, originals):
        setattr(owner, attr, scoped(fn, label))
    try:
        yield
    finally:
        for (owner, attr, _), fn in zip(targets, originals):
            setattr(owner, attr, fn)


def torch_ops(fn, steps, hidden_act):
    """([(op name, category, ms)]: the self CPU time of every op in ``steps`` calls under torch's
    profiler, wall ms/step under it)."""
    import torch
    with torch_scopes(hidden_act), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        for _ in range(steps):
            fn()
        wall = 1000 * (time.perf_counter() - start) / steps

    def chain(e):                                        # the event and its ancestors, innermost first
        while e is not None:
            yield e
            e = e.cpu_parent
    # The sequence numbers of the activation's forward ops, which their backward functions share.
    gelu = {e.sequence_nr for e in prof.events() if any(p.name == "gelu (+grad)" for p in chain(e))} - {-1}
    ops = []
    for e in prof.events():
        names = [p.name for p in chain(e)]
        backward = next((p for p in chain(e) if p.name.startswith("autograd::engine")), None)
        if backward is not None and backward.sequence_nr in gelu:
            names.append("gelu (+grad)")
        if "grad clipping" in names:
            category = "grad clipping"
        elif "gelu (+grad)" in names:
            category = "gelu (+grad)"
        elif any(n.startswith("Optimizer.") for n in names):
            category = "optimizer"
        elif e.name == "aten::sum" and any(n.endswith("AddmmBackward0") for n in names):
            category = "bias-add grad"
        else:      # ops inside a categorised op count there (bernoulli_ in native_dropout), layout copies do not
            found = [categorise(n, TORCH_TYPES) for n in (names[:1] if e.name == "aten::copy_" else names)]
            category = next((c for c in found if c != "other"), "other")
        ops.append((e.name, category, e.self_cpu_time_total / 1000, e.name))
    return ops, wall


def summary(ops, steps, wall, profiled_wall):
    """ms/step per category and for the 10 costliest raw ops."""
    by_category, by_op, count = defaultdict(float), defaultdict(float), defaultdict(int)
    by_shape, shape_count = defaultdict(float), defaultdict(int)
    for op, category, ms, shape in ops:
        by_category[category] += ms / steps
        by_op[(op, category)] += ms / steps
        count[(op, category)] += 1
        by_shape[shape] += ms / steps
        shape_count[shape] += 1
    top = sorted(by_op, key=by_op.get, reverse=True)[:10]
    top_shapes = sorted(by_shape, key=by_shape.get, reverse=True)[:25]
    return {"wall_ms": wall, "profiled_wall_ms": profiled_wall, "op_sum_ms": sum(by_category.values()),
            "categories": {c: by_category[c] for c in CATEGORIES},
            "top_ops": [{"op": op, "category": c, "ms": by_op[op, c], "per_step": count[op, c] / steps}
                        for op, c in top],
            "top_shapes": [{"op": k, "ms": by_shape[k], "per_step": shape_count[k] / steps} for k in top_shapes]}


def profile_case(name, config, batch, seq, args, train=True):
    ours, ref = step_pair(config, batch, seq, train=train)
    for fn in (ours, ref, ours, ref):
        fn()
    walls = {"ours": [], "torch": []}
    for _ in range(args.steps):                          # alternating, so both see the same load
        for key, fn in (("ours", ours), ("torch", ref)):
            start = time.perf_counter()
            fn()
            walls[key].append(1000 * (time.perf_counter() - start))
    profiled = {"ours": ours_ops(ours, args.steps, config.intermediate_size),
                "torch": torch_ops(ref, args.steps, config.hidden_act)}
    return {"name": f"{name}, batch {batch}, seq {seq}",
            **{key: summary(ops, args.steps, float(np.median(walls[key])), profiled_wall)
               for key, (ops, profiled_wall) in profiled.items()}}


def uptime():
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def print_case(case, shapes=False):
    ours, ref = case["ours"], case["torch"]
    print(f"\n{case['name']}: ms/call\n{'category':<22} {'ours':>9} {'torch':>9} {'ours/torch':>10}")
    rows = [(c, ours["categories"][c], ref["categories"][c]) for c in CATEGORIES]
    rows += [("sum of ops", ours["op_sum_ms"], ref["op_sum_ms"]),
             ("wall, under profiler", ours["profiled_wall_ms"], ref["profiled_wall_ms"]),
             ("wall, no profiler", ours["wall_ms"], ref["wall_ms"])]
    for label, a, b in rows:
        print(f"{label:<22} {a:>9.2f} {b:>9.2f} {a / b if b > 0.005 else float('nan'):>10.2f}")
    for framework, result in (("ours (MindSpore)", ours), ("torch", ref)):
        print(f"\ntop 10 ops, {framework}:\n{'op':<36} {'category':<20} {'runs/step':>9} {'ms/step':>8}")
        for t in result["top_ops"]:
            print(f"{t['op'][:36]:<36} {t['category']:<20} {t['per_step']:>9.0f} {t['ms']:>8.2f}")
    if shapes:
        print(f"\nour costliest ops by input shapes:\n"
              f"{'op, inputs':<58} {'runs/step':>9} {'ms/step':>8} {'ms/run':>7}")
        for t in ours["top_shapes"]:
            print(f"{t['op'][:58]:<58} {t['per_step']:>9.0f} {t['ms']:>8.2f} {t['ms'] / t['per_step']:>7.3f}")


def main():
    args = parse_args()
    import mindspore as ms
    import torch
    from albert_min.model import kernels
    from albert_min.model.config import AlbertConfig
    from albert_min.common.device import cpu_threads, use_device
    use_device("CPU", cpu_setup=kernels.prepare_cpu)
    torch.set_num_threads(args.torch_threads)
    info = {"uptime_before": uptime(), "machine": f"{os.cpu_count()} cores, shared with other jobs",
            "steps": args.steps, "ms_threads": cpu_threads(), "torch_threads": args.torch_threads,
            "mindspore": ms.__version__, "torch": torch.__version__}
    if not args.json:
        print(f"MindSpore {ms.__version__} ({info['ms_threads']} kernel threads), torch {torch.__version__} ({args.torch_threads} "
              f"thread), {args.steps} steps each; {info['machine']}: timings move with its load\n"
              f"uptime before: {info['uptime_before']}")
    cases = [("sst2-small train step", AlbertConfig.from_json_file(os.path.join(MODEL, "config.json")), 64, 32)]
    if args.base:
        cases.append(("base fine-tuning step", AlbertConfig.preset("base"), 8, 128))
    cases = [case + (True,) for case in cases]
    if args.forward:
        cases.append(("sst2-small encoder forward", cases[0][1], 64, 32, False))
        if args.base:
            cases.append(("base encoder forward", AlbertConfig.preset("base"), 32, 128, False))
    results = []
    for name, config, batch, seq, train in cases:
        results.append(profile_case(name, config, batch, seq, args, train))
        if not args.json:
            print_case(results[-1], args.shapes)
    info["uptime_after"] = uptime()
    print(json.dumps({"info": info, "cases": results}, indent=2) if args.json
          else f"\nuptime after: {info['uptime_after']}")


if __name__ == "__main__":
    main()
