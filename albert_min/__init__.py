"""albert_min: a minimal, readable ALBERT in pure MindSpore.

    from albert_min import AlbertConfig, AlbertForSequenceClassification
    model = AlbertForSequenceClassification.from_pretrained("weights/sst2-small")

    from albert_min import pipeline
    clf = pipeline("weights/sst2-small")
    clf(["a gorgeous film", "a mess"])   # [{"label": ..., "score": ...}, ...]

The modules read top to bottom: config -> modeling -> checkpoint/convert -> data -> training.
MindSpore is imported by ``modeling``; ``config`` and the converter's readers need only numpy.
"""

from .model.config import AlbertConfig, ConfigError
# The function lives in the package ``predict`` (no module is called ``pipeline``), so that
# importing a module never hides the function; it imports MindSpore only when a pipeline is built.
from .predict import pipeline

_MODEL_CLASSES = ("AlbertModel", "AlbertForPreTraining", "AlbertForSequenceClassification", "AlbertForMaskedLM",
                  "AlbertForQuestionAnswering", "AlbertForTokenClassification", "AlbertForMultipleChoice")
__all__ = ["AlbertConfig", "ConfigError", "pipeline", *_MODEL_CLASSES]


def __getattr__(name):
    # The model classes import MindSpore (seconds); load them only when asked for.
    if name in _MODEL_CLASSES:
        from .model import heads        # the head classes, and the backbone they import
        return getattr(heads, name)
    raise AttributeError(f"module 'albert_min' has no attribute {name!r}")
