"""The resumable training state ``<output>.state``: weights, optimizer moments, the loop's
counters (``state.json``), the run's settings and the fingerprints of its inputs, and the
tokenizer it trained (so a resume never trains it again).

``state.json`` is checked against ``STATE_SCHEMA`` and against the optimizer's own step
count before anything is restored: a hand-edited state is one error naming the key.

Layer: ``albert_min.training``, above ``tasks`` (the layers: ``albert_min/__init__.py``).
"""

import json
import os
import shutil

import mindspore as ms

from ..model.folder import CheckpointError, load_arrays, model_arrays, read_checkpoint, write_checkpoint
from ..common.json_files import Field, JSONFileError, check_fields, read_json
from ..common.safe_output import STATE_KIND, atomic_directory, recover_directory
from ..tasks.batching import MAX_TRAIN_LENGTHS

STATE_FILE = "state.json"
WEIGHTS_FILE = "model.ckpt"   # always .ckpt (CRC-checked), whatever --format the run's model folder has
OPTIMIZER_FILE = "optimizer.ckpt"
TOKENIZER_FILE = "spiece.model"   # the run's tokenizer, kept so that --resume does not train it again

STATE_SCHEMA = {
    "epoch": Field(int, low=0, high=1 << 31),          # epochs completed
    "step": Field(int, low=0, high=1 << 40),           # optimizer steps taken
    "best": Field(float, none=True, required=False),   # best selection score so far (None before any)
    "history": Field(list, items=dict, required=False),        # one record per evaluation
    "epoch_losses": Field(list, items=float, required=False),  # this epoch's losses so far (resume inside an epoch)
    "settings": Field(dict, required=False),           # the run's settings (absent in older states)
    "inputs": Field(dict, required=False),             # {path: {"size", "sha256"}} of the files the run read
    "loss_scale": Field(dict, required=False),         # float16 mixed precision: the dynamic loss scale's state
    "skipped_steps": Field(int, low=0, high=1 << 40, required=False),   # float16: steps skipped for overflow
    "cpu": Field(dict, required=False),                # on CPU: how MindSpore and the kernels ran (CPU_SCHEMA)
    # the most padded lengths the run's batches use (batching.train_lengths_for); absent in older states: 8
    "train_lengths": Field(int, low=1, high=MAX_TRAIN_LENGTHS, required=False),
}
RECORD_SCHEMA = {"step": Field(int, low=0, high=1 << 40)}
CPU_SCHEMA = {"threads": Field(int, low=1, high=256),   # MindSpore's CPU kernel threads (device.default_cpu_threads)
              "kernels": Field(bool),                 # albert_min.model.kernels' layers and dropout, or MindSpore's ops
              "bf16_gemms": Field(bool, required=False)}   # --amp bf16: matrix products from bfloat16 operands
LOSS_SCALE_SCHEMA = {"scale": Field(float, low=1.0, high=3.4e38),     # the loss is multiplied by this
                     "counter": Field(int, low=0, high=1 << 31)}      # finite steps since the scale last grew


def optimizer_state(model, optimizer) -> dict:
    """The optimizer's own parameters: ``global_step`` and the moments (AdamW's ``adam_m.*`` /
    ``adam_v.*``, LAMB's ``lamb_m.*`` / ``lamb_v.*``); the learning-rate schedule is rebuilt
    from the settings, so it is left out."""
    model_ids = {id(p) for p in model.get_parameters()}
    return {p.name: p for p in optimizer.get_parameters()
            if id(p) not in model_ids and p.name != "learning_rate"}


def save_training_state(directory, model, optimizer, state: dict, tokenizer_file=None):
    """Weights, optimizer moments, ``state`` (counters, settings, input fingerprints) and the
    tokenizer file in one atomic folder; the sha256 of each is recorded, and checked when a resume reads it."""
    checksums = (WEIGHTS_FILE, OPTIMIZER_FILE, STATE_FILE, *((TOKENIZER_FILE,) if tokenizer_file else ()))
    with atomic_directory(directory, overwrite=True, kind=STATE_KIND, checksums=checksums) as tmp:
        write_checkpoint(model_arrays(model), os.path.join(tmp, WEIGHTS_FILE))
        write_checkpoint({name: p.asnumpy() for name, p in optimizer_state(model, optimizer).items()},
                         os.path.join(tmp, OPTIMIZER_FILE))
        if tokenizer_file:
            shutil.copyfile(tokenizer_file, os.path.join(tmp, TOKENIZER_FILE))
        with open(os.path.join(tmp, STATE_FILE), "w", encoding="utf-8") as f:
            json.dump(state, f, indent=2)


