"""ALBERT's tokenizer: SentencePiece plus ALBERT's text preprocessing.

Reproduces the reference ``AlbertTokenizer``:

1. lower-case (``do_lower_case``) everything but the special-token strings
   ``<pad> <unk> [CLS] [SEP] [MASK]``, then split those out of the text (case
   sensitive); they map straight to their ids, and ``[MASK]`` also swallows
   the white space on its left;
2. preprocess each remaining chunk: collapse white space (``remove_space``),
   turn `` and '' into ", strip accents by NFKD-decomposing and dropping
   combining marks (``keep_accents=False``), lower-case again;
3. SentencePiece pieces, with ALBERT's one special rule: a piece that ends in
   "digit," (``▁1,``) is re-split so the comma is its own piece;
4. ``[CLS] a [SEP]`` or ``[CLS] a [SEP] b [SEP]`` with token type ids 0 for
   the first segment (including [CLS] and its [SEP]) and 1 for the second;
5. longest-first truncation of pairs, then padding with ``<pad>``.

The reference is the original, SentencePiece-based ("slow") Hugging Face
``AlbertTokenizer`` of transformers 4.x; ``tests/tokenizer/test_tokenizer.py`` checks
exact agreement with it (``tests/fixtures/make_tokenizer_reference.py`` says
how the tokenizers-backed ones of transformers 5 differ). Step 1 and the
per-character lower-casing are Hugging Face's; Google's ``tokenization.py``
encodes special-token strings as plain text and lower-cases with ``str.lower``.
"""

import os
import re
import unicodedata

import numpy as np
from albert_min.common.errors import AlbertMinError
from albert_min.common.records import check_recorded_sha256

SPIECE_UNDERLINE = "\u2581"


class TokenizerError(AlbertMinError):
    """Bad tokenizer input or a SentencePiece model without ALBERT's special pieces."""


