"""RunConfig: everything train.py's flags decide, typed (the task, its files, the tokenizer,
the model's shape, and the ``TrainingConfig``), and what a resume checks against it.

The training state records a run's RunConfig and the fingerprints (size, sha256) of the
files it read; ``settings_for_resume`` gives the saved run back, refusing a changed flag
or a changed input file by name.

Layer: ``albert_min.training``, above ``tasks`` (the layers: ``albert_min/__init__.py``).
"""

import dataclasses
import os
from typing import Optional

from ..common.checksums import file_fingerprint
from ..common.errors import AlbertMinError
from ..tasks.squad.task import OPTION_DEFAULTS, article_range
from .config import EXTENDABLE, PRESENTATION, TrainingConfig


# RunConfig's fields that are SquadTask's options (train.py refuses them for other tasks)
SQUAD_OPTIONS = tuple(OPTION_DEFAULTS)


class ResumeError(AlbertMinError):
    """``--resume`` asked for something other than the saved run."""


@dataclasses.dataclass
class RunConfig:
    task: str                                  # a name of albert_min.tasks.REGISTRY
    training: TrainingConfig                   # the Trainer's settings (schedule, cadence, budget, output)
    train: Optional[str] = None                # training file in the task's layout
    dev: Optional[str] = None                  # dev file evaluated at every evaluation point
    text: Optional[str] = None                 # raw text for pre-training
    tokenizer_text: tuple = ()                 # more text files for a newly trained tokenizer
    init: Optional[str] = None                 # model folder to start from
    config: Optional[str] = None               # config.json of a model trained from scratch
    tokenizer: Optional[str] = None            # spiece.model to use instead of training one
    vocab_size: int = 8000                     # pieces of a newly trained tokenizer
    embedding_size: int = 128                  # E, from scratch without --config
    hidden_size: int = 128                     # H
    layers: int = 4                            # L: loops of the shared block
    heads: int = 4                             # attention heads
    intermediate_size: int = 512               # feed-forward width
    sharing: str = "all"                       # cross-layer sharing: all, attention, ffn or none
    dropout: Optional[float] = None            # None: 0.1 from scratch, else the config's own
    max_length: int = 64                       # pieces per example, [CLS]/[SEP] included
    mask_prob: Optional[float] = None          # pre-training's masked share (None: 0.15)
    # SQuAD's windows and dev decoding (tasks.squad.task.OPTION_DEFAULTS); None for other tasks
    doc_stride: Optional[int] = None           # context pieces from one window's start to the next
    max_query_length: Optional[int] = None     # question pieces kept
    max_answer_length: Optional[int] = None    # longest answer, in pieces, decoded on dev
    null_score_diff_threshold: Optional[float] = None   # v2.0: "" when the null score beats the best span by more
    data_parallel: bool = False                # one worker of an msrun job
    device: Optional[str] = None               # CPU, GPU or Ascend (None: $ALBERT_MIN_DEVICE, else CPU); where
                                               # this process runs, not a setting of the run: not saved, and a
                                               # resume may run on another device

    def to_dict(self) -> dict:
        data = dataclasses.asdict(self)
        data["tokenizer_text"] = list(self.tokenizer_text)
        return data

    def run_settings(self) -> dict:
        """The settings besides the Trainer's and the device (those the state records as "run")."""
        return {k: v for k, v in self.to_dict().items() if k not in ("training", "device")}

    def task_options(self) -> dict:
        """The task's own settings, as ``get_task`` takes them (those given: not None)."""
        names = ("mask_prob", *SQUAD_OPTIONS)
        return {name: getattr(self, name) for name in names if getattr(self, name) is not None}

    def input_files(self) -> list:
        """The files and folders the run reads (a SQuAD ``FILE.json:FIRST-LAST``: FILE.json; a model
        folder: the files that make its model), which no output may be or hold."""
        data = [p for p in (self.train, self.dev) if p]
        if self.task in ("squad", "squad_v2"):
            data = [article_range(p)[0] for p in data]
        files = data + [p for p in (self.text, *self.tokenizer_text, self.config, self.tokenizer) if p]
        if self.init:   # its weights are model.ckpt or model.safetensors (checkpoint.WEIGHTS_FILES)
            files += [os.path.join(self.init, n) for n in ("config.json", "model.ckpt", "model.safetensors",
                                                           "spiece.model")
                      if os.path.isfile(os.path.join(self.init, n))]
        return files

    def files_read(self) -> dict:
        """{each input as given: the files reading it reads}: every file of a RACE folder, the
        whole JSON file of a SQuAD article range (``Task.files_read``), else the input itself."""
        from ..tasks import get_task
        task = get_task(self.task, **self.task_options())
        data = [p for p in (self.train, self.dev) if p]
        return {**{p: [p] for p in self.input_files()}, **{p: task.files_read(p) for p in data}}

    def fingerprints(self) -> dict:
        """{file: its ``file_fingerprint``} of every file the run reads (``files_read``)."""
        return {path: file_fingerprint(path) for files in self.files_read().values() for path in files
                if os.path.isfile(path)}


