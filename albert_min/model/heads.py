"""The heads on the ALBERT backbone (``modeling.AlbertModel``), one class per task model.

Pre-training: the masked-LM head (its decoder tied to the word embeddings) and the
sentence-order head, together ``AlbertForPreTraining``; ``AlbertForMaskedLM`` is what the
published ``albert-*-v2`` checkpoints hold. Fine-tuning: sequence classification (and
regression), extractive question answering, token classification and multiple choice.
Each class is ``PreTrainedMixin``'s ``from_pretrained(dir)``; its parameters carry Hugging
Face's names (``albert.*`` for the backbone, ``predictions.*``, ``sop_classifier.*``,
``classifier.*``, ``qa_outputs.*``), so one model folder loads into every class that fits it.

Shapes as in ``modeling``: B = batch, S = sequence length, H = hidden_size, V = vocab_size.

Layer: ``albert_min.model``, above ``common`` (the layers: ``albert_min/__init__.py``).
"""

import mindspore as ms
from mindspore import nn, ops, Parameter
from mindspore.common.initializer import initializer

from .config import AlbertConfig
from .modeling import ACT2FN, AlbertModel, Dense, LayerNorm, PreTrainedMixin


# ---------------------------------------------------------------------- heads
class AlbertMLMHead(nn.Cell):
    """Masked-language-model head. ``[B, S, H]`` -> logits ``[B, S, V]``.

    dense H -> E, activation, LayerNorm, then the decoder: the transpose of the
    word embedding table (tied, so it costs no parameters) plus a bias.
    """

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.dense = Dense(config.hidden_size, config.embedding_size, config)
        self.activation = ACT2FN[config.hidden_act]
        self.LayerNorm = LayerNorm(config.embedding_size, config.layer_norm_eps)
        self.bias = Parameter(initializer("zeros", (config.vocab_size,), ms.float32), name="bias")
        # the decoder: x W^T + b, as a Dense layer computes it, with the tied table [V, E] as W
        self.matmul = ops.MatMul(transpose_b=True)
        self.bias_add = ops.BiasAdd()

    def construct(self, sequence_output, word_embeddings):
        x = self.LayerNorm(self.activation(self.dense(sequence_output)))           # [B, S, E]
        x_shape = x.shape
        logits = self.bias_add(self.matmul(x.reshape(-1, x_shape[-1]), word_embeddings), self.bias)  # [B*S, V]
        return logits.reshape(x_shape[:-1] + (word_embeddings.shape[0],))


class AlbertSOPHead(nn.Cell):
    """Sentence-order prediction. pooled ``[B, H]`` -> logits ``[B, 2]``
    (0 = segments in their original order, 1 = swapped)."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.dropout = nn.Dropout(p=config.classifier_dropout_prob)
        self.classifier = Dense(config.hidden_size, 2, config)

    def construct(self, pooled_output):
        return self.classifier(self.dropout(pooled_output))


class AlbertForPreTraining(PreTrainedMixin, nn.Cell):
    """Backbone + MLM head + SOP head.

    -> (mlm_logits ``[B, S, V]``, sop_logits ``[B, 2]``).
    """

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.config = config
        self.albert = AlbertModel(config)
        self.predictions = AlbertMLMHead(config)
        self.sop_classifier = AlbertSOPHead(config)

    def construct(self, input_ids, token_type_ids=None, attention_mask=None):
        sequence_output, pooled_output = self.albert(input_ids, token_type_ids, attention_mask)
        mlm_logits = self.predictions(sequence_output, self.albert.embeddings.word_embeddings.weight)
        return mlm_logits, self.sop_classifier(pooled_output)


class AlbertForSequenceClassification(PreTrainedMixin, nn.Cell):
    """Backbone + dropout + linear classifier on the pooled output.

    -> logits ``[B, num_labels]``.
    """

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.config = config
        self.albert = AlbertModel(config)
        self.dropout = nn.Dropout(p=config.classifier_dropout_prob)
        self.classifier = Dense(config.hidden_size, config.num_labels, config)

    def construct(self, input_ids, token_type_ids=None, attention_mask=None):
        pooled_output = self.albert(input_ids, token_type_ids, attention_mask)[1]
        return self.classifier(self.dropout(pooled_output))


class AlbertForMaskedLM(PreTrainedMixin, nn.Cell):
    """Backbone (no pooler) + MLM head: what the published ``albert-*-v2`` checkpoints hold.

    -> mlm_logits ``[B, S, V]``. Parameters: ``albert.*``, ``predictions.*``.
    """

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.config = config
        self.albert = AlbertModel(config, with_pooler=False)
        self.predictions = AlbertMLMHead(config)

    def construct(self, input_ids, token_type_ids=None, attention_mask=None):
        sequence_output = self.albert.hidden_states(input_ids, token_type_ids, attention_mask)[-1]
        return self.predictions(sequence_output, self.albert.embeddings.word_embeddings.weight)


class AlbertForQuestionAnswering(PreTrainedMixin, nn.Cell):
    """Extractive QA (SQuAD): a span start and end score for every token.

    -> (start_logits ``[B, S]``, end_logits ``[B, S]``). Parameters: ``albert.*``
    (no pooler) and ``qa_outputs`` (H -> 2: column 0 start, column 1 end).
    """

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.config = config
        self.albert = AlbertModel(config, with_pooler=False)
        self.qa_outputs = Dense(config.hidden_size, 2, config)

    def construct(self, input_ids, token_type_ids=None, attention_mask=None):
        sequence_output = self.albert.hidden_states(input_ids, token_type_ids, attention_mask)[-1]
        logits = self.qa_outputs(sequence_output)                          # [B, S, 2]
        return logits[:, :, 0], logits[:, :, 1]


class AlbertForTokenClassification(PreTrainedMixin, nn.Cell):
    """Backbone (no pooler) + dropout + linear classifier on every token (e.g. NER).

    -> logits ``[B, S, num_labels]``. Parameters: ``albert.*``, ``classifier``.
    """

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.config = config
        self.albert = AlbertModel(config, with_pooler=False)
        self.dropout = nn.Dropout(p=config.classifier_dropout_prob)
        self.classifier = Dense(config.hidden_size, config.num_labels, config)

    def construct(self, input_ids, token_type_ids=None, attention_mask=None):
        sequence_output = self.albert.hidden_states(input_ids, token_type_ids, attention_mask)[-1]
        return self.classifier(self.dropout(sequence_output))


class AlbertForMultipleChoice(PreTrainedMixin, nn.Cell):
    """Multiple choice (RACE, SWAG): one score per (question, choice) pair.

    input_ids, token_type_ids, attention_mask ``[B, C, S]`` (C choices, each
    the question paired with one answer) -> logits ``[B, C]``, softmax over C.
    Every pair runs through the backbone as its own row; the pooled output goes
    through dropout and a linear layer H -> 1. Parameters: ``albert.*``, ``classifier``.
    """

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.config = config
        self.albert = AlbertModel(config)
        self.dropout = nn.Dropout(p=config.classifier_dropout_prob)
        self.classifier = Dense(config.hidden_size, 1, config)

    def construct(self, input_ids, token_type_ids=None, attention_mask=None):
        B, C, S = input_ids.shape
        if token_type_ids is None:
            token_type_ids = ops.zeros_like(input_ids)
        if attention_mask is None:
            attention_mask = ops.ones_like(input_ids)
        pooled_output = self.albert(input_ids.reshape(B * C, S), token_type_ids.reshape(B * C, S),
                                    attention_mask.reshape(B * C, S))[1]              # [B*C, H]
        return self.classifier(self.dropout(pooled_output)).reshape(B, C)
