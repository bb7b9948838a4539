"""TrainingConfig: how the Trainer trains (schedule, optimizer, evaluation and save
cadence, budget, output). train.py turns its flags into one; Python code builds one directly.

    config = TrainingConfig(output="runs/sst2", epochs=1, batch_size=16, lr=1e-4)

Layer: ``albert_min.training``, above ``tasks`` (the layers: ``albert_min/__init__.py``).
"""

import dataclasses
import math
import os
from typing import Optional

from ..common.errors import AlbertMinError

OPTIMIZERS = ("adamw", "lamb")
WEIGHTS_FORMATS = ("ckpt", "safetensors")   # the model folder's model.ckpt or model.safetensors (checkpoint.FORMATS)
# mindspore.amp.auto_mixed_precision's levels, and bf16: albert_min's CPU kernels multiplying bfloat16 operands,
# everything else float32 (training.mixed_precision, model.kernels.bf16)
AMP_LEVELS = ("O0", "O1", "O2", "O3", "bf16")
BF16_GEMMS = "bf16"
AMP_DTYPES = ("float16", "bfloat16")


def needs_loss_scale(level: str, dtype: str) -> bool:
    """float16 has 5 exponent bits: small gradients underflow and large ones overflow without a
    loss scale. bfloat16 has float32's range and needs none."""
    return level not in ("O0", BF16_GEMMS) and dtype == "float16"


# May differ on --resume: they extend (or shorten) the run's budget, or only change what is shown.
EXTENDABLE = ("epochs", "max_steps", "max_minutes")
PRESENTATION = ("quiet", "report_to")
REPORT_TO = ("none", "tensorboard")         # where the curve goes besides metrics.jsonl (training.metrics_log)


class TrainingConfigError(AlbertMinError):
    """A training setting out of its range; the message names the setting."""


@dataclasses.dataclass
class TrainingConfig:
    output: str                            # model folder the best model is written to; state in <output>.state
    epochs: int = 3                        # passes over the training data
    batch_size: int = 64                   # examples per optimizer step (data parallel: the global batch)
    lr: float = 2e-4                       # peak learning rate
    warmup: float = 0.1                    # share of the steps of linear warm-up, then linear decay to 0
    weight_decay: float = 0.01             # decoupled weight decay (not on biases and LayerNorm weights)
    max_grad_norm: float = 1.0             # gradients are clipped to this global norm
    optimizer: str = "adamw"               # adamw (BERT's AdamWeightDecay) or lamb (the paper's pre-training one)
    grad_accum: int = 1                    # micro-batches per step: the batch is split in this many parts
    adam_bias_correction: bool = False     # scale the schedule by Adam's bias correction (pre-training from scratch)
    max_steps: Optional[int] = None        # stop after this many steps; shortens the schedule too
    max_minutes: Optional[float] = None    # time budget; the state is saved, --resume continues
    eval_every: Optional[int] = None       # also evaluate, keep the best and save the state every N steps
    save_every: Optional[int] = None       # also save the resumable state every N steps
    seed: int = 42                         # batch order, dropout masks (and, in train.py, weights and tokenizer)
    use_jit: bool = True                   # compile the train step to a graph (False: PyNative)
    format: str = "ckpt"                   # the model folder's weights: model.ckpt or MindSpore's model.safetensors
    amp: str = "O0"                        # mixed precision (training.mixed_precision): O0 (off), O1, O2, O3, bf16
    amp_dtype: str = "float16"             # the low dtype under --amp O1-O3: float16 (loss-scaled) or bfloat16
    loss_scale: float = 2.0 ** 16          # float16 only: the dynamic loss scale's starting value
    quiet: bool = False                    # no progress bars
    report_to: str = "none"                # also write TensorBoard event files: "tensorboard" (an optional extra)

    def __post_init__(self):
        self.validate()

    def validate(self):
        def need(ok, name, wanted):
            if not ok:
                raise TrainingConfigError(f"{name} must be {wanted}, got {getattr(self, name)!r}")

        def integer(name, low, optional=False):
            value = getattr(self, name)
            if optional and value is None:
                return
            need(isinstance(value, int) and not isinstance(value, bool) and value >= low, name,
                 f"an integer >= {low}")

        def number(name, low, high=None, low_open=False, optional=False):
            value = getattr(self, name)
            if optional and value is None:
                return
            ok = (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
                  and (value > low if low_open else value >= low) and (high is None or value <= high))
            need(ok, name, f"a finite number {'>' if low_open else '>='} {low}" + (f" and <= {high}" if high else ""))

        need(isinstance(self.output, str) and self.output.strip("/" + os.sep) != "", "output", "a folder path")
        for name in ("epochs", "batch_size", "grad_accum"):
            integer(name, 1)
        for name in ("max_steps", "eval_every", "save_every"):
            integer(name, 1, optional=True)
        integer("seed", 0)
        number("lr", 0.0, low_open=True)
        number("warmup", 0.0, 1.0)
        number("weight_decay", 0.0)
        number("max_grad_norm", 0.0, low_open=True)
        number("max_minutes", 0.0, low_open=True, optional=True)
        need(self.optimizer in OPTIMIZERS, "optimizer", f"one of {', '.join(OPTIMIZERS)}")
        need(self.format in WEIGHTS_FORMATS, "format", f"one of {', '.join(WEIGHTS_FORMATS)}")
        need(self.amp in AMP_LEVELS, "amp", f"one of {', '.join(AMP_LEVELS)}")
        need(self.amp_dtype in AMP_DTYPES, "amp_dtype", f"one of {', '.join(AMP_DTYPES)}")
        need(self.report_to in REPORT_TO, "report_to", f"one of {', '.join(REPORT_TO)}")
        number("loss_scale", 1.0)
        if self.batch_size % self.grad_accum:
            raise TrainingConfigError(f"batch_size {self.batch_size} must be a multiple of grad_accum "
                                      f"{self.grad_accum} (each step's batch is split into equal micro-batches)")
        for name in ("adam_bias_correction", "use_jit", "quiet"):
            need(isinstance(getattr(self, name), bool), name, "true or false")

    @property
    def state_dir(self) -> str:
        """The resumable training state: ``<output>.state`` beside the model folder."""
        return self.output.rstrip("/" + os.sep) + ".state"

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict, source: str = "training config"):
        """The config a dict describes (e.g. a saved state's); unknown keys are an error naming them."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise TrainingConfigError(f"{source}: unknown training settings {unknown}")
        try:
            return cls(**data)
        except TypeError as err:   # a required field missing
            raise TrainingConfigError(f"{source}: {err}") from None
