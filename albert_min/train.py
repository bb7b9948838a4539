"""Fine-tune ALBERT on a GLUE task, SQuAD v1.1/v2.0, RACE or CoNLL-2003 NER, or pre-train it
with MLM + SOP on raw text.

Fine-tuning, from scratch or from a converted checkpoint, on a GLUE task's files
in their official layout (--task sst2 cola mrpc stsb qqp mnli qnli rte wnli,
else inferred from the folder name, else `sentence_label`: a sentence<TAB>label TSV), or on
SQuAD's JSON, RACE's folders or CoNLL-2003's files (--task squad squad_v2 race
conll, else inferred from a .json, a folder holding middle/ or high/, an eng.* file;
docs/tasks.md):

    python train.py --train ../shared/data/sst2/train.tsv --dev ../shared/data/sst2/dev.tsv \\
                    --output weights/sst2-small                       # small model from scratch
    python train.py ... --init weights/albert-base-v2 --output weights/albert-base-sst2
    python train.py --train ../shared/data/glue/STS-B/train.tsv --dev ../shared/data/glue/STS-B/dev.tsv \\
                    --output weights/stsb-small                       # regression, Pearson/Spearman
    python train.py --train ../shared/data/squad/dev-v1.1.json:1-24 --dev ../shared/data/squad/dev-v1.1.json:25-48 \\
                    --init weights/pretrained-small --max-length 128 --doc-stride 32 --max-query-length 32 \\
                    --output weights/squad-small                      # a non-standard split by article

Pre-training with n-gram masked-LM + sentence-order prediction on a text file
(one sentence per line, blank line between documents); --task nsp uses BERT's
next-sentence prediction instead, --task mlm no sentence objective:

    python train.py --task sop --text corpus.txt --output weights/sop-small --max-minutes 30

The best model (by the task's first GLUE metric on dev; in pre-training, held-out MLM accuracy;
without --dev, the last one) is written to --output atomically; the full training state (weights,
optimizer moments, epoch, the run's settings and tokenizer) goes to <output>.state after every
epoch (and --eval-every / --save-every steps); --resume alone continues from it and repeats the
uninterrupted run exactly. The training loop itself is albert_min.training.trainer, usable from Python
(docs/training.md); this script turns flags into its typed configs.

Data-parallel on N workers with MindSpore's launcher (--batch-size stays the global batch):

    msrun --worker_num 2 --local_worker_num 2 --master_port 8118 --log_dir logs --join True \\
          train.py ... --data-parallel
"""

import argparse
import os
import tempfile

# MindSpore logs WARNINGs (deprecations, compile-cache misses) to stderr; errors only, unless the user sets GLOG_v.
os.environ.setdefault("GLOG_v", "3")

from albert_min import arguments as num  # noqa: E402
from albert_min.common.device import add_device_flag  # noqa: E402
from albert_min.common.errors import EXIT_USAGE, fail, reported_errors  # noqa: E402
from albert_min.training.run_config import ResumeError, RunConfig, flag_name, from_flat  # noqa: E402
from albert_min.tasks import REGISTRY, TASK_ALIASES, TASK_NAMES, get_task, infer_task, task_name  # noqa: E402
from albert_min.training.config import (AMP_DTYPES, AMP_LEVELS, BF16_GEMMS, OPTIMIZERS, REPORT_TO,  # noqa: E402
                                        WEIGHTS_FORMATS, TrainingConfig, needs_loss_scale)

SIZE_FLAGS = ("embedding_size", "hidden_size", "layers", "heads", "intermediate_size", "sharing")
PRETRAINING = tuple(name for name, (module, _, _) in REGISTRY.items() if module == "pretraining.task")


