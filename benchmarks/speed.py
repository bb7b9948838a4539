"""Every speed goal of albert_min against transformers + torch, measured side by side in one run.

    /work/refenv/bin/python benchmarks/speed.py            # all rows (about 10 min on 2 busy cores)
    /work/refenv/bin/python benchmarks/speed.py --quick    # SST-2 rows only
    /work/refenv/bin/python benchmarks/speed.py --json     # one JSON object, for tracking
    /work/refenv/bin/python benchmarks/speed.py --only step    # the two train-step rows

Rows (ratio = reference seconds / our seconds: above 1 means we are faster):

* evaluate.py end to end on SST-2 dev with weights/sst2-small: model load ->
  tokenise -> predict -> metrics, imports excluded. Ours runs evaluate.py's
  own main() in fresh subprocesses, first with an empty compile cache
  ($ALBERT_MIN_CACHE; cold), then again with the cache it left (warm). The
  reference builds transformers' AlbertForSequenceClassification, loads the
  same weights from a torch checkpoint, and predicts the same token ids in
  length-sorted batches of 64. "steady" is a second predict in the same
  process (graphs compiled, weights loaded).
* sst2-small encoder (batch 64, seq 32) and train step (forward, backward,
  clipping, AdamW; batch 64, seq 32); base encoder (batch 32, seq 128) and
  base fine-tuning step (batch 8, seq 128): random ids with padded rows,
  the same weights in both frameworks.
* base int8 prediction (batch 32, seq 128; skipped by --quick): a random albert-base-sized
  classifier after ``kernels.quantize_int8`` against transformers' with the same weights after
  torch's ``quantize_dynamic``, and against our float32 graph ("torch" column: our fp32), built
  by benchmarks/int8_speed.py; peak fractions of the int8 peak (our fp32: of the fp32 peak).

Each timing is the median of --repeats runs, ours and the reference
alternating, so both see the same machine load (printed with ``uptime``).
MindSpore runs with --ms-threads kernel threads (default: albert_min's choice,
1 unless $ALBERT_MIN_CPU_THREADS says otherwise); torch is timed at every count in
--torch-threads (default 1 and 2) and each row reports its fastest.

* whole processes, imports included (benchmarks/whole_process.py): ``python evaluate.py`` on
  SST-2 dev against transformers' ``pipeline`` on the same model converted with ``--to hf``,
  and ``python train.py`` for --train-steps steps against the same loop in torch.
torch and transformers are dev-time tools, never imported by albert_min.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gemm_peak import (SHAPES, SMALL_SHAPES, encoder_flops, isa_flags, isa_text, machine_peaks,  # noqa: E402
                       openblas_variables)   # (benchmarks/ is on the path above)
from low_precision_rows import BF16_ROW, INT8_ROWS, bf16_rows, int8_rows  # noqa: E402

MODEL = os.path.join(ROOT, "weights", "sst2-small")
DEV = os.path.join(os.path.dirname(ROOT), "shared", "data", "sst2", "dev.tsv")

# Our evaluate.py, called as `python evaluate.py --model M --data D --json --quiet` runs it
# (evaluate.main), timed from after the imports; in a subprocess so that "cold" really is a
# fresh process with nothing compiled, and with $ALBERT_MIN_CACHE as the compile cache.
# "steady" is a second prediction of the same graphs (predict_logits, as evaluate.py calls it).
OURS_EVAL = r"""
import contextlib, io, json, sys, time
import mindspore as ms
from albert_min.common.device import use_device
from albert_min.model import kernels as _kernels
use_device("CPU", cpu_threads=int(sys.argv[3]) or None, cpu_setup=_kernels.prepare_cpu)   # first call wins: evaluate.py's own keeps this count
import evaluate                            # and what evaluate.py imports as it runs: imports are not timed
from albert_min import tasks
from albert_min.common import safe_output
from albert_min.model import folder as checkpoint, kernels, modeling
from albert_min.tasks import prediction_engine
from albert_min.tasks.glue import metric as glue_metric, reading as glue_reading, task as glue_task
from tokenizer import AlbertTokenizer
model_dir, data = sys.argv[1:3]
argv = ["--model", model_dir, "--data", data, "--json", "--quiet"]
start = time.perf_counter()
with contextlib.redirect_stdout(io.StringIO()):
    metrics = evaluate.main(argv)
