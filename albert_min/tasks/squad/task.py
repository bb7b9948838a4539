"""SQuAD v1.1 (``--task squad``) and v2.0 (``--task squad_v2``) as a task: sliding windows
through AlbertForQuestionAnswering, answers decoded per question as the windows stream out,
the official metric and prediction files. The pieces themselves are ``reading`` (the JSON),
``features`` (windows), ``loss``, ``decode`` (n-best decoding, files) and ``metric`` (EM / F1).

A dev set's windows are never all held: ``prepare`` keeps the recipe, every pass cuts the
windows again, and ``predict`` hands out one batch of windows' logits at a time. Only the
training windows are kept, as compact token-id arrays with their labels.
"""

import dataclasses
import os
import random
import re

import numpy as np

from .. import prediction_steps
from ..batching import pad_for_training, padding_limit
from ..errors import DataError
from ..file_io import json_kind, write_json
from ..task_base import Prepared, Task, finite_or_worst, shuffled_batches
from . import decode, features, metric, reading


# SquadTask's options and their defaults; train.py and evaluate.py have a flag of each name
# (--doc-stride ...), and a model folder's training_settings.json records those it was trained with.
OPTION_DEFAULTS = {"doc_stride": 128, "max_query_length": 64, "max_answer_length": 30,
                   "null_score_diff_threshold": 0.0}
ARTICLE_RANGE = re.compile(r"^(?P<path>.+):(?P<first>\d+)-(?P<last>\d+)$")


def article_range(path):
    """``"dev-v1.1.json:1-24"`` -> ``("dev-v1.1.json", (1, 24))``: that file's articles 1 to 24
    (the non-standard split of dev-v1.1 that shows training learns, see ``reading.read_squad``).
    A path without the suffix, or one that exists as written, -> ``(path, None)``."""
    match = ARTICLE_RANGE.match(path)
    if match is None or os.path.exists(path):
        return path, None
    return match["path"], (int(match["first"]), int(match["last"]))


@dataclasses.dataclass
class SquadFile:
    """``SquadTask.read``'s examples: a file's questions in file order."""
    path: str
    examples: list          # reading.SquadExample

    def __len__(self):
        return len(self.examples)


class Windows:
    """``Prepared.features`` of SQuAD: every question's windows, cut again on each pass."""

    def __init__(self, examples, tokenizer, config: features.WindowConfig):
        self.examples, self.tokenizer, self.config = examples, tokenizer, config
        self.count = None            # windows in a pass, known once one pass has run
        self._training = None

    def __iter__(self):
        n = 0
        for feature in features.iter_features(self.tokenizer, self.examples, self.config, with_labels=True):
            n += 1
            yield feature
        self.count = n

    def training(self):
        """(token ids per window as int32 arrays, first context position, start and end labels),
        made on the first call and kept: what training batches need, without offsets. A question
        whose answer cannot be labelled (``features.unusable_answer``) has no training window."""
        if self._training is None:
            ids, context, starts, ends = [], [], [], []
            usable = [e for e in self.examples if features.unusable_answer(e) is None]
            for f in features.iter_features(self.tokenizer, usable, self.config, with_labels=True):
                ids.append(np.asarray(f.input_ids, np.int32))
                context.append(f.context_start)
                starts.append(f.start_position)
                ends.append(f.end_position)
            self._training = (ids, np.array(context), np.array(starts, np.int32), np.array(ends, np.int32))
        return self._training


class Outputs:
    """``SquadTask.predict``'s outputs: one pass of batches ``[(window, start_logits, end_logits)]``.
    The answers decoded from them are kept here, so ``score`` and ``write_predictions`` share
    one pass; reading the windows a second time is an error rather than an empty result."""

    def __init__(self, batches):
        self._batches, self._read, self.answers = batches, False, None

    def __iter__(self):
        if self._read:
            raise RuntimeError("SQuAD prediction outputs stream once; call predict again to read them again")
        self._read = True
        return self._batches


