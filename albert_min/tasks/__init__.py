"""The task registry: ``get_task(name)`` for train.py's and evaluate.py's ``--task``.

A new task family is one module in this package (a ``base.Task`` subclass, see
``albert_min/tasks/base.py`` for the interface) plus one line in ``REGISTRY``.

The paper's other benchmarks live here as functions too: SQuAD v1.1/v2.0 (squad,
squad_metric, squad_decode), RACE (race) and CoNLL-2003 NER (conll, conlleval): readers
whose errors name the file and line (or question id), features and padded batches for
the heads, decoding, the official metrics and writers of the official prediction formats.
"""

from .data import DataError
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
    """The task of a data file: a SQuAD ``.json`` (optionally ``FILE.json:FIRST-LAST``) -> squad,
    a folder holding RACE's ``middle/`` or ``high/`` (or one of them) -> race, a CoNLL-2003
    ``eng.*`` file -> conll, a GLUE folder by its name (``glue/RTE/dev.tsv`` -> rte); ``cls``
    (albert_min's generic sentence<TAB>label TSV) for anything else."""
    import os
    from .glue_benchmark import infer_task as infer_glue_task
    from .squad_task import article_range
    if not path:
        return "cls"
    if article_range(path)[0].endswith(".json"):
        return "squad"
    if os.path.isdir(path) and (os.path.basename(os.path.normpath(path)) in ("middle", "high")
                                or any(os.path.isdir(os.path.join(path, level)) for level in ("middle", "high"))):
        return "race"
    if os.path.basename(path).startswith("eng."):
        return "conll"
    return infer_glue_task(path)


__all__ = ["REGISTRY", "TASK_NAMES", "Prepared", "Task", "get_task", "infer_task"]