end_to_end = time.perf_counter() - start
steady = []
if int(sys.argv[4]):
    model, tokenizer, max_length = evaluate.load_classifier(model_dir)
    texts = tasks.get_task("sst2").read(data).texts
    batch_size = evaluate.parse_args(argv).batch_size
    for _ in range(1 + int(sys.argv[4])):   # the first compiles this model's graphs
        steady.append(prediction_engine.predict_logits(model, tokenizer, texts, None, batch_size, max_length,
                                                       progress=False)[1])
print(json.dumps({"end_to_end": end_to_end, "steady": steady[1:], "accuracy": metrics["accuracy"]}))
"""


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=3, help="runs per timing; the median is reported")
    p.add_argument("--quick", action="store_true", help="skip the base-size rows")
    p.add_argument("--only", default="", help="run only the rows whose name contains this text (e.g. 'step')")
    p.add_argument("--ms-threads", type=int, default=0,
                   help="MindSpore CPU kernel threads (default 0: albert_min's own choice, 1 unless $ALBERT_MIN_CPU_THREADS)")
    p.add_argument("--train-steps", type=int, default=20, help="train steps of the whole-process train.py row")
    p.add_argument("--torch-threads", default="1,2",
                   help="torch thread counts to try; each row reports torch at its fastest (default: %(default)s)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    p.add_argument("--gemm-shapes", choices=("all", "small"), default="all",
                   help="the GEMM peaks' shapes (benchmarks/gemm_peak.py); small: a quick check only")
    return p.parse_args()


def median_pair(ours, reference, repeats, torch_threads):
    """Median seconds of ours and of the reference at its best thread count, all run
    alternately ``repeats`` times after a warm-up. Returns (ours, reference, threads)."""
    import torch
    ours()
    for n in torch_threads:
        torch.set_num_threads(n)
        reference()
    a, b = [], {n: [] for n in torch_threads}
    for _ in range(repeats):
        start = time.perf_counter()
        ours()
        a.append(time.perf_counter() - start)
        for n in torch_threads:
            torch.set_num_threads(n)
            start = time.perf_counter()
            reference()
            b[n].append(time.perf_counter() - start)
    best = min(torch_threads, key=lambda n: np.median(b[n]))
    return float(np.median(a)), float(np.median(b[best])), best


# ------------------------------------------------------------------ evaluate.py
def torch_eval(torch_dir, encoded, labels, hf_config):
    """The reference's evaluate: build, load a torch checkpoint, predict sorted batches, metrics."""
    import torch
    import transformers
    from albert_min.tasks.glue.metric import binary_metrics
    from albert_min.tasks.batching import eval_batches, pad_batch
    start = time.perf_counter()
    model = transformers.AlbertForSequenceClassification(hf_config)
    model.load_state_dict(torch.load(os.path.join(torch_dir, "pytorch_model.bin")), strict=False)
    model.eval()

    def predict():
        t0 = time.perf_counter()
        probs = np.zeros((len(encoded), 2), np.float32)
        with torch.no_grad():
            for idx, rows in eval_batches(encoded, 64):
                ids, types, mask = (torch.from_numpy(a.astype(np.int64)) for a in pad_batch(rows, 0))
                probs[idx] = model(input_ids=ids, token_type_ids=types, attention_mask=mask).logits.softmax(-1).numpy()
        return probs, time.perf_counter() - t0

    probs, _ = predict()
    metrics = binary_metrics(labels, probs.argmax(-1))
    return time.perf_counter() - start, predict()[1], metrics["accuracy"]


def hf_config_of(config):
    import transformers
    hf = transformers.AlbertConfig(**{k: v for k, v in config.to_dict().items()
                                      if k not in ("model_type", "id2label", "num_labels")},
                                   num_labels=config.num_labels)
    hf._attn_implementation = "eager"
    return hf