class SquadTask(Task):
    """``name``: squad (v1.1: every question has an answer) or squad_v2 (v2.0: "no answer" allowed).

    Options (train.py / evaluate.py flags): ``doc_stride`` (128) pieces from one window's start
    to the next; ``max_query_length`` (64) question pieces kept; ``max_answer_length`` (30)
    pieces in an answer; ``n_best`` (20) start and end candidates per window;
    ``null_score_diff_threshold`` (0.0, v2.0) answer "" when the null score beats the best
    span by more. The window length is the ``max_length`` given to ``prepare`` (384 by default).
    """
    model_class = "AlbertForQuestionAnswering"
    head_prefixes = ("qa_outputs.",)
    default_max_length = 384
    # predictions.json {id: answer}; v2.0's null_odds.json {id: odds}
    prediction_kind = json_kind(lambda v: isinstance(v, dict) and all(isinstance(a, str) for a in v.values()))
    null_odds_kind = json_kind(lambda v: isinstance(v, dict) and all(
        isinstance(x, (int, float)) and not isinstance(x, bool) for x in v.values()))

    def __init__(self, name="squad", doc_stride=OPTION_DEFAULTS["doc_stride"],
                 max_query_length=OPTION_DEFAULTS["max_query_length"],
                 max_answer_length=OPTION_DEFAULTS["max_answer_length"],
                 null_score_diff_threshold=OPTION_DEFAULTS["null_score_diff_threshold"], n_best=20):
        if name not in ("squad", "squad_v2"):
            raise DataError(f"unknown SQuAD task {name!r}; choose squad (v1.1) or squad_v2 (v2.0)")
        for option, value in (("doc_stride", doc_stride), ("max_query_length", max_query_length),
                              ("max_answer_length", max_answer_length), ("n_best", n_best)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise DataError(f"{option} must be an integer >= 1, got {value!r}")
        if not isinstance(null_score_diff_threshold, (int, float)) or not np.isfinite(null_score_diff_threshold):
            raise DataError(f"null_score_diff_threshold must be a finite number, got {null_score_diff_threshold!r}")
        self.name, self.version_2 = name, name == "squad_v2"
        self.doc_stride, self.max_query_length = doc_stride, max_query_length
        self.decoding = decode.DecodeConfig(n_best, max_answer_length, float(null_score_diff_threshold),
                                                  self.version_2)

    def options(self):
        """The options a model folder records (``OPTION_DEFAULTS``' names), so that evaluation
        and ``pipeline()`` cut and decode windows as training did (``options_for``)."""
        return {"doc_stride": self.doc_stride, "max_query_length": self.max_query_length,
                "max_answer_length": self.decoding.max_answer_length,
                "null_score_diff_threshold": self.decoding.null_score_diff_threshold}

    # ------------------------------------------------------------------ files
    def read(self, path):
        """A SQuAD JSON file; ``FILE.json:FIRST-LAST`` keeps articles FIRST..LAST (from 1)."""
        path, articles = article_range(path)
        examples, is_v2 = reading.read_squad(path, articles)
        if is_v2 and not self.version_2:
            raise DataError(f"{path}: a SQuAD v2.0 file (version 2.x or questions marked is_impossible); "
                            "use --task squad_v2")
        return SquadFile(path, examples)

    def files_read(self, path):
        """The whole JSON file, also for ``FILE.json:FIRST-LAST`` (a change to any article changes it)."""
        return [article_range(path)[0]]

    def training_notes(self, data):
        """The questions training leaves out, as Google's ``run_squad`` does: one line naming the
        first of them and how many there are (none: [])."""
        skipped = skipped_questions(data.examples)
        if not skipped:
            return []
        qid, why = skipped[0]
        return [f"note: {data.path}: training skips {len(skipped)} of {len(data.examples)} questions, whose answer "
                f"it cannot find in the context (the first: question {qid}: {why})"]

    def tokenizer_text(self, data):
        contexts = list(dict.fromkeys(e.context for e in data.examples))
        return contexts + [e.question for e in data.examples]

    def prediction_files(self, path):
        return {path: self.prediction_kind, **({null_odds_path(path): self.null_odds_kind} if self.version_2 else {})}

    def write_predictions(self, path, prepared, outputs):
        """predictions.json ``{id: answer}`` at ``path``; for v2.0 also ``null_odds.json``
        ``{id: null score - best span score}`` beside it (``null_odds_path``)."""
        answers = self.answers(prepared, outputs)
        write_json(path, {p.qid: p.text for p in answers}, record=True)
        if self.version_2:
            write_json(null_odds_path(path), {p.qid: p.null_odds for p in answers}, record=True)

    # ----------------------------------------------------------------- features
    def window_config(self, max_length):
        """The windows at ``max_length``; a stride longer than the shortest window (the one
        beside a question of ``max_query_length`` pieces) would skip context: an error."""
        window = max_length - self.max_query_length - 3
        if window < 1 or self.doc_stride > window:
            raise DataError(f"doc_stride {self.doc_stride} is longer than the window: max_length {max_length} - "
                            f"max_query_length {self.max_query_length} - 3 = {window} context pieces "
                            "(a longer stride skips context); lower doc_stride or max_query_length")
        return features.WindowConfig(max_length, self.doc_stride, self.max_query_length)

    def prepare(self, data, tokenizer, max_length):
        return Prepared(data, Windows(data.examples, tokenizer, self.window_config(max_length)), max_length)

    # --------------------------------------------------------------- training
    def steps_per_epoch(self, train, batch_size, seed, parallel):
        windows = len(train.features.training()[0])   # batches are of windows
        if not windows:
            qid, why = skipped_questions(train.examples.examples)[0]
            raise DataError(f"{train.examples.path}: no question to train on: training skips every one, whose answer "
                            f"it cannot find in the context (the first: question {qid}: {why})")
        return parallel.steps(windows, batch_size)

    def train_batches(self, train, epoch, batch_size, seed, parallel):
        """Shuffled batches of windows: (input_ids, token_type_ids, attention_mask, start, end)."""
        ids, context, starts, ends = train.features.training()
        pad_id = train.features.tokenizer.pad_token_id
        lengths = [len(r) for r in ids]
        limit = padding_limit(lengths, train.max_length)   # the windows' longest, if shorter than --max-length
        for idx in shuffled_batches(lengths, batch_size, random.Random(seed + epoch), parallel):
            types = [[0] * context[i] + [1] * (len(ids[i]) - context[i]) for i in idx]
            yield (*pad_for_training([ids[i] for i in idx], types, pad_id, limit, train.train_lengths),
                   starts[idx], ends[idx])

    def loss_fn(self, model):
        from .loss import make_qa_loss_fn
        return make_qa_loss_fn(model)

    # -------------------------------------------------------------- evaluation
    def predict(self, model, prepared, *, batch_size=64, use_jit=True, progress=False, cache_dir=None):
        """An ``Outputs``: batches of ``batch_size`` windows in file order, each window with its
        start and end logits (cut to its length); a progress bar in windows/s."""
        return Outputs(self._scored_windows(model, prepared, batch_size, use_jit, progress))

    def _scored_windows(self, model, prepared, batch_size, use_jit, progress):
        forward, windows = prediction_steps.forward_fn(model, use_jit), prepared.features
        pad_id = windows.tokenizer.pad_token_id
        with prediction_steps.progress_bar(windows.count, "window", progress) as bar:
            for chunk in prediction_steps.chunks(windows, batch_size):
                rows, types = [f.input_ids for f in chunk], [f.token_type_ids for f in chunk]
                arrays = prediction_steps.padded(rows, types, pad_id, prepared.max_length, batch_size, use_jit)
                starts, ends = prediction_steps.run(forward, arrays)                      # (B, S) each
                prediction_steps.check_finite(starts[:len(chunk)], prepared.examples.path)
                prediction_steps.check_finite(ends[:len(chunk)], prepared.examples.path)
                yield [(f, starts[i, :len(f.input_ids)], ends[i, :len(f.input_ids)]) for i, f in enumerate(chunk)]
                bar.update(len(chunk))

    def answers(self, prepared, outputs):
        """One ``decode.Prediction`` per question, in file order, decoded as the windows
        stream in (kept on an ``Outputs`` for the next caller); ``outputs`` may also be a list."""
        if getattr(outputs, "answers", None) is not None:
            return outputs.answers
        scored = (window for batch in outputs for window in batch)
        answers = list(decode.decode_stream(prepared.examples.examples, scored, self.decoding))
        if isinstance(outputs, Outputs):
            outputs.answers = answers
        return answers

    def score(self, prepared, outputs):
        """The official script's numbers as fractions (EM and F1; for v2.0 also HasAns / NoAns
        and the best-threshold scores, with null_odds.json's odds as the no-answer
        probabilities), ``*_thresh`` as odds, counts as counts, plus ``examples``."""
        gold = reading.gold_answers(prepared.examples.examples)
        if not self.version_2 and not all(gold.values()):
            qid = next(q for q, a in gold.items() if not a)
            raise DataError(f"{prepared.examples.path}: question {qid} has no answer to score against; give it "
                            "one, or score the file as SQuAD v2.0 (--task squad_v2), where a question without "
                            "answers is unanswerable")
        answers = self.answers(prepared, outputs)
        texts = {p.qid: p.text for p in answers}
        if not self.version_2:
            m = metric.evaluate_v1(gold, texts)
            return {"exact_match": m["exact_match"] / 100, "f1": m["f1"] / 100, "examples": m["total"]}
        m = metric.evaluate_v2(gold, texts, {p.qid: p.null_odds for p in answers})
        metrics = {k: v / 100 if is_percentage(k) else v for k, v in m.items()}
        return {**metrics, "examples": m["total"]}

    def selection_score(self, metrics):
        return finite_or_worst(metrics.get("dev_f1"))


def skipped_questions(examples):
    """[(question id, why)] of the questions training leaves out (``features.unusable_answer``)."""
    return [(e.qid, why) for e in examples if (why := features.unusable_answer(e)) is not None]


def options_for(model_dir, **given):
    """SquadTask's options for the model in ``model_dir``: each one ``given`` (not None), else the
    one it was trained with (its training_settings.json), else ``OPTION_DEFAULTS``'."""
    from ...model.folder import training_settings
    trained = training_settings(model_dir)
    options = {}
    for name, default in OPTION_DEFAULTS.items():
        value = given.get(name)
        options[name] = value if value is not None else trained.get(name, default)
    unknown = sorted(set(given) - set(OPTION_DEFAULTS))
    if unknown:
        raise DataError(f"unknown SQuAD options {unknown}; choose from {', '.join(OPTION_DEFAULTS)}")
    return options


def is_percentage(key):
    """Which of evaluate_v2's keys are percentages (the others: counts and thresholds)."""
    return ("exact" in key or "f1" in key) and not key.endswith(("_thresh", "_total"))


def null_odds_path(predictions_path):
    """Where v2.0's null odds go: ``null_odds.json`` beside ``predictions.json`` (the official
    names), else ``NAME.null_odds.json`` beside ``NAME.json``."""
    folder, name = os.path.split(predictions_path)
    if name == "predictions.json":
        return os.path.join(folder, "null_odds.json")
    return os.path.join(folder, os.path.splitext(name)[0] + ".null_odds.json")
