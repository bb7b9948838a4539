"""Fine-tune ALBERT on a GLUE task, or pre-train it with MLM + SOP on raw text.

Fine-tuning, from scratch or from a converted checkpoint, on a GLUE task's files
in their official layout (--task sst2 cola mrpc stsb qqp mnli qnli rte wnli,
else inferred from the folder name, else `cls`: a sentence<TAB>label TSV):

    python train.py --train ../shared/data/sst2/train.tsv --dev ../shared/data/sst2/dev.tsv \\
                    --output weights/sst2-small                       # small model from scratch
    python train.py ... --init weights/albert-base-v2 --output weights/albert-base-sst2
    python train.py --train ../shared/data/glue/STS-B/train.tsv --dev ../shared/data/glue/STS-B/dev.tsv \\
                    --output weights/stsb-small                       # regression, Pearson/Spearman

Pre-training with n-gram masked-LM + sentence-order prediction on a text file
(one sentence per line, blank line between documents); --task nsp uses BERT's
next-sentence prediction instead, --task mlm no sentence objective:

    python train.py --task sop --text corpus.txt --output weights/sop-small --max-minutes 30

The best model (by the task's first GLUE metric on dev; in pre-training, held-out MLM accuracy) is written to
--output atomically; the full training state (weights, AdamW moments, epoch)
goes to <output>.state after every epoch (and --eval-every / --save-every
steps); --resume continues from it and repeats the uninterrupted run exactly.

Data-parallel on N workers with MindSpore's launcher (--batch-size stays the global batch):

    msrun --worker_num 2 --local_worker_num 2 --master_port 8118 --log_dir logs --join True \\
          train.py ... --data-parallel
"""

import argparse
import os
import random
import sys
import tempfile

# MindSpore logs WARNINGs (deprecations, compile-cache misses) to stderr; errors only, unless the user sets GLOG_v.
os.environ.setdefault("GLOG_v", "3")

import numpy as np

from albert_min import arguments as num


