"""Fuzz the SQuAD, RACE and GLUE TSV readers inside a memory-limited process (run by
test_fuzz_readers.py).

    python tests/helpers/fuzz_task_readers_worker.py squad|race|glue EXAMPLES

As fuzz_readers_worker.py does for the checkpoint readers: the address space is limited to
about 2 GB, and every input must give a result or an ``AlbertMinError`` of one line naming the
file (or the RACE folder). Inputs are byte mutations of valid files and files built from hostile
values (lone surrogates, zero-width and combining characters, blank and misplaced answers,
nasty integers, deep nesting, a byte-order mark). Every accepted input then goes the whole way:
windows or option rows, training labels and batches, the official metric on made-up logits,
and the prediction file, read back. GLUE TSV files (SST-2, STS-B, MRPC, CoLA and the generic sentence_label
layout) are also mutated where TSV readers break: a byte that is not UTF-8, a NUL, a lone carriage
return, lines that end with CR alone, CR LF line ends and a byte-order mark; each of those must
give exactly the error line (or the examples) the reader's rules say.
"""

import atexit
import json
import os
import resource
import shutil
import sys
import tempfile
import types

LIMIT = 2 << 30
resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]

import numpy as np  # noqa: E402
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from albert_min.common.errors import AlbertMinError  # noqa: E402
from albert_min.common.parallel import SingleProcess  # noqa: E402
from albert_min.tasks import get_task  # noqa: E402
from albert_min.tasks.errors import DataError  # noqa: E402
from helpers.task_files import GLUE_FILES, RACE_FILES, squad_json  # noqa: E402
from tokenizer import AlbertTokenizer  # noqa: E402

WORK = tempfile.mkdtemp(prefix="albert_min_fuzz_tasks_")
SEEN = {"accepted": 0, "refused": 0}   # inputs that went the whole way / ended in a package error
NASTY = [0, 1, 0x7F, 0xFF, 0x7FFFFFFF, 0xFFFFFFFF, 1 << 40, (1 << 63) - 1, (1 << 64) - 1]
atexit.register(shutil.rmtree, WORK, ignore_errors=True)
TOKENIZER = AlbertTokenizer(os.path.join(ROOT, "tests", "fixtures", "spiece_sst2_2k.model"))
SQUAD_OPTIONS = {"doc_stride": 4, "max_query_length": 8, "max_answer_length": 5}
MAX_LENGTH = 24

# Text a reader must take or refuse by name: plain words, white space, zero-width and combining
# characters, a byte-order mark, a blank "_", CJK, emoji, and lone surrogates (a JSON escape).
HOSTILE = ["", " ", "\t\n", "\u200b", "\u200b\u200c", "\u0301", "e\u0301", "\ufeff", "_", "[MASK]", "\u4e2d\u6587",
           "\U0001f600", "\ud800", "x\udfffy", "1,000", "``quoted''", "a" * 300]
words = st.sampled_from(["the", "cat", "sat", "on", "red", "mat", "Paris", "1990", "door", ",", "."])
plain = st.lists(words, min_size=1, max_size=12).map(" ".join)
texts = st.one_of(plain, st.sampled_from(HOSTILE),
                  st.text(max_size=20), st.lists(st.sampled_from(HOSTILE + ["cat", " "]), max_size=4).map("".join))
scalars = st.one_of(st.none(), st.booleans(), st.sampled_from(NASTY + [-1, -(1 << 70)]), st.floats(), texts)
anything = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                         st.dictionaries(texts, inner, max_size=3)), max_leaves=5)


edits = st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(1, 255)), min_size=1, max_size=6)


def mutate(data, edit_list, cut):
    """``data`` with bytes xor-ed at the fractions given, then cut to ``cut`` of its length."""
    data = bytearray(data)
    for where, value in edit_list:
        data[int(where * len(data))] ^= value
    return bytes(data[:int(cut * len(data))]) if cut is not None else bytes(data)


def one_line_error(err, names):
    message = str(err)
    assert any(name in message for name in names), message
    assert "\n" not in message and len(message) < 2000, message


