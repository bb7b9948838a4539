"""The task registry: ``get_task(name)`` for train.py's and evaluate.py's ``--task``.

One folder per task family, each file named by its role, the same name in every family:

    glue/  pretraining/  squad/  race/  conll/
        task.py      the ``task_base.Task`` subclass: what the Trainer, train.py and evaluate.py call
        reading.py   the data files -> examples (errors name the file and line, or question id)
        features.py  examples -> model inputs: token ids, windows, padded batches
        loss.py      the training loss of the family's head
        metric.py    the official score (GLUE's metrics, SQuAD's EM/F1, conlleval, ...)
        decode.py    model outputs -> answers, where that is a step of its own (SQuAD)
        writing.py   the official prediction file, where the task module does not write it itself
        windows.py   CoNLL: tagging a text longer than one window (pipelines)

Every family has ``task.py``, ``reading.py`` and ``metric.py``; the others where the family
has that part (GLUE's features are the shared ``batching.encode_examples``, its loss sits in
``task.py``). The families never import each other (``.importlinter``'s task-families
contract). What they share sits beside them:

    task_base.py          the Task interface, Prepared, shuffled batches
    errors.py             DataError, the error of every data file
    text_files.py         UTF-8 text and TSV lines and rows (GLUE's and the generic TSV's reader)
    file_io.py            JSON in, text/JSON out atomically, recognising the prediction files we wrote
    batching.py           token ids -> padded, length-bucketed batches
    prediction_engine.py  compiled forward graphs, their compile cache, batched sentence classification
    prediction_steps.py   what each family's ``predict`` shares: forward pass, padding, progress, Replay

A new task family is one folder (its ``task.py`` holds a ``task_base.Task`` subclass) plus
one line in ``REGISTRY``.
"""

from .task_base import Prepared, Task
from .errors import DataError

# name -> (module of this package, class, constructor arguments)
REGISTRY = {
    **{name: ("glue.task", "GlueTask", (name,)) for name in
       ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli", "sentence_label")},
    **{name: ("pretraining.task", "PretrainingTask", (name,)) for name in ("sop", "nsp", "mlm")},
    **{name: ("squad.task", "SquadTask", (name,)) for name in ("squad", "squad_v2")},
    "race": ("race.task", "RaceTask", ("race",)),
    "conll": ("conll.task", "ConllTask", ("conll",)),
}
TASK_NAMES = tuple(REGISTRY)
# Older names a command line or a model folder's record may hold: name -> its name now. ``cls``
# (albert_min's generic sentence<TAB>label TSV) read as the [CLS] piece.
TASK_ALIASES = {"cls": "sentence_label"}


def task_name(name: str) -> str:
    """``name`` as ``REGISTRY`` spells it (an alias: its name now; anything else unchanged)."""
    return TASK_ALIASES.get(name, name)


def get_task(name: str, **options) -> Task:
    """The task ``name`` (``options``: its own settings, e.g. ``mask_prob`` for pre-training);
    an alias (``TASK_ALIASES``) gives the task of its name now."""
    name = task_name(name)
    if name not in REGISTRY:
        raise DataError(f"unknown task {name!r}; choose from {', '.join(TASK_NAMES)}")
    import importlib
    module, cls, args = REGISTRY[name]
    return getattr(importlib.import_module(f"{__name__}.{module}"), cls)(*args, **options)


def infer_task(path: str) -> str:
    """The task of a data file: a SQuAD ``.json`` (optionally ``FILE.json:FIRST-LAST``) -> squad,
    a folder holding RACE's ``middle/`` or ``high/`` (or one of them) -> race, a CoNLL-2003
    ``eng.*`` file -> conll, a GLUE folder by its name (``glue/RTE/dev.tsv`` -> rte); ``sentence_label``
    (albert_min's generic sentence<TAB>label TSV) for anything else."""
    import os
    from .glue.reading import infer_task as infer_glue_task
    from .squad.task import article_range
    if not path:
        return "sentence_label"
    if article_range(path)[0].endswith(".json"):
        return "squad"
    if os.path.isdir(path) and (os.path.basename(os.path.normpath(path)) in ("middle", "high")
                                or any(os.path.isdir(os.path.join(path, level)) for level in ("middle", "high"))):
        return "race"
    if os.path.basename(path).startswith("eng."):
        return "conll"
    return infer_glue_task(path)


__all__ = ["REGISTRY", "TASK_ALIASES", "TASK_NAMES", "Prepared", "Task", "get_task", "infer_task", "task_name"]
