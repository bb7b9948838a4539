"""Fine-tune ALBERT on a GLUE task, or pre-train it with MLM + SOP on raw text.

Fine-tuning, from scratch or from a converted checkpoint, on a GLUE task's files
in their official layout (--task sst2 cola mrpc stsb qqp mnli qnli rte wnli,
else inferred from the folder name, else `cls`: a sentence<TAB>label TSV):

    python train.py --train ../shared/data/sst2/train.tsv --dev ../shared/data/sst2/dev.tsv \\
                    --output weights/sst2-small                       # small model from scratch
    python train.py ... --init weights/albert-base-v2 --output weights/albert-base-sst2
    python train.py --train ../shared/data/glue/STS-B/train.tsv --dev ../shared/data/glue/STS-B/dev.tsv \\
                    --output weights/stsb-small                       # regression, Pearson/Spearman

Pre-training with masked-LM + sentence-order prediction on a text file (one
sentence per line, blank line between documents):

    python train.py --task sop --text corpus.txt --output weights/sop-small

The best model (by the task's first GLUE metric on dev; for SOP, the last epoch) is written to
--output atomically; the full training state (weights, AdamW moments, epoch)
goes to <output>.state after every epoch, and --resume continues from it.
"""

import argparse
import json
import math
import os
import random
import sys
import tempfile
import time

import numpy as np


PRETRAINING_TASKS = ("sop",)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    from albert_min.glue import TASK_NAMES
    p.add_argument("--task", choices=TASK_NAMES + PRETRAINING_TASKS,
                   help="a GLUE task (default: from --train's folder name, else cls: sentence<TAB>label); "
                        "sop: MLM+SOP pre-training")
    p.add_argument("--train", help="training TSV in the task's GLUE layout")
    p.add_argument("--dev", help="dev TSV evaluated after every epoch, same layout")
    p.add_argument("--text", help="raw text for --task sop")
    p.add_argument("--output", required=True, help="model folder to write, e.g. weights/sst2-small")
    p.add_argument("--init", help="start from this model folder (config.json, model.ckpt, spiece.model)")
    p.add_argument("--config", help="config.json for a model trained from scratch (default: the 'small' sizes below)")
    p.add_argument("--tokenizer", help="spiece.model to use; default: from --init, else trained on the training text")
    p.add_argument("--vocab-size", type=int, default=8000, help="vocabulary of a newly trained tokenizer")
    size = p.add_argument_group("model size when training from scratch without --config")
    size.add_argument("--embedding-size", type=int, default=128)
    size.add_argument("--hidden-size", type=int, default=128)
    size.add_argument("--layers", type=int, default=4, help="loops of the shared block")
    size.add_argument("--heads", type=int, default=4)
    size.add_argument("--intermediate-size", type=int, default=512)
    size.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=2e-4)
    p.add_argument("--warmup", type=float, default=0.1, help="fraction of steps of linear warm-up")
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--max-grad-norm", type=float, default=1.0)
    p.add_argument("--max-length", type=int, default=64, help="tokens per example incl. [CLS]/[SEP]")
    p.add_argument("--max-steps", type=int, default=None, help="stop after this many steps (smoke runs)")
    p.add_argument("--eval-every", type=int, default=None, help="also evaluate (and keep the best) every N steps")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--resume", action="store_true", help="continue from <output>.state")
    p.add_argument("--force", action="store_true", help="overwrite an existing --output")
    p.add_argument("--no-jit", action="store_true", help="run in PyNative mode instead of a compiled graph")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    args = p.parse_args(argv)
    if args.task is None:
        from albert_min.glue import infer_task
        args.task = infer_task(args.train) if args.train else "cls"
    if args.task not in PRETRAINING_TASKS and not args.train:
        p.error(f"--task {args.task} needs --train")
    if args.task == "sop" and not args.text:
        p.error("--task sop needs --text")
    return args


def build_tokenizer(args, sentences, workdir):
    from tokenizer import AlbertTokenizer, train_sentencepiece
    path = args.tokenizer or (os.path.join(args.init, "spiece.model") if args.init else None)
    if path is None:
        print(f"training a {args.vocab_size}-piece SentencePiece model on {len(sentences)} lines", flush=True)
        path = train_sentencepiece(sentences, os.path.join(workdir, "spiece"), args.vocab_size)
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
            hidden_act="gelu_new", hidden_dropout_prob=args.dropout, attention_probs_dropout_prob=args.dropout,
            classifier_dropout_prob=args.dropout, max_position_embeddings=max(128, args.max_length))
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


def write_json(path, data):
    with open(path, "w") as f:
        json.dump(data, f, indent=2)