def write(path, data: bytes):
    with open(path, "wb") as f:
        f.write(data)


def encoded(value, bom):
    """``value`` as JSON bytes (json.dumps writes a lone surrogate as its \\u escape)."""
    return (b"\xef\xbb\xbf" if bom else b"") + json.dumps(value).encode("ascii")


# ------------------------------------------------------------------ SQuAD
def squad_must_be_clean(path):
    task = get_task("squad_v2", **SQUAD_OPTIONS)   # reads v1.1 and v2.0 files alike
    try:
        data = task.read(path)
        task.training_notes(data)
        prepared = task.prepare(data, TOKENIZER, MAX_LENGTH)
        windows = list(prepared.features)
        try:
            steps = task.steps_per_epoch(prepared, 4, 0, SingleProcess())
        except AlbertMinError as err:   # every answer unusable: nothing to train on
            one_line_error(err, [path])
            steps = 0
        if steps:
            batch = next(task.train_batches(prepared, 0, 4, 0, SingleProcess()))
            assert (batch[3] <= batch[4]).all() and (batch[4] < batch[0].shape[1]).all()
        rng = np.random.default_rng(len(windows))
        outputs = [[(w, rng.normal(size=len(w.input_ids)), rng.normal(size=len(w.input_ids))) for w in windows]]
        metrics = task.score(prepared, outputs)
        assert metrics["examples"] == len(data) and 0 <= metrics["f1"] <= 1
        written = os.path.join(WORK, "predictions.json")
        task.write_predictions(written, prepared, outputs)
        with open(written, encoding="utf-8") as f:
            assert list(json.load(f)) == [e.qid for e in data.examples]
        SEEN["accepted"] += 1
    except AlbertMinError as err:
        one_line_error(err, [path])
        SEEN["refused"] += 1


def sometimes(draw, valid, hostile, one_in=10):
    """``valid``, or one time in ``one_in`` a value drawn from ``hostile``."""
    return draw(hostile) if draw(st.integers(1, one_in)) == 1 else valid


def squad_structured(draw):
    """A SQuAD file whose answers are mostly real spans of their contexts, and whose every
    field may instead hold a hostile value (in half of the files)."""
    hostile = draw(st.booleans())

    def field(valid):
        return sometimes(draw, valid, anything, 20) if hostile else valid

    articles = []
    for a in range(draw(st.integers(1, 2))):
        paragraphs = []
        for p in range(draw(st.integers(1, 2))):
            context = sometimes(draw, draw(plain), texts)
            qas = []
            for q in range(draw(st.integers(1, 3))):
                answers = []
                for _ in range(draw(st.integers(0, 2))):
                    start = draw(st.integers(0, len(context)))
                    end = draw(st.integers(start, len(context)))
                    text = sometimes(draw, context[start:end], texts)
                    answers.append({"text": field(text), "answer_start": field(
                        sometimes(draw, start, st.sampled_from(NASTY + [-1, True])))})
                qa = {"id": field(f"q{a}.{p}.{q}"), "question": field(sometimes(draw, draw(plain), texts)),
                      "answers": field(answers)}
                if draw(st.booleans()):
                    qa["is_impossible"] = field(not answers)
                qas.append(qa)
            paragraphs.append({"context": field(context), "qas": field(qas)})
        articles.append({"paragraphs": field(paragraphs)})
    return {"version": field(draw(st.sampled_from(["1.1", "v2.0"]))), "data": field(articles)}


# ------------------------------------------------------------------ RACE
def race_must_be_clean(folder):
    task = get_task("race")
    try:
        questions = task.read(folder)
        task.files_read(folder)
        prepared = task.prepare(questions, TOKENIZER, MAX_LENGTH)
        for batch in task.train_batches(prepared, 0, 4, 0, SingleProcess()):
            assert batch[0].shape[1:2] == (4,) and batch[0].shape[2] <= MAX_LENGTH
        rng = np.random.default_rng(len(questions))
        outputs = [rng.normal(size=(len(questions), 4))]
        metrics = task.score(prepared, outputs)
        assert metrics["examples"] == len(questions) and 0 <= metrics["accuracy"] <= 1
        written = os.path.join(WORK, "race_predictions.json")
        task.write_predictions(written, prepared, outputs)
        with open(written, encoding="utf-8") as f:
            assert sum(len(v) for v in json.load(f).values()) == len(questions)
        SEEN["accepted"] += 1
    except AlbertMinError as err:
        one_line_error(err, [folder])
        SEEN["refused"] += 1