class AlbertTokenizer:
    SPECIAL_TOKENS = ("<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]")

    def __init__(self, spiece_model, do_lower_case=True, remove_space=True, keep_accents=False):
        import sentencepiece as spm   # imported here so the package imports without it
        if not os.path.isfile(spiece_model):
            raise FileNotFoundError(f"SentencePiece model not found: {spiece_model}")
        # In a folder albert_min wrote (a model folder, a training state), the file it wrote there and no
        # other (another model's vocabulary gives plausible, wrong numbers): TokenizerError naming both.
        check_recorded_sha256(spiece_model, TokenizerError)
        self.spiece_model = spiece_model
        self.sp = spm.SentencePieceProcessor()
        try:
            self.sp.Load(spiece_model)
        except (OSError, RuntimeError) as err:
            raise TokenizerError(f"{spiece_model}: not a SentencePiece model ({err})") from None
        self.do_lower_case = do_lower_case
        self.remove_space = remove_space
        self.keep_accents = keep_accents
        self.unk_token_id = self.sp.unk_id()
        ids = {}
        for token in self.SPECIAL_TOKENS:
            ids[token] = self.sp.PieceToId(token)
            if ids[token] == self.unk_token_id and token != "<unk>":
                raise TokenizerError(f"{spiece_model}: has no {token} piece; not an ALBERT vocabulary")
        self.special_ids = ids
        self._special_re = re.compile("(" + "|".join(re.escape(t) for t in self.SPECIAL_TOKENS) + ")")
        self.pad_token_id = ids["<pad>"]
        self.cls_token_id = ids["[CLS]"]
        self.sep_token_id = ids["[SEP]"]
        self.mask_token_id = ids["[MASK]"]

    @classmethod
    def from_pretrained(cls, model_dir, **kwargs):
        return cls(os.path.join(model_dir, "spiece.model"), **kwargs)

    @property
    def vocab_size(self):
        return self.sp.GetPieceSize()

    # ----------------------------------------------------------------- pieces
    def preprocess_text(self, text):
        out = " ".join(text.strip().split()) if self.remove_space else text
        out = out.replace("``", '"').replace("''", '"')
        if not self.keep_accents:
            out = unicodedata.normalize("NFKD", out)
            out = "".join(c for c in out if not unicodedata.combining(c))
        if self.do_lower_case:
            out = out.lower()
        return out

    def tokenize(self, text):
        """Text -> SentencePiece pieces (strings); special-token strings stay whole.

        Text that normalises to nothing (white space, control, zero-width or combining
        characters only) gives no pieces, like ""; text that is not valid Unicode (a lone
        surrogate) is a TokenizerError.
        """
        check_unicode(text)
        if self.do_lower_case:
            # Lower-case one character at a time, leaving special-token strings
            # alone, like the reference (``PreTrainedTokenizer.tokenize``). Only
            # differs from ``text.lower()`` for a word-final capital sigma: "Σ" ->
            # "σ", never the final form "ς". (It also lets "<UNK>" become <unk>.)
            text = "".join(part if part in self.special_ids else "".join(ch.lower() for ch in part)
                           for part in self._special_re.split(text))
        # [chunk, special, chunk, special, ..., chunk]
        parts = self._special_re.split(text)
        pieces = []
        for i, part in enumerate(parts):
            if i % 2 == 1:
                pieces.append(part)
            elif part:
                if i + 1 < len(parts) and parts[i + 1] == "[MASK]":
                    part = part.rstrip()   # [MASK] swallows the white space on its left
                pieces.extend(self._tokenize_chunk(part))
        return pieces

    def _tokenize_chunk(self, text):
        """Plain text (no special tokens) -> pieces."""
        pieces = self.sp.EncodeAsPieces(self.preprocess_text(text))
        out = []
        for piece in pieces:
            out.extend(self._resplit_digit_comma(piece) or [piece])
        return out

    def _resplit_digit_comma(self, piece):
        """"▁1990," -> ["▁1990", ","]: numbers with a trailing comma get split the way
        the original BERT tokenizer split them. None for any other piece."""
        if not (len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit()):
            return None
        sub = self.sp.EncodeAsPieces(piece[:-1].replace(SPIECE_UNDERLINE, ""))
        if piece[0] != SPIECE_UNDERLINE and sub[0][0] == SPIECE_UNDERLINE:
            if len(sub[0]) == 1:
                sub = sub[1:]
            else:
                sub[0] = sub[0][1:]
        return sub + [piece[-1]]

    # ---------------------------------------------------------------- offsets
    def tokenize_with_offsets(self, text):
        """``tokenize`` plus where each piece came from: (pieces, offsets).

        ``offsets[i] = (start, end)``, character offsets into ``text`` such that
        ``text[start:end]`` is the original text of piece i, before lower-casing,
        accent stripping and white space collapsing (for SQuAD answers, which must
        be cut from the original context). Leading white space that a "▁" piece
        stands for is not part of its span, so a lone "▁" has an empty span.
        ``pieces`` is exactly ``tokenize(text)``.
        """
        chars, spans = self._lower_mapped(text)
        joined = "".join(chars)
        pieces, offsets = [], []
        bounds = [m.span() for m in self._special_re.finditer(joined)]
        cuts = [0] + [i for span in bounds for i in span] + [len(joined)]
        for k in range(0, len(cuts), 2):   # (chunk, special) pairs: [cuts[k], cuts[k+1]) is a chunk
            lo, hi = cuts[k], cuts[k + 1]
            if lo < hi:
                if k + 2 < len(cuts) and joined[hi:cuts[k + 2]] == "[MASK]":
                    while hi > lo and chars[hi - 1].isspace():   # [MASK] swallows the white space on its left
                        hi -= 1
                chunk_pieces, chunk_offsets = self._chunk_with_offsets(chars[lo:hi], spans[lo:hi])
                pieces += chunk_pieces
                offsets += chunk_offsets
            if k + 2 < len(cuts):
                s, e = cuts[k + 1], cuts[k + 2]
                pieces.append(joined[s:e])
                offsets.append((spans[s][0], spans[e - 1][1]))
        return pieces, offsets

    def _lower_mapped(self, text):
        """Step 1 of ``tokenize`` (lower-case all but special-token strings), keeping for every
        output character the (start, end) of the input characters it came from."""
        chars, spans = [], []
        pos = 0
        for i, part in enumerate(self._special_re.split(text)):
            keep = i % 2 == 1 or not self.do_lower_case
            for offset, ch in enumerate(part):
                out = ch if keep else ch.lower()
                chars += out
                spans += [(pos + offset, pos + offset + 1)] * len(out)
            pos += len(part)
        return chars, spans

    def _preprocess_mapped(self, chars, spans):
        """``preprocess_text`` on a character list, each output character keeping its source span."""
        if self.remove_space:
            words, current = [], []
            for ch, span in zip(chars, spans):
                if ch.isspace():
                    if current:
                        words.append(current)
                    current = []
                else:
                    current.append((ch, span))
            if current:
                words.append(current)
            pairs = []
            for w, word in enumerate(words):
                if w:   # the one space stands for the gap between the two words
                    pairs.append((" ", (words[w - 1][-1][1][1], word[0][1][0])))
                pairs += word
        else:
            pairs = list(zip(chars, spans))
        for quote in ("``", "''"):   # str.replace order: all `` first, then all ''
            merged, i = [], 0
            while i < len(pairs):
                if i + 1 < len(pairs) and pairs[i][0] + pairs[i + 1][0] == quote:
                    merged.append(('"', (pairs[i][1][0], pairs[i + 1][1][1])))
                    i += 2
                else:
                    merged.append(pairs[i])
                    i += 1
            pairs = merged
        if not self.keep_accents:
            # NFKD one character at a time equals NFKD of the whole string once the combining
            # marks (the only characters canonical reordering moves) are dropped.
            pairs = [(d, span) for ch, span in pairs for d in unicodedata.normalize("NFKD", ch)
                     if not unicodedata.combining(d)]
        if self.do_lower_case:
            whole = "".join(ch for ch, _ in pairs).lower()   # whole-string: final sigma as str.lower does
            expanded = [span for ch, span in pairs for _ in ch.lower()]
            pairs = list(zip(whole, expanded))
        return "".join(ch for ch, _ in pairs), [span for _, span in pairs]

    def _chunk_with_offsets(self, chars, spans):
        """``_tokenize_chunk`` with each piece's span in the original text."""
        text, text_spans = self._preprocess_mapped(chars, spans)
        if text != self.preprocess_text("".join(chars)):   # a bug here would misplace every answer
            raise TokenizerError("internal: offset mapping disagrees with preprocess_text")
        byte_to_char = [i for i, ch in enumerate(text) for _ in ch.encode("utf-8")] + [len(text)]
        pieces, offsets = [], []
        for p in self.sp.encode(text, out_type="proto").pieces:   # begin/end: bytes of `text`
            lo, hi = byte_to_char[p.begin], byte_to_char[p.end]
            while lo < hi and text[lo].isspace():
                lo += 1
            for piece, (a, b) in self._split_digit_comma(p.piece, lo, hi):
                pieces.append(piece)
                if a < b:
                    offsets.append((text_spans[a][0], text_spans[b - 1][1]))
                else:   # empty span: where the next character starts
                    at = text_spans[a][0] if a < len(text_spans) else spans[-1][1]
                    offsets.append((at, at))
        return pieces, offsets

    def _split_digit_comma(self, piece, lo, hi):
        """``_resplit_digit_comma`` on one piece spanning preprocessed characters [lo, hi):
        yields (piece, (start, end)); the digit sub-pieces share the span in order."""
        sub = self._resplit_digit_comma(piece)
        if sub is None:
            yield piece, (lo, hi)
            return
        sub = sub[:-1]
        comma = max(lo, hi - 1)
        at = lo
        for s in sub:
            width = len(s.replace(SPIECE_UNDERLINE, ""))
            end = min(at + width, comma)
            yield s, (at, end)
            at = end
        yield ",", (comma, hi)

    def convert_tokens_to_ids(self, pieces):
        return [self.sp.PieceToId(p) for p in pieces]

    def convert_ids_to_tokens(self, ids):
        return [self.sp.IdToPiece(int(i)) for i in ids]

    def decode(self, ids, skip_special_tokens=True):
        special = {self.pad_token_id, self.cls_token_id, self.sep_token_id, self.mask_token_id}
        ids = [int(i) for i in ids if not (skip_special_tokens and int(i) in special)]
        return self.sp.DecodeIds(ids)

    def encode_ids(self, text):
        return self.convert_tokens_to_ids(self.tokenize(text))

    # --------------------------------------------------------------- encoding
    @staticmethod
    def truncate_pair(ids_a, ids_b, max_pieces):
        """Longest-first: drop the last piece of the longer segment until both fit
        (on a tie the second segment loses one)."""
        ids_a, ids_b = list(ids_a), list(ids_b)
        while len(ids_a) + len(ids_b) > max_pieces:
            if len(ids_a) > len(ids_b):
                ids_a.pop()
            else:
                ids_b.pop()
        return ids_a, ids_b

    def encode(self, text, text_pair=None, max_length=None, truncation=True):
        """One example -> dict of lists ``input_ids``, ``token_type_ids``, ``attention_mask``."""
        for name, value in (("text", text), ("text_pair", text_pair)):
            if value is not None and not isinstance(value, str):
                raise TokenizerError(f"{name} must be a str, got {type(value).__name__}")
        ids_a = self.encode_ids(text)
        ids_b = self.encode_ids(text_pair) if text_pair is not None else None
        if max_length is not None:
            specials = 3 if ids_b is not None else 2
            if max_length < specials + (2 if ids_b is not None else 1):
                raise TokenizerError(f"max_length={max_length} leaves no room for text")
            if truncation:
                if ids_b is None:
                    ids_a = ids_a[:max_length - specials]
                else:
                    ids_a, ids_b = self.truncate_pair(ids_a, ids_b, max_length - specials)
        input_ids = [self.cls_token_id] + ids_a + [self.sep_token_id]
        token_type_ids = [0] * len(input_ids)
        if ids_b is not None:
            input_ids += ids_b + [self.sep_token_id]
            token_type_ids += [1] * (len(ids_b) + 1)
        return {"input_ids": input_ids, "token_type_ids": token_type_ids, "attention_mask": [1] * len(input_ids)}

    def pad(self, encodings, length=None):
        """List of ``encode`` dicts -> dict of int32 arrays ``[batch, length]``.

        ``length=None`` pads to the longest example (what batching wants).
        """
        longest = max(len(e["input_ids"]) for e in encodings)
        length = longest if length is None else length
        if longest > length:
            raise TokenizerError(f"an example has {longest} tokens, more than the padding length {length}")
        batch = {k: np.zeros((len(encodings), length), np.int32)
                 for k in ("input_ids", "token_type_ids", "attention_mask")}
        batch["input_ids"][:] = self.pad_token_id
        for row, e in enumerate(encodings):
            n = len(e["input_ids"])
            for k in batch:
                batch[k][row, :n] = e[k]
        return batch

    def __call__(self, texts, text_pairs=None, max_length=128, padding="longest", truncation=True):
        """Batch encode. ``padding``: "longest", "max_length" or None (no padding: lists)."""
        if isinstance(texts, str):
            if text_pairs is not None and not isinstance(text_pairs, str):
                raise TokenizerError(f"texts is one str, so text_pairs must be one str too, "
                                     f"got {type(text_pairs).__name__}")
            texts = [texts]
            text_pairs = [text_pairs] if text_pairs is not None else None
        # A str where a list is expected would silently be read as a list of characters.
        for name, value in (("texts", texts), ("text_pairs", text_pairs)):
            if value is not None and not (isinstance(value, (list, tuple))
                                          and all(isinstance(t, str) for t in value)):
                raise TokenizerError(f"{name} must be a str or a list of str, got {type(value).__name__}"
                                     + (" (one str with a list of texts)" if isinstance(value, str) else ""))
        if not texts:
            raise TokenizerError("texts is empty")
        if text_pairs is not None and len(text_pairs) != len(texts):
            raise TokenizerError(f"{len(texts)} texts but {len(text_pairs)} text pairs")
        pairs = text_pairs if text_pairs is not None else [None] * len(texts)
        encodings = [self.encode(a, b, max_length, truncation) for a, b in zip(texts, pairs)]
        if padding is None:
            return {k: [e[k] for e in encodings] for k in encodings[0]}
        if padding not in ("longest", "max_length"):
            raise TokenizerError(f"padding must be 'longest', 'max_length' or None, got {padding!r}")
        return self.pad(encodings, max_length if padding == "max_length" else None)