def build_parser(parser_class=argparse.ArgumentParser):
    run, cfg = RunConfig, TrainingConfig   # the defaults below are the dataclasses' own
    p = parser_class(prog=num.command_name("albert_min.train"), description=__doc__.split("\n\n")[0],
                     formatter_class=num.DefaultsHelp)
    p.add_argument("--task", type=task_name, choices=TASK_NAMES, metavar="TASK",
                   help=f"one of {', '.join(TASK_NAMES)}: a GLUE task, sentence_label (any sentence<TAB>label TSV; "
                        f"{', '.join(TASK_ALIASES)} still names it), "
                        "squad / squad_v2, race or conll (default: from --train: a SQuAD .json, a RACE folder, a "
                        "CoNLL eng.* file, a GLUE folder's name, else sentence_label); or pre-train with sop: MLM+SOP, "
                        "nsp: MLM+NSP, mlm: MLM only")
    p.add_argument("--train", help="training data in the task's official layout: a GLUE TSV, a SQuAD .json "
                                   "(FILE.json:FIRST-LAST: its articles FIRST to LAST), a RACE split or level "
                                   "folder (RACE/train, RACE/train/high), a CoNLL-2003 file (eng.train)")
    p.add_argument("--dev", help="dev data evaluated after every epoch, same layout; without it the last model is kept")
    p.add_argument("--text", help="raw text for --task sop/nsp/mlm")
    p.add_argument("--tokenizer-text", nargs="+", default=[],
                   help="more text (lines, or a TSV's sentence column) to train a new tokenizer on, e.g. "
                        "SST-2 train so fine-tuning meets few unknown pieces (never dev text)")
    p.add_argument("--output", required=True, help="model folder to write, e.g. weights/sst2-small")
    p.add_argument("--init", help="start from this model folder (config.json, model.ckpt or model.safetensors, "
                                  "spiece.model)")
    p.add_argument("--config", help="config.json for a model trained from scratch (else the size flags below)")
    p.add_argument("--tokenizer", help="spiece.model to use; default: from --init, else trained on the training text")
    p.add_argument("--vocab-size", type=num.int_at_least(8), default=run.vocab_size,
                   help="vocabulary of a newly trained tokenizer (at most: SentencePiece stops where the text ends)")
    size = p.add_argument_group("model size when training from scratch without --config")
    size.add_argument("--embedding-size", type=num.positive_int, default=run.embedding_size, help="E")
    size.add_argument("--hidden-size", type=num.positive_int, default=run.hidden_size, help="H")
    size.add_argument("--layers", type=num.positive_int, default=run.layers, help="loops of the shared block")
    size.add_argument("--heads", type=num.positive_int, default=run.heads, help="attention heads; must divide H")
    size.add_argument("--intermediate-size", type=num.positive_int, default=run.intermediate_size,
                      help="feed-forward width")
    size.add_argument("--sharing", choices=("all", "attention", "ffn", "none"), default=run.sharing,
                      help="cross-layer sharing (the paper's Table 4): one block looped L times (all), only "
                           "its attention or only its feed-forward part shared, or L separate layers (none)")
    p.add_argument("--dropout", type=num.probability, default=run.dropout,
                   help="dropout of the hidden states, attention and classifier (default: the --init or --config "
                        "model's, else 0.1); given with --init or --config it replaces the config's")
    p.add_argument("--epochs", type=num.positive_int, default=cfg.epochs, help="passes over the training data")
    p.add_argument("--batch-size", type=num.positive_int, default=cfg.batch_size,
                   help="examples per step; with --data-parallel the GLOBAL batch, split evenly over the workers")
    p.add_argument("--grad-accum", type=num.positive_int, default=cfg.grad_accum,
                   help="split each step's batch into N micro-batches (same step, less memory)")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default=cfg.optimizer,
                   help="adamw: BERT's AdamWeightDecay; lamb: LAMB, the ALBERT paper's pre-training optimizer")
    p.add_argument("--lr", type=num.positive_float, default=cfg.lr, help="peak learning rate")
    p.add_argument("--warmup", type=num.fraction, default=cfg.warmup, help="fraction of steps of linear warm-up")
    p.add_argument("--weight-decay", type=num.non_negative_float, default=cfg.weight_decay, help="decoupled")
    p.add_argument("--max-grad-norm", type=num.positive_float, default=cfg.max_grad_norm, help="global-norm clip")
    p.add_argument("--amp", choices=AMP_LEVELS, default=cfg.amp,
                   help="mixed precision (mindspore.amp.auto_mixed_precision): O1 matmuls, O2/O3 every layer in "
                        "--amp-dtype; LayerNorm and softmax stay float32, and so do the weights. bf16 (CPU): the "
                        "compiled kernels' matrix products from bfloat16 operands, all else float32 "
                        "(docs/mixed-precision.md)")
    p.add_argument("--amp-dtype", choices=AMP_DTYPES, default=cfg.amp_dtype,
                   help="the low-precision dtype of --amp; float16 adds a dynamic loss scale (overflowing steps "
                        "are skipped and counted in the log)")
    p.add_argument("--loss-scale", type=num.float_in(1.0, 2.0 ** 100), default=cfg.loss_scale,
                   help="--amp-dtype float16: the dynamic loss scale's starting value (halved on each overflow)")
    p.add_argument("--max-length", type=num.max_length,
                   help=f"tokens per example incl. [CLS]/[SEP] (default: the task's: squad 384, race 512, "
                        f"conll 128, else {run.max_length}; at most the --init or --config model's positions, a new "
                        f"model's {NEW_MODEL_POSITIONS})")
    p.add_argument("--mask-prob", type=num.float_in(0.0, 1.0, low_open=True, high_open=True), default=None,
                   help="pre-training: share of the pieces masked for the MLM loss (default: 0.15, as in "
                        "BERT and ALBERT); held-out MLM accuracy is always measured at 0.15, so runs compare")
    num.add_squad_flags(p, "{}")
    p.add_argument("--max-steps", type=num.positive_int, default=cfg.max_steps,
                   help="stop after this many steps; also the length of the LR schedule when shorter than --epochs "
                        "(default: no limit, --epochs decides)")
    p.add_argument("--max-minutes", type=num.positive_float, default=cfg.max_minutes,
                   help="time budget: stop after this many minutes of training, evaluate, save the model and a "
                        "resumable state (--resume continues mid-epoch) (default: no limit)")
    p.add_argument("--eval-every", type=num.positive_int, default=cfg.eval_every,
                   help="also evaluate (and keep the best) and save the training state every N steps (default: after "
                        "every epoch only)")
    p.add_argument("--save-every", type=num.positive_int, default=cfg.save_every,
                   help="also save the resumable training state every N steps (it is always saved after "
                        "every epoch); each save recompiles the train step once (default: after every epoch only)")
    p.add_argument("--seed", type=num.seed, default=cfg.seed, help="weights, tokenizer, batches, dropout")
    p.add_argument("--resume", action="store_true",
                   help="continue the run saved in <output>.state with its own settings and tokenizer; only "
                        "--epochs, --max-steps, --max-minutes (this process's budget; not carried over), "
                        "--quiet and --device (where this process runs) may be given anew")
    p.add_argument("--format", choices=WEIGHTS_FORMATS, default=cfg.format,
                   help="the weights file of --output: model.ckpt, or MindSpore's model.safetensors (its sha256 "
                        "is recorded and checked on load); the training state is .ckpt either way")
    p.add_argument("--force", action="store_true",
                   help="start again: replace the --output and <output>.state of an earlier run (a folder "
                        "albert_min did not write is refused, with or without --force)")
    p.add_argument("--pynative", "--no-jit", dest="use_jit", action="store_false",
                   help="run MindSpore in PyNative mode (op by op), not compiled graphs (--no-jit: its old "
                        "name, still accepted)")
    p.add_argument("--data-parallel", action="store_true",
                   help="one worker of an msrun job: train on this worker's share of every batch, average the "
                        "gradients over the workers; only rank 0 writes and reports (see the README)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--report-to", choices=REPORT_TO, default=cfg.report_to,
                   help="besides <output>/metrics.jsonl (always written), TensorBoard event files in "
                        "<output>/tensorboard (needs: pip install 'albert_min[tensorboard]')")
    add_device_flag(p)
    return p


