"""The pieces of the training loop (albert_min.training.trainer): learning-rate schedule, AdamW or
LAMB with decay groups, one compiled train step (or one over micro-batches), and the
dropout reseeding that makes a resumed run repeat the uninterrupted one. The saved
training state is albert_min.training.state.

Layer: ``albert_min.training``, above ``tasks`` (the layers: ``albert_min/__init__.py``).
"""

import logging
import random

import numpy as np
import mindspore as ms
from mindspore import amp, nn, ops

from ..model.kernels.philox_dropout import DropoutWithKernels, start_step as start_dropout_step   # noqa: F401 (the Trainer's)


def linear_warmup_decay(peak_lr, total_steps, warmup_fraction):
    """Per-step learning rates: linear warm-up to ``peak_lr``, then linear decay to 0
    (BERT/ALBERT fine-tuning). Returned as a float32 array indexed by step."""
    warmup = max(1, int(round(total_steps * warmup_fraction)))
    steps = np.arange(total_steps, dtype=np.float64)
    up = (steps + 1) / warmup
    down = np.maximum(0.0, (total_steps - steps) / max(1, total_steps - warmup))
    return (peak_lr * np.where(steps < warmup, up, down)).astype(np.float32)


def with_adam_bias_correction(lr_schedule, beta1=0.9, beta2=0.999):
    """``lr_schedule`` times sqrt(1 - beta2^t) / (1 - beta1^t), t = step + 1: Adam's bias
    correction in the step-size form of Kingma & Ba (section 2), for ``AdamWeightDecay``,
    which has none.

    Without it the first updates are 3-6.5x what Adam intends (2.7x still at step 150),
    which a short warm-up from random weights does not absorb: pre-training at lr 1e-3
    sat on the masked-LM "unigram plateau" (see the README). The only difference left
    to torch's ``AdamW`` is that the weight decay is scaled by the same factor (at most
    6.5x smaller, over the first few hundred steps) and eps is not rescaled.
    """
    t = np.arange(1, len(lr_schedule) + 1, dtype=np.float64)
    return (lr_schedule * np.sqrt(1.0 - beta2 ** t) / (1.0 - beta1 ** t)).astype(np.float32)


def make_optimizer(model, lr_schedule, weight_decay, kind="adamw"):
    """AdamW (BERT's ``AdamWeightDecay``) or LAMB (``albert_min.training.lamb``, the ALBERT paper's
    pre-training optimizer: Adam's update scaled per tensor by ||w|| / ||update||), with no weight
    decay on biases and LayerNorm weights."""
    no_decay = [p for p in model.trainable_params() if p.name.endswith("bias") or "LayerNorm" in p.name
                or "layer_norm" in p.name]
    decay = [p for p in model.trainable_params() if all(p is not q for q in no_decay)]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    if kind == "lamb":
        from .lamb import Lamb   # nn.Lamb's fused kernel has no CPU implementation: see albert_min.training.lamb
        return Lamb(groups, learning_rate=ms.Tensor(lr_schedule), eps=1e-6)
    if kind != "adamw":
        raise ValueError(f"unknown optimizer {kind!r}")
    return nn.AdamWeightDecay(groups, learning_rate=ms.Tensor(lr_schedule), eps=1e-6)


def _averaged_over_workers(grad_reducer):
    """(grads, loss) -> the same averaged over data-parallel workers; None for one process."""
    if grad_reducer is None:
        return None
    from mindspore.communication import get_group_size
    sum_over_workers, workers = ops.AllReduce(), get_group_size()

    def average(grads, loss):
        return grad_reducer(grads), sum_over_workers(loss) / workers
    return average


def _gradients(loss_fn, optimizer, loss_scaler):
    """``(*batch) -> (loss, grads)``; with ``loss_scaler`` the gradients are those of the loss times
    the scale (still scaled: ``_update`` unscales them) and the loss is the unscaled one."""
    if loss_scaler is None:
        return ms.value_and_grad(loss_fn, None, optimizer.parameters)

    def scaled(*batch):
        loss = loss_fn(*batch)
        return loss_scaler.scale(loss), loss
    grad_fn = ms.value_and_grad(scaled, None, optimizer.parameters, has_aux=True)

    def gradients(*batch):
        (_, loss), grads = grad_fn(*batch)
        return loss, grads
    return gradients


