"""Mixed precision for the train step (``TrainingConfig.amp`` / train.py ``--amp``), through
``mindspore.amp.auto_mixed_precision``, and the dynamic loss scale float16 needs.

- O1: the matrix products (MindSpore's white list: MatMul, BatchMatMul, Dense) run in the low dtype,
  each returning float32. MindSpore's own O1 rewrites the network's Python source
  (``mindspore.rewrite``): on albert_min's model it fails (``DenseOpt.__init__() takes 1 positional
  argument but 2 were given``) after writing the rewritten source into the working directory. So
  here each matmul cell is passed to ``auto_mixed_precision`` at O3 instead, which casts it down
  and its output back to float32: the same white list, without the rewrite.
- O2: every cell runs in the low dtype except MindSpore's black list (nn.LayerNorm, BatchNorm).
- O3: every cell runs in the low dtype.

At every level albert_min's own LayerNorm cells and the attention softmax stay float32
(``keep_float32``): MindSpore's lists name ``nn.LayerNorm`` and ``P.LayerNorm``, which
albert_min's LayerNorm cell is not, so O2 and O3 would otherwise run it in float16 (with
eps 1e-12, which is 0 in float16). So O2 and O3 train the same network here. The parameters
(the master weights) stay float32 and the gradients reach the optimizer in float32; the low
dtype exists only inside the forward and backward passes. The compiled CPU kernels
(albert_min.model.kernels) compute in float32, so under O1-O3 the layers use MindSpore's own ops
(``kernels.use_mindspore_ops``).

- bf16 (CPU only): the compiled kernels stay, and their matrix products (Dense layers forward and
  backward, attention's products) multiply bfloat16 operands with float32 accumulation
  (``kernels.use_bf16_gemms``); everything else, the weights and every tensor between layers stay
  float32. MindSpore's CPU kernels have no bfloat16 (``CPU_UNSUPPORTED``): this is the bfloat16
  training that runs on CPU.

Layer: ``albert_min.training``, above ``tasks`` (the layers: ``albert_min/__init__.py``).
"""

import contextlib

import mindspore as ms
from mindspore import amp

from ..model import kernels
from ..common.errors import AlbertMinError
from .config import BF16_GEMMS, needs_loss_scale  # noqa: F401  (needs_loss_scale: here since mixed precision began)

# The dynamic loss scale of float16 training: it starts at TrainingConfig.loss_scale (2**16), is halved
# on every step whose gradients overflow (the step is skipped) and doubled after SCALE_WINDOW steps in a
# row without one.
SCALE_FACTOR = 2
SCALE_WINDOW = 1000


class MixedPrecisionError(AlbertMinError):
    """A mixed-precision setting this device cannot run."""


def check_device(level: str, dtype: str, device: str):
    """MixedPrecisionError naming the flag when ``device``'s kernels cannot run ``dtype`` (see
    docs/mixed-precision.md for what was measured on CPU)."""
    if level == BF16_GEMMS:
        if device.upper() != "CPU":
            raise MixedPrecisionError(f"--amp bf16: bf16 GEMMs are albert_min's CPU kernels, not {device}'s; use "
                                      "--amp O1 --amp-dtype bfloat16 there")
        reason = kernels.bf16.unavailable(kernels.library())
        if reason:
            raise MixedPrecisionError(f"--amp bf16: {reason}; train in float32 (no --amp)")
        return
    if level == "O0" or device.upper() != "CPU":
        return
    unsupported = CPU_UNSUPPORTED.get(dtype)
    if unsupported:
        instead = ("--amp bf16 (bfloat16 matrix products in albert_min's kernels) or --amp-dtype float16"
                   if dtype == "bfloat16" else "--amp-dtype bfloat16")
        raise MixedPrecisionError(f"--amp {level} --amp-dtype {dtype}: MindSpore {ms.__version__}'s CPU kernels "
                                  f"do not run {dtype} ({unsupported}); use {instead} on CPU, or this setting "
                                  "on GPU/Ascend")


# dtype -> why MindSpore's CPU kernels cannot train in it (measured with MindSpore 2.10.0, see docs/mixed-precision.md).
CPU_UNSUPPORTED = {"bfloat16": "MatMul, BatchMatMul, Softmax, Sigmoid and Erf have no bfloat16 CPU kernel"}


