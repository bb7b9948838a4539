"""Evaluate an ALBERT sentence classifier on a GLUE-style TSV (SST-2 dev by default).

    python evaluate.py --model weights/sst2-small --data ../shared/data/sst2/dev.tsv

Prints accuracy, F1, precision and recall (binary, positive = label 1), the
confusion matrix and examples/s. --output writes one prediction per row,
--json prints the metrics as JSON instead of the table.
"""

import argparse
import json
import os
import sys

from albert_min import arguments as num
from albert_min.checkpoint import training_max_length

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
    p.add_argument("--data", default=os.path.join("..", "shared", "data", "sst2", "dev.tsv"),
                   help="TSV with header sentence<TAB>label (default: %(default)s)")
    p.add_argument("--batch-size", type=num.positive_int, default=64)
    p.add_argument("--max-length", type=num.max_length, default=None,
                   help="tokens per sentence incl. [CLS]/[SEP] (default: what train.py used, else 128)")
    p.add_argument("--output", help="write predictions here as TSV: sentence, label, prediction, p(positive)")
    p.add_argument("--json", action="store_true", help="print the metrics as JSON")
    p.add_argument("--no-jit", action="store_true", help="PyNative instead of a compiled graph")
    p.add_argument("--no-compile-cache", action="store_true",
                   help="do not keep compiled graphs in $ALBERT_MIN_CACHE (default ~/.cache/albert_min/compile)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p.parse_args(argv)


def format_report(metrics, model_dir, data_path, speed):
    c = metrics["confusion"]
    return "\n".join([
        f"model: {model_dir}",
        f"data:  {data_path} ({metrics['examples']} examples)",
        "",
        f"accuracy   {100 * metrics['accuracy']:6.2f}",
        f"f1         {100 * metrics['f1']:6.2f}",
        f"precision  {100 * metrics['precision']:6.2f}",
        f"recall     {100 * metrics['recall']:6.2f}",
        "",
        "confusion    pred 0  pred 1",
        f"  label 0    {c['tn']:6d}  {c['fp']:6d}",
        f"  label 1    {c['fn']:6d}  {c['tp']:6d}",
        "",
        f"speed: {speed:.1f} examples/s",
    ])


def check_output_file(path):
    """Before the work: ``--output`` must be creatable (an existing folder, writable, not a folder itself)."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise IsADirectoryError(21, "is a folder, not a file", path)
    if not os.path.isdir(folder):
        raise FileNotFoundError(2, "no such folder", folder)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PermissionError(13, "folder not writable", folder)


def write_predictions(path, sentences, labels, predictions, probs):
    """Atomically: to a temporary file beside ``path``, renamed when complete."""
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write("sentence\tlabel\tprediction\tp_positive\n")
            for s, y, pred, p in zip(sentences, labels, predictions, probs):
                f.write(f"{s}\t{y}\t{pred}\t{p:.6f}\n")
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
    from albert_min.data import DataError, read_tsv, check_labels
    if not os.path.isdir(args.model):
        raise FileNotFoundError(f"model folder not found: {args.model}")
    if args.output:
        check_output_file(args.output)
    sentences, labels = read_tsv(args.data)
    import mindspore as ms
    ms.set_device("CPU")
    from albert_min.training import set_cpu_threads
    set_cpu_threads()
    from albert_min.modeling import AlbertForSequenceClassification
    from albert_min.classify import predict, binary_metrics, default_compile_cache
    from tokenizer import AlbertTokenizer
    model = AlbertForSequenceClassification.from_pretrained(args.model)
    if model.config.num_labels != 2:
        raise DataError(f"{args.model} has {model.config.num_labels} labels; this script reports binary metrics")
    check_labels(labels, 2, args.data)
    tokenizer = AlbertTokenizer.from_pretrained(args.model)
    max_length = min(args.max_length or training_max_length(args.model), model.config.max_position_embeddings)
    probs, seconds = predict(model, tokenizer, sentences, args.batch_size, max_length,
                             use_jit=not args.no_jit, progress=not (args.quiet or args.json),
                             cache_dir=None if args.no_compile_cache else default_compile_cache())
    if not np.isfinite(probs).all():
        raise CheckpointError(f"{args.model}: the model gives non-finite outputs (NaN/Inf) on {args.data}; "
                              "its weights or config are broken")
    predictions = probs.argmax(-1)
    metrics = binary_metrics(labels, predictions)
    metrics["examples_per_s"] = len(sentences) / seconds
    if args.output:
        write_predictions(args.output, sentences, labels, predictions, probs[:, 1])
    if args.json:
        print(json.dumps(metrics, indent=2))
    else:
        print(format_report(metrics, args.model, args.data, metrics["examples_per_s"]))
    return metrics


if __name__ == "__main__":
    main()