class _SavedSettingsParser(argparse.ArgumentParser):
    """Re-checks a saved run's settings with the flags' own checks; a bad one names the state file."""
    source = ""

    def error(self, message):
        raise ResumeError(f"{self.source}: the saved run's settings do not pass train.py's checks: {message}")


def parse_args(argv=None):
    """Flags -> the run's typed config (a RunConfig)."""
    return parse_flags(argv)[0]


def parse_flags(argv=None):
    """Flags -> (RunConfig, parsed flags, the settings named on the command line); argparse's own
    one-line errors (exit 2) for bad flags."""
    p = build_parser()
    args = p.parse_args(argv)
    if args.resume and args.force:
        p.error("--resume and --force contradict each other: continue the run, or start it again")
    unset = object()   # argparse fills in defaults only for names the namespace lacks: what stays unset was not given
    named = vars(build_parser().parse_args(argv, namespace=argparse.Namespace(**dict.fromkeys(vars(args), unset))))
    given = {k: v for k, v in named.items() if v is not unset and k not in ("resume", "force", "output")}
    check_amp_flags(p, args, given)
    return check_settings(p, args), args, given


def check_amp_flags(p, args, given):
    """--amp-dtype and --loss-scale do nothing without --amp (and --loss-scale nothing with bfloat16):
    given, they are a mistake to name, not a float32 run to hand back quietly. --resume alone takes
    the saved run's --amp."""
    if args.resume and "amp" not in given:
        return
    if args.amp in ("O0", BF16_GEMMS):
        named = [flag_name(k) for k in ("amp_dtype", "loss_scale") if k in given]
        if named and args.amp == BF16_GEMMS:
            p.error(f"{' and '.join(named)}: --amp bf16 computes in bfloat16 with no loss scale; they are for "
                    "--amp O1, O2 or O3")
        if named:
            p.error(f"{' and '.join(named)}: mixed precision is off (--amp O0); add --amp O1, O2 or O3")
    elif "loss_scale" in given and not needs_loss_scale(args.amp, args.amp_dtype):
        p.error(f"--loss-scale is for --amp-dtype float16 (bfloat16 needs no loss scale), not {args.amp_dtype}")


