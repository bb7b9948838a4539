"""albert_min: a minimal, readable ALBERT in pure MindSpore.

    from albert_min import AlbertConfig, AlbertForSequenceClassification
    model = AlbertForSequenceClassification.from_pretrained("weights/sst2-small")

    from albert_min import pipeline
    clf = pipeline("weights/sst2-small")
    clf(["a gorgeous film", "a mess"])   # [{"label": ..., "score": ...}, ...]

The modules read top to bottom: config -> modeling -> checkpoint/convert -> data -> training.
MindSpore is imported by ``modeling``; ``config`` and the converter's readers need only numpy.
"""

from .config import AlbertConfig, ConfigError
# Bound eagerly, not in __getattr__ below: importing the submodule albert_min.pipeline
# (export.py does) makes it an attribute of the package, which would hide a lazily
# provided function of the same name. The module imports MindSpore only when used.
from .pipeline import pipeline

__all__ = ["AlbertConfig", "ConfigError", "AlbertModel", "AlbertForPreTraining", "AlbertForSequenceClassification",
           "pipeline"]


def __getattr__(name):
    # The model classes import MindSpore (seconds); load them only when asked for.
    if name in ("AlbertModel", "AlbertForPreTraining", "AlbertForSequenceClassification"):
        from . import modeling
        return getattr(modeling, name)
    raise AttributeError(f"module 'albert_min' has no attribute {name!r}")
