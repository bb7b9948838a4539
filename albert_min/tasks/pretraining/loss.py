"""Pre-training's loss: masked LM on the masked positions only, plus the sentence objective.
"""

from mindspore import ops


# ------------------------------------------------------------------ the model
def masked_lm_logits(model, sequence_output, flat_positions):
    """MLM logits ``[B*P, V]`` at the masked positions only."""
    B, S, H = sequence_output.shape
    gathered = ops.gather(sequence_output.reshape(B * S, H), flat_positions, 0)   # [B*P, H]
    return model.predictions(gathered, model.albert.embeddings.word_embeddings.weight)


def make_loss_fn(model, task):
    """Pre-training loss of ``AlbertForPreTraining``: masked-LM (mean over the
    predicted pieces) + the sentence objective's cross-entropy unless ``task == "mlm"``."""

    def loss_fn(input_ids, token_type_ids, attention_mask, flat_positions, mlm_ids, mlm_weights, labels):
        sequence_output, pooled_output = model.albert(input_ids, token_type_ids, attention_mask)
        logits = masked_lm_logits(model, sequence_output, flat_positions)
        per_piece = ops.cross_entropy(logits, mlm_ids, reduction="none")
        loss = (per_piece * mlm_weights).sum() / (mlm_weights.sum() + 1e-5)
        if task != "mlm":
            loss = loss + ops.cross_entropy(model.sop_classifier(pooled_output), labels)
        return loss

    return loss_fn