def clip_by_global_norm(grads, max_norm):
    """``grads`` times max_norm / max(global norm, max_norm): all of them scaled by one factor when the
    norm of their concatenation exceeds ``max_norm`` (torch's ``clip_grad_norm_`` without its 1e-6).
    ``ops.clip_by_global_norm`` computes the same, but its sums (MindSpore's CPU ReduceSum over all axes
    at once runs at about 1 GB/s) and its two passes per gradient (times max_norm, then divided by the
    norm) took 66 ms of the base fine-tuning step, against 10 ms for these. Mapped over the gradients
    (``HyperMap``, as MindSpore's is): a Python loop over them compiled 1 s slower."""
    norm = ops.sqrt(ops.addn(_map(_sum_of_squares, grads)))
    factor = max_norm / ops.maximum(norm, max_norm)                 # 1 when the norm is within max_norm
    return _map(ops.partial(_times, factor), grads)


_map = ops.HyperMap()
_sum_of_squares = ops.MultitypeFuncGraph("sum_of_squares")
_times = ops.MultitypeFuncGraph("times")


@_sum_of_squares.register("Tensor")
def _tensor_sum_of_squares(x):
    """The sum of ``x``'s squared elements, a float32 scalar: in rows of 256 first (a reduction over the
    last axis is vectorised on CPU: 2.3 ms for the 3.8 M word embeddings, 16 ms over all axes at once)."""
    squares = x * x
    row = 256 if squares.size % 256 == 0 else squares.size
    return ops.reduce_sum(ops.reduce_sum(squares.reshape(-1, row), 1))


@_times.register("Tensor", "Tensor")
def _tensor_times(factor, x):
    return x * factor


def _update(optimizer, max_grad_norm, average, loss_scaler):
    """``(grads, loss) -> loss`` after averaging over the workers, clipping and the optimizer
    update; with ``loss_scaler`` ``-> (loss, grads_finite)``: the gradients are unscaled, and a
    step whose gradients overflowed is skipped (weights and moments unchanged, the optimizer's
    step counter, which indexes the learning-rate schedule, still advances) while the scale is
    lowered. The workers average before the check, so they all agree to skip."""
    def update(grads, loss):
        if average is not None:
            grads, loss = average(grads, loss)
        if loss_scaler is None:
            optimizer(clip_by_global_norm(grads, max_grad_norm))
            return loss
        grads = loss_scaler.unscale(grads)
        finite = amp.all_finite(grads)
        if finite:
            optimizer(clip_by_global_norm(grads, max_grad_norm))
        else:
            ops.assign_add(optimizer.global_step, optimizer.global_step_increase_tensor)
        loss_scaler.adjust(finite)
        return loss, finite
    return update


def make_train_step(loss_fn, optimizer, max_grad_norm, use_jit=True, grad_reducer=None, loss_scaler=None):
    """One optimisation step: loss, gradients, global-norm clipping, optimizer update.

    ``loss_fn(*batch)`` returns a scalar. The step is compiled to a graph
    with ``mindspore.jit`` unless ``use_jit`` is False. Data-parallel workers
    pass ``grad_reducer`` (``nn.DistributedGradReducer``, see albert_min.common.parallel):
    the gradients are averaged over the workers BEFORE clipping, so the norm is
    the global batch's, and the returned loss is the mean over the workers.
    float16 mixed precision passes ``loss_scaler`` (``mindspore.amp.DynamicLossScaler``):
    the step then returns ``(loss, grads_finite)`` and skips an overflowing update (``_update``).
    """
    gradients = _gradients(loss_fn, optimizer, loss_scaler)
    update = _update(optimizer, max_grad_norm, _averaged_over_workers(grad_reducer), loss_scaler)

    def train_step(*batch):
        loss, grads = gradients(*batch)
        return update(grads, loss)

    return ms.jit(train_step) if use_jit else train_step


def make_accumulating_step(loss_fn, optimizer, max_grad_norm, use_jit=True, grad_reducer=None, loss_scaler=None):
    """``make_train_step`` over micro-batches: ``step([(weight, batch), ...])`` adds up
    ``weight * gradient`` of each micro-batch, then averages over the workers, clips and
    updates once. With weights = each micro-batch's share of the rows and a loss that is a
    mean over rows, this is the step on the whole batch, in less memory. With ``loss_scaler``
    the micro-batches' scaled gradients are added up and checked once, at the update."""
    gradients = _gradients(loss_fn, optimizer, loss_scaler)

    def weighted(weight, *batch):
        loss, grads = gradients(*batch)
        return loss * weight, tuple(g * weight for g in grads)

    def add(total, part):
        return tuple(a + b for a, b in zip(total, part))

    compile_ = ms.jit if use_jit else (lambda f: f)
    apply = _update(optimizer, max_grad_norm, _averaged_over_workers(grad_reducer), loss_scaler)
    weighted, add, apply = compile_(weighted), compile_(add), compile_(apply)

    def step(parts):
        loss = grads = None
        for weight, batch in parts:
            part_loss, part_grads = weighted(ms.Tensor(weight, ms.float32), *batch)
            loss, grads = (part_loss, part_grads) if grads is None else (loss + part_loss, add(grads, part_grads))
        return apply(grads, loss)

    return step