class Trainer:
    """Epoch loop shared by both tasks: steps, progress bar, state saving, resume."""

    def __init__(self, args, model, tokenizer, spiece_path, steps_per_epoch, loss_fn):
        from albert_min.training import linear_warmup_decay, make_optimizer, make_train_step
        self.args, self.model, self.tokenizer, self.spiece_path = args, model, tokenizer, spiece_path
        self.steps_per_epoch = steps_per_epoch
        self.total_steps = steps_per_epoch * args.epochs
        if args.max_steps:
            self.total_steps = min(self.total_steps, args.max_steps)
        self.optimizer = make_optimizer(model, linear_warmup_decay(args.lr, self.total_steps, args.warmup),
                                        args.weight_decay)
        self.train_step = make_train_step(loss_fn, self.optimizer, args.max_grad_norm, use_jit=not args.no_jit)
        self.state_dir = args.output.rstrip("/") + ".state"
        self.state = {"epoch": 0, "step": 0, "best": None, "history": []}

    def resume(self):
        from albert_min.training import load_training_state
        self.state = load_training_state(self.state_dir, self.model, self.optimizer)
        print(f"resumed from {self.state_dir}: epoch {self.state['epoch']}, step {self.state['step']}", flush=True)

    def run(self, epoch_batches, evaluate):
        """epoch_batches(epoch) yields tuples of numpy arrays; evaluate() -> (score, metrics dict).

        Evaluates (and keeps the best model) after every epoch and, with
        --eval-every N, every N steps; saves the resumable state after every epoch.
        """
        import mindspore as ms
        from tqdm import tqdm
        from albert_min.training import save_training_state
        args = self.args
        for epoch in range(self.state["epoch"], args.epochs):
            if self.state["step"] >= self.total_steps:
                break
            self.model.set_train(True)
            losses, start = [], time.perf_counter()
            bar = tqdm(total=min(self.steps_per_epoch, self.total_steps - self.state["step"]),
                       desc=f"epoch {epoch + 1}/{args.epochs}", unit="step", disable=args.quiet)
            for batch in epoch_batches(epoch):
                if self.state["step"] >= self.total_steps:
                    break
                loss = float(self.train_step(*[ms.Tensor(x) for x in batch]).asnumpy())
                if not math.isfinite(loss):
                    sys.exit(f"error: loss became {loss} at step {self.state['step']}; lower --lr")
                losses.append(loss)
                self.state["step"] += 1
                bar.update(1)
                bar.set_postfix(loss=f"{np.mean(losses[-50:]):.4f}")
                mid_epoch = len(losses) < self.steps_per_epoch
                if args.eval_every and self.state["step"] % args.eval_every == 0 and mid_epoch:
                    self.evaluate_and_keep_best(evaluate, epoch + len(losses) / self.steps_per_epoch, losses, start)
                    self.model.set_train(True)
            bar.close()
            self.evaluate_and_keep_best(evaluate, epoch + 1, losses, start)
            self.state["epoch"] = epoch + 1
            save_training_state(self.state_dir, self.model, self.optimizer, self.state)
        return self.state

    def evaluate_and_keep_best(self, evaluate, epoch, losses, start):
        """Evaluate, log a record, and save the model folder if this is the best score so far."""
        from albert_min.checkpoint import TRAIN_METRICS_FILE, save_model_dir
        seconds = time.perf_counter() - start
        self.model.set_train(False)
        score, metrics = evaluate()
        record = {"epoch": round(epoch, 2), "step": self.state["step"], "max_length": self.args.max_length,
                  "train_loss": float(np.mean(losses)), "steps_per_s": len(losses) / seconds, **metrics}
        self.state["history"].append(record)
        print(json.dumps(record), flush=True)
        if self.state["best"] is None or score >= self.state["best"]:
            self.state["best"] = score
            save_model_dir(self.model, self.args.output, spiece_model=self.spiece_path, overwrite=True,
                           extra_files={TRAIN_METRICS_FILE: lambda path: write_json(path, record)})
            print(f"saved {self.args.output} (score {score:.4f})", flush=True)


def run_classification(args, workdir):
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
            batch = pad_with_types([ids[i] for i in idx], [types[i] for i in idx], tokenizer.pad_token_id)
            yield (*batch, np.array([train_set.labels[i] for i in idx], label_dtype))

    def evaluate():
        if not dev:
            return 0.0, {}
        logits, seconds = predict_logits(model, tokenizer, dev.texts, dev.text_pairs, max_length=args.max_length,
                                         use_jit=not args.no_jit, progress=not args.quiet)
        metrics = glue.evaluation_metrics(task, dev.labels, logits)
        return glue.selection_score(task, metrics), {"dev_" + k: v for k, v in metrics.items() if k != "confusion"}

    trainer = Trainer(args, model, tokenizer, spiece_path, math.ceil(len(ids) / args.batch_size), loss_fn)
    if args.resume:
        trainer.resume()
    return trainer.run(epoch_batches, evaluate)