def evaluate_rows(args, rows):
    import torch
    from albert_min.tasks.batching import encode_single_sentences
    from albert_min.tasks.text_files import read_tsv
    from albert_min.model.heads import AlbertForSequenceClassification
    from tokenizer import AlbertTokenizer
    from albert_min.model import kernels
    ours_model = kernels.accelerate(AlbertForSequenceClassification.from_pretrained(MODEL))   # as evaluate.py
    tokenizer = AlbertTokenizer.from_pretrained(MODEL)
    sentences, labels = read_tsv(DEV)
    encoded = encode_single_sentences(tokenizer, sentences, 64)
    hf_config = hf_config_of(ours_model.config)
    with tempfile.TemporaryDirectory() as tmp:
        torch.save({p.name: torch.from_numpy(p.asnumpy()) for p in ours_model.get_parameters()},
                   os.path.join(tmp, "pytorch_model.bin"))
        env = dict(os.environ, PYTHONPATH=ROOT)
        script = os.path.join(tmp, "ours_evaluate.py")     # a file: MindSpore's cache hashes the entry script
        with open(script, "w") as f:
            f.write(OURS_EVAL)
        cold, warm, steady, ref_e2e, ref_steady = [], [], [], {}, {}
        for rep in range(args.repeats):
            cache = os.path.join(tmp, f"cache{rep}")
            for out in (cold, warm):
                proc = subprocess.run([sys.executable, script, MODEL, DEV, str(args.ms_threads or 0),
                                       "1" if out is warm else "0"],
                                      cwd=ROOT, env=dict(env, ALBERT_MIN_CACHE=cache), capture_output=True,
                                      text=True)
                if proc.returncode:
                    sys.exit(f"error: our evaluate run failed:\n{proc.stderr[-2000:]}")
                result = json.loads(proc.stdout.strip().splitlines()[-1])
                out.append(result["end_to_end"])
                steady += result["steady"]
            for threads in args.torch_threads:
                torch.set_num_threads(threads)
                e2e, st, ref_accuracy = torch_eval(tmp, encoded, labels, hf_config)
                ref_e2e.setdefault(threads, []).append(e2e)
                ref_steady.setdefault(threads, []).append(st)
    n = len(sentences)
    flops = encoder_flops(ours_model.config, [len(ids) for ids in encoded])   # useful FLOPs: unpadded lengths
    best = min(ref_e2e, key=lambda t: np.median(ref_e2e[t]))
    ref = float(np.median(ref_e2e[best]))
    for name, ours in (("evaluate.py end to end, cold cache", cold), ("evaluate.py end to end, warm cache", warm)):
        rows.append({"what": name, "unit": "s", "ours": float(np.median(ours)), "reference": ref,
                     "ratio": ref / float(np.median(ours)), "torch_threads": best, "gflop": flops / 1e9,
                     "seconds": {"ours": float(np.median(ours)), "reference": ref}})
    best = min(ref_steady, key=lambda t: np.median(ref_steady[t]))
    ours_st, ref_st = float(np.median(steady)), float(np.median(ref_steady[best]))
    rows.append({"what": "evaluate steady state (2nd predict)", "unit": "ex/s", "ours": n / ours_st,
                 "reference": n / ref_st, "ratio": ref_st / ours_st, "torch_threads": best, "gflop": flops / 1e9,
                 "seconds": {"ours": ours_st, "reference": ref_st}})
    rows[-1]["accuracy"] = {"ours": result["accuracy"], "reference": ref_accuracy}