def dropouts(model):
    """MindSpore's ``nn.Dropout`` cells of ``model`` (where the kernels are not built), in a fixed order."""
    return [cell for _, cell in model.cells_and_names() if isinstance(cell, nn.Dropout)]


def kernel_dropouts(model):
    """The dropout cells of ``model`` whose masks come from ``albert_min.model.kernels.philox_dropout``."""
    return [cell for _, cell in model.cells_and_names() if isinstance(cell, DropoutWithKernels)]


def keep_probability(cell):
    """1 - p of an ``nn.Dropout`` (built with ``p``, or with the older ``keep_prob``)."""
    return cell.keep_prob if cell.p is None else 1.0 - cell.p


def reseed_dropout(model, seed, step, rank=0):
    """Give every dropout of ``model`` a fresh mask generator seeded from ``(seed, step)``
    (and ``rank``: each data-parallel worker draws its own masks for its own rows).

    MindSpore's CPU dropout keeps its random state inside the kernel, where it
    cannot be saved (and ``mindspore.Generator``-driven dropout, ``DropoutExt``,
    has no CPU kernel). So the masks are made a function of where a run is
    instead of its history: the trainer calls this, and compiles a new train
    step (fresh kernels), at step 0 and after every saved state. A resumed run
    reseeds at the step it resumes from, so it draws the very masks the
    uninterrupted run drew.

    The kernels' dropout (``kernel_dropouts``) needs no new kernels: its masks are a function
    of (seed, rank, step, call), set here and before every step (``start_dropout_step``).
    """
    for index, cell in enumerate(dropouts(model)):
        keep = keep_probability(cell)
        entropy = [seed, step, index] + ([rank] if rank else [])   # rank 0: the single-process masks
        seed0, seed1 = np.random.SeedSequence(entropy).generate_state(2) % (2**31 - 1) + 1
        cell.dropout = ops.Dropout(float(keep), int(seed0), int(seed1))
    start_dropout_step(seed, step, rank)


def uses_dropout(model) -> bool:
    """Does any dropout of ``model`` drop anything?"""
    return (any(keep_probability(cell) < 1.0 for cell in dropouts(model))
            or any(cell.p > 0 for cell in kernel_dropouts(model)))


def reseeds_by_recompiling(model) -> bool:
    """Does a MindSpore dropout of ``model`` drop anything? Its masks are reseeded by compiling
    the train step again (``reseed_dropout``); without one (no dropout, or the kernels' dropout)
    the trainer keeps its compiled step across saves (no recompile to wait for)."""
    return any(keep_probability(cell) < 1.0 for cell in dropouts(model))


def release_compiled_graphs():
    """Free every graph this process compiled, before ``reseed_dropout``'s recompile.

    MindSpore keeps a compiled graph and its memory for the life of the process,
    even when nothing can call it again. Without this, each recompile of the small
    model's train step (3 batch shapes) kept 0.84 GB (benchmarks/recompile_memory.py),
    and a fine-tuning run that saved its state every 300 steps grew to 17.4 GB. The graphs still
    in use, e.g. the dev evaluation's, are simply compiled again when next called.
    """
    ms.ms_memory_recycle()


class _WithoutRecompileWarning(logging.Filter):
    """Drops MindSpore's "has been compiled again" warning: after ``reseed_dropout``
    recompiling the train step is the point, not a mistake."""

    def filter(self, record):
        return "has been compiled again" not in record.getMessage()


def quiet_recompile_warning():
    from mindspore import log as ms_log
    logger = ms_log._get_logger()   # pylint: disable=protected-access
    if not any(isinstance(f, _WithoutRecompileWarning) for f in logger.filters):
        logger.addFilter(_WithoutRecompileWarning())


def seed_everything(seed):
    """Python, NumPy and MindSpore RNGs (weight init, dropout, shuffling)."""
    random.seed(seed)
    np.random.seed(seed)
    ms.set_seed(seed)
