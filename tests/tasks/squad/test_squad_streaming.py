"""SQuAD decoding and windows that stream (issue 44, item 6): the n-best answers decoded window
by window (``squad_decode.QuestionDecoder``) are exactly run_squad's n-best list, made here the
way albert_min made it before (every candidate of every window sorted by score), and evaluating
one long context takes memory that hardly grows with its length."""

import json
import math
import os
import random
import subprocess
import sys

import numpy as np
import pytest

from helpers.paths import FIXTURES, ROOT

sys.path.insert(0, ROOT)
from albert_min.tasks.squad import decode as squad_decode  # noqa: E402
from albert_min.tasks.squad import features as squad_features  # noqa: E402
from albert_min.tasks.squad import reading as squad_reading  # noqa: E402


def reference_decode(example, windows, config):
    """albert_min's decoding before issue 44: every candidate of every window kept and sorted."""
    candidates, null_score = [], math.inf
    for feature, start_logits, end_logits in windows:
        start_logits, end_logits = np.asarray(start_logits), np.asarray(end_logits)
        n = len(feature.input_ids)
        first, last = feature.context_start, feature.context_start + len(feature.offsets) - 1
        for s in np.argsort(-start_logits[:n], kind="stable")[:config.n_best]:
            if not first <= s <= last or not feature.is_max_context[s - first]:
                continue
            for e in np.argsort(-end_logits[:n], kind="stable")[:config.n_best]:
                if not s <= e <= last or e - s + 1 > config.max_answer_length:
                    continue
                candidates.append((float(start_logits[s] + end_logits[e]), feature.offsets[s - first][0],
                                   feature.offsets[e - first][1]))
        null_score = min(null_score, float(start_logits[0] + end_logits[0]))
    candidates.sort(key=lambda c: -c[0])
    nbest, seen = [], set()
    for score, start, end in candidates:
        text = example.context[start:end]
        if text in seen or not text.strip():
            continue
        seen.add(text)
        nbest.append({"text": text, "score": score, "start": start, "end": end})
        if len(nbest) == config.n_best:
            break
    return squad_decode.prediction(example, nbest, null_score, config)


def windows_of(rng, words, size, stride, head, logits):
    """Windows over a context of one-character ``words`` (some of them blank: "▁"-only answers),
    with random max-context flags and logits (``logits``: "ties" draws small integers)."""
    context = " ".join(words)
    offsets = [(2 * i, 2 * i + 1) for i in range(len(words))]
    starts = squad_features.window_starts(len(words), size, stride)
    windows = []
    for start in starts:
        length = min(size, len(words) - start)
        n = head + length + 1
        feature = squad_features.SquadFeature(0, [5] * n, [0] * head + [1] * (length + 1), head,
                                     offsets[start:start + length], [rng.random() < 0.7 for _ in range(length)])
        if logits == "ties":
            s, e = rng.integers(-3, 4, n).astype(np.float32), rng.integers(-3, 4, n).astype(np.float32)
        else:
            s, e = rng.normal(size=n).astype(np.float32), rng.normal(size=n).astype(np.float32)
        windows.append((feature, s, e))
    return squad_reading.SquadExample("q", "?", context, [("a", 0)]), windows


@pytest.mark.parametrize("seed", range(40))
def test_streaming_decoder_gives_run_squads_nbest_exactly(seed):
    rng = np.random.default_rng(seed)
    alphabet = list("abc ") if seed % 2 else list("abcdefghij")   # few distinct texts, and blank ones
    words = [str(rng.choice(alphabet)) for _ in range(int(rng.integers(1, 400)))]
    config = squad_decode.DecodeConfig(n_best=int(rng.choice([1, 2, 5, 20])),
                                       max_answer_length=int(rng.choice([1, 3, 30])),
                                       null_score_diff_threshold=float(rng.normal()), version_2=bool(seed % 3 == 0))
    example, windows = windows_of(rng, words, int(rng.integers(4, 30)), int(rng.integers(1, 4)), 5,
                                  "ties" if seed % 4 < 2 else "normal")
    want = reference_decode(example, windows, config)
    got = squad_decode.decode_question(example, windows, config)
    assert got == want
    streamed = list(squad_decode.decode_stream([example], iter(windows), config))
    assert streamed == [want]