def run_sop(args, workdir):
    import mindspore as ms
    from mindspore import ops
    from albert_min.data import read_documents, make_sop_examples, sop_batch, mask_tokens
    from albert_min.modeling import AlbertForPreTraining, count_parameters

    documents = read_documents(args.text)
    tokenizer, spiece_path = build_tokenizer(args, [s for d in documents for s in d], workdir)
    config = build_config(args, tokenizer, num_labels=2)
    model = build_model(AlbertForPreTraining, config, args)
    print(f"model: {count_parameters(model) / 1e6:.2f}M parameters", flush=True)
    docs_ids = [[tokenizer.encode_ids(s) for s in d] for d in documents]
    held_out = make_sop_examples(docs_ids, args.max_length, random.Random(args.seed))
    random.Random(args.seed).shuffle(held_out)
    n_dev = max(1, len(held_out) // 20)   # 5% of the pairs, fixed, to measure SOP accuracy
    dev_examples = held_out[:n_dev]
    if len(held_out) < 2:
        sys.exit(f"error: {args.text} yields {len(held_out)} SOP pairs; need documents of 2+ sentences")
    # Held-out pairs are kept out of training in either order.
    dev_keys = {frozenset((tuple(a), tuple(b))) for a, b, _ in dev_examples}
    vocab = config.vocab_size

    def loss_fn(input_ids, token_type_ids, attention_mask, mlm_labels, sop_labels):
        mlm_logits, sop_logits = model(input_ids, token_type_ids, attention_mask)
        mlm = ops.cross_entropy(mlm_logits.reshape(-1, vocab), mlm_labels.reshape(-1), ignore_index=-1)
        return mlm + ops.cross_entropy(sop_logits, sop_labels)

    def batches(examples, mask_rng):
        for start in range(0, len(examples), args.batch_size):
            input_ids, token_type_ids, attention_mask, sop_labels = sop_batch(examples[start:start + args.batch_size],
                                                                               tokenizer)
            masked, mlm_labels = mask_tokens(input_ids, attention_mask, tokenizer, mask_rng)
            yield masked, token_type_ids, attention_mask, mlm_labels, sop_labels

    def epoch_batches(epoch):
        # New random cuts, swaps and masks every epoch from the same documents.
        examples = make_sop_examples(docs_ids, args.max_length, random.Random(args.seed + 1000 + epoch))
        examples = [e for e in examples if frozenset((tuple(e[0]), tuple(e[1]))) not in dev_keys]
        random.Random(args.seed + epoch).shuffle(examples)
        yield from batches(examples, np.random.default_rng(args.seed + epoch))

    def evaluate():
        correct_sop = correct_mlm = total_mlm = 0
        for masked, tt, am, mlm_labels, sop_labels in batches(dev_examples, np.random.default_rng(0)):
            mlm_logits, sop_logits = model(ms.Tensor(masked), ms.Tensor(tt), ms.Tensor(am))
            correct_sop += int((sop_logits.asnumpy().argmax(-1) == sop_labels).sum())
            target = mlm_labels >= 0
            correct_mlm += int((mlm_logits.asnumpy().argmax(-1)[target] == mlm_labels[target]).sum())
            total_mlm += int(target.sum())
        sop_acc = correct_sop / len(dev_examples)
        return sop_acc, {"heldout_sop_accuracy": sop_acc, "heldout_mlm_accuracy": correct_mlm / max(1, total_mlm)}

    steps = math.ceil(len(held_out) / args.batch_size)
    trainer = Trainer(args, model, tokenizer, spiece_path, steps, loss_fn)
    if args.resume:
        trainer.resume()
    return trainer.run(epoch_batches, evaluate)


def main(argv=None):
    args = parse_args(argv)
    if os.path.exists(args.output) and not (args.force or args.resume):
        sys.exit(f"error: {args.output} exists; pass --force to overwrite it or --resume to continue")
    import mindspore as ms
    ms.set_device("CPU")
    from albert_min.training import seed_everything, set_cpu_threads
    set_cpu_threads()   # one kernel thread: same seed, same run (see its docstring)
    seed_everything(args.seed)
    with tempfile.TemporaryDirectory() as workdir:
        runner = run_sop if args.task in PRETRAINING_TASKS else run_classification
        state = runner(args, workdir)
    print(f"done: best score {state['best']}, model in {args.output}")
    return state


if __name__ == "__main__":
    main()
