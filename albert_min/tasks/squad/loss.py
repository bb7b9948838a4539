"""Training losses of the three task heads, as the reference implementations define them.

Each ``make_*_loss_fn(model)`` returns ``loss_fn(input_ids, token_type_ids, attention_mask,
*labels)`` -> scalar, the shape ``training.step.make_train_step`` takes:

- question answering: the mean of the start and end positions' cross-entropies over the
  sequence (transformers' AlbertForQuestionAnswering; positions come from squad.batch);
- token classification: cross-entropy over the pieces whose label is not ``base.IGNORE``
  (only each word's first piece), averaged over those pieces;
- multiple choice: cross-entropy over the 4 options' scores.
"""

import mindspore as ms
from mindspore import ops

from .base import IGNORE


def make_qa_loss_fn(model):
    def loss_fn(input_ids, token_type_ids, attention_mask, start_positions, end_positions):
        start_logits, end_logits = model(input_ids, token_type_ids, attention_mask)   # (B, S) each
        return (ops.cross_entropy(start_logits, start_positions) + ops.cross_entropy(end_logits, end_positions)) / 2
    return loss_fn


def make_token_loss_fn(model):
    def loss_fn(input_ids, token_type_ids, attention_mask, labels):
        logits = model(input_ids, token_type_ids, attention_mask)                       # (B, S, L)
        flat = logits.reshape(-1, logits.shape[-1])                                      # (B*S, L)
        return ops.cross_entropy(flat, labels.reshape(-1), ignore_index=IGNORE)
    return loss_fn


def make_choice_loss_fn(model):
    def loss_fn(input_ids, token_type_ids, attention_mask, labels):
        return ops.cross_entropy(model(input_ids, token_type_ids, attention_mask), labels)   # logits (B, C)
    return loss_fn


def as_tensors(*arrays):
    """numpy batches -> MindSpore tensors, in order."""
    return [ms.Tensor(a) for a in arrays]
