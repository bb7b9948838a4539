"""The task registry: ``get_task(name)`` for train.py's and evaluate.py's ``--task``.

A new task family is one module in this package (a ``base.Task`` subclass, see
``albert_min/tasks/base.py`` for the interface) plus one line in ``REGISTRY``.
"""

from ..data import DataError
from .base import Prepared, Task

# name -> (module of this package, class, constructor arguments)
REGISTRY = {
    **{name: ("glue", "GlueTask", (name,)) for name in
       ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli", "cls")},
    **{name: ("pretraining", "PretrainingTask", (name,)) for name in ("sop", "nsp", "mlm")},
    **{name: ("squad_task", "SquadTask", (name,)) for name in ("squad", "squad_v2")},
    "race": ("race", "RaceTask", ("race",)),
    "conll": ("conll", "ConllTask", ("conll",)),
}
TASK_NAMES = tuple(REGISTRY)


def get_task(name: str, **options) -> Task:
    """The task ``name`` (``options``: its own settings, e.g. ``mask_prob`` for pre-training)."""
    if name not in REGISTRY:
        raise DataError(f"unknown task {name!r}; choose from {', '.join(TASK_NAMES)}")
    import importlib
    module, cls, args = REGISTRY[name]
    return getattr(importlib.import_module(f"{__name__}.{module}"), cls)(*args, **options)


def infer_task(path: str) -> str:
    """The task of a data file from its folder name (``glue/RTE/dev.tsv`` -> rte); ``cls``
    (albert_min's generic sentence<TAB>label TSV) for any other folder."""
    from ..glue import infer_task as infer_glue_task
    return infer_glue_task(path) if path else "cls"


__all__ = ["REGISTRY", "TASK_NAMES", "Prepared", "Task", "get_task", "infer_task"]
