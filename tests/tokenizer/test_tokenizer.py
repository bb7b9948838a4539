"""The tokenizer against the reference Hugging Face (slow, SentencePiece) AlbertTokenizer.

``fixtures/tokenizer_reference.json`` holds that tokenizer's outputs on
``fixtures/spiece_sst2_2k.model`` (written by ``fixtures/make_tokenizer_reference.py``,
which says which transformers it used and how the tokenizers-backed ones differ).
"""
import json
import os

import pytest
import sentencepiece as spm

from tokenizer import AlbertTokenizer, TokenizerError, train_sentencepiece

from helpers.paths import FIXTURES  # noqa: E402
MODEL = os.path.join(FIXTURES, "spiece_sst2_2k.model")
KEYS = ("input_ids", "token_type_ids", "attention_mask")

with open(os.path.join(FIXTURES, "tokenizer_reference.json"), encoding="utf-8") as _f:
    REFERENCE = json.load(_f)


def by_name(cases):
    return pytest.mark.parametrize("case", cases, ids=[c["name"] for c in cases])


@pytest.fixture(scope="module")
def tok():
    return AlbertTokenizer(MODEL)


def test_fixture_is_for_this_model():
    assert REFERENCE["model"] == os.path.basename(MODEL)
    assert len(REFERENCE["singles"]) >= 340 and len(REFERENCE["pairs"]) >= 50 and REFERENCE["batches"]


@by_name(REFERENCE["singles"])
def test_single(tok, case):
    assert tok.tokenize(case["text"]) == case["pieces"]
    enc = tok.encode(case["text"], max_length=case.get("max_length"))
    assert {k: enc[k] for k in KEYS} == {k: case[k] for k in KEYS}
    if case.get("max_length") is None:
        # without truncation, ids are exactly [CLS] + pieces + [SEP]
        assert enc["input_ids"][1:-1] == tok.convert_tokens_to_ids(case["pieces"])


@by_name(REFERENCE["pairs"])
def test_pair(tok, case):
    enc = tok.encode(case["text"], case["text_pair"], max_length=case.get("max_length"))
    assert {k: enc[k] for k in KEYS} == {k: case[k] for k in KEYS}


@by_name(REFERENCE["batches"])
def test_batch(tok, case):
    out = tok(case["texts"], case.get("text_pairs"), max_length=case["max_length"], padding=case["padding"])
    got = {k: (out[k].tolist() if case["padding"] else out[k]) for k in KEYS}
    assert got == {k: case[k] for k in KEYS}


def test_fixture_covers_the_hard_parts():
    """Guard against a regenerated fixture silently losing what it is meant to test."""
    singles = {c["name"]: c for c in REFERENCE["singles"]}
    assert singles["hard14"]["text"] == "in 1990, the film" and "," in singles["hard14"]["pieces"]
    assert any(c["input_ids"][-1] == 3 and len(c["input_ids"]) == c["max_length"]
               for c in REFERENCE["singles"] if c.get("max_length"))
    truncated = [c for c in REFERENCE["pairs"] if c.get("max_length") and len(c["input_ids"]) == c["max_length"]]
    assert len(truncated) >= 40
    assert any(c["name"].startswith("tie") for c in truncated)
    assert any(c["padding"] == "max_length" and 0 in sum(c["attention_mask"], []) for c in REFERENCE["batches"])


# ------------------------------------------------------------------ errors
def test_missing_model_file(tmp_path):
    path = str(tmp_path / "nope" / "spiece.model")
    with pytest.raises(FileNotFoundError, match="nope"):
        AlbertTokenizer(path)
    with pytest.raises(FileNotFoundError, match="spiece.model"):
        AlbertTokenizer.from_pretrained(str(tmp_path))


def test_not_a_sentencepiece_model(tmp_path):
    path = tmp_path / "garbage.model"
    path.write_bytes(b"this is not a protobuf")
    with pytest.raises(TokenizerError):
        AlbertTokenizer(str(path))


def test_model_without_albert_special_pieces(tmp_path):
    sentences = ["a plain sentencepiece model has no cls or sep pieces .",
                 "only <unk> , <s> and </s> by default ."] * 50
    spm.SentencePieceTrainer.Train(sentence_iterator=iter(sentences), model_prefix=str(tmp_path / "plain"),
                                   vocab_size=30, num_threads=1, minloglevel=2)
    with pytest.raises(TokenizerError, match=r"\[CLS\]|<pad>"):
        AlbertTokenizer(str(tmp_path / "plain.model"))


@pytest.mark.parametrize("pair, max_length", [(None, 2), (None, 0), ("b", 4), ("b", 1)])
def test_max_length_too_small(tok, pair, max_length):
    with pytest.raises(TokenizerError, match="max_length"):
        tok.encode("a b c", pair, max_length=max_length)
    with pytest.raises(TokenizerError, match="max_length"):
        tok(["a b c"], None if pair is None else [pair], max_length=max_length)


def test_smallest_max_length_is_accepted(tok):
    assert len(tok.encode("a b c", max_length=3)["input_ids"]) == 3
    assert len(tok.encode("a b c", "d e f", max_length=5)["input_ids"]) == 5


def test_text_pairs_length_mismatch(tok):
    with pytest.raises(TokenizerError, match="2 texts but 1 text pairs"):
        tok(["a", "b"], ["c"])


def test_bad_padding_argument(tok):
    with pytest.raises(TokenizerError, match="padding"):
        tok(["a"], padding="left")


def test_padding_length_shorter_than_example(tok):
    with pytest.raises(TokenizerError, match="padding length"):
        tok.pad([tok.encode("a b c d e f")], length=3)


# ----------------------------------------------------------------- training
def test_train_sentencepiece_is_deterministic_with_albert_special_ids(tmp_path):
    sst2_train = os.path.join(os.path.dirname(os.path.dirname(FIXTURES)), "..", "shared", "data", "sst2", "train.tsv")
    if os.path.exists(sst2_train):
        with open(sst2_train, encoding="utf-8") as f:
            sentences = [line.split("\t")[0] for line in f.readlines()[1:3001]]
    else:
        sentences = [case["text"] for case in REFERENCE["singles"]]
    sentences += ["Café DÉJÀ vu , 1,000 ``quotes''"] * 3
    models = []
    for run in ("one", "two"):
        (tmp_path / run).mkdir()
        models.append(train_sentencepiece(sentences, str(tmp_path / run / "sp"), vocab_size=300))
    # the files differ only in the model_prefix they record; the vocabularies are identical
    vocabs = [open(m[:-len(".model")] + ".vocab", encoding="utf-8").read() for m in models]
    assert vocabs[0] == vocabs[1]
    toks = [AlbertTokenizer(m) for m in models]
    for text in sentences[:200] + ["Café déjà vu in 1990, the [MASK] ``end''"]:
        assert toks[0].tokenize(text) == toks[1].tokenize(text)
        assert toks[0].encode(text) == toks[1].encode(text)
    t = toks[0]
    assert [t.pad_token_id, t.unk_token_id, t.cls_token_id, t.sep_token_id, t.mask_token_id] == [0, 1, 2, 3, 4]
    assert t.convert_ids_to_tokens(range(5)) == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
    assert t.vocab_size == 300
    # trained on preprocessed text: no upper-case or accented pieces are wasted
    pieces = t.convert_ids_to_tokens(range(5, t.vocab_size))
    assert all(p == p.lower() and "é" not in p for p in pieces)


def test_fixture_model_has_albert_special_ids(tok):
    assert tok.convert_ids_to_tokens(range(5)) == list(AlbertTokenizer.SPECIAL_TOKENS)
    assert tok.vocab_size == 2000
