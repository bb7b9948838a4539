"""Evaluate an ALBERT model on a GLUE task's file (SST-2 dev by default), SQuAD, RACE or CoNLL-2003.

    python evaluate.py --model weights/sst2-small --data ../shared/data/sst2/dev.tsv
    python evaluate.py --model weights/stsb-small --data ../shared/data/glue/STS-B/dev.tsv --json
    python evaluate.py --model weights/squad-small --data ../shared/data/squad/dev-v1.1.json --output predictions.json

SQuAD v1.1/v2.0 (a .json), RACE (a split or level folder) and CoNLL-2003 (an eng.* file) are
scored with their official metrics, and --output writes their official prediction files
(predictions.json and null_odds.json; {"high10024.txt": ["C", ...]}; conlleval's columns);
docs/tasks.md.

The task (--task, else from the folder name, else a generic sentence<TAB>label
TSV) decides the file layout and GLUE's metrics: Matthews correlation (CoLA),
F1 and accuracy (MRPC, QQP), Pearson and Spearman (STS-B), accuracy (the rest).
Binary tasks also get the confusion matrix, and precision, recall and F1 of
label 1 where it is a positive class (not the inference tasks RTE, QNLI, WNLI,
whose label 1 is not_entailment or entailment: accuracy alone, as GLUE reports).
The table prints percent; --json prints fractions (0.8142), and says so with
"scale": "fraction". A metric the data leaves undefined (precision with no
positive prediction, a correlation with constant predictions) prints as n/a with
the reason (JSON: null, the reason under "notes"). --output writes the
predictions in GLUE's submission layout (index<TAB>prediction), also for a test
file without labels.
"""

import argparse
import contextlib
import json
import os
import sys

from albert_min import arguments as num
from albert_min.common.device import add_device_flag
from albert_min.common.errors import fail, reported_errors

# MindSpore logs WARNINGs (deprecations, compile-cache misses) to stderr; errors only, unless the user sets GLOG_v.
os.environ.setdefault("GLOG_v", "3")

# In a clone (albert_min/ beside train.py, evaluate.py and weights/): its committed model folders, and the
# commands as `python evaluate.py`; installed: weights/ in the current folder, `python -m albert_min.evaluate`.
_CLONE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IN_A_CLONE = os.path.isfile(os.path.join(_CLONE, "evaluate.py"))
WEIGHTS = os.path.join(_CLONE, "weights") if IN_A_CLONE else "weights"
EVALUATE, TRAIN = ("python evaluate.py", "python train.py") if IN_A_CLONE else \
    ("python -m albert_min.evaluate", "python -m albert_min.train")
TRAINING_METRICS = "train_metrics.json"   # what train.py records next to the model it keeps


def how_to_get_a_model(weights=WEIGHTS):
    """The message for a run without --model (after ``error: ``): the model folders ready in ``weights``
    first (with the dev accuracy training recorded), then how to train or convert one, into a
    folder that does not exist yet (train.py refuses to replace one without --force)."""
    lines = ["no model given (--model DIR).",
             "A model folder holds config.json, model.ckpt (or model.safetensors) and spiece.model."]
    ready = []
    for name in sorted(os.listdir(weights)) if os.path.isdir(weights) else []:
        folder = os.path.join(weights, name)
        has_weights = any(os.path.isfile(os.path.join(folder, n)) for n in ("model.ckpt", "model.safetensors"))
        record = training_record(folder) if has_weights else {}
        if isinstance(record.get("dev_accuracy"), float):   # a classifier train.py kept by its dev score
            task = f" on {record['task']}" if isinstance(record.get("task"), str) else ""
            ready.append((f"{EVALUATE} --model {os.path.relpath(folder)}",
                          f"(trained{task}: dev accuracy {100 * record['dev_accuracy']:.2f})"))
    if ready:
        width = max(len(command) for command, _ in ready)
        lines += [f"Ready in {'this clone' if IN_A_CLONE else os.path.relpath(weights)} (SST-2 dev is --data's default):"]
        lines += [f"  {command:<{width}}  {note}" for command, note in ready]
    output = os.path.join(os.path.relpath(weights), "sst2-mine")
    suffix = 1
    while os.path.exists(output) or os.path.exists(output + ".state"):
        suffix += 1
        output = os.path.join(os.path.relpath(weights), f"sst2-mine-{suffix}")
    lines += [
        "To make one:" if ready else "To get one:",
        "  * train a small one from scratch on SST-2 (about 20 min on 2 CPU cores), as the README does:",
        f"      {TRAIN} --train ../shared/data/sst2/train.tsv --dev ../shared/data/sst2/dev.tsv "
        f"--dropout 0.2 --eval-every 300 --output {output}",
        "  * or convert a public ALBERT checkpoint fine-tuned on SST-2 (pytorch_model.bin,",
        "    model.safetensors or a TF model.ckpt-*), without torch or tensorflow:",
        "      python -m albert_min.convert path/to/checkpoint weights/albert-sst2",
        f"    (a pre-trained-only checkpoint must then be fine-tuned: {TRAIN} --init weights/DIR)"]
    return "\n".join(lines)


