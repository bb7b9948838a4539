"""CoNLL-2003's column files -> sentences of (word, NER tag).

Files hold one token a line (lines end in LF, CRLF or CR), ``word POS chunk NER`` separated
by spaces, a blank line between sentences and a ``-DOCSTART-`` line opening each document
(skipped). Tags stay in the files' IOB1 scheme; ``metric`` (conlleval) scores them as they are.
"""

import dataclasses

from ..errors import DataError
from ..text_files import text_lines


DOCSTART = "-DOCSTART-"


@dataclasses.dataclass
class Sentence:
    words: list          # the tokens as written in the file
    tags: list           # their NER tags (IOB1 strings), one per word
    lines: list          # each word's line number in the file, for messages


def conll_lines(path):
    """``(line number, line)`` of a CoNLL file whose lines end in LF, CRLF or CR alone (old Mac
    files), numbered as an editor shows them."""
    number = 0
    for _, line in text_lines(path):
        for part in line.split("\r"):
            number += 1
            yield number, part


def read_conll(path, columns=4):
    """Sentences of a CoNLL-2003 file. Every line must have ``columns`` space-separated fields,
    the NER tag last (``O`` or ``B-``/``I-`` and a type); errors name ``path:line``."""
    sentences, words, tags, lines = [], [], [], []
    for line_no, line in conll_lines(path):
        fields = line.split()
        if not fields:
            if words:
                sentences.append(Sentence(words, tags, lines))
            words, tags, lines = [], [], []
            continue
        if fields[0] == DOCSTART:
            continue
        if len(fields) != columns:
            raise DataError(f"{path}:{line_no}: expected {columns} space-separated columns "
                            f"(word ... NER tag), found {len(fields)}")
        tag = fields[-1]
        prefix, dash, kind = tag.partition("-")
        if tag != "O" and not (dash and prefix in ("B", "I") and kind):
            raise DataError(f"{path}:{line_no}: NER tag {tag!r} is not O, B-TYPE or I-TYPE")
        lines.append(line_no)
        words.append(fields[0])
        tags.append(tag)
    if words:
        sentences.append(Sentence(words, tags, lines))
    if not sentences:
        raise DataError(f"{path}: no sentences")
    return sentences


def label_names_of(sentences):
    """Label names of a training set: "O" first, then the other tags sorted."""
    tags = {t for s in sentences for t in s.tags}
    return ("O",) + tuple(sorted(tags - {"O"}))


def check_tags(sentences, label_names, path):
    """A DataError naming ``path:line`` for the first tag the model has no label for."""
    known = set(label_names)
    for s in sentences:
        for tag, line_no in zip(s.tags, s.lines):
            if tag not in known:
                raise DataError(f"{path}:{line_no}: tag {tag!r} is not one of the model's labels "
                                f"{', '.join(label_names)}")