def race_structured(draw):
    """A RACE file of 1 to 3 questions whose every field may hold a hostile value (in half of the files)."""
    hostile = draw(st.booleans())

    def field(valid):
        return sometimes(draw, valid, anything, 20) if hostile else valid
    n = draw(st.integers(1, 3))
    return {"article": field(sometimes(draw, draw(plain), texts)),
            "questions": field([sometimes(draw, draw(plain), texts) for _ in range(n)]),
            "options": field([field([sometimes(draw, draw(plain), texts) for _ in range(4)]) for _ in range(n)]),
            "answers": field([draw(st.sampled_from("ABCD")) for _ in range(n)])}


def fresh_race_folder():
    folder = os.path.join(WORK, "RACE", "dev")
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(os.path.join(folder, "high"))
    return folder


# ------------------------------------------------------------------ GLUE TSV
GLUE_TASKS = ["sst2", "stsb", "mrpc", "cola", "sentence_label"]


def glue_must_be_clean(path, name):
    """The examples ``path`` holds in task ``name``'s layout, once they went the whole way
    (features, metrics on made-up logits, the predictions file read back); None when refused."""
    task = get_task(name)
    try:
        examples = task.read(path)
        n = len(examples)
        num_labels = task.spec.num_labels or max(2, max(examples.labels or [0]) + 1)
        task.check_model(types.SimpleNamespace(is_regression=task.spec.is_regression, num_labels=num_labels),
                         examples, "the model")
        prepared = task.prepare(examples, TOKENIZER, MAX_LENGTH)
        assert len(prepared.features["ids"]) == n and len(examples.texts.sources) == n
        logits = np.random.default_rng(n).normal(size=(n, num_labels))
        if examples.labels is not None:
            assert task.score(prepared, [logits])["examples"] == n
        written = os.path.join(WORK, "glue_predictions.tsv")
        task.write_predictions(written, prepared, [logits])
        with open(written, encoding="utf-8") as f:
            assert len(f.read().splitlines()) == n + 1
        SEEN["accepted"] += 1
        return examples
    except AlbertMinError as err:
        one_line_error(err, [path])
        SEEN["refused"] += 1
        return None


def same_rows(a, b):
    return (a.texts, a.text_pairs, a.labels, a.index) == (b.texts, b.text_pairs, b.labels, b.index)


def tsv_insert_expectation(data, position, inserted):
    """The error (``"LINE: message"``) a TSV reader must give for ``inserted`` put at byte
    ``position`` of the valid ``data``, or None when the file must read as before."""
    line = data[:position].count(b"\n") + 1
    if not inserted:
        return None
    if inserted == b"\r":
        return None if data[position:position + 1] == b"\n" else f"{line}: a carriage return (CR)"
    return f"{line}: a NUL byte" if inserted == b"\0" else f"{line}: not UTF-8"