def training_record(model_dir):
    """The record train.py kept with the model (its train_metrics.json), {} when there is none
    or it is not a JSON object: used for messages and checks only, never for a score."""
    from albert_min.model.config import ConfigError, read_json_object
    path = os.path.join(model_dir, TRAINING_METRICS)
    try:
        return read_json_object(path) if os.path.isfile(path) else {}
    except ConfigError:
        return {}


def parse_args(argv=None):
    return build_parser().parse_args(argv)


def build_parser():
    p = argparse.ArgumentParser(prog=num.command_name("albert_min.evaluate"), description=__doc__.split("\n\n")[0],
                                formatter_class=num.Help)
    p.add_argument("--model", help="model folder (config.json, model.ckpt or model.safetensors, spiece.model) "
                                    "(default: none; lists the folders ready in weights/)")
    from albert_min.tasks import TASK_ALIASES, TASK_NAMES, task_name
    p.add_argument("--data", default=os.path.join("..", "shared", "data", "sst2", "dev.tsv"),
                   help="a GLUE task's TSV in its official layout, a SQuAD .json (FILE.json:FIRST-LAST: its "
                        "articles FIRST to LAST), a RACE split or level folder, a CoNLL-2003 eng.* file "
                        "(default: %(default)s)")
    tasks = [n for n in TASK_NAMES if n not in ("sop", "nsp", "mlm")]
    p.add_argument("--task", type=task_name, choices=tasks, metavar="TASK",
                   help=f"one of {', '.join(tasks)}: the data's task: a GLUE task, sentence_label (any "
                        f"sentence<TAB>label TSV; {', '.join(TASK_ALIASES)} still names it), or squad / squad_v2 "
                        "(a SQuAD .json), race (a RACE split or level folder), conll (a CoNLL-2003 file) "
                        "(default: from a GLUE folder's name, else sentence_label)")
    num.add_squad_flags(p, "what train.py used, else {}")
    p.add_argument("--batch-size", type=num.positive_int, default=64,
                   help="examples per forward pass at lengths of 64 and more; shorter buckets take more "
                        "(default: %(default)s)")
    p.add_argument("--max-length", type=num.max_length, default=None,
                   help="tokens per example incl. [CLS]/[SEP], at most the model's max_position_embeddings "
                        "(default: what train.py used, else 128)")
    p.add_argument("--output", help="write predictions here in the task's official layout: GLUE's "
                                    "index<TAB>prediction, SQuAD's predictions.json (v2.0: null_odds.json beside "
                                    "it), RACE's letters per file, conlleval's columns (default: none written)")
    p.add_argument("--force", action="store_true",
                   help="replace an existing --output file that evaluate.py wrote and nobody changed since (the "
                        "record .NAME.albert_min.json it writes beside it says so), never an input or another file "
                        "(default: refuse)")
    p.add_argument("--json", action="store_true",
                   help="print the metrics as JSON, as fractions (0.8142; the table prints percent, 81.42), "
                        'marked "scale": "fraction"; undefined metrics are null (default: the table)')
    p.add_argument("--pynative", "--no-jit", action="store_true",
                   help="run MindSpore in PyNative mode (op by op), not compiled graphs (--no-jit: its old "
                        "name, still accepted) (default: compiled)")
    p.add_argument("--no-compile-cache", action="store_true",
                   help="do not keep compiled graphs in $ALBERT_MIN_CACHE (default: kept, in "
                        "~/.cache/albert_min/compile, on CPU; never kept on GPU or Ascend)")
    p.add_argument("--quiet", action="store_true", help="no progress bar (default: a progress bar on stderr)")
    p.add_argument("--int8", action="store_true",
                   help="Dense layers in int8, each weight quantized once (docs/int8.md); where the compiled "
                        "kernels or oneDNN's int8 gemm are missing, a notice and float32 (default: float32)")
    add_device_flag(p)
    return p


