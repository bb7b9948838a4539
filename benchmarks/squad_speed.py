"""SQuAD dev prediction (windows per second) against transformers + torch, side by side in one run.

    /work/refenv/bin/python benchmarks/squad_speed.py              # pretrained-small's shape, 150 questions
    /work/refenv/bin/python benchmarks/squad_speed.py --base       # albert-base's shape (slow)
    /work/refenv/bin/python benchmarks/squad_speed.py --json       # one JSON object, for tracking

The model is AlbertForQuestionAnswering with random weights (seed 0) of weights/pretrained-small's
config (or, with --base, albert-base's), the same weights loaded into transformers'
AlbertForQuestionAnswering. The data is dev-v1.1's first --questions questions (written to a
temporary file in SQuAD's layout, which evaluate.py reads too), cut into windows of
--max-length pieces (--doc-stride, --max-query-length; pretrained-small has 128 positions) with
weights/pretrained-small's tokenizer. Rows (ratio = reference seconds / ours: above 1, we are faster):

* prediction, in process: windows cut -> forward in batches of --batch-size -> answers decoded
  -> EM/F1. Ours is ``SquadTask.predict`` + ``score``, as evaluate.py calls them; the reference
  runs the same windows, padded to the same arrays, through transformers' forward and then the
  same decoding. After one warm-up pass each (graphs compiled).
* forward only: the same padded batches, made before the timing.
* evaluate.py --task squad, in a fresh process: the seconds it reports (windows cut to EM/F1,
  graph compiles included, imports and model load not) against the reference's first pass on a
  freshly built model; the process's wall time, imports and model load included, is printed too.

Each timing is the median of --repeats runs, ours and the reference alternating, so both see
the same machine load (``uptime`` is printed before and after). MindSpore runs with
--ms-threads kernel threads; torch is timed at every count in --torch-threads and each row
reports its fastest (speed.py's ``median_pair``). torch and transformers are dev-time tools,
never imported by albert_min.
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

from speed import hf_config_of, median_pair  # noqa: E402

SMALL = os.path.join(ROOT, "weights", "pretrained-small")
DEV = os.path.join(os.path.dirname(ROOT), "shared", "data", "squad", "dev-v1.1.json")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--questions", type=int, default=150, help="dev-v1.1's first N questions (default: %(default)s)")
    p.add_argument("--base", action="store_true", help="albert-base's shape instead of pretrained-small's")
    p.add_argument("--max-length", type=int, default=128, help="window length (default: %(default)s)")
    p.add_argument("--doc-stride", type=int, default=32, help="(default: %(default)s)")
    p.add_argument("--max-query-length", type=int, default=32, help="(default: %(default)s)")
    p.add_argument("--batch-size", type=int, default=64, help="windows per forward pass, evaluate.py's default")
    p.add_argument("--repeats", type=int, default=3, help="runs per timing; the median is reported")
    p.add_argument("--ms-threads", type=int, default=1)
    p.add_argument("--torch-threads", default="1,2",
                   help="torch thread counts to try; each row reports torch at its fastest (default: %(default)s)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    return p.parse_args()


def uptime():
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def first_questions(n, folder):
    """A SQuAD file in ``folder`` holding dev-v1.1's first ``n`` questions."""
    with open(DEV, encoding="utf-8") as f:
        data = json.load(f)
    articles, left = [], n
    for article in data["data"]:
        paragraphs = []
        for paragraph in article["paragraphs"]:
            if left > 0:
                paragraphs.append({**paragraph, "qas": paragraph["qas"][:left]})
                left -= len(paragraphs[-1]["qas"])
        if paragraphs:
            articles.append({**article, "paragraphs": paragraphs})
    path = os.path.join(folder, "dev-first.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({**data, "data": articles}, f)
    return path


def setup(args):
    """(our model, the task, the prepared windows, their count)."""
    import mindspore as ms
    from albert_min.model.config import AlbertConfig
    from albert_min.model.heads import AlbertForQuestionAnswering
    from albert_min.tasks.squad.task import SquadTask
    from tokenizer import AlbertTokenizer
    config = AlbertConfig.preset("base") if args.base else AlbertConfig.from_json_file(os.path.join(SMALL,
                                                                                                   "config.json"))
    ms.set_seed(0)
    from albert_min.model import kernels
    ours = kernels.accelerate(AlbertForQuestionAnswering(config))   # as evaluate.py and pipeline() run it
    ours.set_train(False)
    task = SquadTask("squad", doc_stride=args.doc_stride, max_query_length=args.max_query_length)
    prepared = task.prepare(task.read(args.data), AlbertTokenizer(os.path.join(SMALL, "spiece.model")),
                            args.max_length)
    return ours, task, prepared, sum(1 for _ in prepared.features)


def reference_model(ours):
    """transformers' AlbertForQuestionAnswering with our weights (our parameter names are its names)."""
    import torch
    import transformers
    ref = transformers.AlbertForQuestionAnswering(hf_config_of(ours.config))
    state = {p.name: torch.from_numpy(p.asnumpy().copy()) for p in ours.get_parameters()}
    missing, unexpected = ref.load_state_dict(state, strict=False)
    if unexpected or any("position_ids" not in m for m in missing):
        sys.exit(f"error: weights do not match transformers' names: missing {missing}, unexpected {unexpected}")
    ref.eval()
    return ref


def padded_batches(prepared, batch_size):
    """[(windows, (input_ids, token_type_ids, attention_mask))]: the arrays ``SquadTask.predict`` makes."""
    from albert_min.tasks import prediction_steps
    pad_id = prepared.features.tokenizer.pad_token_id
    for chunk in prediction_steps.chunks(prepared.features, batch_size):
        yield chunk, prediction_steps.padded([f.input_ids for f in chunk], [f.token_type_ids for f in chunk], pad_id,
                                             prepared.max_length, batch_size, use_jit=True)


def torch_logits(ref, arrays):
    import torch
    ids, types, mask = (torch.from_numpy(a.astype(np.int64)) for a in arrays)
    with torch.no_grad():
        out = ref(input_ids=ids, token_type_ids=types, attention_mask=mask)
    return out.start_logits.numpy(), out.end_logits.numpy()


def torch_scored_windows(ref, prepared, batch_size):
    """``SquadTask.predict``'s outputs with transformers' forward in place of ours."""
    for chunk, arrays in padded_batches(prepared, batch_size):
        starts, ends = torch_logits(ref, arrays)
        yield [(f, starts[i, :len(f.input_ids)], ends[i, :len(f.input_ids)]) for i, f in enumerate(chunk)]


def in_process_rows(args, ours, task, prepared, windows, rows):
    from albert_min.tasks import prediction_steps
    ref = reference_model(ours)
    scores = {}

    def ours_pass():
        scores["ours"] = task.score(prepared, task.predict(ours, prepared, batch_size=args.batch_size))

    def ref_pass():
        scores["reference"] = task.score(prepared, torch_scored_windows(ref, prepared, args.batch_size))
    s_ours, s_ref, threads = median_pair(ours_pass, ref_pass, args.repeats, args.torch_threads)
    rows.append(row("prediction in process (windows -> EM/F1)", windows, s_ours, s_ref, threads,
                    f1={k: round(100 * v["f1"], 2) for k, v in scores.items()}))

    batches = [arrays for _, arrays in padded_batches(prepared, args.batch_size)]
    forward = prediction_steps.forward_fn(ours)
    s_ours, s_ref, threads = median_pair(lambda: [prediction_steps.run(forward, a) for a in batches],
                                         lambda: [torch_logits(ref, a) for a in batches],
                                         args.repeats, args.torch_threads)
    rows.append(row("forward only (padded batches made before)", windows, s_ours, s_ref, threads))


def evaluate_rows(args, ours, task, prepared, windows, rows):
    """evaluate.py in a fresh process against a freshly built reference's first pass."""
    import torch
    from albert_min.model.folder import save_model_dir
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = save_model_dir(ours, os.path.join(tmp, "model"), spiece_model=os.path.join(SMALL, "spiece.model"))
        command = [sys.executable, os.path.join(ROOT, "evaluate.py"), "--task", "squad", "--model", model_dir,
                   "--data", args.data, "--max-length", str(args.max_length),
                   "--doc-stride", str(args.doc_stride), "--max-query-length", str(args.max_query_length),
                   "--batch-size", str(args.batch_size), "--json", "--quiet"]
        reported, wall, reference = [], [], {n: [] for n in args.torch_threads}
        for _ in range(args.repeats):
            start = time.perf_counter()
            proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
            wall.append(time.perf_counter() - start)
            if proc.returncode:
                sys.exit(f"error: evaluate.py failed:\n{proc.stderr[-2000:]}")
            reported.append(json.loads(proc.stdout)["seconds"])
            for n in args.torch_threads:
                torch.set_num_threads(n)
                ref = reference_model(ours)
                start = time.perf_counter()
                task.score(prepared, torch_scored_windows(ref, prepared, args.batch_size))
                reference[n].append(time.perf_counter() - start)
    best = min(args.torch_threads, key=lambda n: np.median(reference[n]))
    rows.append(row("evaluate.py --task squad, fresh process", windows, float(np.median(reported)),
                    float(np.median(reference[best])), best, wall_s=round(float(np.median(wall)), 1)))


def row(what, windows, s_ours, s_ref, threads, **extra):
    return {"what": what, "unit": "windows/s", "ours": windows / s_ours, "reference": windows / s_ref,
            "ratio": s_ref / s_ours, "torch_threads": threads, **extra}


def main():
    args = parse_args()
    import mindspore as ms
    import torch
    ms.set_device("CPU")
    ms.device_context.cpu.op_tuning.threads_num(args.ms_threads)
    args.torch_threads = [int(n) for n in args.torch_threads.split(",")]
    before = uptime()
    with tempfile.TemporaryDirectory() as tmp:
        args.data = first_questions(args.questions, tmp)
        ours, task, prepared, windows = setup(args)
        rows = []
        in_process_rows(args, ours, task, prepared, windows, rows)
        evaluate_rows(args, ours, task, prepared, windows, rows)
    c = ours.config
    info = {"date": time.strftime("%Y-%m-%d %H:%M"), "machine": f"{os.cpu_count()} cores",
            "uptime_before": before, "uptime_after": uptime(), "repeats": args.repeats,
            "model": f"{'albert-base' if args.base else 'pretrained-small'} shape, random weights: E={c.embedding_size} "
                     f"H={c.hidden_size} L={c.num_hidden_layers}",
            "data": f"dev-v1.1's first {len(prepared.examples)} questions: {windows} windows "
                    f"of {args.max_length} (stride {args.doc_stride}, query {args.max_query_length}), "
                    f"batch {args.batch_size}",
            "ms_threads": args.ms_threads, "torch_threads": args.torch_threads,
            "mindspore": ms.__version__, "torch": torch.__version__}
    if args.json:
        print(json.dumps({"info": info, "rows": rows}, indent=2))
        return
    print(f"{info['date']}, {info['machine']}, median of {args.repeats}, MindSpore {ms.__version__} "
          f"({args.ms_threads} thread), torch {torch.__version__} (best of {args.torch_threads} threads)")
    print(f"{info['model']}\n{info['data']}\nbefore: {before}\nafter:  {info['uptime_after']}")
    print(f"{'what':<44} {'ours':>9} {'torch':>9} {'unit':<10} {'ratio':>6}  torch threads")
    for r in rows:
        notes = "".join(f", {k} {r[k]}" for k in ("f1", "wall_s") if k in r)
        print(f"{r['what']:<44} {r['ours']:>9.2f} {r['reference']:>9.2f} {r['unit']:<10} {r['ratio']:>6.2f}  "
              f"{r['torch_threads']}{notes}")


if __name__ == "__main__":
    main()
