"""Evaluate an ALBERT classifier (or STS-B regressor) on a GLUE task's file (SST-2 dev by default).

    python evaluate.py --model weights/sst2-small --data ../shared/data/sst2/dev.tsv
    python evaluate.py --model weights/stsb-small --data ../shared/data/glue/STS-B/dev.tsv --json

The task (--task, else from the folder name, else a generic sentence<TAB>label
TSV) decides the file layout and GLUE's metrics: Matthews correlation (CoLA),
F1 and accuracy (MRPC, QQP), Pearson and Spearman (STS-B), accuracy (the rest).
Binary tasks also get precision, recall (positive = label 1) and the confusion
matrix. --json prints the metrics as JSON instead of the table; --output writes
the predictions in GLUE's submission layout (index<TAB>prediction), also for a
test file without labels.
"""

import argparse
import json
import os
import sys

from albert_min import arguments as num

# MindSpore logs WARNINGs (deprecations, compile-cache misses) to stderr; errors only, unless the user sets GLOG_v.
os.environ.setdefault("GLOG_v", "3")

HOW_TO_GET_A_MODEL = """\
error: no model given (--model weights/DIR).
A model folder holds config.json, model.ckpt and spiece.model. To get one:
  * train a small one from scratch on SST-2 (about 30 min on 2 CPU cores):
      python train.py --train ../shared/data/sst2/train.tsv --dev ../shared/data/sst2/dev.tsv --output weights/sst2-small
  * or convert a public ALBERT checkpoint fine-tuned on SST-2 (pytorch_model.bin,
    model.safetensors or a TF model.ckpt-*), without torch or tensorflow:
      python -m albert_min.convert path/to/checkpoint weights/albert-sst2
    (a pre-trained-only checkpoint must then be fine-tuned: train.py --init weights/DIR)"""


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", help="model folder (config.json, model.ckpt, spiece.model)")
    from albert_min.glue import TASK_NAMES
    p.add_argument("--data", default=os.path.join("..", "shared", "data", "sst2", "dev.tsv"),
                   help="a GLUE task's TSV in its official layout (default: %(default)s)")
    p.add_argument("--task", choices=TASK_NAMES,
                   help="the data's task (default: from its folder name, else cls: sentence<TAB>label)")
    p.add_argument("--batch-size", type=num.positive_int, default=64)
    p.add_argument("--max-length", type=num.max_length, default=None,
                   help="tokens per sentence incl. [CLS]/[SEP] (default: what train.py used, else 128)")
    p.add_argument("--output", help="write predictions here in GLUE's submission layout: index<TAB>prediction")
    p.add_argument("--json", action="store_true", help="print the metrics as JSON")
    p.add_argument("--no-jit", action="store_true", help="PyNative instead of a compiled graph")
    p.add_argument("--no-compile-cache", action="store_true",
                   help="do not keep compiled graphs in $ALBERT_MIN_CACHE (default ~/.cache/albert_min/compile)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p.parse_args(argv)


REPORTED = ("accuracy", "f1", "precision", "recall", "matthews", "pearson", "spearman")


def format_report(metrics, model_dir, data_path, speed, task=None):
    """The table: the task's GLUE metrics first (in percent), then the binary extras.
    SST-2's and the generic task's table has stayed the same since the first release."""
    lines = [f"model: {model_dir}", f"data:  {data_path} ({metrics['examples']} examples)"]
    if task is not None and task.name not in ("sst2", "cls"):
        lines.append(f"task:  {task.name}")
    lines.append("")
    order = (task.metrics if task is not None else ()) + REPORTED
    for name in dict.fromkeys(k for k in order if k in metrics):
        lines.append(f"{name:<10} {100 * metrics[name]:6.2f}")
    if "confusion" in metrics:
        c = metrics["confusion"]
        lines += ["", "confusion    pred 0  pred 1",
                  f"  label 0    {c['tn']:6d}  {c['fp']:6d}",
                  f"  label 1    {c['fn']:6d}  {c['tp']:6d}"]
        if task is not None and task.label_names and task.label_names != ("0", "1"):
            lines.append(f"  (label 0 = {task.label_names[0]}, label 1 = {task.label_names[1]})")
    lines += ["", f"speed: {speed:.1f} examples/s"]
    return "\n".join(lines)


def check_output_file(path):
    """Before the work: ``--output`` must be creatable (an existing folder, writable, not a folder itself)."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise IsADirectoryError(21, "is a folder, not a file", path)
    if not os.path.isdir(folder):
        raise FileNotFoundError(2, "no such folder", folder)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PermissionError(13, "folder not writable", folder)


def write_predictions(path, index, predictions):
    """GLUE's submission layout, ``index<TAB>prediction`` with a header; predictions are
    strings (label names or scores). Atomically: to a temporary file beside ``path``,
    renamed when complete."""
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write("index\tprediction\n")
            for i, prediction in zip(index, predictions):
                f.write(f"{i}\t{prediction}\n")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def main(argv=None):
    args = parse_args(argv)
    if not args.model:
        sys.exit(HOW_TO_GET_A_MODEL)
    from albert_min.errors import AlbertMinError
    try:
        return evaluate(args)
    except (AlbertMinError, OSError) as err:
        sys.exit(f"error: {num.os_error_text(err) if isinstance(err, OSError) else err}")


def evaluate(args):
    import numpy as np
    from albert_min.checkpoint import CheckpointError
    from albert_min.checkpoint import training_max_length
    from albert_min.data import DataError
    from albert_min import glue
    if not os.path.isdir(args.model):
        raise FileNotFoundError(f"model folder not found: {args.model}")
    if args.output:
        check_output_file(args.output)
    from albert_min.tasks import get_task, infer_task
    registered = get_task(args.task or infer_task(args.data))
    task = registered.spec   # the GLUE layout, labels and metrics that this script reports
    examples = registered.read(args.data)
    if examples.labels is None and not args.output:
        raise DataError(f"{args.data} has no labels to score; pass --output to write its predictions")
    import mindspore as ms
    ms.set_device("CPU")
    from albert_min.training import set_cpu_threads
    set_cpu_threads()
    from albert_min.modeling import AlbertForSequenceClassification
    from albert_min.classify import predict_logits, default_compile_cache
    from tokenizer import AlbertTokenizer
    model = AlbertForSequenceClassification.from_pretrained(args.model)
    registered.check_model(model.config, examples, args.model)
    tokenizer = AlbertTokenizer.from_pretrained(args.model)
    max_length = min(args.max_length or training_max_length(args.model), model.config.max_position_embeddings)
    logits, seconds = predict_logits(model, tokenizer, examples.texts, examples.text_pairs, args.batch_size,
                                     max_length, use_jit=not args.no_jit, progress=not (args.quiet or args.json),
                                     cache_dir=None if args.no_compile_cache else default_compile_cache())
    if not np.isfinite(logits).all():
        raise CheckpointError(f"{args.model}: the model gives non-finite outputs (NaN/Inf) on {args.data}; "
                              "its weights or config are broken")
    order = glue.model_label_order(task, model.config.id2label)
    if order is not None:   # the model's output columns -> the task's label ids
        logits = logits[:, [order.index(j) for j in range(len(order))]]
    if args.output:
        if task.is_regression:
            shown = [f"{x:.3f}" for x in logits[:, 0]]
        else:
            names = glue.label_strings(task, model.config.num_labels)
            shown = [names[i] for i in logits.argmax(-1)]
        write_predictions(args.output, examples.index, shown)
    if examples.labels is None:
        print(f"{args.data}: no labels; wrote {len(examples)} predictions to {args.output}")
        return {"task": task.name, "examples": len(examples)}
    metrics = {"task": task.name, **glue.evaluation_metrics(task, examples.labels, logits)}
    metrics["examples_per_s"] = len(examples) / seconds
    if args.json:
        # JSON has no NaN: an undefined correlation (constant predictions) is null.
        print(json.dumps({k: None if isinstance(v, float) and v != v else v for k, v in metrics.items()}, indent=2))
    else:
        print(format_report(metrics, args.model, args.data, metrics["examples_per_s"], task))
    return metrics


if __name__ == "__main__":
    main()