REPORTED = ("accuracy", "f1", "precision", "recall", "matthews", "pearson", "spearman")


def format_report(metrics, model_dir, data_path, speed, task=None):
    """The table: the task's GLUE metrics first (in percent), then the binary extras.
    SST-2's and the generic task's table has stayed the same since the first release."""
    lines = [f"model: {model_dir}", f"data:  {data_path} ({metrics['examples']} examples)"]
    if task is not None and task.name not in ("sst2", "sentence_label"):
        lines.append(f"task:  {task.name}")
    lines.append("")
    order = (task.metrics if task is not None else ()) + REPORTED
    notes = metrics.get("notes", {})
    for name in dict.fromkeys(k for k in order if k in metrics):
        value = metrics[name]
        lines.append(f"{name:<10} {'n/a':>6}  ({notes.get(name, 'undefined')})" if value is None
                     else f"{name:<10} {100 * value:6.2f}")
    if "confusion" in metrics:
        c = metrics["confusion"]
        lines += ["", "confusion    pred 0  pred 1",
                  f"  label 0    {c['tn']:6d}  {c['fp']:6d}",
                  f"  label 1    {c['fn']:6d}  {c['tp']:6d}"]
        if task is not None and task.label_names and task.label_names != ("0", "1"):
            lines.append(f"  (label 0 = {task.label_names[0]}, label 1 = {task.label_names[1]})")
    lines += ["", f"speed: {speed:.1f} examples/s"]
    return "\n".join(lines)


def predictions_kind():
    """What --force may replace where GLUE's predictions go: a file starting with GLUE's header
    (see albert_min.common.safe_output); each task's own is its ``Task.prediction_kind``."""
    from albert_min.tasks.glue.task import GlueTask
    return GlueTask.prediction_kind


def write_predictions(path, index, predictions, force=False, protect=()):
    """GLUE's submission layout, ``index<TAB>prediction`` with a header; predictions are
    strings (label names or scores). Atomically, replacing only what safe_output allows."""
    from albert_min.common.safe_output import atomic_file
    from albert_min.tasks.glue.task import PREDICTIONS_HEADER
    with atomic_file(path, predictions_kind(), force, protect) as tmp:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(PREDICTIONS_HEADER)
            for i, prediction in zip(index, predictions):
                f.write(f"{i}\t{prediction}\n")


def main(argv=None):
    args = parse_args(argv)
    if not args.model:
        fail(how_to_get_a_model())
    missing = missing_input(args)
    if missing:
        fail(missing)
    args.device = num.use_device_flag(args.device)   # before any work
    from albert_min.common.safe_output import output_lock
    with reported_errors():
        with output_lock(args.output) if args.output else contextlib.nullcontext():   # one writer per --output
            return evaluate(args)


def missing_input(args):
    """The model folder (or a checkpoint there not converted) or data file not there, worded as its reader would ("model folder not found: …"),
    else None: checked before MindSpore is imported (seconds), as a flag is."""
    from albert_min.tasks.squad.task import article_range
    from albert_min.common.other_checkpoints import unconverted_checkpoint
    if not os.path.isdir(args.model):
        return f"model folder not found: {args.model}"
    data = article_range(args.data)[0]
    return unconverted_checkpoint(args.model) or (None if os.path.exists(data) else f"data file not found: {data}")


