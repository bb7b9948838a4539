"""Text files as every reader reads them: UTF-8 lines (a byte-order mark skipped, bytes that are not
UTF-8 an error naming ``path:line``), TSV lines and rows, and the generic sentence<TAB>label TSV
(``read_tsv``). Token ids and batches: ``batching``; pre-training's raw text: ``pretraining.reading``.

Layer: ``albert_min.tasks``, above ``checkpoints`` (the layers: ``albert_min/__init__.py``).
"""

import itertools
import os

from .errors import DataError


class HeaderError(DataError):
    """A TSV file whose header lacks a column the task needs; ``header``: the header as read."""

    def __init__(self, message, header):
        super().__init__(message)
        self.header = header


# ------------------------------------------------------------------- TSV input
class TextColumn(list):
    """A file's texts, each knowing the ``path:line`` it came from (``sources``).

    Some rows can only be refused once tokenized (``encode_examples``: text that
    normalises to nothing); the readers return their texts as a TextColumn so that
    error still names the row's line, through every caller that passes the texts on.
    A plain list works wherever a TextColumn does; errors then name "example i".
    """

    def __init__(self, texts, sources):
        super().__init__(texts)
        self.sources = list(sources)
        if len(self.sources) != len(self):
            raise ValueError(f"{len(self)} texts but {len(self.sources)} sources")


UTF8_BOM = b"\xef\xbb\xbf"


def _utf8_lines(path):
    """Yield ``(line number, line with its end-of-line)`` of a UTF-8 file split at LF (b"\\n");
    a byte-order mark at the start is skipped (spreadsheet exports, MRPC's header write one);
    bytes that are not UTF-8 are a DataError naming ``path:line``."""
    with open(path, "rb") as f:
        for line_no, raw in enumerate(f, start=1):
            if line_no == 1 and raw.startswith(UTF8_BOM):
                raw = raw[len(UTF8_BOM):]
            try:
                yield line_no, raw.decode("utf-8")
            except UnicodeDecodeError:
                raise DataError(f"{path}:{line_no}: not UTF-8") from None


def text_lines(path):
    """Yield ``(line number, line without its end-of-line)`` of a UTF-8 text file (plain text
    and CoNLL columns; TSV files: ``tsv_lines``).

    A UTF-8 byte-order mark at the start is skipped (spreadsheet exports write
    one); bytes that are not UTF-8 are a DataError naming ``path:line``.
    """
    for line_no, line in _utf8_lines(path):
        yield line_no, line.rstrip("\r\n")


def tsv_lines(path):
    """Yield ``(line number, line without its end-of-line)`` of a TSV file: the one way every
    TSV task (GLUE's and the generic ``sentence_label``) reads its file, through ``tsv_rows``.

    UTF-8, a byte-order mark at the start skipped (``text_lines``). A line ends at LF or CR LF
    (GLUE's files end lines with LF; Windows tools with CR LF). A carriage return anywhere else
    is a DataError naming ``path:line``, not text: TSV fields cannot be quoted, so a CR inside
    one is a broken row, and a file whose lines end with CR alone (old Mac editors) would
    otherwise read as one long line, or as rows that other tools do not see. A NUL byte is a
    DataError too (a UTF-16 or binary file, which would otherwise read as text with the NULs
    dropped by the tokenizer).
    """
    for line_no, line in _utf8_lines(path):
        line = line[:-2] if line.endswith("\r\n") else line[:-1] if line.endswith("\n") else line
        if "\r" in line:
            raise DataError(f"{path}:{line_no}: a carriage return (CR) that does not end the line; TSV lines "
                            "end with LF or CR LF (lines that end with CR alone, as old Mac editors write them: "
                            "convert them, e.g. tr '\\r' '\\n')")
        if "\0" in line:
            raise DataError(f"{path}:{line_no}: a NUL byte; TSV files are UTF-8 text (a UTF-16 or binary file?)")
        yield line_no, line


def tsv_rows(path, layout=None):
    """``(header, rows)`` of a TSV file (``tsv_lines``): ``rows`` yields ``(line number, fields)``
    of every line that is not blank, each with one field per header column (else a DataError
    naming ``path:line``, ``row_fields``). The header is the first line's fields, unless
    ``layout(first line's fields)`` says otherwise: it returns ``(header, whether the first line
    is a row)`` (CoLA's train and dev files have no header row). A missing file is a
    FileNotFoundError naming it.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"data file not found: {path}")
    lines = tsv_lines(path)
    first = next(lines, None)
    first_fields = first[1].split("\t") if first is not None else []
    header, first_is_row = layout(first_fields) if layout is not None else (first_fields, False)

    def rows():
        for line_no, line in itertools.chain([first] if first is not None and first_is_row else [], lines):
            if line.strip():
                yield line_no, row_fields(path, line_no, line, header)
    return header, rows()


def row_fields(path, line_no, line, header):
    """The tab-separated fields of one TSV row; a DataError naming ``path:line_no`` unless
    there is one per header column."""
    fields = line.split("\t")
    if len(fields) != len(header):
        raise DataError(f"{path}:{line_no}: expected {len(header)} tab-separated fields "
                        f"({', '.join(header)}), found {len(fields)}")
    return fields


def read_tsv(path, text_column="sentence", label_column="label", require_labels=True):
    """Read a GLUE TSV with a header row. Returns (sentences, labels or None).

    Every malformed row is an error naming ``path:line`` (1-based, header = line 1).
    Labels must be integers. If ``require_labels`` is False a file without a
    label column is accepted (labels = None), for prediction only.
    """
    header, rows = tsv_rows(path)
    sentences, labels, sources = [], [], []
    if text_column not in header:
        raise HeaderError(f"{path}:1: header {header} has no {text_column!r} column", header)
    text_at = header.index(text_column)
    label_at = header.index(label_column) if label_column in header else None
    if label_at is None and require_labels:
        raise HeaderError(f"{path}:1: header {header} has no {label_column!r} column", header)
    for line_no, fields in rows:
        text = fields[text_at].strip()
        if not text:
            raise DataError(f"{path}:{line_no}: empty {text_column!r}")
        sentences.append(text)
        sources.append(f"{path}:{line_no}")
        if label_at is not None:
            try:
                labels.append(int(fields[label_at]))
            except ValueError:
                raise DataError(f"{path}:{line_no}: label {fields[label_at]!r} is not an integer") from None
    if not sentences:
        raise DataError(f"{path}: no examples after the header")
    return TextColumn(sentences, sources), (labels if label_at is not None else None)


def check_labels(labels, num_labels, path):
    bad = [y for y in set(labels) if not 0 <= y < num_labels]
    if bad:
        raise DataError(f"{path}: labels {sorted(bad)} outside 0..{num_labels - 1} (the model has {num_labels})")
