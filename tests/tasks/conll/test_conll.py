"""CoNLL-2003 reader, first-piece labels, word tags and the majority baseline."""
import os

import numpy as np
import pytest

from albert_min.tasks.errors import DataError
from albert_min.tasks.conll import features as conll_features
from albert_min.tasks.conll import metric as conll_metric
from albert_min.tasks.conll import reading as conll_reading
from tokenizer import AlbertTokenizer

from helpers.paths import FIXTURES, ROOT  # noqa: E402
CONLL = os.path.join(ROOT, "..", "shared", "data", "conll2003")

SAMPLE = """-DOCSTART- -X- -X- O

EU NNP I-NP I-ORG
rejects VBZ I-VP O
German JJ I-NP I-MISC
call NN I-NP O

Peter NNP I-NP I-PER
Blackburn NNP I-NP I-PER
-DOCSTART- -X- -X- O

Bonn NNP I-NP I-LOC
"""


@pytest.fixture(scope="module")
def tok():
    return AlbertTokenizer(os.path.join(FIXTURES, "spiece_sst2_2k.model"))


def write(tmp_path, text):
    path = tmp_path / "eng.x"
    path.write_text(text)
    return str(path)


def test_reads_sentences_and_skips_docstart(tmp_path):
    sentences = conll_reading.read_conll(write(tmp_path, SAMPLE))
    assert [s.words for s in sentences] == [["EU", "rejects", "German", "call"], ["Peter", "Blackburn"], ["Bonn"]]
    assert sentences[1].tags == ["I-PER", "I-PER"] and [s.lines for s in sentences] == [[3, 4, 5, 6], [8, 9], [12]]
    assert conll_reading.label_names_of(sentences) == ("O", "I-LOC", "I-MISC", "I-ORG", "I-PER")


@pytest.mark.parametrize("text, message", [
    ("EU NNP I-ORG\n", r"eng\.x:1: expected 4 space-separated columns"),
    ("EU NNP I-NP I-ORG\nx NN I-NP X-ORG\n", r"eng\.x:2: NER tag 'X-ORG'"),
    ("EU NNP I-NP I-\n", r"eng\.x:1: NER tag 'I-'"),
    ("-DOCSTART- -X- -X- O\n\n", r"eng\.x: no sentences"),
])
def test_bad_lines_name_file_and_line(tmp_path, text, message):
    with pytest.raises(DataError, match=message):
        conll_reading.read_conll(write(tmp_path, text))


def test_unknown_tag_names_its_line(tmp_path):
    path = write(tmp_path, SAMPLE)
    with pytest.raises(DataError, match=r"eng\.x:8: tag 'I-PER' is not one of the model's labels"):
        conll_reading.check_tags(conll_reading.read_conll(path), ("O", "I-ORG", "I-MISC", "I-LOC"), path)


def test_first_piece_labelled_others_ignored(tok):
    sentence = conll_reading.Sentence(["Blackburn", "rejects", "x"], ["I-PER", "O", "O"], [])
    labels = ("O", "I-PER")
    feats = conll_features.encode_sentences(tok, [sentence], labels, max_length=64)
    pieces = [tok.encode_ids(w) for w in sentence.words]
    assert len(pieces[0]) > 1                                    # the case this test is about
    assert feats.input_ids[0] == [tok.cls_token_id] + sum(pieces, []) + [tok.sep_token_id]
    expected = [conll_features.IGNORE, 1] + [conll_features.IGNORE] * (len(pieces[0]) - 1) + [0] + [conll_features.IGNORE] * (len(pieces[1]) - 1)
    expected += [0] + [conll_features.IGNORE] * (len(pieces[2]) - 1) + [conll_features.IGNORE]
    assert feats.labels[0] == expected
    assert feats.first_piece[0] == [1, 1 + len(pieces[0]), 1 + len(pieces[0]) + len(pieces[1])]


def test_words_beyond_max_length_are_dropped_and_predicted_o(tok):
    sentence = conll_reading.Sentence(["a", "b", "c", "d"], ["I-PER", "O", "O", "I-PER"], [])
    feats = conll_features.encode_sentences(tok, [sentence], ("O", "I-PER"), max_length=4)   # room for 2 one-piece words
    assert feats.first_piece[0][2:] == [-1, -1] and feats.dropped_words == 2
    logits = np.zeros((4, 2))
    logits[1, 1] = logits[2, 0] = 1.0
    assert conll_features.word_tags(logits, feats.first_piece[0], ("O", "I-PER")) == ["I-PER", "O", "O", "O"]


def test_truncation_cuts_the_sentence_not_single_words(tok):
    long_word = "Blackburn"
    n = len(tok.encode_ids(long_word))
    sentence = conll_reading.Sentence(["a", long_word, "b"], ["O", "I-PER", "O"], [])
    feats = conll_features.encode_sentences(tok, [sentence], ("O", "I-PER"), max_length=2 + n)   # "a" fits, then not all of the word
    assert feats.first_piece[0] == [1, -1, -1]    # "b" would fit, but it comes after the cut


def test_batch_labels_ignore_padding(tok):
    sentences = [conll_reading.Sentence(["EU", "rejects"], ["I-ORG", "O"], []), conll_reading.Sentence(["Bonn"], ["I-LOC"], [])]
    names = ("O", "I-LOC", "I-ORG")
    feats = conll_features.encode_sentences(tok, sentences, names, max_length=64)
    ids, types, mask, labels = conll_features.batch(feats, [0, 1], tok.pad_token_id)
    assert ids.shape == labels.shape and ids.shape[1] % 8 == 0
    n = len(feats.input_ids[1])
    assert labels[1, n:].tolist() == [conll_features.IGNORE] * (ids.shape[1] - n) and mask[1].sum() == n
    assert labels[1, 1] == 1 and types.sum() == 0


def test_majority_tagger():
    train = [conll_reading.Sentence(["Paris", "is", "Paris"], ["I-LOC", "O", "I-PER"], []),
             conll_reading.Sentence(["Paris"], ["I-LOC"], [])]
    tag = conll_metric.majority_tagger(train)
    assert tag(["Paris", "is", "Rome"]) == ["I-LOC", "O", "O"]


@pytest.mark.skipif(not os.path.isfile(os.path.join(CONLL, "eng.testa")), reason="needs ../shared/data/conll2003")
def test_reads_the_real_files():
    sentences = conll_reading.read_conll(os.path.join(CONLL, "eng.testa"))
    assert (len(sentences), sum(len(s.words) for s in sentences)) == (3250, 51362)   # README counts


def test_entity_character_spans_from_word_tags():
    text = "  Peter Blackburn  met EU officials in Bonn."
    words, spans = conll_features.split_words(text)
    assert words == ["Peter", "Blackburn", "met", "EU", "officials", "in", "Bonn."]
    tags = ["I-PER", "I-PER", "O", "I-ORG", "O", "O", "I-LOC"]
    assert conll_features.entity_spans(text, spans, tags) == [
        {"type": "PER", "text": "Peter Blackburn", "start": 2, "end": 17},
        {"type": "ORG", "text": "EU", "start": 23, "end": 25},
        {"type": "LOC", "text": "Bonn.", "start": 39, "end": 44}]
