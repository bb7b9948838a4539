"""SQuAD's training loss (question answering), as transformers' AlbertForQuestionAnswering defines it:
the mean of the start and end positions' cross-entropies over the sequence (positions come
from ``features.batch``).

Each family's ``loss.make_*_loss_fn(model)`` returns ``loss_fn(input_ids, token_type_ids,
attention_mask, *labels)`` -> scalar, the shape ``training.step.make_train_step`` takes.
"""

from mindspore import ops


def make_qa_loss_fn(model):
    def loss_fn(input_ids, token_type_ids, attention_mask, start_positions, end_positions):
        start_logits, end_logits = model(input_ids, token_type_ids, attention_mask)   # (B, S) each
        return (ops.cross_entropy(start_logits, start_positions) + ops.cross_entropy(end_logits, end_positions)) / 2
    return loss_fn
