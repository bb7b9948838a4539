"""The Trainer: the epoch loop for every task (steps, progress bar, evaluation and keeping
the best model, time budget, saving and resuming the state), usable from Python:

    from albert_min.tasks import get_task
    from albert_min.training.trainer import Trainer
    from albert_min.training.config import TrainingConfig

    task = get_task("sst2")
    train = task.prepare(task.read("train.tsv"), tokenizer, max_length=64)
    state = Trainer(TrainingConfig(output="runs/sst2", epochs=1), model, task, train).run()

What a batch holds and how the loss and the score are computed come from the task
(``albert_min.tasks.task_base``); how the Trainer trains from its ``TrainingConfig``.

Layer: ``albert_min.training``, above ``tasks`` (the layers: ``albert_min/__init__.py``).
"""

import dataclasses
import json
import math
import time

import mindspore as ms
import numpy as np
from tqdm import tqdm

from ..common.device import cpu_threads
from ..common.errors import AlbertMinError
from ..common.parallel import SingleProcess
from ..common.safe_output import output_lock
from ..model import kernels
from ..model.folder import SETTINGS_FILE, TRAIN_METRICS_FILE, model_arrays, save_model_dir
from ..tasks.batching import MAX_TRAIN_LENGTHS, train_lengths_for
from ..tasks.task_base import rows_of
from .mixed_precision import (check_device, float32_forward, loss_scale_state, make_loss_scaler,
                              mixed_precision_network, restore_loss_scale)
from .step import (kernel_dropouts, linear_warmup_decay, make_accumulating_step, make_optimizer, make_train_step,
                   quiet_recompile_warning, release_compiled_graphs, reseed_dropout, reseeds_by_recompiling,
                   start_dropout_step, with_adam_bias_correction)
from .metrics_log import MetricsLog
from .state import check_same_cpu_setup, load_training_state, save_training_state


class TrainingError(AlbertMinError):
    """Training cannot go on (e.g. the loss became NaN)."""


def write_json(path, data):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2)