def evaluate(args):
    from albert_min.model.folder import tokenizer_file
    tokenizer_file(args.model)                   # before any work: a converted TF checkpoint has none
    from albert_min.tasks import get_task, infer_task
    name = args.task or infer_task(args.data)
    if not name.startswith("squad"):
        check_no_squad_flags(args, name)
    options = {}
    if name.startswith("squad"):
        from albert_min.tasks.squad.task import options_for
        options = options_for(args.model, **squad_flags(args))
    registered = get_task(name, **options)
    if args.output:   # before the work: every file the task writes (SQuAD v2.0's null_odds.json too)
        from albert_min.common.safe_output import check_file_target
        for path, kind in registered.prediction_files(args.output).items():
            check_file_target(path, kind, args.force, protect=(args.data, args.model))
    return evaluate_task(args, registered)


def load_classifier(model_dir, max_length=None):
    """(model, tokenizer, max_length) as evaluate.py predicts a GLUE file with them (benchmarks/speed.py
    times this too): the truncation length is ``max_length``, else what train.py used, within the
    model's positions. On CPU its layers compute with the compiled kernels (``kernels.accelerate``)."""
    from albert_min.model import kernels
    from albert_min.model.folder import training_max_length
    from albert_min.model.heads import AlbertForSequenceClassification
    from tokenizer import AlbertTokenizer
    model = kernels.accelerate(AlbertForSequenceClassification.from_pretrained(model_dir))
    tokenizer = AlbertTokenizer.from_pretrained(model_dir)
    return model, tokenizer, min(max_length or training_max_length(model_dir), model.config.max_position_embeddings)


def evaluate_task(args, task):
    """Every task the same way: it reads, predicts (streaming), scores with its official metric
    (``Task.report``) and writes its official prediction file (``albert_min/tasks/task_base.py``).
    GLUE prints its own table (``format_report``, examples/s), warns when the model was trained on
    another task, and writes the predictions of a file without labels."""
    import time
    from albert_min.common.device import applies_cpu_only_parts, default_compile_cache
    from albert_min.model import heads, kernels
    from albert_min.model.folder import CheckpointError, training_max_length
    from albert_min.tasks.errors import DataError
    from albert_min.tasks.glue.task import GlueTask
    from tokenizer import AlbertTokenizer
    glue = isinstance(task, GlueTask)
    if args.max_length is not None:
        check_max_length(args.max_length, args.model)
    examples = task.read(args.data)
    unlabelled = glue and examples.labels is None
    if glue:
        warn_if_trained_on_another_task(args.model, task.spec, args.data)
        if unlabelled and not args.output:
            raise DataError(f"{args.data} has no labels to score; pass --output to write its predictions")
    model = kernels.accelerate(getattr(heads, task.model_class).from_pretrained(args.model))
    model.set_train(False)
    if args.int8:
        from albert_min.model.kernels import quantize_int8
        quantize_int8(model)
    task.check_model(model.config, examples, args.model)
    tokenizer = AlbertTokenizer.from_pretrained(args.model)
    # the length train.py used, else the task's own (GLUE has none: train.py's default 64 is for training; 128 here)
    max_length = min(args.max_length or training_max_length(args.model, getattr(task, "default_max_length", 128)),
                     model.config.max_position_embeddings)
    # The cache is a CPU-only part: its key does not name the device, and it was checked on CPU alone.
    keep_graphs = applies_cpu_only_parts(args.device) and not args.no_compile_cache
    start = time.perf_counter()
    prepared = task.prepare(examples, tokenizer, max_length)
    try:
        predicting = time.perf_counter()
        outputs = task.predict(model, prepared, batch_size=args.batch_size, use_jit=not args.pynative,
                               progress=not (args.quiet or args.json),
                               cache_dir=default_compile_cache() if keep_graphs else None)
        if unlabelled:
            task.write_predictions(args.output, prepared, outputs)
            print(f"{args.data}: no labels; wrote {len(examples)} predictions to {args.output}")
            return {"task": task.name, "examples": len(examples)}
        metrics = {"task": task.name, **task.report(prepared, outputs)}
    except CheckpointError as err:   # non-finite outputs: name the model folder too
        raise CheckpointError(f"{args.model}: {err}") from None
    if glue:
        metrics["examples_per_s"] = len(examples) / (time.perf_counter() - predicting)
    else:
        metrics["seconds"] = round(time.perf_counter() - start, 1)   # 39.0, not 38.99588028500057
    if args.output:
        task.write_predictions(args.output, prepared, outputs)
    if args.json:
        print(json.dumps({**metrics, "scale": "fraction"}, indent=2))
    elif glue:
        print(format_report(metrics, args.model, args.data, metrics["examples_per_s"], task.spec))
    else:
        print(f"model: {args.model}\ndata:  {args.data}\ntask:  {task.name}\n")
        for key, value in metrics.items():
            if isinstance(value, float) and key != "seconds" and not key.endswith("_thresh"):
                print(f"{key:<22} {100 * value:6.2f}")
            elif key not in ("task",):
                print(f"{key:<22} {value}")
        if args.output:
            print(f"\npredictions: {args.output}")
    return metrics