def settings_argv(flat):
    """A saved run's flat settings as train.py's flags (to check them with the flags' own checks)."""
    argv = []
    for name, value in flat.items():
        if name == "use_jit":
            argv += [] if value else [flag_name(name)]
        elif name in ("adam_bias_correction",) or value is None or value is False:
            continue
        elif value is True:
            argv.append(flag_name(name))
        elif isinstance(value, list):
            argv += [flag_name(name), *map(str, value)] if value else []
        else:
            argv += [flag_name(name), str(value)]
    return argv


def resumed_settings(settings, given):
    """The saved run's settings, with the budget flags given anew; a changed flag or input is an error.
    A state saved before runs recorded their settings resumes with the flags as given."""
    from albert_min.training.run_config import check_inputs_unchanged, settings_for_resume
    from albert_min.training.run import saved_run
    saved, inputs, path = saved_run(settings.training.state_dir)
    if saved is None:
        print(f"note: {path} does not record the run's settings (an older albert_min wrote it); "
              "resuming with the flags as given", flush=True)
        return settings
    p = build_parser(_SavedSettingsParser)
    p.source = path
    check_settings(p, p.parse_args(settings_argv(saved) + ["--resume"]))   # a hand-edited setting: named here
    if isinstance(saved.get("task"), str):
        saved = {**saved, "task": task_name(saved["task"])}   # a run saved as --task cls resumes as sentence_label
    flat = settings_for_resume(saved, given, path)
    resumed = check_settings(p, p.parse_args(settings_argv(flat) + ["--resume"]))
    check_inputs_unchanged(inputs, path, resumed)
    resumed.training.output = settings.training.output   # the folder given now (the same one, maybe spelt otherwise)
    resumed.device = settings.device                     # where this process runs: not a setting of the run
    return resumed