def flag_name(setting: str) -> str:
    """The train.py flag of a setting (``RunConfig.flat``'s name): use_jit's is --pynative (False when given)."""
    return "--pynative" if setting == "use_jit" else "--" + setting.replace("_", "-")


def from_flat(flat: dict) -> RunConfig:
    """A RunConfig from every setting by its own name (the Trainer's beside the rest, as flags name them)."""
    training_names = {f.name for f in dataclasses.fields(TrainingConfig)}
    training = TrainingConfig(**{k: v for k, v in flat.items() if k in training_names})
    rest = {k: v for k, v in flat.items() if k not in training_names}
    rest["tokenizer_text"] = tuple(rest.get("tokenizer_text", ()))
    return RunConfig(training=training, **rest)


def settings_for_resume(saved: dict, given: dict, state_path: str) -> dict:
    """The settings a ``--resume`` runs with, in ``RunConfig.flat`` form.

    saved: the saved run's flat settings; given: the settings named on the command line
    (only those). Each given one must equal the saved one, except the budget
    (``EXTENDABLE``: epochs, max_steps, max_minutes) and ``PRESENTATION`` (quiet). The
    run's epochs and max_steps (its schedule) carry over; max_minutes, the time budget
    of one process, does not. The device is not saved (``run_settings``), so it is never
    compared: a run may resume on another device (the caller sets the one given now).
    """
    changed = [name for name, value in given.items()
               if name not in EXTENDABLE + PRESENTATION and name in saved and saved[name] != _as_saved(value)]
    if changed:
        shown = "; ".join(f"{flag_name(n)} {_shown(n, given[n])} (the run has {_shown(n, saved[n])})"
                          for n in changed)
        raise ResumeError(f"{shown}: --resume continues the run saved in {state_path} as it was started; leave "
                          f"{'this flag' if len(changed) == 1 else 'these flags'} out (only --epochs, --max-steps, "
                          "--max-minutes, --quiet and --device may change)")
    # --max-minutes budgets one process: a resume has none unless it is given again.
    return {**saved, "max_minutes": None, **{k: v for k, v in given.items() if k in EXTENDABLE + PRESENTATION}}


def check_inputs_unchanged(saved: dict, state_path: str, settings: Optional[RunConfig] = None):
    """Every file the saved run read (``saved``: {path: fingerprint}) is still there with the same
    size and sha256; and, given the run's ``settings``, it reads no file now that it did not read
    then (a file added to a RACE folder)."""
    for path, fingerprint in saved.items():
        if not os.path.isfile(path):
            raise ResumeError(f"{path}: the run saved in {state_path} read this file, and it is gone; "
                              "--resume needs the same inputs")
        if file_fingerprint(path) != fingerprint:
            raise ResumeError(f"{path}: changed since the run saved in {state_path} read it (size or sha256 "
                              "differ); --resume needs the same inputs")
    for source, files in (settings.files_read() if settings is not None else {}).items():
        new = [path for path in files if path not in saved and os.path.isfile(path)]
        if not new:
            continue
        if files != [source] and len(new) == len(files):   # saved before folders and ranges were fingerprinted
            raise ResumeError(f"{source}: the run saved in {state_path} recorded no fingerprint of it (albert_min "
                              "did not, for a RACE folder or a SQuAD article range), so --resume cannot tell "
                              "that it is unchanged; start the run again with --force")
        where = f" (in {source} now)" if files != [source] else ""
        raise ResumeError(f"{new[0]}: the run saved in {state_path} did not read this file{where}; "
                          "--resume needs the same inputs")


def _as_saved(value):
    return list(value) if isinstance(value, tuple) else value


def _shown(name, value):
    if name == "use_jit":
        return "on" if value is False else "off"   # the flag --pynative is on when use_jit is False
    return " ".join(value) if isinstance(value, (list, tuple)) else str(value)
