"""Sentence classification in eval mode, and the metrics the paper reports."""

import time
import weakref

import numpy as np
import mindspore as ms
from tqdm import tqdm

from .data import encode_all, encode_examples, eval_batches, pad_batch, pad_with_types


_GRAPHS = weakref.WeakKeyDictionary()


def compiled(cell, use_jit=True):
    """The cell's forward as a MindSpore graph (``mindspore.jit``) or plain PyNative.

    Graph mode compiles once per distinct input shape, which is why batches
    are padded to a multiple of 8 tokens. The graph is kept per cell, so
    train.py's repeated dev evaluations do not compile it again.
    """
    if not use_jit:
        return cell
    if cell not in _GRAPHS:
        _GRAPHS[cell] = ms.jit(cell.construct)
    return _GRAPHS[cell]


def predict(model, tokenizer, sentences, batch_size=64, max_length=128, use_jit=True, progress=True):
    """Class probabilities ``[N, num_labels]`` for ``sentences``, in input order.

    Returns (probabilities, seconds spent).
    """
    model.set_train(False)
    forward = compiled(model, use_jit)
    encoded = encode_all(tokenizer, sentences, max_length)
    probs = np.zeros((len(sentences), model.config.num_labels), np.float32)
    start = time.perf_counter()
    with tqdm(total=len(sentences), desc="evaluating", unit="ex", disable=not progress) as bar:
        for idx, rows in eval_batches(encoded, batch_size):
            input_ids, token_type_ids, attention_mask = pad_batch(rows, tokenizer.pad_token_id)
            logits = forward(ms.Tensor(input_ids), ms.Tensor(token_type_ids), ms.Tensor(attention_mask)).asnumpy()
            e = np.exp(logits - logits.max(-1, keepdims=True))
            probs[idx] = e / e.sum(-1, keepdims=True)
            bar.update(len(idx))
    return probs, time.perf_counter() - start


def binary_metrics(labels, predictions, positive=1):
    """Accuracy, precision, recall, F1 (for ``positive``) and the confusion matrix."""
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    if labels.shape != predictions.shape or labels.size == 0:
        raise ValueError(f"need as many predictions as labels, got {predictions.shape} vs {labels.shape}")
    tp = int(((predictions == positive) & (labels == positive)).sum())
    fp = int(((predictions == positive) & (labels != positive)).sum())
    fn = int(((predictions != positive) & (labels == positive)).sum())
    tn = int(((predictions != positive) & (labels != positive)).sum())
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"accuracy": (tp + tn) / labels.size, "f1": f1, "precision": precision, "recall": recall,
            "confusion": {"tp": tp, "fp": fp, "fn": fn, "tn": tn}, "examples": int(labels.size)}


def predict_logits(model, tokenizer, texts, text_pairs=None, batch_size=64, max_length=128, use_jit=True,
                   progress=True):
    """Raw model outputs ``[N, num_labels]`` for single sentences or sentence pairs, in
    input order (pairs as ``[CLS] a [SEP] b [SEP]`` with token type ids 0 / 1).
    For a regression model (num_labels = 1) column 0 is the predicted score.

    Returns (logits, seconds spent).
    """
    model.set_train(False)
    forward = compiled(model, use_jit)
    ids, types = encode_examples(tokenizer, texts, text_pairs, max_length)
    logits = np.zeros((len(texts), model.config.num_labels), np.float32)
    start = time.perf_counter()
    with tqdm(total=len(texts), desc="evaluating", unit="ex", disable=not progress) as bar:
        for idx, rows in eval_batches(ids, batch_size):
            batch = pad_with_types(rows, [types[i] for i in idx], tokenizer.pad_token_id)
            logits[idx] = forward(*[ms.Tensor(x) for x in batch]).asnumpy()
            bar.update(len(idx))
    return logits, time.perf_counter() - start


def softmax(logits):
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)
