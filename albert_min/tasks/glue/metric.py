"""GLUE's metrics: accuracy, F1, Matthews correlation, Pearson and Spearman, as GLUE reports them
per task (``reading.Task.metrics``), and the extras albert_min reports for binary tasks.
"""

import math
from typing import Optional

import numpy as np

from .reading import Task


# ---------------------------------------------------------------------- metrics
# Fractions, not percent. A metric the data leaves undefined (0/0: precision with no
# positive prediction, a correlation with a constant side) is None, never a number
# that reads as a score; the dicts below then carry "notes": {metric: why}
# (evaluate.py prints "n/a (why)", JSON null).
def accuracy(labels, predictions) -> float:
    labels, predictions = _paired(labels, predictions)
    return float((labels == predictions).mean())


def confusion(labels, predictions, positive=1) -> dict:
    """Counts of true/false positives/negatives for class ``positive``."""
    labels, predictions = _paired(labels, predictions)
    yes, true = predictions == positive, labels == positive
    return {"tp": int((yes & true).sum()), "fp": int((yes & ~true).sum()),
            "fn": int((~yes & true).sum()), "tn": int((~yes & ~true).sum())}


def precision(labels, predictions, positive=1) -> Optional[float]:
    """None when ``positive`` is never predicted."""
    c = confusion(labels, predictions, positive)
    return c["tp"] / (c["tp"] + c["fp"]) if c["tp"] + c["fp"] else None


def recall(labels, predictions, positive=1) -> Optional[float]:
    """None when no label is ``positive``."""
    c = confusion(labels, predictions, positive)
    return c["tp"] / (c["tp"] + c["fn"]) if c["tp"] + c["fn"] else None


def f1_score(labels, predictions, positive=1) -> Optional[float]:
    """F1 of class ``positive``, 2tp / (2tp + fp + fn): 0 when it is predicted or true but never
    both; None when it is never predicted and never true."""
    c = confusion(labels, predictions, positive)
    return 2 * c["tp"] / (2 * c["tp"] + c["fp"] + c["fn"]) if c["tp"] + c["fp"] + c["fn"] else None


def matthews_corrcoef(labels, predictions) -> Optional[float]:
    """Binary Matthews correlation (tp*tn - fp*fn) / sqrt(...); None when a margin is empty:
    one class predicted for everything, or only one class in the labels (GLUE's scorer,
    sklearn, counts that as 0)."""
    c = {k: float(v) for k, v in confusion(labels, predictions).items()}
    tp, tn, fp, fn = c["tp"], c["tn"], c["fp"], c["fn"]
    denominator = math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return (tp * tn - fp * fn) / denominator if denominator else None


def pearson(labels, predictions) -> Optional[float]:
    """None when either side is constant: a correlation is then undefined."""
    return _correlation("pearsonr", labels, predictions)


def spearman(labels, predictions) -> Optional[float]:
    """Pearson correlation of the ranks; ties get their average rank. None as ``pearson``."""
    return _correlation("spearmanr", labels, predictions)


def _correlation(name, labels, predictions):
    import scipy.stats   # scipy comes with MindSpore; imported here to keep this module light
    labels, predictions = _paired(labels, predictions, float)
    if labels.size < 2 or np.ptp(labels) == 0 or np.ptp(predictions) == 0:
        return None
    return float(getattr(scipy.stats, name)(labels, predictions)[0])


def undefined_note(name, labels, predictions, positive=1) -> str:
    """Why metric ``name`` is None on these labels and predictions, for the reader."""
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    if name == "precision":
        return f"no positive predictions (label {positive})"
    if name == "recall":
        return f"no positive labels (label {positive})"
    if name == "f1":
        return f"no positive labels or predictions (label {positive})"
    if name == "matthews":
        if len(np.unique(predictions)) < 2:
            return "one class predicted for every example"
        return "one class in every label"
    if labels.size < 2:                                       # pearson, spearman
        return "fewer than 2 examples"
    return "constant predictions" if np.ptp(predictions) == 0 else "constant labels"


def _noted(metrics, labels, predictions):
    """``metrics`` with "notes": {name: why} for each undefined one (no key when none is)."""
    notes = {name: undefined_note(name, labels, predictions) for name, value in metrics.items() if value is None}
    if notes:
        metrics["notes"] = notes
    return metrics


def _paired(labels, predictions, dtype=None):
    labels, predictions = np.asarray(labels, dtype), np.asarray(predictions, dtype)
    if labels.shape != predictions.shape or labels.ndim != 1 or labels.size == 0:
        raise ValueError(f"need as many predictions as labels, got {predictions.shape} vs {labels.shape}")
    return labels, predictions


METRICS = {"accuracy": accuracy, "f1": f1_score, "matthews": matthews_corrcoef,
           "pearson": pearson, "spearman": spearman}


def compute_metrics(task: Task, labels, predictions) -> dict:
    """GLUE's metrics for ``task`` plus ``examples`` (and ``notes`` for undefined ones)."""
    out = {name: METRICS[name](labels, predictions) for name in task.metrics}
    out["examples"] = len(labels)
    return _noted(out, labels, predictions)


def binary_metrics(labels, predictions, positive=1) -> dict:
    """Accuracy, F1, precision, recall (for ``positive``), the confusion matrix and ``examples``
    (and ``notes`` for undefined ones)."""
    out = {"accuracy": accuracy(labels, predictions), "f1": f1_score(labels, predictions, positive),
           "precision": precision(labels, predictions, positive), "recall": recall(labels, predictions, positive),
           "confusion": confusion(labels, predictions, positive), "examples": len(labels)}
    return _noted(out, labels, predictions)


def selection_score(task: Task, metrics: dict) -> float:
    """The number train.py keeps the best model by: the task's first metric. An
    undefined one (None: constant predictions, say) ranks as the worst, -1."""
    score = metrics[task.metrics[0]]
    return score if score is not None and math.isfinite(score) else -1.0


def evaluation_metrics(task: Task, labels, logits) -> dict:
    """What train.py logs and evaluate.py reports, from the model's raw outputs
    ``[N, num_labels]`` (columns in the task's label order): GLUE's metrics for the
    task. Binary tasks also get the confusion matrix, and those whose label 1 is a
    positive class (``Task.positive_class``) accuracy, F1, precision and recall of label 1,
    as albert_min has always reported for SST-2."""
    logits = np.asarray(logits)
    if task.is_regression:
        return compute_metrics(task, labels, logits[:, 0])
    predictions = logits.argmax(-1)
    metrics = {k: v for k, v in compute_metrics(task, labels, predictions).items() if k != "notes"}
    if logits.shape[1] == 2:
        extras = binary_metrics(labels, predictions) if task.positive_class else \
            {"confusion": confusion(labels, predictions)}
        metrics.update({k: v for k, v in extras.items() if k not in metrics and k != "notes"})
    return _noted(metrics, labels, predictions)