# --------------------------------------------------------- encoder / train step
def step_pair(config, batch, seq, train):
    """(ours, reference): zero-argument callables running one encoder forward (eval mode)
    or, with ``train``, one train step of the classifier, on the same random inputs
    and the same weights in both frameworks."""
    import mindspore as ms
    from encoder_throughput import make_inputs, reference_model
    import torch
    import transformers
    from albert_min.model.modeling import AlbertModel
    from albert_min.model.heads import AlbertForSequenceClassification
    from albert_min.training.step import linear_warmup_decay, make_optimizer, make_train_step, quiet_recompile_warning
    from mindspore import ops
    quiet_recompile_warning()   # each train-step row builds its own "train_step": compiling it again is the point
    inputs = make_inputs(config, batch, seq, seed=1 if train else 0)
    ms.set_seed(0)
    from albert_min.model import kernels
    ours = kernels.accelerate((AlbertForSequenceClassification if train else AlbertModel)(config))   # as run
    ref, _ = reference_model(config, transformers.AlbertForSequenceClassification if train else None)
    state = {p.name: torch.from_numpy(p.asnumpy().copy()) for p in ours.get_parameters()}
    ref.load_state_dict(state, strict=False)
    tensors = [ms.Tensor(x) for x in inputs]
    t = [torch.from_numpy(x.astype(np.int64)) for x in inputs]
    if train:
        ours.set_train(True)
        optimizer = make_optimizer(ours, linear_warmup_decay(2e-5, 1000, 0.1), 0.01)

        def loss_fn(input_ids, token_type_ids, attention_mask, labels):
            return ops.cross_entropy(ours(input_ids, token_type_ids, attention_mask), labels)

        step = make_train_step(loss_fn, optimizer, 1.0)
        ref.train()
        ref_opt = torch.optim.AdamW(ref.parameters(), lr=2e-5, weight_decay=0.01)

        def ours_fn():
            step(*tensors).asnumpy()

        def ref_fn():
            loss = torch.nn.functional.cross_entropy(
                ref(input_ids=t[0], token_type_ids=t[1], attention_mask=t[2]).logits, t[3])
            ref_opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(ref.parameters(), 1.0)
            ref_opt.step()
    else:
        ours.set_train(False)
        ref.eval()
        forward = ms.jit(ours.construct)

        def ours_fn():
            forward(*tensors[:3])[0].asnumpy()

        def ref_fn():
            with torch.no_grad():
                ref(input_ids=t[0], token_type_ids=t[1], attention_mask=t[2])

    return ours_fn, ref_fn


def throughput_rows(args, rows, name, config, batch, seq, train):
    if args.only not in name:
        return
    ours_fn, ref_fn = step_pair(config, batch, seq, train)
    s_ours, s_ref, threads = median_pair(ours_fn, ref_fn, args.repeats, args.torch_threads)
    unit, scale = ("steps/s", 1) if train else ("sent/s", batch)
    flops = encoder_flops(config, [seq] * batch, train=train, classifier=train)
    rows.append({"what": f"{name}, batch {batch}, seq {seq}", "unit": unit, "ours": scale / s_ours,
                 "reference": scale / s_ref, "ratio": s_ref / s_ours, "torch_threads": threads,
                 "gflop": flops / 1e9, "seconds": {"ours": s_ours, "reference": s_ref}})


# Issue 29's, 38's and 43's goals (ratio = the reference's time / ours).
GOALS = {"python evaluate.py whole process, cold": 2.5, "python evaluate.py whole process, warm": 3.0,
         "python train.py whole process": 1.0,
         "evaluate.py end to end, cold cache": 0.5, "evaluate.py end to end, warm cache": 0.8,
         "evaluate steady state (2nd predict)": 1.0, "sst2-small train step": 1.0,
         "base fine-tuning step": 1.0, "base encoder": 1.2, "sst2-small encoder": 1.2,
         INT8_ROWS[0]: 1.3, INT8_ROWS[1]: 2.0, BF16_ROW: 1.0}


# The row groups main() runs, in order: (row names, function(args, rows) appending the rows that
# args.only selects, base-sized: skipped by --quick). A new row (e.g. a bf16 train step) is one
# entry here and its goal in GOALS.
def _throughput(name, config, batch, seq, train):
    def rows_of(args, rows):
        from albert_min.model.config import AlbertConfig
        shape = (AlbertConfig.from_json_file(os.path.join(MODEL, "config.json")) if config == "sst2-small"
                 else AlbertConfig.preset(config))
        throughput_rows(args, rows, name, shape, batch, seq, train)
    return (f"{name}, batch {batch}, seq {seq}",), rows_of, config != "sst2-small"


ROW_GROUPS = [
    (("evaluate.py end to end, cold cache", "evaluate.py end to end, warm cache",
      "evaluate steady state (2nd predict)"), lambda args, rows: evaluate_rows(args, rows), False),
    _throughput("sst2-small encoder", "sst2-small", 64, 32, train=False),
    _throughput("sst2-small train step", "sst2-small", 64, 32, train=True),
    _throughput("base encoder", "base", 32, 128, train=False),
    _throughput("base fine-tuning step", "base", 8, 128, train=True),
    (INT8_ROWS, int8_rows, True),
    ((BF16_ROW,), bf16_rows, True),
]


