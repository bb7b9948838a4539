"""CoNLL's training loss (token classification): cross-entropy over the pieces whose label is not
``features.IGNORE`` (only each word's first piece), averaged over those pieces.
"""

from mindspore import ops

from .features import IGNORE


def make_token_loss_fn(model):
    def loss_fn(input_ids, token_type_ids, attention_mask, labels):
        logits = model(input_ids, token_type_ids, attention_mask)                       # (B, S, L)
        flat = logits.reshape(-1, logits.shape[-1])                                      # (B*S, L)
        return ops.cross_entropy(flat, labels.reshape(-1), ignore_index=IGNORE)
    return loss_fn