def test_the_features_of_one_example_are_made_one_window_at_a_time(tok):
    example = squad_reading.SquadExample("q", "who sat?", " ".join(["the cat sat on the mat ."] * 50), [("the cat", 0)])
    features = squad_features.iter_example_features(tok, example, 0, squad_features.WindowConfig(32, 8, 8), with_labels=True)
    assert not isinstance(features, list)
    first = next(features)
    assert first.context_start == len(tok.encode_ids("who sat?")) + 2
    assert [f.input_ids for f in [first, *features]] == \
        [f.input_ids for f in squad_features.example_features(tok, example, 0, squad_features.WindowConfig(32, 8, 8), True)]


@pytest.fixture(scope="module")
def tok():
    from tokenizer import AlbertTokenizer
    return AlbertTokenizer(os.path.join(FIXTURES, "spiece_sst2_2k.model"))


HOSTILE_TEXT = ["", " ", "  two  spaces ", "\u200b", "e\u0301 caf\u00e9", "\u4e2d\u6587 \u4e2d", "\U0001f600 x",
                "1,000 and 2,500,000 ", "[MASK] at [MASK]", " x [MASK]", "ﬁne İstanbul ß", "a\tb\nc\u3000d",
                "``quoted''", "(paren) [bracket] {brace}", "a" * 300, "don't STOP", "x" * 5 + " " * 5]


@pytest.mark.parametrize("seed", range(3))
def test_a_context_tokenized_by_chunks_gives_the_pieces_of_the_whole(tok, seed):
    rng = random.Random(seed)
    words = ["the", "Cat", "sat", "Paris", "1990", "door,", "naïve", "ÉCOLE", "[MASK]", "x"] + HOSTILE_TEXT
    context = "".join(rng.choice(words) + rng.choice([" ", "  ", "\n", "\t", " ", ""]) for _ in range(400))
    pieces, offsets = tok.tokenize_with_offsets(context)
    whole = (tok.convert_tokens_to_ids(pieces), offsets)
    for chunk in (1, 50, 1 << 20):                  # 1: cut at every place it may
        assert squad_features.context_pieces(tok, context, chunk=chunk) == whole, chunk


# ------------------------------------------------------------ memory on one long context
MEMORY_RUN = r"""
import json, resource, sys
sys.path.insert(0, {root!r})
import numpy as np
import mindspore as ms
from albert_min.tasks import get_task  # noqa: E402
from tokenizer import AlbertTokenizer


class Logits:
    '''A stand-in for the QA model (its memory is one batch's, whatever the context): start and
    end logits drawn per window, so that decoding meets as many candidates as with a model.'''
    def __init__(self):
        self.rng = np.random.default_rng(0)

    def set_train(self, mode):
        pass

    def __call__(self, input_ids, token_type_ids, attention_mask):
        shape = input_ids.shape
        return (ms.Tensor(self.rng.normal(size=shape).astype(np.float32)),
                ms.Tensor(self.rng.normal(size=shape).astype(np.float32)))


task = get_task("squad", doc_stride=16, max_query_length=16)
data = task.read({path!r})
prepared = task.prepare(data, AlbertTokenizer({spiece!r}), 64)
metrics = task.score(prepared, task.predict(Logits(), prepared, batch_size=64, use_jit=False))
print(json.dumps({{"windows": prepared.features.count, "examples": metrics["examples"],
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


def peak_memory(tmp_path, characters):
    """(windows, peak RSS in MB) of a process scoring one question on a context of ``characters``."""
    block = "The old cat sat on the red mat near the door, and it slept there all day long. "
    context = (block * (characters // len(block) + 1))[:characters].rstrip()
    path = tmp_path / f"long{characters}.json"
    path.write_text(json.dumps({"version": "1.1", "data": [{"paragraphs": [{"context": context, "qas": [
        {"id": "q1", "question": "Where did the cat sit?",
         "answers": [{"text": "on the red mat", "answer_start": context.index("on the red mat")}]}]}]}]}))
    code = MEMORY_RUN.format(root=ROOT, path=str(path), spiece=os.path.join(FIXTURES, "spiece_sst2_2k.model"))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["examples"] == 1
    return result["windows"], result["peak_mb"]


def test_memory_hardly_grows_with_one_long_context(tmp_path):
    """Issue 44: 0.5 GB more per MB of context before (949 MB at 1 MB, 2.49 GB at 4 MB): the whole
    context tokenized at once, every window's features and every candidate answer held."""
    small_windows, small = peak_memory(tmp_path, 100_000)
    large_windows, large = peak_memory(tmp_path, 400_000)
    assert large_windows > 3.5 * small_windows > 7000
    per_mb = (large - small) / 0.3
    assert per_mb < 150, f"{small:.0f} MB at 0.1 MB of context, {large:.0f} MB at 0.4 MB: {per_mb:.0f} MB per MB"