def squad_flags(args):
    from albert_min.tasks.squad.task import OPTION_DEFAULTS
    return {name: getattr(args, name) for name in OPTION_DEFAULTS}


def check_no_squad_flags(args, task_name):
    """SQuAD's flags given for another task would change nothing: an error naming the flag."""
    from albert_min.tasks.errors import DataError
    given = [name for name, value in squad_flags(args).items() if value is not None]
    if given:
        raise DataError(f"--{given[0].replace('_', '-')} is for SQuAD (--task squad or squad_v2), "
                        f"not --task {task_name}")


def check_max_length(max_length, model_dir):
    """--max-length within the model's positions: beyond them there is nothing to evaluate with."""
    from albert_min.model.config import ConfigError, load_config
    positions = load_config(model_dir).max_position_embeddings
    if max_length > positions:
        raise ConfigError(f"--max-length {max_length} is more than {model_dir}'s max_position_embeddings "
                          f"({positions}, config.json): pass at most {positions}")


def warn_if_trained_on_another_task(model_dir, task, data_path):
    """A model scored on another task's data (a single-sentence SST-2 model on RTE's pairs)
    gives numbers that mean little: say so on stderr, naming both tasks. The model's task is
    what train.py recorded (training_settings.json's "task", or an older folder's
    train_metrics.json's); nothing is said when it is unknown.
    ``sentence_label`` (any other sentence<TAB>label file; ``cls`` in older records) names no
    task, so it goes with any single-sentence classifier (an SST-2 model on your own reviews), both ways."""
    from albert_min.tasks import task_name
    from albert_min.tasks.glue import reading as glue_reading
    from albert_min.model.folder import training_settings
    try:
        trained_on = training_settings(model_dir).get("task") or training_record(model_dir).get("task")
    except ValueError:     # a broken settings file is reported where the length is read
        return
    if not isinstance(trained_on, str):
        return
    trained_on = task_name(trained_on)   # an older record's cls
    if trained_on == task.name:
        return
    single_sentence = {name for name, t in glue_reading.TASKS.items() if not t.is_pair and not t.is_regression}
    if "sentence_label" in (trained_on, task.name) and {trained_on, task.name} <= single_sentence:
        return

    def shape(name):
        known = glue_reading.TASKS.get(name)
        return "" if known is None else " (sentence pairs)" if known.is_pair else " (single sentences)"
    print(f"warning: {model_dir} was trained on {trained_on}{shape(trained_on)}, but {data_path} is "
          f"{task.name}{shape(task.name)}; its scores on it may mean little (pass --task if the data's task "
          f"is not {task.name})", file=sys.stderr)


def command():
    """The ``albert-min-evaluate`` console script (setup.cfg): ``main()`` from the command line, exit status 0.
    A console script exits with what its function returns, and ``main`` returns the scores (a dict, for
    Python callers), which would be printed as an error with exit status 1."""
    main()


if __name__ == "__main__":
    main()
