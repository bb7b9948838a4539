"""RACE's training loss (multiple choice): cross-entropy over the 4 options' scores.
"""

from mindspore import ops


def make_choice_loss_fn(model):
    def loss_fn(input_ids, token_type_ids, attention_mask, labels):
        return ops.cross_entropy(model(input_ids, token_type_ids, attention_mask), labels)   # logits (B, C)
    return loss_fn
