"""albert_min: a minimal, readable ALBERT in pure MindSpore.

    from albert_min import AlbertConfig, AlbertForSequenceClassification
    model = AlbertForSequenceClassification.from_pretrained("weights/sst2-small")

    from albert_min import pipeline
    clf = pipeline("weights/sst2-small")
    clf(["a gorgeous film", "a mess"])   # [{"label": ..., "score": ...}, ...]

The package is cut into layers, each a folder that imports only the layers below it
(``.importlinter`` at the repository root is the contract; ``lint-imports`` checks it, and
docs/layout.md maps the old module paths to the new):

    train.py, evaluate.py   python -m albert_min.train / albert_min.evaluate (albert-min-train,
    convert.py, export.py   albert-min-evaluate; train.py, evaluate.py in a clone), .convert, .export: the commands
    arguments.py            the flag types of the commands
    fingerprint.py          python -m albert_min.fingerprint: record a model folder changed on purpose
    training/ | predict/    train and resume a model | a model folder as a function (``pipeline``)
    tasks/                  one folder per task family (glue/, pretraining/, squad/, race/, conll/: task, reading,
                            features, loss, metric); shared batching and the batched prediction engine
    checkpoints/            other libraries' checkpoints in and out: file formats, tensor names, HF export
    model/                  the config, the backbone, the heads, the kernels, the model folder on disk
    common/                 errors, the device, data-parallel workers, safe outputs and locks, checked JSON

MindSpore is imported by ``model.modeling``; ``model.config`` and the checkpoint readers need only numpy.
"""

from .model.config import AlbertConfig, ConfigError
# The function lives in the package ``predict`` (no module is called ``pipeline``), so that
# importing a module never hides the function; it imports MindSpore only when a pipeline is built.
from .predict import pipeline

_MODEL_CLASSES = ("AlbertModel", "AlbertForPreTraining", "AlbertForSequenceClassification", "AlbertForMaskedLM",
                  "AlbertForQuestionAnswering", "AlbertForTokenClassification", "AlbertForMultipleChoice")
# Training from Python (README "Use from Python"): the pieces train.py hands its typed configs to.
_TRAINING = {"Trainer": "training.trainer", "TrainingConfig": "training.config", "get_task": "tasks",
             "accelerate": "model.kernels"}   # the compiled CPU kernels swapped into a built model
__all__ = ["AlbertConfig", "ConfigError", "pipeline", *_MODEL_CLASSES, *_TRAINING]


def __getattr__(name):
    # The model classes and the training pieces import MindSpore (seconds); load them only when asked for.
    if name in _MODEL_CLASSES:
        from .model import heads        # the head classes, and the backbone they import
        return getattr(heads, name)
    if name in _TRAINING:
        import importlib
        return getattr(importlib.import_module(f".{_TRAINING[name]}", __name__), name)
    raise AttributeError(f"module 'albert_min' has no attribute {name!r}")
