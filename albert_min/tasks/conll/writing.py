"""conlleval's input file, ``word gold predicted`` columns, as evaluate.py --output writes it, and
how ``--force`` recognises one it wrote.
"""

from ...common.safe_output import FileKind
from ..file_io import PREDICTIONS, bounded_text, write_text


def write_columns(path, sentences):
    """The ``word gold predicted`` file conlleval reads: one token a line, a blank line after
    each sentence. ``sentences``: iterable of (words, gold tags, predicted tags). Written whole
    to a temporary file beside it and renamed (``file_io.write_text``), so a reader never sees half a file."""
    lines = []
    for words, gold_tags, pred_tags in sentences:
        for word, gold, pred in zip(words, gold_tags, pred_tags, strict=True):
            if not word or any(ch.isspace() for ch in word):
                raise ValueError(f"word {word!r} is empty or holds white space: conlleval would "
                                 "read the wrong columns")
            lines.append(f"{word} {gold} {pred}\n")
        lines.append("\n")
    write_text(path, "".join(lines), record=True)


def is_written_columns(path):
    """Whether ``path`` holds exactly what ``write_columns`` writes: ``word gold predicted``
    lines (one space between fields, no other white space, the gold tag ``O`` or
    ``B-``/``I-TYPE`` as the data files have it), a blank line after each sentence and nowhere else."""
    text = bounded_text(path)
    if not text or not text.endswith("\n\n") or text.startswith("\n") or "\n\n\n" in text:
        return False
    for line in text[:-1].split("\n"):
        fields = line.split(" ")
        if line and (len(fields) != 3 or any(not f or any(ch.isspace() for ch in f) for f in fields)
                     or not (fields[1] == "O" or fields[1][:2] in ("B-", "I-") and len(fields[1]) > 2)):
            return False
    return True


COLUMNS_KIND = FileKind(PREDICTIONS, is_written_columns, recorded=True)   # what evaluate.py --force may replace
