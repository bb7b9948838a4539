"""Issue 36's cases: damaged files and long texts (part B); SQuAD, RACE and CoNLL inputs (part A)."""

import json
import os
import pathlib
import shutil
import subprocess
import sys

# error_cases.inputs first: it puts the repository and tests/ on sys.path
from error_cases.inputs import copy, edit_json, ends_listing, FIXTURES, intact, p, ROOT, run, SST2_SMALL, write
from albert_min import convert as cv
from albert_min.common.safe_output import MANIFEST_FILE
from helpers.tiny_runs import TINY_MODEL


# ------------------------------------------------------------------ issue 36 (part B): damaged files, long texts
NER_TAGS = {"0": "O", "1": "I-PER", "2": "I-LOC", "3": "I-ORG", "4": "I-MISC"}
PIPELINE = """import sys
sys.path.insert(0, {root!r})
from albert_min import pipeline
from albert_min.common.errors import AlbertMinError
model, item, options = sys.argv[1], eval(sys.argv[2]), eval(sys.argv[3])
try:
    result = pipeline(model, **options)(item)
except AlbertMinError as err:      # as a user's script reports the pipeline's errors
    sys.exit(f"error: {{err}}")
if isinstance(item, str) and len(item) > 1000:
    print(f"{{len(result)}} entities in {{len(item)}} characters; the last ends at character {{result[-1]['end']}}")
else:
    print(result)
"""


def task_models():
    """The converted fixtures tiny_qa, tiny_multiple_choice and tiny_token_cls (tag names in id2label),
    with a SentencePiece model of their 120-piece vocabulary trained on tests/helpers/task_files' text."""
    from helpers.task_files import CONLL, CONTEXT_1, CONTEXT_2, CONTEXT_3, RACE_FILES
    from tokenizer import train_sentencepiece
    text = [CONTEXT_1, CONTEXT_2, CONTEXT_3] + [w for d in RACE_FILES.values() for q in d["options"] for w in q]
    text += [line.split()[0] for line in CONLL.splitlines() if line.strip()]
    spiece = train_sentencepiece(text * 3, p("36", "spiece", "spiece"), vocab_size=100)
    models = {}
    for fixture in ("tiny_qa", "tiny_multiple_choice", "tiny_token_cls"):
        models[fixture] = cv.convert(os.path.join(FIXTURES, fixture, "model.safetensors"), p("36", "models", fixture),
                                     tokenizer=spiece)["dst"]
    config = os.path.join(models["tiny_token_cls"], "config.json")
    edit_json(config, id2label=NER_TAGS, label2id={v: int(k) for k, v in NER_TAGS.items()})
    return models


def replaced_alone(path):
    """``path`` then holds other bytes, and is all its folder holds with its record (no temporary left)."""
    before = open(path, "rb").read()

    def check():
        changed, listed = open(path, "rb").read() != before, sorted(os.listdir(os.path.dirname(path)))
        name = os.path.basename(path)
        return changed and listed == [f".{name}{MANIFEST_FILE}", name], \
            f"{os.path.basename(path)} {'replaced' if changed else 'NOT replaced'}; its folder lists {listed}"
    return check