def check_unicode(text):
    """SentencePiece reads UTF-8, and a lone surrogate (``"\\ud800"``, e.g. from half of a
    JSON ``\\ud83d\\ude00`` pair) has none: refuse it here, not as a pybind11 RuntimeError."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise TokenizerError(f"not valid Unicode: lone surrogate U+{ord(text[err.start]):04X} "
                             f"at character {err.start}") from None


def train_sentencepiece(sentences, model_prefix, vocab_size=8000, seed_sentence_size=2_000_000):
    """Train an ALBERT-style unigram SentencePiece model on ``sentences``.

    Same special pieces and ids as Google's ``30k-clean.model``: <pad>=0,
    <unk>=1, [CLS]=2, [SEP]=3, [MASK]=4. Text is preprocessed exactly as the
    tokenizer will preprocess it (lower case, accents stripped), so no piece is
    wasted on forms that can never occur. A text longer than SentencePiece's
    sentence limit (4,192 bytes) is cut at spaces (``shorter_lines``). Deterministic
    for the same input. Writes ``model_prefix.model`` and ``model_prefix.vocab``; returns the .model path.
    """
    import sentencepiece as spm

    cleaner = AlbertTokenizer.__new__(AlbertTokenizer)
    cleaner.remove_space, cleaner.keep_accents, cleaner.do_lower_case = True, False, True
    cleaned = [line for s in sentences for line in shorter_lines(cleaner.preprocess_text(s))]
    if not any(cleaned):
        raise TokenizerError("no text to train a SentencePiece model on")
    try:
        _train_sentencepiece(spm, cleaned, model_prefix, vocab_size, seed_sentence_size)
    except RuntimeError as err:   # SentencePiece's C++ errors, e.g. too few distinct characters
        if "all_chars_count" in str(err):   # its normaliser left no character at all
            raise TokenizerError("no text to train a SentencePiece model on: every character is white space, a "
                                 "control or a zero-width character") from None
        raise TokenizerError(f"SentencePiece training failed: {str(err).strip().splitlines()[-1]}") from None
    return model_prefix + ".model"


def shorter_lines(text, limit=None):
    """``text`` (preprocessed: words between single spaces) cut at spaces into lines of at most
    ``limit`` UTF-8 bytes (``MAX_SENTENCE_BYTES``; a longer word is cut between characters).
    SentencePiece skips a longer training sentence; its pieces never cross a space, so cutting
    there changes nothing it learns (a RACE article or a SQuAD context of 5 kB trains as is)."""
    limit = limit or MAX_SENTENCE_BYTES
    if len(text) * 4 <= limit or len(text.encode("utf-8")) <= limit:
        return [text]
    lines, words, size = [], [], 0
    for word in text.split(" "):
        encoded = word.encode("utf-8")
        while len(encoded) > limit:   # longer than a line by itself: whole lines of it, cut between characters
            head = encoded[:limit].decode("utf-8", "ignore") or word[0]
            if words:
                lines.append(" ".join(words))
                words, size = [], 0
            lines.append(head)
            word = word[len(head):]
            encoded = word.encode("utf-8")
        if words and size + 1 + len(encoded) > limit:
            lines.append(" ".join(words))
            words, size = [], 0
        size += len(encoded) + (1 if words else 0)
        words.append(word)
    if words:
        lines.append(" ".join(words))
    return lines


MAX_SENTENCE_BYTES = 4192   # SentencePiece's max_sentence_length default, passed explicitly


def _train_sentencepiece(spm, cleaned, model_prefix, vocab_size, seed_sentence_size):
    spm.SentencePieceTrainer.Train(
        sentence_iterator=iter(cleaned), max_sentence_length=MAX_SENTENCE_BYTES,
        model_prefix=model_prefix, vocab_size=vocab_size, model_type="unigram",
        hard_vocab_limit=False,   # a small corpus gets as many pieces as it supports, not an error
        pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, control_symbols=["[CLS]", "[SEP]", "[MASK]"],
        character_coverage=0.99995, input_sentence_size=seed_sentence_size,
        shuffle_input_sentence=False, num_threads=1, minloglevel=2)
