"""RACE's model inputs, as Google's ``run_race`` builds them: a question with a ``_`` blank
has the option put into the blank, any other is followed by " " and the option; per option
one sequence ``[CLS] article [SEP] question+option [SEP]``, the question+option kept to its
last ``max_qa_length`` pieces and the article truncated to fill the rest.
"""

import numpy as np

from ..batching import MAX_TRAIN_LENGTHS, pad_with_types, train_length


def question_with_option(question, option):
    """Google's run_race: the option fills the ``_`` blank, or follows the question after a space."""
    return question.replace("_", option) if "_" in question else question + " " + option


def encode_question(tokenizer, q, max_length, max_qa_length=128, article_ids=None):
    """One question's 4 sequences: (input_ids, token_type_ids), two lists of 4 int lists.
    ``article_ids`` saves re-tokenizing an article shared by several questions."""
    if max_length < 5:
        raise ValueError(f"max_length={max_length} leaves no room for an article and an option")
    article = tokenizer.encode_ids(q.article) if article_ids is None else article_ids
    rows, types = [], []
    for option in q.options:
        qa = tokenizer.encode_ids(question_with_option(q.question, option))
        qa = qa[-min(max_qa_length, max_length - 4):]   # keep at least one article piece
        context = article[:max_length - 3 - len(qa)]
        rows.append([tokenizer.cls_token_id] + context + [tokenizer.sep_token_id] + qa + [tokenizer.sep_token_id])
        types.append([0] * (len(context) + 2) + [1] * (len(qa) + 1))
    return rows, types


def encode_questions(tokenizer, questions, max_length, max_qa_length=128):
    """Every question's 4 sequences, each article tokenized once."""
    out, cache = [], {}
    for q in questions:
        if q.key not in cache:
            cache = {q.key: tokenizer.encode_ids(q.article)}   # questions of a file are consecutive
        out.append(encode_question(tokenizer, q, max_length, max_qa_length, cache[q.key]))
    return out


def batch(encoded, labels, pad_id, max_length=None, lengths=MAX_TRAIN_LENGTHS):
    """Questions -> input_ids, token_type_ids, attention_mask int32 ``[B, 4, S]`` and labels ``[B]``;
    S is the longest sequence rounded up to ``batching.train_length`` of ``max_length`` and ``lengths``
    (``max_length`` None: to a multiple of 8)."""
    rows = [r for rs, _ in encoded for r in rs]
    types = [t for _, ts in encoded for t in ts]
    longest = max(len(r) for r in rows)
    length = train_length(longest, max_length, lengths) if max_length else -(-longest // 8) * 8
    arrays = pad_with_types(rows, types, pad_id, length=length)
    B = len(encoded)
    input_ids, token_type_ids, attention_mask = (a.reshape(B, 4, length) for a in arrays)
    return input_ids, token_type_ids, attention_mask, np.asarray(labels, np.int32)