def float32_cells():
    """The cell classes that stay float32 under every AMP level: normalisation and softmax."""
    from ..model.modeling import LayerNorm
    return (LayerNorm, kernels.layers.Softmax)


def matmul_cells():
    """The cell classes of the white list's operations: x W^T + b (Dense) and attention's products."""
    return (kernels.layers.Linear, kernels.layers.BatchMatMul)


def keep_float32(network):
    """Run every LayerNorm and softmax cell of ``network`` in float32 (their inputs are cast up,
    and the next low-precision cell casts their outputs down)."""
    for _, cell in network.cells_and_names():
        if isinstance(cell, float32_cells()):
            cell.to_float(ms.float32)


def _matmuls_to_low_precision(model, dtype):
    """O1: each matmul cell wrapped by ``auto_mixed_precision(cell, "O3")``: its inputs cast to
    ``dtype``, its output back to float32."""
    for _, cell in list(model.cells_and_names()):
        for name, child in list(cell.name_cells().items()):
            if isinstance(child, matmul_cells()):
                setattr(cell, name, amp.auto_mixed_precision(child, "O3", dtype))


def _mark(model, level, dtype):
    """Mark ``model``'s cells with the precision each runs in at ``level`` (again after ``float32_forward``)."""
    if level == "O1":
        model.to_float(ms.float32)
        for _, cell in model.cells_and_names():
            if isinstance(cell, matmul_cells()):
                cell.to_float(dtype)
        return
    model.to_float(dtype)
    keep_float32(model)


def mixed_precision_network(model, level: str, dtype: str):
    """``model`` run at AMP ``level`` (O0-O3) in ``dtype`` ("float16", "bfloat16"), or with bf16 GEMMs
    (``level`` "bf16", ``dtype`` ignored): the network the train step calls.

    ``model`` itself is changed in place (O1-O3: its cells are marked with their precision, and its
    compiled-kernel layers are swapped for MindSpore's ops; bf16: its matrix-product cells swapped for
    bf16 ones); its parameters stay float32 and are the ones the optimizer updates and the checkpoints
    save. O0 returns ``model`` unchanged.
    """
    if level == "O0":
        return model
    if level == BF16_GEMMS:
        report = kernels.use_bf16_gemms(model, notice=False)
        if report.reason:           # check_device says so before any work; here for library callers
            raise MixedPrecisionError(f"--amp bf16: {report.reason}")
        return model
    kernels.use_mindspore_ops(model)
    low = getattr(ms, dtype)
    if level == "O1":
        _matmuls_to_low_precision(model, low)
        network = model
    else:
        network = amp.auto_mixed_precision(model, level, low)   # a wrapper casting the outputs to float32
    _mark(model, level, low)
    return network


@contextlib.contextmanager
def float32_forward(model, level: str, dtype: str):
    """Run ``model`` in float32 inside the block: the dev evaluation during training scores the
    float32 model the checkpoints hold, as evaluate.py will: ``model``'s cells are marked float32
    meanwhile, and marked back after. bf16's cells compute in float32 in prediction by themselves."""
    if level in ("O0", BF16_GEMMS):
        yield
        return
    model.to_float(ms.float32)
    try:
        yield
    finally:
        _mark(model, level, getattr(ms, dtype))


def make_loss_scaler(level: str, dtype: str, scale: float):
    """MindSpore's ``DynamicLossScaler`` for float16 training, None where no scale is needed."""
    if not needs_loss_scale(level, dtype):
        return None
    return amp.DynamicLossScaler(scale_value=float(scale), scale_factor=SCALE_FACTOR, scale_window=SCALE_WINDOW)


def loss_scale_state(scaler) -> dict:
    """What a resume needs of the scaler: its scale and the count of finite steps since the last change."""
    return {"scale": float(scaler.scale_value.asnumpy()), "counter": int(scaler.counter.asnumpy())}


def restore_loss_scale(scaler, state: dict):
    scaler.scale_value.set_data(ms.Tensor(state["scale"], ms.float32))
    scaler.counter.set_data(ms.Tensor(state["counter"], ms.int32))