def check_settings(p, args):
    """The checks between flags, and the typed config they make."""
    # --resume alone: the task is the saved run's, checked when its settings are read (resumed_settings)
    task_known = args.task is not None or not args.resume
    task_given = args.task is not None
    if args.task is None:
        args.task = infer_task(args.train) if args.train else "sentence_label"
    pretraining = args.task in PRETRAINING
    if args.max_length is None:
        args.max_length = default_max_length(p, args)
    else:
        check_max_length(p, args)
    if not args.resume:
        if not pretraining and not args.train:
            p.error(f"--task {args.task} needs --train" if task_given else
                    "--train is needed: the data to fine-tune on (or pre-train: --task sop --text FILE)")
        if pretraining and not args.text:
            p.error(f"--task {args.task} needs --text")
    if pretraining and args.max_length < 5:
        p.error(f"--task {args.task} needs --max-length >= 5 ([CLS] a [SEP] b [SEP])")
    if task_known and not pretraining and args.mask_prob is not None:
        p.error(f"--mask-prob is for pre-training (--task sop, nsp or mlm), not --task {args.task}")
    if task_known:
        check_squad_options(p, args)
    if args.init or args.config:
        ignored = ["--" + name.replace("_", "-") for name in SIZE_FLAGS if getattr(args, name) != p.get_default(name)]
        if ignored:
            p.error(f"{', '.join(ignored)}: the model's shape comes from {'--init' if args.init else '--config'}; "
                    "leave out the size flags")
    if args.batch_size % args.grad_accum:
        p.error(f"--batch-size {args.batch_size} must be a multiple of --grad-accum {args.grad_accum}")
    training = {name: getattr(args, name) for name in TrainingConfig.__dataclass_fields__ if hasattr(args, name)}
    # pre-training from random weights: see the README; LAMB corrects its own moments
    training["adam_bias_correction"] = pretraining and args.optimizer == "adamw"
    flat = {k: v for k, v in vars(args).items() if k not in ("resume", "force")}
    flat.update(training)
    return from_flat(flat)


# The positions of a model trained from scratch without --config: ALBERT's and BERT's 512 (a longer
# --max-length is a run that pads every batch towards it and runs out of memory, not a model).
NEW_MODEL_POSITIONS = 512


def model_positions(args):
    """(max_position_embeddings, what it is, in words) of the model the run trains: the --init
    folder's or the --config file's, else NEW_MODEL_POSITIONS; None where the config cannot be
    read (reported by name where the model is built, after the flags are checked)."""
    source = args.init or args.config
    if not source:
        return NEW_MODEL_POSITIONS, (f"the {NEW_MODEL_POSITIONS} positions of a model trained from scratch (ALBERT's; "
                                     "a --config can give more)")
    from albert_min.model.config import ConfigError, load_config
    try:
        positions = load_config(source).max_position_embeddings
        return positions, f"{source}'s max_position_embeddings ({positions})"
    except (ConfigError, OSError):
        return None


def default_max_length(p, args):
    """--max-length left out: the task's default (SQuAD 384, RACE 512, CoNLL 128, else RunConfig's),
    at most the positions of the --init / --config model (pretrained-small's 128)."""
    # Pre-training's tasks have no length of their own (and their module imports MindSpore: not before --help).
    length = RunConfig.max_length if args.task in PRETRAINING else getattr(get_task(args.task), "default_max_length",
                                                                            RunConfig.max_length)
    positions = model_positions(args) if args.init or args.config else None
    return min(length, positions[0]) if positions else length


def check_max_length(p, args):
    """--max-length within the positions of the model the run trains: one error line, before any work
    (MindSpore would try to allocate the batches of that length). A resumed run keeps its own."""
    positions = None if args.resume else model_positions(args)
    if positions and args.max_length > positions[0]:
        p.error(f"--max-length {args.max_length} is more than {positions[1]}: pass at most {positions[0]}")