PRETRAINING_TASKS = ("sop", "nsp", "mlm")   # the rest of --task is a GLUE task (albert_min.glue)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    from albert_min.glue import TASK_NAMES
    p.add_argument("--task", choices=TASK_NAMES + PRETRAINING_TASKS,
                   help="a GLUE task (default: from --train's folder name, else cls: sentence<TAB>label); "
                        "or pre-train with sop: MLM+SOP, nsp: MLM+NSP, mlm: MLM only")
    p.add_argument("--train", help="training TSV in the task's GLUE layout")
    p.add_argument("--dev", help="dev TSV evaluated after every epoch, same layout")
    p.add_argument("--text", help="raw text for --task sop/nsp/mlm")
    p.add_argument("--tokenizer-text", nargs="+", default=[],
                   help="more text (lines, or a TSV's sentence column) to train a new tokenizer on, e.g. "
                        "SST-2 train so fine-tuning meets few unknown pieces (never dev text)")
    p.add_argument("--output", required=True, help="model folder to write, e.g. weights/sst2-small")
    p.add_argument("--init", help="start from this model folder (config.json, model.ckpt, spiece.model)")
    p.add_argument("--config", help="config.json for a model trained from scratch (default: the 'small' sizes below)")
    p.add_argument("--tokenizer", help="spiece.model to use; default: from --init, else trained on the training text")
    p.add_argument("--vocab-size", type=num.int_at_least(8), default=8000, help="vocabulary of a newly trained tokenizer")
    size = p.add_argument_group("model size when training from scratch without --config")
    size_flags = [
        size.add_argument("--embedding-size", type=num.positive_int, default=128),
        size.add_argument("--hidden-size", type=num.positive_int, default=128),
        size.add_argument("--layers", type=num.positive_int, default=4, help="loops of the shared block"),
        size.add_argument("--heads", type=num.positive_int, default=4),
        size.add_argument("--intermediate-size", type=num.positive_int, default=512),
        size.add_argument("--sharing", choices=("all", "attention", "ffn", "none"), default="all",
                          help="cross-layer sharing (the paper's Table 4): one block looped L times (all), only "
                               "its attention or only its feed-forward part shared, or L separate layers (none)")]
    p.add_argument("--dropout", type=num.probability, default=None,
                   help="dropout of the hidden states, attention and classifier (default 0.1 from scratch); "
                        "given with --init or --config it replaces the config's")
    p.add_argument("--epochs", type=num.positive_int, default=3)
    p.add_argument("--batch-size", type=num.positive_int, default=64,
                   help="examples per step; with --data-parallel the GLOBAL batch, split evenly over the workers")
    p.add_argument("--lr", type=num.positive_float, default=2e-4)
    p.add_argument("--warmup", type=num.fraction, default=0.1, help="fraction of steps of linear warm-up")
    p.add_argument("--weight-decay", type=num.non_negative_float, default=0.01)
    p.add_argument("--max-grad-norm", type=num.positive_float, default=1.0)
    p.add_argument("--max-length", type=num.max_length, default=64, help="tokens per example incl. [CLS]/[SEP]")
    p.add_argument("--mask-prob", type=num.float_in(0.0, 1.0, low_open=True, high_open=True), default=None,
                   help="pre-training: share of the pieces masked for the MLM loss (default 0.15, as in BERT "
                        "and ALBERT); held-out MLM accuracy is always measured at 0.15, so runs compare")
    p.add_argument("--max-steps", type=num.positive_int, default=None,
                   help="stop after this many steps; also the length of the LR schedule when shorter than --epochs")
    p.add_argument("--max-minutes", type=num.positive_float, default=None,
                   help="time budget: stop after this many minutes of training, evaluate, save the model and a "
                        "resumable state (--resume continues mid-epoch)")
    p.add_argument("--eval-every", type=num.positive_int, default=None,
                   help="also evaluate (and keep the best) and save the training state every N steps")
    p.add_argument("--save-every", type=num.positive_int, default=None,
                   help="also save the resumable training state every N steps (it is always saved after "
                        "every epoch); each save recompiles the train step once")
    p.add_argument("--seed", type=num.seed, default=42)
    p.add_argument("--resume", action="store_true",
                   help="continue from <output>.state, exactly: use the same flags as the interrupted run")
    p.add_argument("--force", action="store_true", help="overwrite an existing --output")
    p.add_argument("--no-jit", action="store_true", help="run in PyNative mode instead of a compiled graph")
    p.add_argument("--data-parallel", action="store_true",
                   help="one worker of an msrun job: train on this worker's share of every batch, average the "
                        "gradients over the workers; only rank 0 writes and reports (see the README)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    args = p.parse_args(argv)
    if args.task is None:
        from albert_min.glue import infer_task
        args.task = infer_task(args.train) if args.train else "cls"
    if args.task not in PRETRAINING_TASKS and not args.train:
        p.error(f"--task {args.task} needs --train")
    if args.task in PRETRAINING_TASKS and not args.text:
        p.error(f"--task {args.task} needs --text")
    if args.task in PRETRAINING_TASKS and args.max_length < 5:
        p.error(f"--task {args.task} needs --max-length >= 5 ([CLS] a [SEP] b [SEP])")
    if args.task not in PRETRAINING_TASKS and args.mask_prob is not None:
        p.error(f"--mask-prob is for pre-training (--task sop, nsp or mlm), not --task {args.task}")
    if args.init or args.config:
        ignored = [a.option_strings[0] for a in size_flags if getattr(args, a.dest) != a.default]
        if ignored:
            p.error(f"{', '.join(ignored)}: the model's shape comes from {'--init' if args.init else '--config'}; "
                    "leave out the size flags")
    if args.resume and args.force:
        p.error("--resume and --force contradict each other: continue the run, or start it again")
    return args


def build_tokenizer(args, sentences, workdir):
    from tokenizer import AlbertTokenizer, TokenizerError, train_sentencepiece
    path = args.tokenizer or (os.path.join(args.init, "spiece.model") if args.init else None)
    if path is None:
        print(f"training a {args.vocab_size}-piece SentencePiece model on {len(sentences)} lines", flush=True)
        try:
            path = train_sentencepiece(sentences, os.path.join(workdir, "spiece"), args.vocab_size)
        except TokenizerError as err:
            raise TokenizerError(f"{args.train or args.text}: {err}") from None
    return AlbertTokenizer(path), path


def build_config(args, tokenizer, num_labels):
    from albert_min.config import AlbertConfig, load_config
    if args.init:
        config = load_config(args.init)
    elif args.config:
        config = AlbertConfig.from_json_file(args.config)
    else:
        config = AlbertConfig(
            vocab_size=tokenizer.vocab_size, embedding_size=args.embedding_size, hidden_size=args.hidden_size,
            num_hidden_layers=args.layers, num_attention_heads=args.heads, intermediate_size=args.intermediate_size,
            hidden_act="gelu_new", max_position_embeddings=max(128, args.max_length),
            cross_layer_sharing=args.sharing)
    dropout = args.dropout
    if dropout is None and not (args.init or args.config):
        dropout = 0.1   # from scratch; an --init / --config model keeps its own unless --dropout is given
    if dropout is not None:
        config.hidden_dropout_prob = config.attention_probs_dropout_prob = config.classifier_dropout_prob = dropout
    if config.vocab_size < tokenizer.vocab_size:
        sys.exit(f"error: the tokenizer has {tokenizer.vocab_size} pieces but the model only {config.vocab_size}")
    if args.max_length > config.max_position_embeddings:
        sys.exit(f"error: --max-length {args.max_length} exceeds max_position_embeddings "
                 f"{config.max_position_embeddings}")
    config.num_labels = num_labels
    return config


def build_model(cls, config, args):
    if args.init:
        head = ("classifier.",) if cls.__name__ == "AlbertForSequenceClassification" else ("predictions.", "sop_classifier.")
        return cls.from_pretrained(args.init, config=config, allow_missing=head)
    return cls(config)


def run_classification(args, workdir, parallel):
    """Fine-tune on a GLUE task (or a generic sentence<TAB>label TSV): single sentences or
    pairs, classification (cross-entropy) or, for STS-B, regression (MSE on one score)."""
    from albert_min import glue
    from albert_min.classify import predict_logits
    from albert_min.data import check_labels, encode_examples, train_batch_indices, pad_with_types
    from albert_min.modeling import AlbertForSequenceClassification, count_parameters
    from mindspore import ops

    task = glue.get_task(args.task)
    train_set = glue.read_examples(args.train, task)
    dev = glue.read_examples(args.dev, task) if args.dev else None
    for data in (train_set, dev):
        if data is not None and data.labels is None:
            raise glue.DataError(f"{data.path}: has no {task.label_column!r} column; training needs labels")
    num_labels = task.num_labels or max(train_set.labels) + 1
    print(f"task {task.name}: {len(train_set)} training examples"
          + (f", {len(dev)} dev" if dev else "") + (" (sentence pairs)" if task.is_pair else ""), flush=True)
    tokenizer, spiece_path = build_tokenizer(args, train_set.texts + (train_set.text_pairs or []), workdir)
    config = build_config(args, tokenizer, num_labels)
    config.problem_type = "regression" if task.is_regression else None
    config.id2label = dict(enumerate(task.label_names)) if task.label_names else None
    config.validate()
    if not task.is_regression:
        check_labels(train_set.labels, config.num_labels, args.train)
        if dev:
            check_labels(dev.labels, config.num_labels, args.dev)
    model = build_model(AlbertForSequenceClassification, config, args)
    print(f"model: {count_parameters(model) / 1e6:.2f}M parameters, E={config.embedding_size} "
          f"H={config.hidden_size} L={config.num_hidden_layers} (shared), vocab {config.vocab_size}", flush=True)
    ids, types = encode_examples(tokenizer, train_set.texts, train_set.text_pairs, args.max_length)
    label_dtype = np.float32 if task.is_regression else np.int32

    if task.is_regression:
        def loss_fn(input_ids, token_type_ids, attention_mask, y):
            scores = model(input_ids, token_type_ids, attention_mask)[:, 0]   # [B]
            return ((scores - y) ** 2).mean()
    else:
        def loss_fn(input_ids, token_type_ids, attention_mask, y):
            return ops.cross_entropy(model(input_ids, token_type_ids, attention_mask), y)

    def epoch_batches(epoch):
        for idx in train_batch_indices([len(r) for r in ids], args.batch_size, random.Random(args.seed + epoch)):
            rows = parallel.shard(len(idx))   # this worker's share of the global batch
            if rows is None:
                continue
            idx = idx[rows]
            batch = pad_with_types([ids[i] for i in idx], [types[i] for i in idx], tokenizer.pad_token_id)
            yield (*batch, np.array([train_set.labels[i] for i in idx], label_dtype))

    def evaluate():
        if not dev:
            return 0.0, {}
        logits, seconds = predict_logits(model, tokenizer, dev.texts, dev.text_pairs, max_length=args.max_length,
                                         use_jit=not args.no_jit, progress=not args.quiet)
        metrics = glue.evaluation_metrics(task, dev.labels, logits)
        return glue.selection_score(task, metrics), {"dev_" + k: v for k, v in metrics.items() if k != "confusion"}

    return run_trainer(args, model, tokenizer, spiece_path, parallel.steps(len(ids), args.batch_size), loss_fn,
                       parallel, epoch_batches, evaluate)


def tokenizer_sentences(args, sentences):
    """The text a new tokenizer is trained on: the training text plus --tokenizer-text files."""
    from albert_min.data import read_tsv
    extra = []
    for path in args.tokenizer_text:
        if path.endswith(".tsv"):
            extra += read_tsv(path, require_labels=False)[0]
        else:
            with open(path, encoding="utf-8") as f:
                extra += [line.strip() for line in f if line.strip()]
    return list(sentences) + extra


def run_pretraining(args, workdir, parallel):
    """--task sop / nsp / mlm on --text; the pieces are in albert_min.pretraining."""
    from albert_min import pretraining
    from albert_min.data import read_documents, DataError
    from albert_min.modeling import AlbertForPreTraining, count_parameters

    documents = read_documents(args.text)
    if len(documents) < 2:
        raise DataError(f"{args.text}: pre-training needs 2+ documents (blank line between them), got 1")
    tokenizer, spiece_path = build_tokenizer(args, tokenizer_sentences(args, [s for d in documents for s in d]),
                                             workdir)
    config = build_config(args, tokenizer, num_labels=2)
    model = build_model(AlbertForPreTraining, config, args)
    print(f"model: {count_parameters(model) / 1e6:.2f}M parameters, E={config.embedding_size} "
          f"H={config.hidden_size} L={config.num_hidden_layers} sharing={config.cross_layer_sharing}", flush=True)
    train_docs, heldout_docs = pretraining.split_documents(documents, 0.05, random.Random(args.seed))
    train_ids = [[tokenizer.encode_ids(s) for s in d] for d in train_docs]
    heldout_ids = [[tokenizer.encode_ids(s) for s in d] for d in heldout_docs]
    batcher = pretraining.PretrainingBatcher(tokenizer, args.max_length, args.mask_prob or pretraining.MASK_PROB)
    # The held-out masks stay at BERT's 15% whatever --mask-prob, so held-out MLM accuracy compares across runs.
    heldout = pretraining.HeldOut(heldout_ids, pretraining.PretrainingBatcher(tokenizer, args.max_length),
                                  args.max_length, args.batch_size, args.seed)
    print(f"{len(train_docs)} training documents, {len(heldout_docs)} held out "
          f"({len(heldout.sets['sop'])} SOP + {len(heldout.sets['nsp'])} NSP pairs)", flush=True)

    def epoch_examples(epoch):
        # New cuts, swaps / negatives and masks every epoch from the same documents.
        examples = pretraining.make_sentence_examples(args.task, train_ids, args.max_length,
                                                      random.Random(args.seed + 1000 + epoch))
        random.Random(args.seed + epoch).shuffle(examples)
        return examples

    def epoch_batches(epoch):
        examples, rng = epoch_examples(epoch), np.random.default_rng(args.seed + epoch)
        for start in range(0, len(examples), args.batch_size):
            batch = batcher(examples[start:start + args.batch_size], rng)   # masks drawn for the global batch
            rows = parallel.shard(len(batch[-1]))
            if rows is not None:
                yield pretraining.shard_batch(batch, rows) if parallel.size > 1 else batch

    def evaluate():
        metrics = heldout.evaluate(model, progress=not args.quiet, parallel=parallel)   # each worker a share
        return metrics["heldout_mlm_accuracy"], metrics

    steps = parallel.steps(len(epoch_examples(0)), args.batch_size)   # later epochs differ by a few cuts
    return run_trainer(args, model, tokenizer, spiece_path, steps, pretraining.make_loss_fn(model, args.task),
                       parallel, epoch_batches, evaluate)


def run_trainer(args, model, tokenizer, spiece_path, steps_per_epoch, loss_fn, parallel, epoch_batches, evaluate):
    """The epoch loop (albert_min.trainer), resumed from <output>.state with --resume; returns its final state."""
    from albert_min.trainer import Trainer
    trainer = Trainer(args, model, tokenizer, spiece_path, steps_per_epoch, loss_fn, parallel,
                      state_dir=state_dir(args), protect=input_paths(args),
                      adam_bias_correction=args.task in PRETRAINING_TASKS)
    if args.resume:
        trainer.resume()
    return trainer.run(epoch_batches, evaluate)


def state_dir(args):
    return args.output.rstrip("/" + os.sep) + ".state"


def input_paths(args):
    """Files the run reads: the outputs must neither be nor contain them."""
    return tuple(p for p in (args.train, args.dev, args.text, args.init, args.config, args.tokenizer) if p)


def check_outputs(args, writes=True):
    """Before any long work: the model and state folders can be written and replace
    nothing albert_min did not write (see ``albert_min.safe_output.check_replaceable``).
    ``writes=False``: the same checks for a data-parallel worker that never writes."""
    from albert_min.safe_output import check_replaceable, recover_directory
    state = state_dir(args)
    if args.resume and writes:
        for folder in (args.output, state):
            recovered = recover_directory(folder)
            if recovered:
                print(recovered, flush=True)
    if args.resume:
        if not os.path.isdir(state):
            sys.exit(f"error: no training state to resume in {state}")
    elif not args.force:
        if os.path.exists(args.output):
            sys.exit(f"error: {args.output} exists; pass --force to overwrite it or --resume to continue")
        if os.path.exists(state):
            sys.exit(f"error: {state} holds an unfinished run; pass --resume to continue it or --force to restart")
    for path in (args.output, state):
        check_replaceable(path, overwrite=True, protect=input_paths(args))
        if not writes:
            continue
        parent = os.path.dirname(os.path.abspath(path))
        os.makedirs(parent, exist_ok=True)
        if not os.access(parent, os.W_OK | os.X_OK):
            raise PermissionError(13, "folder not writable", parent)


def check_data_parallel(args):
    """Before MindSpore's init (which would wait and fail with a traceback): msrun is there and the batch divides."""
    from albert_min.parallel import MSRUN_VARIABLES, msrun_workers
    workers = msrun_workers()
    if workers is None:
        print(f"error: --data-parallel must run under msrun ({', '.join(MSRUN_VARIABLES)} not set), e.g. "
              f"msrun --worker_num 2 --local_worker_num 2 --master_port 8118 train.py ... --data-parallel",
              file=sys.stderr)
        sys.exit(2)
    if args.batch_size % workers:
        print(f"error: --batch-size {args.batch_size} (the global batch) must be a multiple of the "
              f"{workers} data-parallel workers", file=sys.stderr)
        sys.exit(2)


def start_data_parallel(args):
    """Join the msrun job; every worker checks the outputs (on --resume after rank 0, which alone
    completes or rolls back a save a crash interrupted)."""
    from albert_min.parallel import DataParallel
    parallel = DataParallel()
    if parallel.writes or not args.resume:
        check_outputs(args, writes=parallel.writes)
    if args.resume:
        parallel.barrier()
        if not parallel.writes:
            check_outputs(args, writes=False)
    if not parallel.writes:
        args.quiet = True
        sys.stdout = open(os.devnull, "w")   # only rank 0 reports progress; errors still reach stderr
    return parallel


def main(argv=None):
    args = parse_args(argv)
    if args.data_parallel:
        check_data_parallel(args)
    from albert_min.errors import AlbertMinError
    try:
        return train(args)
    except (AlbertMinError, OSError) as err:
        sys.exit(f"error: {num.os_error_text(err) if isinstance(err, OSError) else err}")
    except KeyboardInterrupt:
        print(f"interrupted; continue from the last saved state with --resume ({state_dir(args)})", file=sys.stderr)
        sys.exit(130)


def train(args):
    if not args.data_parallel:
        check_outputs(args)
    import mindspore as ms
    ms.set_device("CPU")
    from albert_min.parallel import SingleProcess
    parallel = start_data_parallel(args) if args.data_parallel else SingleProcess()
    from albert_min.training import seed_everything, set_cpu_threads
    set_cpu_threads()   # one kernel thread: same seed, same run (see its docstring)
    seed_everything(args.seed)
    with tempfile.TemporaryDirectory() as workdir:
        runner = run_pretraining if args.task in PRETRAINING_TASKS else run_classification
        state = runner(args, workdir, parallel)
    print(f"done: best score {state['best']}, model in {args.output}")
    return state


if __name__ == "__main__":
    main()