def issue_36_damaged_and_long(add, train, evaluate):
    from albert_min.model.kernels import build
    from albert_min.tasks.conll import writing as conll_writing
    from albert_min.tasks import file_io
    from helpers.task_files import CONLL, write_conll, write_race, write_squad
    # 36.1: convert read an albert_min folder's model.safetensors as a public checkpoint (a flipped bit laundered).
    st = p("36.1", "m")
    cv.convert(os.path.join(FIXTURES, "tiny_sst2_hf"), st, weights_format="safetensors")
    raw = bytearray(open(os.path.join(st, "model.safetensors"), "rb").read())
    raw[-3] ^= 0x01
    write(os.path.join(st, "model.safetensors"), bytes(raw))
    add("36.1", "convert a --format safetensors folder with one flipped bit in model.safetensors",
        ["convert", st, p("36.1", "out")], names=[st + "/model.safetensors", "sha256"],
        check=ends_listing(p("36.1"), ["m"]))
    # 36.11: a truncated cached kernel library (SIGBUS) beside a killed build's temporary.
    cache = p("36.11", "cache", mkdir=True)
    library = build.library_path(cache)
    good = open(library, "rb").read()
    write(library, good[:len(good) // 2])
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    write(os.path.join(os.path.dirname(library), f".{build.LIBRARY}.tmp-{int(dead.stdout)}-killed"), b"half")

    def library_rebuilt():
        listed = sorted(os.listdir(os.path.dirname(library)))
        ok = listed == [build.LIBRARY, build.LIBRARY + build.RECORD_SUFFIX] and open(library, "rb").read() == good
        return ok, f"the kernels' folder lists {listed}; the library is {'whole again' if ok else 'NOT whole'}"
    add("36.11", "train with a cached albert_kernels.so cut to half its size, beside a killed build's temporary",
        train(p("36.11", "out")), expect="ok", env={"ALBERT_MIN_CACHE": cache}, stderr=True,
        lines=("albert_min: kernels",), check=library_rebuilt)
    # evaluate.py --force: the tasks' own prediction files (an earlier run's, in albert_min's layout) and others'.
    models = task_models()
    inputs = pathlib.Path(p("36.f", mkdir=True))
    data = {"squad": write_squad(inputs), "race": write_race(inputs),
            "conll": write_conll(inputs, CONLL.replace("B-LOC", "I-LOC"))}
    squad_flags = ["--doc-stride", "16", "--max-query-length", "16"]
    for task, model, name, earlier, extra in (
            ("squad", "tiny_qa", "predictions.json",
             lambda f: file_io.write_json(f, {"q1": "an earlier answer"}, record=True), squad_flags),
            ("race", "tiny_multiple_choice", "race.json",
             lambda f: file_io.write_json(f, {"1.txt": ["A", "B"]}, record=True), []),
            ("conll", "tiny_token_cls", "columns.txt",
             lambda f: conll_writing.write_columns(f, [(["Bonn"], ["I-LOC"], ["O"])]), [])):
        ours, theirs = p(f"36.f{task}", "ours", name), p(f"36.f{task}", "theirs", name)
        earlier(ours)
        dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
        write(p(f"36.f{task}", "ours", f".{name}.tmp-{int(dead.stdout)}-killed"), b"half")   # a killed writer's
        write(theirs, json.dumps({"q1": "their answer"}, indent=4) + "\n" if name.endswith(".json")
              else "Bonn\tI-LOC\tO\n\n")
        args = ["evaluate.py", "--model", models[model], "--data", data[task], "--task", task, "--quiet", *extra]
        add(f"36.f{task}", f"evaluate --force onto the {task} predictions an earlier run wrote (+ a killed writer's "
            "temporary)", args + ["--output", ours, "--force"], expect="ok", lines=("predictions:",),
            check=replaced_alone(ours))
        add(f"36.f{task}x", f"evaluate --force onto a {task} predictions file another tool wrote",
            args + ["--output", theirs, "--force"], names=[theirs, "not a predictions file evaluate.py wrote"],
            check=intact(os.path.dirname(theirs)))
    # An unusable $ALBERT_MIN_CACHE: MindSpore printed 9 raw [ERROR] lines.
    a_file = write(p("36.c", "a_file"), "not a folder")
    add("36.c", "evaluate with $ALBERT_MIN_CACHE below a regular file", evaluate(SST2_SMALL), expect="ok",
        env={"ALBERT_MIN_CACHE": os.path.join(a_file, "cache")}, stderr=True, lines=("albert_min:", "[ERROR]"),
        check=intact(p("36.c")))
    # 36.5: the NER pipeline tagged the first max_length pieces of a long text only; lone surrogates.
    ner, qa = models["tiny_token_cls"], models["tiny_qa"]
    script = write(p("36", "call_pipeline.py"), PIPELINE.format(root=ROOT))   # MODEL ITEM OPTIONS (Python literals)
    add("36.5", "NER pipeline(max_length=16) on a 64,000-character text",
        ["python", script, ner, "' '.join(['Peter Blackburn went to Paris .'] * 2000)", "{'max_length': 16}"],
        expect="ok", lines=("",), cost=True)
    for id, model, item, options in (("36.s1", ner, "'Peter \\ud800 Blackburn'", "{}"),
                                     ("36.s2", qa, "[{'question': 'Where?', 'context': 'Bonn \\ud800'}]",
                                      "{'doc_stride': 16, 'max_query_length': 16}")):
        add(id, f"{'NER' if model == ner else 'QA'} pipeline on a text with a lone surrogate",
            ["python", script, model, item, options], names=["not valid Unicode: lone surrogate U+D800", "input"])


# ------------------------------------------------------------------ issue 36: SQuAD, RACE and CoNLL inputs (part A)
TASK_FLAGS = [*TINY_MODEL, "--batch-size", "4", "--max-steps", "2", "--pynative"]
SQUAD_FLAGS = ["--task", "squad", "--max-length", "32", "--doc-stride", "8", "--max-query-length", "12"]


def squad_file(path, edit=None, raw=None):
    """tests/helpers/task_files' five-question SQuAD v1.1 file (``edit(data)`` changes it first), or ``raw``."""
    from helpers.task_files import squad_json
    data = squad_json()
    if edit:
        edit(data)
    return write(path, raw if raw is not None else json.dumps(data))


def race_split(folder, articles):
    """A RACE split with high/1.txt, high/2.txt ... holding one question on each article."""
    for n, article in enumerate(articles, start=1):
        write(os.path.join(folder, "high", f"{n}.txt"), json.dumps({
            "article": article, "questions": ["The cat sat on the _ ."], "options": [["red", "blue", "old", "big"]],
            "answers": ["A"]}))
    return folder


def task_run(parts, argv):
    """A model folder (+ .state) train.py wrote, for the cases that need one (trained once)."""
    out = p(*parts)
    result = run(["train.py", *argv, "--output", out])
    assert result.code == 0, result.err[-3000:]
    return out


def issue_36_task_inputs(add):
    from test_task_inputs import CONTEXT
    qas = lambda d: d["data"][0]["paragraphs"][0]["qas"]   # noqa: E731 - article 1's first paragraph
    # SQuAD: q2's answer_start points elsewhere, q3's answer is empty; trained on articles 1-2 as a range.
    labels = squad_file(p("36s", "data", "s.json"), lambda d: (qas(d)[1]["answers"][0].update(answer_start=0),
                                                       qas(d)[1]["answers"][0].update(text="Broncos"),
                                                       qas(d)[0]["answers"][0].update(text="", answer_start=3)))
    squad = task_run(("36s", "out"), ["--train", labels + ":1-2", "--dev", labels, *TASK_FLAGS, *SQUAD_FLAGS])
    add("36.3", "train SQuAD: q2's answer_start points at other text, q1's answer is \"\" (training labels)",
        ["train.py", "--train", labels + ":1-2", "--output", p("36.3", "out"), *TASK_FLAGS, *SQUAD_FLAGS],
        expect="ok", lines=("note:", "done"))
    add("36.8", "evaluate SQuAD with an empty answer text", ["evaluate.py", "--model", squad, "--data", labels,
        "--quiet", "--pynative"], expect="ok", lines=("f1",))
    # 2. --resume after an input changed: a context of a SQuAD range's file, a gold answer of a RACE file.
    changed = copy(os.path.dirname(labels), "36.2a", "data")
    resumed = copy(squad, "36.2a", "out")
    shutil.copytree(squad + ".state", resumed + ".state")
    edit_state_paths(resumed + ".state", os.path.dirname(labels), changed)
    squad_file(os.path.join(changed, "s.json"), raw=open(labels).read().replace("Paris is", "Lyon is"))
    add("36.2a", "train --resume after a context changed in FILE.json of --train FILE.json:1-2",
        ["train.py", "--output", resumed, "--resume", "--max-steps", "3"], names=[os.path.join(changed, "s.json")])
    long_article = " ".join(["The old cat sat on the red mat near the door ."] * 100)          # 4.6 kB
    split = race_split(p("36r", "RACE", "train"), [long_article, "A small boat left the harbour at dawn ."])
    race = task_run(("36r", "out"), ["--task", "race", "--train", split, *TASK_FLAGS, "--max-length", "32"])
    add("36.m1", "train RACE from scratch: an article of 4.6 kB (over SentencePiece's 4,192-byte sentence limit)",
        ["train.py", "--task", "race", "--train", split, "--output", p("36.m1", "out"), *TASK_FLAGS,
         "--max-length", "32"], expect="ok", lines=("trained a", "done"))
    race_copy = copy(p("36r", "RACE"), "36.2b", "RACE")
    resumed = copy(race, "36.2b", "out")
    shutil.copytree(race + ".state", resumed + ".state")
    edit_state_paths(resumed + ".state", p("36r", "RACE"), race_copy)
    gold = os.path.join(race_copy, "train", "high", "2.txt")
    edit_json(gold, answers=["D"])
    add("36.2b", "train --resume after a gold answer of a RACE file changed", ["train.py", "--output", resumed,
        "--resume", "--max-steps", "3"], names=[gold])
    # 4, 10. A RACE folder whose file holds no question.
    empty = race_split(p("36.4", "RACE", "dev"), ["A text ."])
    edit_json(os.path.join(empty, "high", "1.txt"), questions=[], options=[], answers=[])
    add("36.4", "train RACE (--tokenizer given) on a folder without questions", ["train.py", "--task", "race", "--train",
        empty, "--output", p("36.4", "out"), *TASK_FLAGS, "--max-length", "32",
        "--tokenizer", os.path.join(FIXTURES, "spiece_sst2_2k.model")], names=[empty, "no questions"],
        check=ends_listing(p("36.4"), ["RACE"]))
    add("36.10", "evaluate RACE on a folder without questions", ["evaluate.py", "--model", race, "--data", empty,
        "--quiet"], names=[empty, "no questions"])
    # 6. Windows over a long context (quadratic before: 116 s for 100 kB in the QA pipeline).
    long_context = " ".join([CONTEXT] * 1700)                                            # 105 kB
    big = squad_file(p("36.6", "s.json"), lambda d: d["data"][0]["paragraphs"][0].update(
        context=long_context, qas=[{"id": "q1", "question": "Who won?",
                                    "answers": [{"text": "Broncos", "answer_start": long_context.index("Broncos")}]}]))
    add("36.6", "evaluate SQuAD, one context of 105 kB (11,500 windows of 32 pieces, stride 8)", ["evaluate.py",
        "--model", squad, "--data", big, "--quiet"], expect="ok", lines=("f1", "seconds"), cost=True)
    # Issue 44, item 6: memory on one long context (0.5 GB more per MB of context before: 949 MB at 1 MB).
    huge_context = " ".join([CONTEXT] * (1_000_000 // (len(CONTEXT) + 1)))                # 1 MB
    huge = squad_file(p("44.6", "s.json"), lambda d: d["data"][0]["paragraphs"][0].update(
        context=huge_context, qas=[{"id": "q1", "question": "Who won?",
                                    "answers": [{"text": "Broncos", "answer_start": huge_context.index("Broncos")}]}]))
    add("44.6", "evaluate SQuAD, one context of 1 MB (windows of 32 pieces, stride 8): peak memory",
        ["evaluate.py", "--model", squad, "--data", huge, "--quiet"], expect="ok", lines=("f1", "seconds"), cost=True)
    # 7, 9. JSON Python cannot read; lone surrogates; a RACE file name that is not UTF-8; a FIFO named *.txt.
    for id, what, raw in (("36.7a", "nested 100,000 deep", "[" * 100000),
                          ("36.7b", "an integer of 5,000 digits on line 2", '{"version": "1.1",\n "data": ' + "9" * 5000 +
                           "}")):
        path = squad_file(p(id, "s.json"), raw=raw)
        add(id, f"evaluate SQuAD: JSON {what}", ["evaluate.py", "--model", squad, "--data", path, "--quiet"],
            names=[path + ":"])
    surrogate = squad_file(p("36.9a", "s.json"), lambda d: qas(d)[1].update(question="How long did it \ud800 sleep?"))
    add("36.9a", "evaluate SQuAD: a question holding the JSON escape \\ud800 (a lone surrogate)",
        ["evaluate.py", "--model", squad, "--data", surrogate, "--quiet"], names=[surrogate, "question q2"])
    odd = race_split(p("36.9b", "RACE", "dev"), ["The cat is old ."])
    shutil.copy(os.path.join(os.fsencode(odd), b"high", b"1.txt"), os.path.join(os.fsencode(odd), b"high", b"\xff2.txt"))
    add("36.9b", "evaluate RACE: a file named b'\\xff2.txt' (not UTF-8)", ["evaluate.py", "--model", race, "--data",
        odd, "--quiet"], names=[os.path.join(odd, "high"), "xff2.txt"])
    fifo = race_split(p("36.12", "RACE", "dev"), ["The cat is old ."])
    os.mkfifo(os.path.join(fifo, "high", "2.txt"))
    add("36.12", "evaluate RACE: a FIFO named high/2.txt beside high/1.txt", ["evaluate.py", "--model", race,
        "--data", fifo, "--quiet"], expect="ok", lines=("accuracy ",))
    # Messages: a v1.1 question without answers, a byte-order mark, CR-only CoNLL, zero-width text.
    unanswered = squad_file(p("36.m2", "s.json"), lambda d: qas(d)[1].update(answers=[]))
    add("36.m2", "evaluate SQuAD v1.1: a question without answers", ["evaluate.py", "--model", squad, "--data",
        unanswered, "--quiet", "--pynative"], names=[unanswered, "question q2", "--task squad_v2"])
    bom = squad_file(p("36.m3", "s.json"), raw="\ufeff" + open(labels).read())
    add("36.m3", "evaluate SQuAD: the JSON starts with a UTF-8 byte-order mark", ["evaluate.py", "--model", squad,
        "--data", bom, "--quiet", "--pynative"], expect="ok", lines=("f1",))
    from helpers.task_files import CONLL
    cr = write(p("36.m4", "eng.train"), CONLL.replace("\n", "\r"))
    add("36.m4", "train CoNLL on a file with CR-only line ends", ["train.py", "--train", cr, "--output",
        p("36.m4", "out"), *TASK_FLAGS, "--tokenizer", os.path.join(FIXTURES, "spiece_sst2_2k.model")],
        expect="ok", lines=("task conll", "done"))
    zero = race_split(p("36.m5", "RACE", "train"), ["\u200b\u200c"])
    edit_json(os.path.join(zero, "high", "1.txt"), questions=["\u200b"], options=[["\u200b"] * 4])
    add("36.m5", "train RACE from scratch on text of zero-width characters only", ["train.py", "--task", "race",
        "--train", zero, "--output", p("36.m5", "out"), *TASK_FLAGS, "--max-length", "32"],
        names=[zero, "zero-width"], check=ends_listing(p("36.m5"), ["RACE"]))


def edit_state_paths(state_dir, old, new):
    """A copied training state as if its run had read the inputs copied from ``old`` to ``new``."""
    path = os.path.join(state_dir, "state.json")
    with open(path) as f:
        text = f.read()
    write(path, text.replace(json.dumps(old)[1:-1], json.dumps(new)[1:-1]))
