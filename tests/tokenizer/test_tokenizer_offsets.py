"""AlbertTokenizer.tokenize_with_offsets: the pieces of ``tokenize`` and where each came from."""
import json
import os

import pytest

from tokenizer import AlbertTokenizer

from helpers.paths import FIXTURES  # noqa: E402
MODEL = os.path.join(FIXTURES, "spiece_sst2_2k.model")

HARD = [
    "Hello  Wörld, it's Café Ångström!",       # accents, double space, punctuation
    "  leading and trailing spaces \t\n",
    "In 1990, 12,000,000, people",                 # ALBERT's "digit," re-split
    "``Quoted'' text and `single' ones",           # `` and '' become one " each
    "Mask [MASK] here, [CLS] and <UNK> or <pad>",  # special-token strings
    "ﬁnal ligature and ① circled",                # compatibility characters
    "İstanbul ΣΑΣ ΟΔΟΣ",                           # lower() that changes length; final sigma
    "tab\tnew\nline\u00a0nbsp",
    "",
    "   ",
]


@pytest.fixture(scope="module")
def tok():
    return AlbertTokenizer(MODEL)


def fixture_texts():
    with open(os.path.join(FIXTURES, "tokenizer_reference.json"), encoding="utf-8") as f:
        ref = json.load(f)
    return ([c["text"] for c in ref["singles"]] + [c["text"] for c in ref["pairs"]]
            + [c["text_pair"] for c in ref["pairs"]])


def test_same_pieces_as_tokenize_on_every_fixture_text(tok):
    for text in fixture_texts() + HARD:
        pieces, offsets = tok.tokenize_with_offsets(text)
        assert pieces == tok.tokenize(text), text
        assert len(offsets) == len(pieces)


@pytest.mark.parametrize("text", HARD)
def test_spans_are_ordered_and_inside_the_text(tok, text):
    _, offsets = tok.tokenize_with_offsets(text)
    for (s, e), (s2, _) in zip(offsets, offsets[1:]):
        assert 0 <= s <= e <= len(text) and s <= s2
    for s, e in offsets:
        assert not text[s:e][:1].isspace()   # a "▁" stands for the space before, not in the span


def test_spans_cut_the_original_text(tok):
    text = "Hello  Wörld, it's Café Ångström!"
    pieces, offsets = tok.tokenize_with_offsets(text)
    # Every piece's span, preprocessed, is the piece itself (without "▁"): nothing lost, nothing moved.
    for piece, (s, e) in zip(pieces, offsets):
        assert tok.preprocess_text(text[s:e]) == piece.replace("\u2581", "")
    # and the spans, joined, give back the text without its white space
    assert "".join(text[s:e] for s, e in offsets) == text.replace(" ", "")


def test_special_tokens_and_quotes_map_to_what_was_written(tok):
    text = "a ``b'' [MASK] <UNK>"
    pieces, offsets = tok.tokenize_with_offsets(text)
    by_piece = [(p, text[s:e]) for p, (s, e) in zip(pieces, offsets)]
    assert ("[MASK]", "[MASK]") in by_piece
    assert ("<unk>", "<UNK>") in by_piece          # lower-cased into a special token, as tokenize does
    assert [t for p, t in by_piece if p.endswith('"')] == ["``", "''"]


def test_digit_comma_split_gives_the_comma_its_own_character(tok):
    text = "In 1990, people"
    pieces, offsets = tok.tokenize_with_offsets(text)
    comma = pieces.index(",")
    assert offsets[comma] == (7, 8)
    digits = "".join(text[s:e] for p, (s, e) in zip(pieces, offsets) if any(ch.isdigit() for ch in p))
    assert digits == "1990"


def test_length_changing_lower_case_keeps_later_offsets(tok):
    text = "İstanbul is big"   # "İ".lower() is two characters
    pieces, offsets = tok.tokenize_with_offsets(text)
    assert text[offsets[-1][0]:offsets[-1][1]] == "big"[-len(pieces[-1].replace("\u2581", "")):]
