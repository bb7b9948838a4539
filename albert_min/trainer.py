"""The epoch loop train.py runs for both fine-tuning and pre-training: steps, progress
bar, evaluation and keeping the best model, time budget, saving and resuming the state.

What a step computes (the loss) and what a batch holds come from the caller: train.py
builds them per task and hands them in as ``loss_fn``, ``epoch_batches`` and ``evaluate``.
"""

import json
import math
import sys
import time

import mindspore as ms
import numpy as np
from tqdm import tqdm

from .checkpoint import TRAIN_METRICS_FILE, model_arrays, save_model_dir
from .training import (linear_warmup_decay, load_training_state, make_optimizer, make_train_step,
                       quiet_recompile_warning, release_compiled_graphs, reseed_dropout, save_training_state,
                       uses_dropout, with_adam_bias_correction)


def write_json(path, data):
    with open(path, "w") as f:
        json.dump(data, f, indent=2)


class Trainer:
    """The epoch loop shared by fine-tuning and pre-training.

    args: train.py's parsed flags (the schedule: epochs, max_steps, lr, warmup, weight_decay,
    max_grad_norm, seed, max_minutes; when to evaluate and save: eval_every, save_every;
    and output, no_jit, quiet). steps_per_epoch: this run's steps per epoch (global batches).
    loss_fn(*batch) -> scalar loss; parallel: albert_min.parallel's SingleProcess or DataParallel.
    """

    def __init__(self, args, model, tokenizer, spiece_path, steps_per_epoch, loss_fn, parallel, *,
                 state_dir, protect, adam_bias_correction):
        self.args, self.model, self.tokenizer, self.spiece_path = args, model, tokenizer, spiece_path
        self.parallel = parallel   # albert_min.parallel: this worker's rows, who writes, agreed decisions
        self.steps_per_epoch = steps_per_epoch
        self.total_steps = steps_per_epoch * args.epochs
        if args.max_steps:
            self.total_steps = min(self.total_steps, args.max_steps)
        schedule = linear_warmup_decay(args.lr, self.total_steps, args.warmup)
        if adam_bias_correction:   # pre-training from random weights with a short warm-up: see the README
            schedule = with_adam_bias_correction(schedule)
        self.optimizer = make_optimizer(model, schedule, args.weight_decay)
        self.loss_fn = loss_fn
        self.train_step = None   # built (dropout reseeded, recompiled) at the start of each saved segment
        self.state_dir = state_dir   # <output>.state: the resumable training state
        self.protect = protect       # the run's input files: a saved model folder must not replace them
        # epoch_losses: this epoch's losses so far, so a resumed epoch reports the same mean loss
        self.state = {"epoch": 0, "step": 0, "best": None, "history": [], "epoch_losses": []}

    def step(self, batch):
        """One train step. After every saved state the dropout masks are reseeded from
        (seed, step) and the step recompiled, so a resumed run repeats the original
        exactly (see ``albert_min.training.reseed_dropout``)."""
        if self.train_step is None:
            quiet_recompile_warning()
            reseed_dropout(self.model, self.args.seed, self.state["step"], self.parallel.rank)
            self.train_step = make_train_step(self.loss_fn, self.optimizer, self.args.max_grad_norm,
                                              use_jit=not self.args.no_jit,
                                              grad_reducer=self.parallel.grad_reducer(self.optimizer.parameters))
        return float(self.train_step(*[ms.Tensor(x) for x in batch]).asnumpy())

    def save_state(self):
        if self.parallel.writes:
            save_training_state(self.state_dir, self.model, self.optimizer, self.state)
        if uses_dropout(self.model):   # fresh masks from (seed, step): see reseed_dropout
            self.train_step = None
            release_compiled_graphs()

    def resume(self):
        # check_outputs has already completed or rolled back an interrupted save of both folders
        self.state = load_training_state(self.state_dir, self.model, self.optimizer, recover=False)
        self.state.setdefault("epoch_losses", [])
        print(f"resumed from {self.state_dir}: epoch {self.state['epoch']}, step {self.state['step']}", flush=True)

    def run(self, epoch_batches, evaluate):
        """epoch_batches(epoch) yields tuples of numpy arrays; evaluate() -> (score, metrics dict).

        Evaluates (and keeps the best model) after every epoch and, with
        --eval-every N, every N steps; saves the resumable state at each of those
        points and every --save-every steps.
        """
        args = self.args
        self.check_workers_agree()
        deadline = time.monotonic() + args.max_minutes * 60 if args.max_minutes else None
        out_of_time = False
        for epoch in range(self.state["epoch"], args.epochs):
            if self.state["step"] >= self.total_steps or out_of_time:
                break
            self.model.set_train(True)
            losses, start = self.state["epoch_losses"], time.perf_counter()
            done = len(losses)   # > 0 when resuming inside this epoch: those batches are skipped

            def log(epoch_done):   # evaluate at this point of the epoch; steps/s counts this run's steps only
                self.evaluate_and_keep_best(evaluate, epoch_done, losses, start, len(losses) - done)

            bar = tqdm(total=min(self.steps_per_epoch - done, self.total_steps - self.state["step"]),
                       desc=f"epoch {epoch + 1}/{args.epochs}", unit="step", disable=args.quiet)
            for index, batch in enumerate(epoch_batches(epoch)):
                if index < done:
                    continue   # drawn anyway, so the epoch's shuffling and masking RNGs advance as before
                if self.state["step"] >= self.total_steps:
                    break
                loss = self.step(batch)
                if not math.isfinite(loss):
                    sys.exit(f"error: loss became {loss} at step {self.state['step']}; lower --lr")
                losses.append(loss)
                self.state["step"] += 1
                bar.update(1)
                bar.set_postfix(loss=f"{np.mean(losses[-50:]):.4f}")
                mid_epoch = len(losses) < self.steps_per_epoch
                if args.eval_every and self.state["step"] % args.eval_every == 0 and mid_epoch:
                    log(epoch + len(losses) / self.steps_per_epoch)
                    self.model.set_train(True)
                    self.save_state()
                elif args.save_every and self.state["step"] % args.save_every == 0 and mid_epoch:
                    self.save_state()
                if deadline is not None and self.parallel.any(time.monotonic() >= deadline) and mid_epoch:
                    out_of_time = True   # checked after a step: at least one step per run
                    break
            bar.close()
            if len(losses) < self.steps_per_epoch:   # stopped inside the epoch: out of time or at --max-steps
                if not self.state["history"] or self.state["history"][-1]["step"] != self.state["step"]:
                    log(epoch + len(losses) / self.steps_per_epoch)
                    self.save_state()   # else --eval-every has just evaluated and saved this very step
                if out_of_time:
                    print(f"stopped after --max-minutes {args.max_minutes} at step {self.state['step']}; "
                          f"--resume continues from {self.state_dir}", flush=True)
                break
            log(epoch + 1)
            self.state["epoch"] = epoch + 1
            self.state["epoch_losses"] = []
            self.save_state()
            if (deadline is not None and self.parallel.any(time.monotonic() >= deadline)
                    and self.state["step"] < self.total_steps):
                print(f"stopped after --max-minutes {args.max_minutes} at step {self.state['step']} (end of "
                      f"epoch {epoch + 1}); --resume continues from {self.state_dir}", flush=True)
                break
        return self.state

    def check_workers_agree(self):
        """Data-parallel workers never exchange weights: they must start from the same ones."""
        if self.parallel.size == 1:
            return
        sp = self.tokenizer.sp   # the vocabulary: a trained spiece.model's bytes also hold its temporary paths
        vocabulary = "\n".join(f"{sp.IdToPiece(i)} {sp.GetScore(i)}" for i in range(sp.GetPieceSize()))
        self.parallel.check_same("tokenizers (give them one with --tokenizer)", vocabulary.encode())
        self.parallel.check_same("initial weights", b"".join(a.tobytes() for a in model_arrays(self.model).values()))

    def evaluate_and_keep_best(self, evaluate, epoch, losses, start, steps_run):
        """Evaluate, log a record, and save the model folder if this is the best score so far.

        losses: the epoch's losses so far (before a resume too); steps_run: those this run took since start.
        """
        seconds = time.perf_counter() - start
        self.model.set_train(False)
        evaluating = time.perf_counter()
        score, metrics = evaluate()
        record = {"epoch": round(epoch, 2), "step": self.state["step"], "max_length": self.args.max_length,
                  "train_loss": float(np.mean(losses)), "steps_per_s": steps_run / seconds,
                  "eval_s": round(time.perf_counter() - evaluating, 3), **metrics}
        self.state["history"].append(record)
        print(json.dumps(record), flush=True)
        if self.state["best"] is None or score >= self.state["best"]:
            self.state["best"] = score
            if not self.parallel.writes:
                return
            save_model_dir(self.model, self.args.output, spiece_model=self.spiece_path, overwrite=True,
                           protect=self.protect, extra_files={TRAIN_METRICS_FILE: lambda path: write_json(path, record)})
            print(f"saved {self.args.output} (score {score:.4f})", flush=True)