class Trainer:
    """Train ``model`` on ``task`` as ``config`` says.

    config: a ``TrainingConfig``. model: the task's model class (``task.model_class``), built: the
    Trainer accelerates it in place (``kernels.accelerate``: the compiled kernels where they run).
    task: an ``albert_min.tasks`` Task. train / dev: ``task.prepare``'s results (or
    ``task.training_sets``'); without ``dev`` nothing is evaluated and the last model is kept.
    tokenizer_file: the spiece.model the model folder and the state get a copy of.
    parallel: albert_min.common.parallel's SingleProcess (default) or DataParallel.
    protect: input paths the saved folders must neither be nor contain.
    settings: more JSON-able settings to record in the state beside ``config`` (train.py's data
    files and model shape); inputs: fingerprints of the files the run read (recorded too).
    lock_output: hold ``safe_output.output_lock`` on the output while ``run`` runs (False when
    the caller already holds it, as train.py does from before its first check).
    """

    def __init__(self, config, model, task, train, dev=None, *, tokenizer_file=None, parallel=None, protect=(),
                 settings=None, inputs=None, lock_output=True):
        # the compiled kernels swapped in (where they run) before the optimizer, train step and dropout lists
        self.config, self.model, self.task, self.train, self.dev = config, kernels.accelerate(model), task, train, dev
        self.tokenizer_file = tokenizer_file
        self.parallel = parallel or SingleProcess()   # this worker's rows, who writes, agreed decisions
        self.protect, self.lock_output = tuple(protect), lock_output
        self.steps_per_epoch = task.steps_per_epoch(train, config.batch_size, config.seed, self.parallel)
        if self.steps_per_epoch < 1:   # a run of 0 steps would save an untrained model as if trained
            where = getattr(train.examples, "path", None)
            raise TrainingError(f"{where + ': ' if where else ''}no training examples: an epoch has no step")
        self.total_steps = self.steps_per_epoch * config.epochs
        if config.max_steps:
            self.total_steps = min(self.total_steps, config.max_steps)
        # each padded length is one compile of the train step: a short run pads to few (batching.train_lengths_for)
        self.train = dataclasses.replace(train, train_lengths=train_lengths_for(self.total_steps))
        schedule = linear_warmup_decay(config.lr, self.total_steps, config.warmup)
        if config.adam_bias_correction:   # pre-training from random weights with a short warm-up: see the README
            schedule = with_adam_bias_correction(schedule)
        self.optimizer = make_optimizer(model, schedule, config.weight_decay, config.optimizer)
        self.lr_schedule = schedule   # the learning rate of each step, for the metrics log
        self.metrics = MetricsLog(config.output, config.report_to, writes=self.parallel.writes)   # metrics.jsonl
        check_device(config.amp, config.amp_dtype, ms.get_context("device_target"))
        # the float32 parameters stay the model's: the optimizer updates them and the checkpoints save them
        self.loss_fn = task.loss_fn(mixed_precision_network(model, config.amp, config.amp_dtype))
        self.loss_scaler = make_loss_scaler(config.amp, config.amp_dtype, config.loss_scale)   # float16 only
        self.train_step = None   # built (dropout reseeded, recompiled) at the start of each saved segment
        self.counts_dropout_calls = bool(kernel_dropouts(model))   # the kernels' dropout: set before every step
        # epoch_losses: this epoch's losses so far, so a resumed epoch reports the same mean loss
        self.state = {"epoch": 0, "step": 0, "best": None, "history": [], "epoch_losses": [],
                      "settings": {"training": config.to_dict(), **(settings or {})}, "inputs": inputs or {},
                      "train_lengths": self.train.train_lengths}
        if self.loss_scaler is not None:   # float16: the scale, and the steps skipped for overflowing gradients
            self.state.update({"loss_scale": loss_scale_state(self.loss_scaler), "skipped_steps": 0})
        if cpu_threads() is not None and ms.get_context("device_target") == "CPU":   # what a CPU resume must match
            self.state["cpu"] = {"threads": cpu_threads(), "kernels": kernels.uses_kernels(model)}
            if kernels.uses_bf16_gemms(model):   # --amp bf16 (absent: float32 products, as older states)
                self.state["cpu"]["bf16_gemms"] = True

    def step(self, batch):
        """One optimizer step on ``batch`` (in ``config.grad_accum`` micro-batches); returns the loss.
        Under float16 a step whose gradients overflow is skipped and counted. The kernels' dropout
        draws the masks of (seed, step, call) (``start_dropout_step``, before every step); MindSpore's
        is reseeded from (seed, step) after every saved state and the step recompiled. Either way a
        resumed run repeats the original exactly (see ``albert_min.training.step.reseed_dropout``)."""
        config = self.config
        if self.train_step is None:
            quiet_recompile_warning()
            reseed_dropout(self.model, config.seed, self.state["step"], self.parallel.rank)
            make = make_train_step if config.grad_accum == 1 else make_accumulating_step
            self.train_step = make(self.loss_fn, self.optimizer, config.max_grad_norm, use_jit=config.use_jit,
                                   grad_reducer=self.parallel.grad_reducer(self.optimizer.parameters),
                                   loss_scaler=self.loss_scaler)
        if self.counts_dropout_calls:
            start_dropout_step(config.seed, self.state["step"], self.parallel.rank)
        if config.grad_accum == 1:
            out = self.train_step(*[ms.Tensor(x) for x in batch])
        else:
            rows = rows_of(batch)
            bounds = np.linspace(0, rows, config.grad_accum + 1).round().astype(int)
            parts = [((end - start) / rows, [ms.Tensor(x) for x in self.task.split_batch(batch, slice(start, end))])
                     for start, end in zip(bounds[:-1], bounds[1:]) if end > start]
            out = self.train_step(parts)
        if self.loss_scaler is None:
            return float(out.asnumpy())
        loss, finite = out
        if not bool(finite.asnumpy()):
            self.state["skipped_steps"] += 1
        return float(loss.asnumpy())

    def save_state(self):
        if self.loss_scaler is not None:
            self.state["loss_scale"] = loss_scale_state(self.loss_scaler)
        if self.parallel.writes:
            save_training_state(self.config.state_dir, self.model, self.optimizer, self.state, self.tokenizer_file)
        if reseeds_by_recompiling(self.model):   # MindSpore's dropout: fresh masks from (seed, step), reseed_dropout
            self.train_step = None
            release_compiled_graphs()

    def resume(self):
        """Continue from ``config.state_dir``: weights, optimizer moments and counters (checked
        against each other, see ``state.load_training_state``)."""
        saved = load_training_state(self.config.state_dir, self.model, self.optimizer, recover=False)
        check_same_cpu_setup(saved.get("cpu"), self.state.get("cpu"), self.config.state_dir)
        self.state.update({k: saved[k] for k in ("epoch", "step", "best", "history", "epoch_losses")})
        # the batches' padded lengths as the run began (a resume may extend its steps); older states: 8
        self.state["train_lengths"] = saved.get("train_lengths", MAX_TRAIN_LENGTHS)
        self.train = dataclasses.replace(self.train, train_lengths=self.state["train_lengths"])
        if self.loss_scaler is not None:
            if "loss_scale" not in saved or "skipped_steps" not in saved:
                raise TrainingError(f"{self.config.state_dir}: the state has no loss scale; it is not a state of "
                                    "this float16 mixed-precision run")
            restore_loss_scale(self.loss_scaler, saved["loss_scale"])
            self.state.update({k: saved[k] for k in ("loss_scale", "skipped_steps")})
        if len(self.state["epoch_losses"]) >= self.steps_per_epoch:
            raise TrainingError(f"{self.config.state_dir}: the state is {len(self.state['epoch_losses'])} steps into "
                                f"an epoch of {self.steps_per_epoch}; it is not a state of this run")
        self.metrics.resume(self.state["step"])
        print(f"resumed from {self.config.state_dir}: epoch {self.state['epoch']}, step {self.state['step']}",
              flush=True)

    def run(self):
        """Train to the end of the schedule (or the budget); returns the state (counters, history).

        Evaluates (and keeps the best model) after every epoch and every ``eval_every``
        steps; saves the resumable state at each of those points and every ``save_every`` steps.
        """
        try:
            if self.lock_output and self.parallel.writes:
                with output_lock(self.config.output):
                    return self._run()
            return self._run()
        finally:
            self.metrics.close()

    def _run(self):
        config = self.config
        self.check_workers_agree()
        deadline = time.monotonic() + config.max_minutes * 60 if config.max_minutes else None
        out_of_time = False
        for epoch in range(self.state["epoch"], config.epochs):
            if self.state["step"] >= self.total_steps or out_of_time:
                break
            self.model.set_train(True)
            losses, start = self.state["epoch_losses"], time.perf_counter()
            done = len(losses)   # > 0 when resuming inside this epoch: those batches are skipped

            def log(epoch_done):   # evaluate at this point of the epoch; steps/s counts this run's steps only
                self.evaluate_and_keep_best(epoch_done, losses, start, len(losses) - done)

            bar = tqdm(total=min(self.steps_per_epoch - done, self.total_steps - self.state["step"]),
                       desc=f"epoch {epoch + 1}/{config.epochs}", unit="step", disable=config.quiet)
            batches = self.task.train_batches(self.train, epoch, config.batch_size, config.seed, self.parallel)
            for index, batch in enumerate(batches):
                if index < done:
                    continue   # drawn anyway, so the epoch's shuffling and masking RNGs advance as before
                if self.state["step"] >= self.total_steps:
                    break
                began = time.perf_counter()
                loss = self.step(batch)
                if not math.isfinite(loss):
                    raise TrainingError(f"loss became {loss} at step {self.state['step']}; lower the learning "
                                        "rate (--lr)")
                losses.append(loss)
                self.metrics.append({"step": self.state["step"] + 1, "loss": loss,
                                     "lr": float(self.lr_schedule[self.state["step"]]),
                                     "examples_per_s": rows_of(batch) * self.parallel.size
                                     / (time.perf_counter() - began)})
                self.state["step"] += 1
                bar.update(1)
                bar.set_postfix(loss=f"{np.mean(losses[-50:]):.4f}")
                mid_epoch = len(losses) < self.steps_per_epoch
                if config.eval_every and self.state["step"] % config.eval_every == 0 and mid_epoch:
                    log(epoch + len(losses) / self.steps_per_epoch)
                    self.model.set_train(True)
                    self.save_state()
                elif config.save_every and self.state["step"] % config.save_every == 0 and mid_epoch:
                    self.save_state()
                if deadline is not None and self.parallel.any(time.monotonic() >= deadline) and mid_epoch:
                    out_of_time = True   # checked after a step: at least one step per run
                    break
            bar.close()
            if len(losses) < self.steps_per_epoch:   # stopped inside the epoch: out of time or at max_steps
                if not self.state["history"] or self.state["history"][-1]["step"] != self.state["step"]:
                    log(epoch + len(losses) / self.steps_per_epoch)
                    self.save_state()   # else eval_every has just evaluated and saved this very step
                if out_of_time:
                    print(f"stopped after --max-minutes {config.max_minutes} at step {self.state['step']}; "
                          f"--resume continues from {config.state_dir}", flush=True)
                break
            log(epoch + 1)
            self.state["epoch"] = epoch + 1
            self.state["epoch_losses"] = []
            self.save_state()
            if (deadline is not None and self.parallel.any(time.monotonic() >= deadline)
                    and self.state["step"] < self.total_steps):
                print(f"stopped after --max-minutes {config.max_minutes} at step {self.state['step']} (end of "
                      f"epoch {epoch + 1}); --resume continues from {config.state_dir}", flush=True)
                break
        return self.state

    def check_workers_agree(self):
        """Data-parallel workers never exchange weights: they must start from the same ones."""
        if self.parallel.size == 1:
            return
        if self.tokenizer_file:
            from tokenizer import AlbertTokenizer
            sp = AlbertTokenizer(self.tokenizer_file).sp   # the vocabulary: a trained file also holds its temp paths
            vocabulary = "\n".join(f"{sp.IdToPiece(i)} {sp.GetScore(i)}" for i in range(sp.GetPieceSize()))
            self.parallel.check_same("tokenizers (give them one with --tokenizer)", vocabulary.encode())
        self.parallel.check_same("initial weights", b"".join(a.tobytes() for a in model_arrays(self.model).values()))

    def evaluate_and_keep_best(self, epoch, losses, start, steps_run):
        """Evaluate, log a record, and save the model folder if this is the best score so far
        (without a dev set: every time, so the last model is kept).

        losses: the epoch's losses so far (before a resume too); steps_run: those this run took since start.
        """
        seconds = time.perf_counter() - start
        self.model.set_train(False)
        evaluating = time.perf_counter()
        metrics, score = {}, None
        if self.dev is not None:
            with float32_forward(self.model, self.config.amp, self.config.amp_dtype):
                metrics = self.task.evaluate(self.model, self.dev, use_jit=self.config.use_jit,
                                             progress=not self.config.quiet, parallel=self.parallel)
            score = self.task.selection_score(metrics)
        record = {"epoch": round(epoch, 2), "step": self.state["step"],
                  "train_loss": float(np.mean(losses)), "steps_per_s": steps_run / seconds,
                  "eval_s": round(time.perf_counter() - evaluating, 3), **metrics}
        if self.loss_scaler is not None:   # float16: steps skipped so far for overflowing gradients, and the scale
            record.update(skipped_steps=self.state["skipped_steps"],
                          loss_scale=loss_scale_state(self.loss_scaler)["scale"])
        self.state["history"].append(record)
        self.metrics.append({"step": record["step"], "epoch": record["epoch"], "train_loss": record["train_loss"],
                             "eval": metrics})
        print(json.dumps(record), flush=True)
        if score is not None and self.state["best"] is not None and score < self.state["best"]:
            return
        if score is not None:
            self.state["best"] = score
        if not self.parallel.writes:
            return
        settings = {"task": self.task.name, "max_length": self.train.max_length, **self.task.options()}
        save_model_dir(self.model, self.config.output, spiece_model=self.tokenizer_file, overwrite=True,
                       protect=self.protect, extra_files={TRAIN_METRICS_FILE: lambda path: write_json(path, record),
                                                          SETTINGS_FILE: lambda path: write_json(path, settings),
                                                          **self.metrics.files_for_save()},
                       weights_format=self.config.format)
        print(f"saved {self.config.output} " + (f"({shown_score(score, metrics)})" if score is not None else
                                                f"(no dev set: the last model, step {self.state['step']})"),
              flush=True)


def shown_score(score, metrics):
    """"score 0.8142"; where the dev metric the model is kept by is undefined (CoLA's Matthews correlation
    of constant predictions), which and why, rather than the -1 it ranks as."""
    undefined = [k for k, v in metrics.items() if k.startswith("dev_") and v is None]
    if score != -1.0 or not undefined:
        return f"score {score:.4f}"
    name = undefined[0]   # the task's metrics come first, the one it is kept by before the rest
    why = (metrics.get("dev_notes") or {}).get(name[len("dev_"):])
    return f"score undefined: {name}{f' ({why})' if why else ''}; ranked below any defined score"