def check_squad_options(p, args):
    """SQuAD's flags: refused for another task; for SQuAD, the defaults filled in (so the run
    records them, and a --resume given another value is refused) and the windows checked."""
    from albert_min.tasks.errors import DataError
    from albert_min.tasks.squad.task import OPTION_DEFAULTS
    squad = args.task in ("squad", "squad_v2")
    for name, default in OPTION_DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, default if squad else None)
        elif not squad:
            p.error(f"{flag_name(name)} is for SQuAD (--task squad or squad_v2), not --task {args.task}")
    if squad:
        try:
            get_task(args.task, **{name: getattr(args, name) for name in OPTION_DEFAULTS}).window_config(
                args.max_length)
        except DataError as err:
            p.error(f"--doc-stride {args.doc_stride} with --max-length {args.max_length} and --max-query-length "
                    f"{args.max_query_length}: {err}")


def check_data_parallel(batch_size):
    """Before MindSpore's init (which would wait and fail with a traceback): msrun is there and the batch divides."""
    from albert_min.common.parallel import MSRUN_VARIABLES, ParallelError, msrun_workers
    try:
        workers = msrun_workers()
    except ParallelError as err:
        fail(str(err), EXIT_USAGE)
    if workers is None:
        fail(f"--data-parallel must run under msrun ({', '.join(MSRUN_VARIABLES)} not set), e.g. "
             f"msrun --worker_num 2 --local_worker_num 2 --master_port 8118 train.py ... --data-parallel", EXIT_USAGE)
    if batch_size % workers:
        fail(f"--batch-size {batch_size} (the global batch) must be a multiple of the {workers} data-parallel "
             "workers", EXIT_USAGE)


def missing_input(args):
    """The first input named on the command line that is not there, worded as its reader would
    ("data file not found: …"), else None: checked before MindSpore is imported (seconds), as a flag is."""
    from albert_min.common.other_checkpoints import unconverted_checkpoint
    from albert_min.tasks.squad.task import article_range
    inputs = [(article_range(path)[0], os.path.exists, "data file") for path in (args.train, args.dev) if path]
    inputs += [(path, os.path.isfile, "text file") for path in (args.text, *args.tokenizer_text) if path]
    inputs += [(args.init, os.path.isdir, "model folder"), (args.config, os.path.isfile, "config file"),
               (args.tokenizer, os.path.isfile, "SentencePiece model")]
    missing = next((f"{what} not found: {path}" for path, exists, what in inputs if path and not exists(path)), None)
    return missing or (unconverted_checkpoint(args.init) if args.init else None)


def main(argv=None):
    settings, args, given = parse_flags(argv)
    if settings.data_parallel:
        check_data_parallel(settings.training.batch_size)
    missing = missing_input(args)
    if missing:
        fail(missing)
    num.use_device_flag(settings.device)   # before any work (and before msrun's init)
    interrupted = f"interrupted; continue from the last saved state with --resume ({settings.training.state_dir})"
    with reported_errors(interrupted=interrupted):
        from albert_min.common.safe_output import output_lock
        from albert_min.training.run import prepare_outputs, train_run
        if settings.data_parallel:   # rank 0 locks the output once it has joined the job
            if args.resume:
                settings = resumed_settings(settings, given)
            return train_run(settings, resume=args.resume, force=args.force)
        with output_lock(settings.training.output):
            prepare_outputs(settings, resume=args.resume, force=args.force)
            if args.resume:
                settings = resumed_settings(settings, given)
            return train_run(settings, resume=args.resume, force=args.force)


def command():
    """The ``albert-min-train`` console script (setup.cfg): ``main()`` from the command line, exit status 0.
    A console script exits with what its function returns, and ``main`` returns the run's state (a dict, for
    Python callers), which would be printed as an error with exit status 1."""
    main()


if __name__ == "__main__":
    main()