def fuzz_glue(examples):
    path_of = {}
    for name in GLUE_TASKS:
        folder, _ = GLUE_FILES[name]
        os.makedirs(os.path.join(WORK, folder), exist_ok=True)
        path_of[name] = os.path.join(WORK, folder, "dev.tsv")
    valid = {name: "".join(line + "\n" for line in GLUE_FILES[name][1]).encode() for name in GLUE_TASKS}
    clean = {}
    for name in GLUE_TASKS:
        write(path_of[name], valid[name])
        clean[name] = glue_must_be_clean(path_of[name], name)
        assert clean[name] is not None, name
    run_settings = settings(max_examples=examples, deadline=None, database=None, derandomize=True,
                            suppress_health_check=list(HealthCheck))

    @run_settings
    @given(name=st.sampled_from(GLUE_TASKS), edit_list=edits, cut=st.one_of(st.none(), st.floats(0, 1)))
    def mutated(name, edit_list, cut):
        """Bytes flipped anywhere: examples that go the whole way, or one error naming the file."""
        write(path_of[name], mutate(valid[name], edit_list, cut))
        glue_must_be_clean(path_of[name], name)

    bad_bytes = st.sampled_from([b"", b"\xff", b"\xfe", b"\x80", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\0", b"\r"])

    @run_settings
    @given(name=st.sampled_from(GLUE_TASKS), where=st.floats(0, 1), inserted=bad_bytes,
           bom=st.booleans(), crlf=st.booleans(), cr_only=st.booleans())
    def tsv_mutations(name, where, inserted, bom, crlf, cr_only):
        """One bad byte (not UTF-8, NUL, a lone CR) at a known place, in files with or without a
        BOM and with LF, CR LF or CR-only line ends: the error names that line, or the file reads
        as the valid one does."""
        data = valid[name]
        position = int(where * len(data))
        expected = tsv_insert_expectation(data, position, inserted)
        data = data[:position] + inserted + data[position:]
        if cr_only:                                           # the whole file is one line
            expected = "1: not UTF-8" if expected and "UTF-8" in expected else "1: a carriage return (CR)"
            data = data.replace(b"\n", b"\r")
        elif crlf:
            data = data.replace(b"\n", b"\r\n")
            if expected is None and inserted:                 # b"\r\n" became b"\r\r\n": a lone CR
                line = data[:data.index(b"\r\r")].count(b"\n") + 1
                expected = f"{line}: a carriage return (CR)"
        path = path_of[name]
        write(path, (b"\xef\xbb\xbf" if bom else b"") + data)
        try:
            got = get_task(name).read(path)
        except DataError as err:
            assert expected is not None and str(err).startswith(f"{path}:{expected}"), (str(err), expected)
            one_line_error(err, [path])
            SEEN["refused"] += 1
            return
        assert expected is None and same_rows(got, clean[name]), expected
        assert glue_must_be_clean(path, name) is not None

    mutated()
    tsv_mutations()


# ------------------------------------------------------------------ the runs
def fuzz(task, examples):
    squad_path = os.path.join(WORK, "s.json")
    valid = encoded(squad_json(version_2=True), False) if task == "squad" else \
        encoded(RACE_FILES[("middle", "1.txt")], False)
    run_settings = settings(max_examples=examples, deadline=None, database=None, derandomize=True,
                            suppress_health_check=list(HealthCheck))

    def check(raw):
        if task == "squad":
            write(squad_path, raw)
            squad_must_be_clean(squad_path)
        else:
            folder = fresh_race_folder()
            write(os.path.join(folder, "high", "1.txt"), raw)
            race_must_be_clean(folder)

    @run_settings
    @given(edit_list=edits, cut=st.one_of(st.none(), st.floats(0, 1)))
    def mutated(edit_list, cut):
        check(mutate(valid, edit_list, cut))

    @run_settings
    @given(data=st.data(), bom=st.booleans(), wrap=st.sampled_from(["", "deep", "long-int"]))
    def structured(data, bom, wrap):
        value = squad_structured(data.draw) if task == "squad" else race_structured(data.draw)
        raw = encoded(value, bom)
        if wrap == "deep":                        # nested past Python's recursion limit
            raw = b"[" * 50_000 + raw + b"]" * 50_000
        elif wrap == "long-int":                  # an integer Python will not read
            raw = raw[:-1] + b', "n": ' + b"7" * 5000 + b"}"
        check(raw)

    mutated()
    structured()


if __name__ == "__main__":
    task, examples = sys.argv[1], int(sys.argv[2])
    fuzz_glue(examples) if task == "glue" else fuzz(task, examples)
    second = "TSV-mutated" if task == "glue" else "built"
    print(f"{task}: {examples} mutated + {examples} {second} inputs ({SEEN['accepted']} runs accepted, "
          f"{SEEN['refused']} refused by name), all clean")
