"""The pieces that make albert_min fast: each must compute exactly what the plain formula does."""

import json
import math
import os
import shutil
import subprocess
import sys

import numpy as np
import mindspore as ms
import pytest

from albert_min.model import kernels
from albert_min.tasks import prediction_engine
from albert_min.tasks.prediction_engine import cache_key, predict
from albert_min.model.config import AlbertConfig
from albert_min.tasks.batching import bucket_length, bucketed_eval_batches, pad_batch
from albert_min.tasks.text_files import read_tsv
from albert_min.model.modeling import gelu_new
from albert_min.model.heads import AlbertForSequenceClassification
from helpers.paths import ROOT, SST2_DIR

MODEL = os.path.join(ROOT, "weights", "sst2-small")


def exact_gelu_new(x):
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) in float64."""
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def test_sigmoid_form_of_gelu_new_matches_the_tanh_formula():
    x = np.linspace(-30, 30, 60001).astype(np.float32)
    ours = gelu_new(ms.Tensor(x)).asnumpy()
    assert np.abs(ours - exact_gelu_new(x.astype(np.float64))).max() < 2e-6
    assert np.isfinite(ours).all() and ours[0] == 0.0          # no overflow far out on the left


def test_gradient_of_gelu_new_matches_central_differences():
    x = np.linspace(-6, 6, 241)
    grad = ms.grad(lambda t: gelu_new(t).sum())(ms.Tensor(x.astype(np.float32))).asnumpy()
    h = 1e-5
    numeric = (exact_gelu_new(x + h) - exact_gelu_new(x - h)) / (2 * h)
    assert np.abs(grad - numeric).max() < 2e-5


def test_bucket_lengths_are_powers_of_two_capped_at_max_length():
    assert [bucket_length(n, 128) for n in (1, 16, 17, 33, 65, 128)] == [16, 16, 32, 64, 128, 128]
    assert [bucket_length(n, 50) for n in (10, 20, 40, 50)] == [16, 32, 50, 50]


def test_bucketed_batches_cover_every_row_once_with_one_shape_per_bucket():
    rng = np.random.default_rng(0)
    encoded = [[1] * int(n) for n in rng.integers(3, 65, size=300)]
    seen, shapes = [], {}
    for idx, rows, num_rows, length in bucketed_eval_batches(encoded, batch_size=16, max_length=64):
        assert len(rows) <= num_rows and all(len(r) <= length for r in rows)
        assert shapes.setdefault(length, num_rows) == num_rows        # one row count per length
        input_ids, _, mask = pad_batch(rows, 0, length=length, num_rows=num_rows)
        assert input_ids.shape == (num_rows, length)
        assert mask[:len(rows)].sum(1).tolist() == [len(r) for r in rows]
        assert (mask[len(rows):].sum(1) == 1).all()                   # filler rows: [0] visible only
        seen += idx
    assert sorted(seen) == list(range(300))
    assert sorted(shapes) == [16, 32, 64] and shapes[16] > shapes[64]  # shorter rows, bigger batches


def test_pad_batch_refuses_a_row_longer_than_the_length():
    with pytest.raises(ValueError, match="does not fit"):
        pad_batch([[1] * 20], 0, length=16)


def test_the_dynamic_graph_and_padding_do_not_change_probabilities(monkeypatch):
    """Graph mode (one dynamic-shape graph, batches of 8) and PyNative (batches of 5, other padding)
    agree, and declaring the graph's inputs dynamic renames none of the model's parameters."""
    from tokenizer import AlbertTokenizer
    monkeypatch.setattr(prediction_engine, "GRAPH_FROM_ROWS", 1)             # the graph for these 45 rows
    model = AlbertForSequenceClassification.from_pretrained(MODEL)
    tokenizer = AlbertTokenizer.from_pretrained(MODEL)
    sentences = read_tsv(os.path.join(SST2_DIR, "dev.tsv"))[0][:45]
    names = [p.name for p in model.get_parameters()]
    graph, _ = predict(model, tokenizer, sentences, batch_size=8, max_length=64, progress=False)
    assert model in prediction_engine._DYNAMIC_GRAPHS
    plain, _ = predict(model, tokenizer, sentences, batch_size=5, max_length=64, use_jit=False, progress=False)
    assert np.abs(graph - plain).max() <= 1e-5
    assert [p.name for p in model.get_parameters()] == names


def tiny_classifier(**changes):
    return AlbertForSequenceClassification(AlbertConfig(**{
        "vocab_size": 50, "embedding_size": 8, "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
        "intermediate_size": 16, "max_position_embeddings": 32, **changes}))


def test_compile_cache_folders_are_keyed_by_config_and_shape_order():
    small, other = tiny_classifier(), tiny_classifier(num_hidden_layers=2)
    shapes = [(256, 16), (128, 32)]
    assert cache_key(small, shapes) == cache_key(small, [list(s) for s in shapes])
    assert cache_key(small, shapes) != cache_key(other, shapes)
    assert cache_key(small, shapes) != cache_key(small, shapes[::-1])
    assert cache_key(small, shapes) != cache_key(small, shapes, ("Int64",) * 3)


def test_compile_cache_key_covers_all_the_code_and_libraries_the_graph_is_built_from(tmp_path, monkeypatch):
    """Issue 44: the key hashed modeling.py and heads.py only, so after an edit of the kernels' softmax
    (layers.py) evaluate.py loaded the old graph and reported the old accuracy. Every source file of the
    package counts (here a copy of it), and so do the kernels' library, the thread counts and the cells."""
    copy = tmp_path / "albert_min"
    shutil.copytree(prediction_engine.PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(prediction_engine, "PACKAGE_DIR", str(copy))
    model, shapes = tiny_classifier(), [prediction_engine.DYNAMIC_SHAPE]
    keys = [cache_key(model, shapes)]
    assert cache_key(model, shapes) == keys[0]           # the same code, the same folder
    for name in ("model/kernels/layers.py", "model/kernels/philox_dropout.py", "tasks/prediction_engine.py",
                 "model/kernels/gelu.cc", "model/kernels/aot.h"):
        with open(copy / name, "a", encoding="utf-8") as f:
            f.write("\n")                                 # any edit, even one that changes no number
        prediction_engine.source_digest.cache_clear()             # a new process: the package read again
        keys.append(cache_key(model, shapes))
    assert len(set(keys)) == len(keys)
    monkeypatch.setattr(prediction_engine, "library_digest", lambda path: "another build of the kernels")
    keys.append(cache_key(model, shapes))
    monkeypatch.setattr(kernels, "KERNEL_THREADS", kernels.KERNEL_THREADS + 1)
    keys.append(cache_key(model, shapes))
    if kernels.library():                                 # the same model accelerated: the kernels' cells
        keys.append(cache_key(kernels.accelerate(tiny_classifier()), shapes))
    assert len(set(keys)) == len(keys)


def test_a_model_compiles_its_graph_only_once_enough_rows_were_asked(monkeypatch):
    """PyNative for a few rows (nothing to compile), the dynamic graph once GRAPH_FROM_ROWS rows were asked
    of the same model in this process; both give the same probabilities."""
    from tokenizer import AlbertTokenizer
    monkeypatch.setattr(prediction_engine, "GRAPH_FROM_ROWS", 12)
    model = AlbertForSequenceClassification.from_pretrained(MODEL)
    tokenizer = AlbertTokenizer.from_pretrained(MODEL)
    sentences = read_tsv(os.path.join(SST2_DIR, "dev.tsv"))[0][:8]
    few, _ = predict(model, tokenizer, sentences, batch_size=4, max_length=64, progress=False)
    assert model not in prediction_engine._DYNAMIC_GRAPHS                   # 8 rows asked: PyNative
    again, _ = predict(model, tokenizer, sentences, batch_size=4, max_length=64, progress=False)
    assert model in prediction_engine._DYNAMIC_GRAPHS                       # 16 rows asked: the graph
    np.testing.assert_allclose(again, few, rtol=0, atol=1e-6)
    other = AlbertForSequenceClassification.from_pretrained(MODEL)
    predict(other, tokenizer, sentences, batch_size=4, max_length=64, use_jit=False, progress=False)
    predict(other, tokenizer, sentences, batch_size=4, max_length=64, use_jit=False, progress=False)
    assert other not in prediction_engine._DYNAMIC_GRAPHS                   # use_jit=False never compiles


def test_second_evaluate_run_uses_the_cache_and_reports_the_same(tmp_path):
    # GRAPH_FROM_ROWS rows: evaluate.py compiles the graph (fewer run in PyNative and cache nothing)
    rows = open(os.path.join(SST2_DIR, "dev.tsv"), encoding="utf-8").read().splitlines()[:prediction_engine.GRAPH_FROM_ROWS + 1]
    data = tmp_path / "dev30.tsv"
    data.write_text("\n".join(rows) + "\n", encoding="utf-8")
    cache = tmp_path / "cache"
    env = dict(os.environ, ALBERT_MIN_CACHE=str(cache))
    runs = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, "evaluate.py", "--model", MODEL, "--data", str(data), "--json"],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
        runs.append(json.loads(proc.stdout[proc.stdout.index("{"):]))
        assert [p.name for p in cache.iterdir()] and not [p for p in cache.iterdir() if ".tmp-" in p.name]
    # One folder of graphs, and kernels/: evaluate.py predicts with the compiled kernels (built on first use).
    assert len([p for p in cache.iterdir() if p.name != "kernels"]) == 1
    assert (cache / "kernels").exists() == (kernels.library() is not None)
    for key in ("accuracy", "f1", "confusion"):
        assert runs[0][key] == runs[1][key]
