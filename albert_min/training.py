"""The pieces of fine-tuning and pre-training that train.py strings together:
learning-rate schedule, AdamW with decay groups, one compiled train step,
and atomic save / resume of the whole training state."""

import json
import os
import random

import numpy as np
import mindspore as ms
from mindspore import nn, ops

from .checkpoint import atomic_directory, read_checkpoint, write_checkpoint, model_arrays, load_arrays

STATE_FILE = "state.json"
WEIGHTS_FILE = "model.ckpt"
OPTIMIZER_FILE = "optimizer.ckpt"


def linear_warmup_decay(peak_lr, total_steps, warmup_fraction):
    """Per-step learning rates: linear warm-up to ``peak_lr``, then linear decay to 0
    (BERT/ALBERT fine-tuning). Returned as a float32 array indexed by step."""
    warmup = max(1, int(round(total_steps * warmup_fraction)))
    steps = np.arange(total_steps, dtype=np.float64)
    up = (steps + 1) / warmup
    down = np.maximum(0.0, (total_steps - steps) / max(1, total_steps - warmup))
    return (peak_lr * np.where(steps < warmup, up, down)).astype(np.float32)


def make_optimizer(model, lr_schedule, weight_decay):
    """AdamW (BERT's AdamWeightDecay) with no decay on biases and LayerNorm weights."""
    no_decay = [p for p in model.trainable_params() if p.name.endswith("bias") or "LayerNorm" in p.name
                or "layer_norm" in p.name]
    decay = [p for p in model.trainable_params() if all(p is not q for q in no_decay)]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return nn.AdamWeightDecay(groups, learning_rate=ms.Tensor(lr_schedule), eps=1e-6)


def make_train_step(loss_fn, optimizer, max_grad_norm, use_jit=True):
    """One optimisation step: loss, gradients, global-norm clipping, AdamW update.

    ``loss_fn(*batch)`` returns a scalar. The step is compiled to a graph
    with ``mindspore.jit`` unless ``use_jit`` is False.
    """
    grad_fn = ms.value_and_grad(loss_fn, None, optimizer.parameters)

    def train_step(*batch):
        loss, grads = grad_fn(*batch)
        grads = ops.clip_by_global_norm(grads, max_grad_norm)
        optimizer(grads)
        return loss

    return ms.jit(train_step) if use_jit else train_step


# ------------------------------------------------------------- training state
def save_training_state(directory, model, optimizer, state: dict):
    """Weights, optimizer moments and ``state`` (epoch, step, best score, RNG) in one atomic folder."""
    with atomic_directory(directory, overwrite=True) as tmp:
        write_checkpoint(model_arrays(model), os.path.join(tmp, WEIGHTS_FILE))
        moments = {p.name: p.asnumpy() for p in optimizer.get_parameters()
                   if p.name.startswith(("moment", "global_step", "beta"))}
        write_checkpoint(moments, os.path.join(tmp, OPTIMIZER_FILE))
        with open(os.path.join(tmp, STATE_FILE), "w") as f:
            json.dump(state, f, indent=2)


def load_training_state(directory, model, optimizer) -> dict:
    """Restore what ``save_training_state`` wrote; returns the state dict."""
    if not os.path.isfile(os.path.join(directory, STATE_FILE)):
        raise FileNotFoundError(f"no training state to resume in {directory}")
    load_arrays(model, read_checkpoint(os.path.join(directory, WEIGHTS_FILE)), directory)
    saved = read_checkpoint(os.path.join(directory, OPTIMIZER_FILE))
    for p in optimizer.get_parameters():
        if p.name in saved:
            if tuple(saved[p.name].shape) != tuple(p.shape):
                raise ValueError(f"{directory}: optimizer state {p.name} does not fit this model")
            p.set_data(ms.Tensor(saved[p.name]))
    with open(os.path.join(directory, STATE_FILE)) as f:
        return json.load(f)


def set_cpu_threads(threads=1):
    """Number of MindSpore CPU kernel threads; once per process, later calls are ignored.

    One thread by default: MindSpore's CPU dropout masks depend on how kernel
    threads split the work, so with more threads the same seed gives different
    runs. On 2 cores one thread was measured no slower (small model train step
    2.52 vs 2.33 steps/s with MindSpore's default of 25 threads; base encoder
    5.4 sentences/s either way): the heavy kernels parallelise on their own.
    """
    global _THREADS_SET
    if not _THREADS_SET:
        ms.device_context.cpu.op_tuning.threads_num(threads)
        _THREADS_SET = True


_THREADS_SET = False


def seed_everything(seed):
    """Python, NumPy and MindSpore RNGs (weight init, dropout, shuffling)."""
    random.seed(seed)
    np.random.seed(seed)
    ms.set_seed(seed)
