"""SQuAD v1.1 / v2.0's official JSON -> examples; errors name the file and the question id.
"""

import dataclasses

from ..errors import DataError
from ..file_io import check_utf8_text, read_json_data


@dataclasses.dataclass
class SquadExample:
    qid: str
    question: str
    context: str
    answers: list                 # [(text, character start in context)], [] if unanswerable
    is_impossible: bool = False   # v2.0: the context does not answer the question


def read_squad(path, articles=None):
    """Examples of a SQuAD-format JSON file, in file order; errors name the file and the
    question id. Returns (examples, is_v2): is_v2 when the version says 2.x or any question
    has ``is_impossible``.

    ``articles=(first, last)`` keeps only those articles, counted from 1, last included: the
    non-standard split of dev-v1.1 that shows training learns here ((1, 24) to train,
    (25, 48) to evaluate), since no SQuAD training set is on this machine.

    Every text (context, question, answer, id) must be text UTF-8 can write: a lone surrogate
    from a JSON escape is an error naming the question. An answer is kept as written, even
    one that is blank or not at its ``answer_start``: the official scripts score against it;
    training skips it (``answer_span``).
    """
    dataset = read_json_data(path)
    if not isinstance(dataset, dict) or not isinstance(dataset.get("data"), list):
        raise DataError(f"{path}: not SQuAD JSON (no top-level \"data\" list)")
    examples, seen, has_impossible = [], set(), False
    chosen = range(len(dataset["data"])) if articles is None else range(articles[0] - 1, articles[1])
    if articles is not None and not (1 <= articles[0] <= articles[1] <= len(dataset["data"])):
        raise DataError(f"{path}: articles {articles[0]}-{articles[1]} asked, the file has 1-{len(dataset['data'])}")
    for a in chosen:
        for p, paragraph in enumerate(_list(dataset["data"][a], "paragraphs", f"{path}: article {a}")):
            where = f"{path}: article {a} paragraph {p}"
            context = paragraph.get("context") if isinstance(paragraph, dict) else None
            if not isinstance(context, str):
                raise DataError(f"{where}: no \"context\" string")
            check_utf8_text(context, f"{where}: the context")
            for qa in _list(paragraph, "qas", where):
                example = _read_question(path, qa, context, where)
                if example.qid in seen:
                    raise DataError(f"{path}: question {example.qid}: the id appears twice")
                seen.add(example.qid)
                has_impossible |= example.is_impossible
                examples.append(example)
    if not examples:
        raise DataError(f"{path}: no questions")
    is_v2 = has_impossible or str(dataset.get("version", "")).lstrip("v").startswith("2")
    return examples, is_v2


def _list(obj, key, where):
    value = obj.get(key) if isinstance(obj, dict) else None
    if not isinstance(value, list):
        raise DataError(f"{where}: no \"{key}\" list")
    return value


def _read_question(path, qa, context, where):
    qid = qa.get("id") if isinstance(qa, dict) else None
    if not isinstance(qid, str) or not qid:
        raise DataError(f"{where}: a question without an \"id\" string")
    check_utf8_text(qid, f"{where}: a question id")
    where = f"{path}: question {qid}"
    question = qa.get("question")
    if not isinstance(question, str) or not question.strip():
        raise DataError(f"{where}: no \"question\" text")
    check_utf8_text(question, f"{where}: the question")
    impossible = qa.get("is_impossible", False)
    if not isinstance(impossible, bool):
        raise DataError(f"{where}: is_impossible is {impossible!r}, not true or false")
    answers = []
    for n, answer in enumerate(_list(qa, "answers", where), start=1):
        text = answer.get("text") if isinstance(answer, dict) else None
        start = answer.get("answer_start") if isinstance(answer, dict) else None
        if not isinstance(text, str) or not isinstance(start, int) or isinstance(start, bool):
            raise DataError(f"{where}: an answer without a \"text\" string and an integer \"answer_start\"")
        check_utf8_text(text, f"{where}: answer {n}")
        if not 0 <= start <= len(context) - len(text):
            raise DataError(f"{where}: answer_start {start} puts {text[:40]!r} outside the context "
                            f"({len(context)} characters)")
        answers.append((text, start))
    if impossible and answers:
        raise DataError(f"{where}: is_impossible is true but it has {len(answers)} answers")
    return SquadExample(qid, question, context, answers, impossible)


def gold_answers(examples):
    """{question id: [answer texts]} for squad_metric (an unanswerable question: [])."""
    return {e.qid: [text for text, _ in e.answers] for e in examples}