PEAK_NAMES = {"fp32": "fp32 dnnl_sgemm", "bf16": "bf16 dnnl_gemm_bf16bf16f32", "int8": "int8 dnnl_gemm_u8s8s32",
              "openblas": "fp32 OpenBLAS (environment as set)", "openblas_unset": "fp32 OpenBLAS (OPENBLAS_* unset)"}


def header_lines(peaks):
    """The machine as the rows saw it: instruction sets, the OPENBLAS_* variables, the GEMM peaks."""
    variables = " ".join(f"{k}={v}" for k, v in openblas_variables().items()) or "none set"
    shown = "; ".join(f"{PEAK_NAMES[kind]} " + " / ".join(f"{g:.0f}" for g in by_threads.values())
                      for kind, by_threads in peaks.items())
    return [f"ISA: {isa_text()}; OPENBLAS_* variables: {variables}",
            f"GEMM peaks, GFLOP/s at 1 / 2 threads (benchmarks/gemm_peak.py): {shown}",
            "peak = ours / torch matmul GFLOP/s as a fraction of the fp32 peak (a bf16 or int8 row: of its dtype's)"]


def goal_of(what):
    for key, goal in GOALS.items():
        if what.startswith(key):
            return goal
    return None


def main():
    args = parse_args()
    import mindspore as ms
    import torch
    from albert_min.model import kernels
    from albert_min.common.device import cpu_threads, use_device
    use_device("CPU", cpu_threads=args.ms_threads or None, cpu_setup=kernels.prepare_cpu)
    args.ms_threads = cpu_threads()
    args.torch_threads = [int(n) for n in args.torch_threads.split(",")]
    load = os.getloadavg()
    rows = []
    for names, add_rows, base_sized in ROW_GROUPS:
        if any(args.only in name for name in names) and not (args.quick and base_sized):
            add_rows(args, rows)
    peaks = machine_peaks(repeats=5, shapes=SMALL_SHAPES if args.gemm_shapes == "small" else SHAPES)
    for row in rows:
        row["goal"] = goal_of(row["what"])
        # matmul GFLOP/s achieved, as a fraction of the machine's peak for the row's dtype (fp32 unless
        # the row says bf16 or int8), at its best thread count
        dtypes = row.get("dtypes", {})
        row["peak_fraction"] = {who: row["gflop"] / sec / max(peaks[dtypes.get(who, row.get("dtype", "fp32"))].values())
                                for who, sec in row.pop("seconds").items()}
    from whole_process import whole_process_rows
    processes = []
    whole_process_rows(args, processes)
    for row in processes:
        rows.append({**row, "unit": "s", "torch_threads": "default", "goal": goal_of(row["what"]),
                     "peak_fraction": None})
    info = {"date": time.strftime("%Y-%m-%d %H:%M"), "machine": f"{os.cpu_count()} cores",
            "load_before": load, "load_after": os.getloadavg(), "repeats": args.repeats,
            "ms_threads": args.ms_threads, "torch_threads": args.torch_threads,
            "mindspore": ms.__version__, "torch": torch.__version__,
            "gemm_peak_gflops": peaks, "isa": isa_flags(), "openblas_env": openblas_variables()}
    if args.json:
        print(json.dumps({"info": info, "rows": rows}, indent=2))
        return
    print(f"{info['date']}, {info['machine']}, load {load[0]:.1f} -> {info['load_after'][0]:.1f}, "
          f"median of {args.repeats}, MindSpore {ms.__version__} ({args.ms_threads} thread), "
          f"torch {torch.__version__} (best of {args.torch_threads} threads)")
    print("\n".join(header_lines(peaks)))
    print(f"{'what':<52} {'ours':>10} {'torch':>10} {'unit':<7} {'ratio':>6} {'goal':>6} {'peak':>11}  torch threads")
    for r in rows:
        goal = f">={r['goal']}" if r["goal"] else ""
        peak_fraction = r["peak_fraction"]
        fraction = f"{peak_fraction['ours']:.2f}/{peak_fraction['reference']:.2f}" if peak_fraction else ""
        print(f"{r['what']:<52} {r['ours']:>10.3f} {r['reference']:>10.3f} {r['unit']:<7} {r['ratio']:>6.2f} "
              f"{goal:>6} {fraction:>11}  {r['torch_threads']}")


if __name__ == "__main__":
    main()