def read_state(directory) -> dict:
    """``state.json`` of a training state, checked against ``STATE_SCHEMA`` (CheckpointError if absent)."""
    path = os.path.join(directory, STATE_FILE)
    if not os.path.isfile(path):
        raise CheckpointError(f"no training state to resume in {directory}")
    state = {"best": None, "history": [], "epoch_losses": [], **read_json(path, STATE_SCHEMA)}
    for i, record in enumerate(state["history"]):
        check_fields(path, record, RECORD_SCHEMA, where=f"history[{i}]")
    if "loss_scale" in state:
        check_fields(path, state["loss_scale"], LOSS_SCALE_SCHEMA, where="loss_scale")
    if "cpu" in state:
        check_fields(path, state["cpu"], CPU_SCHEMA, where="cpu")
    if len(state["epoch_losses"]) > state["step"]:
        raise JSONFileError(f"{path}: 'epoch_losses' holds {len(state['epoch_losses'])} losses, more than "
                            f"the {state['step']} steps taken")
    return state


def check_same_cpu_setup(saved, current, directory):
    """A run trained on CPU resumes only as it ran: with the same MindSpore CPU kernel threads and the
    kernels on or off as before (``saved``, ``current``: ``CPU_SCHEMA`` records, None off CPU or
    unrecorded). The kernels' dropout draws other masks than MindSpore's, and the thread count
    may change how MindSpore's CPU kernels round: either would silently be another run. So must the
    matrix products' precision (``bf16_gemms``; absent in older states: float32)."""
    if not saved or not current:
        return
    saved, current = ({"bf16_gemms": False, **record} for record in (saved, current))
    if saved == current:
        return
    problems = []
    if saved["bf16_gemms"] != current["bf16_gemms"]:
        problems.append("the run trained with bf16 matrix products (--amp bf16) and this process computes them in "
                        "float32" if saved["bf16_gemms"] else
                        "the run trained with float32 matrix products and this process has bf16 ones (--amp bf16)")
    if saved["kernels"] != current["kernels"]:
        problems.append("the run trained with albert_min's compiled kernels (their dropout masks) and this process "
                        "has MindSpore's ops (ALBERT_MIN_KERNELS=off, or the kernels could not be built); unset "
                        "ALBERT_MIN_KERNELS" if saved["kernels"] else
                        "the run trained with MindSpore's ops (ALBERT_MIN_KERNELS=off) and this process has "
                        "albert_min's compiled kernels; set ALBERT_MIN_KERNELS=off")
    if saved["threads"] != current["threads"] and saved["kernels"] == current["kernels"]:
        problems.append(f"the run trained with MindSpore at {saved['threads']} CPU kernel thread"
                        f"{'s' if saved['threads'] > 1 else ''} and this process has {current['threads']}; set "
                        f"ALBERT_MIN_CPU_THREADS={saved['threads']}")
    raise CheckpointError(f"{os.path.join(directory, STATE_FILE)}: {'; '.join(problems)} to resume it exactly")


def load_training_state(directory, model, optimizer, recover=True) -> dict:
    """Restore what ``save_training_state`` wrote; returns the state dict.

    A save that a crash interrupted is first completed or rolled back
    (``recover_directory``; ``recover=False`` for readers that must not write,
    e.g. data-parallel workers other than rank 0). Every optimizer tensor must
    be there, and its step count must be the state's: a resume without the
    moments, or at another step, would silently be a different run.
    """
    if recover:
        recover_directory(directory)
    state = read_state(directory)
    optimizer_path = os.path.join(directory, OPTIMIZER_FILE)
    saved = read_checkpoint(optimizer_path)
    wanted = optimizer_state(model, optimizer)
    missing = sorted(set(wanted) - set(saved))
    if missing:
        raise CheckpointError(f"{optimizer_path}: lacks optimizer state {missing[:3]}"
                              f"{' and more' if len(missing) > 3 else ''}; cannot resume this run exactly")
    for name, p in wanted.items():
        if tuple(saved[name].shape) != tuple(p.shape):
            raise CheckpointError(f"{optimizer_path}: optimizer state {name} does not fit this model")
    if "global_step" in saved and int(saved["global_step"].reshape(-1)[0]) != state["step"]:
        raise JSONFileError(f"{os.path.join(directory, STATE_FILE)}: 'step' is {state['step']} but "
                            f"{optimizer_path} has taken {int(saved['global_step'].reshape(-1)[0])} steps")
    load_arrays(model, read_checkpoint(os.path.join(directory, WEIGHTS_FILE)), directory)
    for name, p in wanted.items():
        p.set_data(ms.Tensor(saved[name]))
    return state
