"""Every TSV task reads its file one way (``text_files.tsv_rows``): UTF-8, a byte-order mark skipped,
lines ending at LF or CR LF, any other carriage return and any NUL byte refused by line, and
bytes that are not UTF-8 named by line, through the library, evaluate.py and train.py alike
(issue 44: a GLUE file with one non-UTF-8 byte gave a UnicodeDecodeError traceback)."""

import os
import sys

import pytest

from helpers.paths import ROOT

sys.path.insert(0, ROOT)
from albert_min.tasks import get_task  # noqa: E402
from albert_min.tasks.glue import reading as glue_reading  # noqa: E402
from albert_min.tasks.errors import DataError  # noqa: E402
from albert_min.tasks.text_files import read_tsv  # noqa: E402
from helpers.task_files import GLUE_FILES  # noqa: E402

SST2_SMALL = os.path.join(ROOT, "weights", "sst2-small")

FILES = GLUE_FILES


def write(tmp_path, task, lines=None, end=b"\n", edit=None, bom=False):
    """The task's rows as bytes, lines ended by ``end``; ``edit(line index, bytes)`` changes a line."""
    folder, rows = FILES[task]
    rows = [r.encode() for r in (rows if lines is None else lines)]
    if edit is not None:
        rows = [edit(i, r) for i, r in enumerate(rows)]
    path = tmp_path / folder / "dev.tsv"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + b"".join(r + end for r in rows))
    return str(path)


def read(path, task):
    return get_task(task).read(path)


def at_line(n, insert):
    """An edit putting ``insert`` in the middle of line ``n`` (1-based)."""
    return lambda i, row: row[:len(row) // 2] + insert + row[len(row) // 2:] if i == n - 1 else row


@pytest.mark.parametrize("task", FILES)
def test_every_task_reads_lf_crlf_and_a_bom_alike(task, tmp_path):
    plain = read(write(tmp_path, task), task)
    for end, bom in ((b"\r\n", False), (b"\n", True), (b"\r\n", True)):
        again = read(write(tmp_path, task, end=end, bom=bom), task)
        assert (again.texts, again.text_pairs, again.labels, again.index) == \
            (plain.texts, plain.text_pairs, plain.labels, plain.index)
        assert again.texts.sources == plain.texts.sources


@pytest.mark.parametrize("task", FILES)
@pytest.mark.parametrize("insert, line, message", [
    (b"\xff", 3, "not UTF-8"),
    (b"\xc3", 2, "not UTF-8"),                       # half of a two-byte character
    (b"\x00", 3, "a NUL byte; TSV files are UTF-8 text"),
    (b"\r", 2, "a carriage return (CR) that does not end the line"),
])
def test_a_bad_byte_is_one_error_naming_the_line(task, insert, line, message, tmp_path):
    path = write(tmp_path, task, edit=at_line(line, insert))
    with pytest.raises(DataError) as err:
        read(path, task)
    assert str(err.value).startswith(f"{path}:{line}: {message}") and "\n" not in str(err.value)


@pytest.mark.parametrize("task", FILES)
def test_a_file_whose_lines_end_with_cr_alone_is_refused_at_line_1(task, tmp_path):
    """Not split into rows by one reader and read as one line by the other (as before), and not a
    layout error that shows a header the reader did not read."""
    path = write(tmp_path, task, end=b"\r")
    with pytest.raises(DataError) as err:
        read(path, task)
    assert str(err.value).startswith(f"{path}:1: a carriage return (CR) that does not end the line; TSV lines "
                                     "end with LF or CR LF")


def test_the_layout_error_shows_the_header_as_read(tmp_path):
    path = write(tmp_path, "sentence_label", lines=["sentence\tlabel\u00a0", "good\t1"])   # a no-break space after label
    with pytest.raises(DataError) as err:
        read(path, "sentence_label")
    assert str(err.value) == (f"{path}:1: does not match task sentence_label's layout (columns sentence, label); its header is "
                              "['sentence', 'label\\xa0']")
    rte = write(tmp_path, "rte")
    with pytest.raises(DataError, match=r"its header is \['index', 'sentence1', 'sentence2', 'label'\]; its folder "
                                        "suggests --task rte$"):
        read(rte, "sst2")


def test_read_tsv_for_tokenizer_text_reads_as_the_tasks_do(tmp_path):
    path = write(tmp_path, "sentence_label", end=b"\r\n", bom=True)
    assert read_tsv(path) == (["good", "bad", "fine"], [1, 0, 1])
    with pytest.raises(DataError, match=":3: a NUL byte"):
        read_tsv(write(tmp_path, "sentence_label", edit=at_line(3, b"\x00")), require_labels=False)


@pytest.mark.parametrize("task, lines, message", [
    ("sst2", [], ":1: header [] has no 'sentence' column; is this a SST-2 file? (pass --task to choose the layout)"),
    ("cola", [], ": no examples"),
    ("sentence_label", [], ":1: header [] has no 'sentence' column"), ("sst2", ["sentence\tlabel", ""], ": no examples"),
    ("sentence_label", ["sentence\tlabel", " "], ": no examples after the header")])
def test_empty_and_header_only_files(task, lines, message, tmp_path):
    path = write(tmp_path, task, lines=lines)
    with pytest.raises(DataError) as err:
        glue_reading.read_examples(path, glue_reading.TASKS[task])
    assert str(err.value) == path + message


# ------------------------------------------------------- the scripts: one error line, no traceback
@pytest.mark.parametrize("task", ["sst2", "stsb", "mrpc"])
@pytest.mark.parametrize("named", [False, True])
def test_evaluate_on_a_glue_file_that_is_not_utf8_says_where(task, named, tmp_path):
    import evaluate
    path = write(tmp_path, task, edit=at_line(3, b"\xff"))
    with pytest.raises(SystemExit) as done:
        evaluate.main(["--model", SST2_SMALL, "--data", path, "--quiet", *(["--task", task] if named else [])])
    assert done.value.code == f"error: {path}:3: not UTF-8"


@pytest.mark.parametrize("task", ["sst2", "stsb", "mrpc"])
@pytest.mark.parametrize("named", [False, True])
def test_train_on_a_glue_file_that_is_not_utf8_says_where(task, named, tmp_path):
    import train
    path = write(tmp_path, task, edit=at_line(4, b"\xfe"))
    with pytest.raises(SystemExit) as done:
        train.main(["--train", path, "--output", str(tmp_path / "out"), "--max-steps", "1", "--quiet",
                    *(["--task", task] if named else [])])
    assert done.value.code == f"error: {path}:4: not UTF-8"
    assert not os.path.exists(tmp_path / "out")


@pytest.mark.parametrize("script", ["evaluate.py", "train.py"])
def test_the_scripts_print_one_line_and_no_traceback(script, tmp_path):
    import subprocess
    path = write(tmp_path, "mrpc", edit=at_line(2, b"\xff"))
    args = (["--model", SST2_SMALL, "--data", path] if script == "evaluate.py" else
            ["--train", path, "--output", str(tmp_path / "out"), "--max-steps", "1"])
    done = subprocess.run([sys.executable, os.path.join(ROOT, script), *args, "--quiet"], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 1 and done.stderr.splitlines() == [f"error: {path}:2: not UTF-8"]
