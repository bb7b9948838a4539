"""The tasks' batches through the real heads of albert_min.model.heads (a tiny random model):
the arrays have the shapes and types the heads take, and what comes out decodes."""
import os

import mindspore as ms
import numpy as np
import pytest

from albert_min.model.config import AlbertConfig
from albert_min.model.heads import AlbertForMultipleChoice, AlbertForQuestionAnswering, AlbertForTokenClassification
from albert_min.tasks.conll import features as conll_features
from albert_min.tasks.conll import loss as conll_loss
from albert_min.tasks.conll import reading as conll_reading
from albert_min.tasks.race import features as race_features
from albert_min.tasks.race import loss as race_loss
from albert_min.tasks.race import metric as race_metric
from albert_min.tasks.race import reading as race_reading
from albert_min.tasks.squad import decode as squad_decode
from albert_min.tasks.squad import features as squad_features
from albert_min.tasks.squad import loss as squad_loss
from albert_min.tasks.squad import reading as squad_reading
from helpers.paths import FIXTURES
from tokenizer import AlbertTokenizer

CONTEXT = "The old cat sat on the red mat near the door. It was happy there, and it slept all day long."


@pytest.fixture(scope="module")
def tok():
    return AlbertTokenizer(os.path.join(FIXTURES, "spiece_sst2_2k.model"))


def tiny(cls, tok, **extra):
    ms.set_seed(0)
    config = AlbertConfig(vocab_size=tok.vocab_size, embedding_size=8, hidden_size=16, num_hidden_layers=2,
                          num_attention_heads=2, intermediate_size=32, max_position_embeddings=64, **extra)
    model = cls(config)
    model.set_train(False)
    return model


def tensors(*arrays):
    return [ms.Tensor(a) for a in arrays]


def test_squad_windows_through_the_qa_head(tok):
    model = tiny(AlbertForQuestionAnswering, tok)
    examples = [squad_reading.SquadExample("a", "Where is the cat?", CONTEXT, []),
                squad_reading.SquadExample("b", "When?", "It slept all day.", [])]
    features = list(squad_features.iter_features(tok, examples, squad_features.WindowConfig(max_length=32, doc_stride=8)))

    def scored():
        for start in range(0, len(features), 3):      # batches of 3 windows, as a prediction loop would
            chunk = features[start:start + 3]
            b = squad_features.batch(chunk, tok.pad_token_id)
            starts, ends = model(*tensors(b["input_ids"], b["token_type_ids"], b["attention_mask"]))
            assert starts.shape == (len(chunk), b["input_ids"].shape[1])
            yield from zip(chunk, starts.asnumpy(), ends.asnumpy())

    predictions = list(squad_decode.decode_stream(examples, scored(), squad_decode.DecodeConfig(version_2=True)))
    assert [p.qid for p in predictions] == ["a", "b"]
    for p, e in zip(predictions, examples):
        assert p.text in e.context and np.isfinite(p.null_odds)


def test_race_options_through_the_multiple_choice_head(tok):
    model = tiny(AlbertForMultipleChoice, tok)
    q = race_reading.RaceQuestion("high1.txt", "high", "The cat is old. It sleeps all day.", "The cat is _ .",
                          ["young", "old", "red", "big"], 1)
    ids, types, mask, labels = race_features.batch(race_features.encode_questions(tok, [q, q], max_length=32), [1, 1], tok.pad_token_id)
    logits = model(*tensors(ids, types, mask)).asnumpy()
    assert logits.shape == (2, 4) and labels.tolist() == [1, 1]
    # the same question twice: the same logits, so the accuracy is 0 or 100 by whether option 1 wins, on every level
    np.testing.assert_allclose(logits[0], logits[1], rtol=0, atol=1e-6)
    predicted = logits.argmax(-1)
    expected = 100.0 if predicted[0] == 1 else 0.0
    assert race_metric.accuracy([q, q], predicted) == {"all": expected, "high": expected}
    assert race_metric.accuracy([q, q], [1, 1]) == {"all": 100.0, "high": 100.0}
    assert race_metric.accuracy([q, q], [1, 0]) == {"all": 50.0, "high": 50.0}


def test_conll_sentences_through_the_token_classification_head(tok):
    names = ("O", "I-LOC", "I-PER")
    model = tiny(AlbertForTokenClassification, tok, num_labels=len(names))
    sentences = [conll_reading.Sentence(["Peter", "Blackburn", "sleeps"], ["I-PER", "I-PER", "O"], [1, 2, 3]),
                 conll_reading.Sentence(["Bonn"], ["I-LOC"], [5])]
    feats = conll_features.encode_sentences(tok, sentences, names, max_length=32)
    ids, types, mask, labels = conll_features.batch(feats, [0, 1], tok.pad_token_id)
    logits = model(*tensors(ids, types, mask)).asnumpy()
    assert logits.shape == ids.shape + (3,) and labels.shape == ids.shape
    tags = [conll_features.word_tags(logits[i], feats.first_piece[i], names) for i in range(2)]
    assert [len(t) for t in tags] == [3, 1] and all(t in names for ts in tags for t in ts)


class Fixed:
    """A stand-in head returning given logits, so a loss can be checked by hand."""

    def __init__(self, *outputs):
        self.outputs = [ms.Tensor(np.asarray(o, np.float32)) for o in outputs]

    def __call__(self, *inputs):
        return self.outputs[0] if len(self.outputs) == 1 else tuple(self.outputs)


def test_losses_by_hand():
    ids = ms.Tensor(np.zeros((1, 3), np.int32))
    # uniform logits over 3 positions: each cross-entropy is log 3
    qa = squad_loss.make_qa_loss_fn(Fixed(np.zeros((1, 3)), np.zeros((1, 3))))
    assert float(qa(ids, ids, ids, ms.Tensor([1], ms.int32), ms.Tensor([2], ms.int32))) == pytest.approx(np.log(3))
    # two labelled pieces: -log softmax([2, 0])[0] and -log softmax([0, 0])[1]; the IGNORE piece would add log 2 + 5
    logits = np.array([[[2.0, 0.0], [0.0, 0.0], [5.0, 0.0]]])
    labels = ms.Tensor(np.array([[0, 1, conll_features.IGNORE]], np.int32))
    expected = (np.log(1 + np.exp(-2.0)) + np.log(2.0)) / 2
    assert float(conll_loss.make_token_loss_fn(Fixed(logits))(ids, ids, ids, labels)) == pytest.approx(expected, rel=1e-5)
    choice = race_loss.make_choice_loss_fn(Fixed(np.log([[0.1, 0.2, 0.3, 0.4]])))
    assert float(choice(ids, ids, ids, ms.Tensor([3], ms.int32))) == pytest.approx(-np.log(0.4), rel=1e-5)

