"""Sentence classification in eval mode: batched prediction, one dynamic-shape graph
(metrics: albert_min.tasks.glue.metric); also the compiled forward (``compiled``) and the compile
cache every family's ``predict`` uses.

Layer: ``albert_min.tasks``, above ``checkpoints`` (the layers: ``albert_min/__init__.py``).
"""

import contextlib
import errno
import functools
import hashlib
import json
import os
import shutil
import sys
import time
import weakref

import mindspore as ms
import numpy as np
from mindspore import nn
from tqdm import tqdm

from ..common.checksums import sha256_of
from ..common.device import cache_not_usable, under
from ..common.errors import os_error_text
from ..common.json_files import Field, JSONFileError, read_json
from .batching import encode_examples, eval_batches, pad_with_types


_GRAPHS = weakref.WeakKeyDictionary()


def compiled(cell, use_jit=True):
    """The cell's forward as a MindSpore graph (``mindspore.jit``) or plain PyNative.

    Graph mode compiles once per distinct input shape (about 1.5 s each for
    the small model on 2 cores), so callers pad to few shapes (sentence
    classification uses ``dynamic_graph`` instead). The graph is kept per cell,
    so repeated evaluations do not compile it again.
    """
    if not use_jit:
        return cell
    if cell not in _GRAPHS:
        _GRAPHS[cell] = ms.jit(cell.construct)
    return _GRAPHS[cell]


_DYNAMIC_GRAPHS = weakref.WeakKeyDictionary()


class _DynamicForward(nn.Cell):
    """The classifier's forward in a Cell of its own, whose inputs are declared dynamic
    (``set_inputs``) without touching the classifier, which train.py goes on training."""

    def __init__(self, classifier):
        super().__init__(auto_prefix=False)        # the classifier's parameter names stay as they are
        self.classifier = classifier
        ids = ms.Tensor(shape=[None, None], dtype=ms.int32)   # (B, S), both free
        self.set_inputs(ids, ids, ids)

    def construct(self, input_ids, token_type_ids, attention_mask):
        return self.classifier(input_ids, token_type_ids, attention_mask)


def dynamic_graph(classifier):
    """``classifier``'s forward, ``(input_ids, token_type_ids, attention_mask)`` int32 ``[B, S]`` ->
    logits, as one MindSpore graph for every batch size and length (``Cell.set_inputs`` with
    ``Tensor(shape=[None, None])``).

    One compile instead of one per padded shape: evaluate.py on SST-2 dev compiled
    three bucket shapes (16/32/64 tokens), and the dynamic graph predicts about as
    fast (benchmarks/evaluate_startup.py, docs/speed.md). ``mindspore.enable_dynamic``
    declares the same, but its graph loaded from the compile cache gave NaN logits
    (MindSpore 2.10 CPU). Kept per model, so train.py's repeated dev evaluations
    compile it once.
    """
    if classifier not in _DYNAMIC_GRAPHS:
        _DYNAMIC_GRAPHS[classifier] = ms.jit(_DynamicForward(classifier).construct)
    return _DYNAMIC_GRAPHS[classifier]


_CACHE_USED = False
DYNAMIC_SHAPE = (None, None)   # the (B, S) that keys dynamic_graph's cache folder

# PyNative (op by op, nothing to compile) or the dynamic-shape graph? Compiling costs about 2 s once
# (sst2-small, 1 thread); the graph then predicts about 1.8x faster (448 against 253 ex/s), and a
# later process loads it from the compile cache in about 0.3 s. benchmarks/evaluate_startup.py
# --variants dynamic,pynative --rows 16,64,256,0 (docs/speed.md): with nothing compiled PyNative
# took 0.65 / 0.88 / 1.74 s for 16 / 64 / 256 rows against the graph's 2.29 / 2.86 / 2.82 s; with the
# graph cached the two tie at 16-64 rows and the graph wins from 256 (1.23 against 1.76 s). So a model
# is compiled once it has been asked for GRAPH_FROM_ROWS rows in this process (a pipeline fed a few
# sentences at a time, train.py's repeated dev evaluations), or straight away when its graph is cached.
GRAPH_FROM_ROWS = 256
_ROWS_ASKED = weakref.WeakKeyDictionary()


def _cache_folder(root, model, shapes):
    """Where compile_cache keeps ``model``'s graphs for ``shapes`` under ``root``."""
    return os.path.join(root, cache_key(model, shapes))


def graph_pays(model, rows, cache_dir=None):
    """Whether predicting ``rows`` more rows with ``model`` should use (and compile) its dynamic-shape
    graph rather than PyNative: see GRAPH_FROM_ROWS."""
    asked = _ROWS_ASKED.get(model, 0) + rows
    _ROWS_ASKED[model] = asked
    if model in _DYNAMIC_GRAPHS or asked >= GRAPH_FROM_ROWS:
        return True
    return _cache_applies(cache_dir) and os.path.isdir(_cache_folder(cache_dir, model, [DYNAMIC_SHAPE]))


def _cache_applies(root):
    """Whether compile_cache would use ``root`` in this process (see there)."""
    # MindSpore hashes the entry script (sys.argv[0]) into the cache: none under `python -c` or a REPL.
    return root is not None and not _CACHE_USED and os.path.isfile(sys.argv[0])


PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # albert_min/, whose code is traced
SOURCE_SUFFIXES = (".py", ".cc", ".h")
INPUT_DTYPES = ("Int32", "Int32", "Int32")   # (input_ids, token_type_ids, attention_mask), as predict_logits feeds them


@functools.lru_cache(maxsize=None)
def source_digest(package_dir):
    """sha256 of every source file under ``package_dir`` (names and bytes, in name order): the code a
    traced forward may reach. Read once per process and folder (2 ms here)."""
    digest = hashlib.sha256()
    for folder, subfolders, files in os.walk(package_dir):
        subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(SOURCE_SUFFIXES):
                path = os.path.join(folder, name)
                digest.update(os.path.relpath(path, package_dir).encode() + b"\0")
                with open(path, "rb") as f:
                    digest.update(hashlib.sha256(f.read()).digest())
    return digest.hexdigest()


def library_digest(path):
    """The compiled kernels' sha256, as their build recorded it beside the library (which
    ``kernels.built`` checked), else read from the library; None for no library."""
    if path is None:
        return None
    from ..model.kernels.build import RECORD_SUFFIX
    try:
        return read_json(path + RECORD_SUFFIX, {"sha256": Field(str)})["sha256"]
    except (JSONFileError, OSError):
        return sha256_of(path)


def graph_inputs(model):
    """What makes ``model``'s graph besides its config: the class of every cell (kernels or MindSpore's
    ops, cells swapped by a speed step) and every parameter's name, shape and dtype."""
    cells = [[name, f"{type(cell).__module__}.{type(cell).__qualname__}"] for name, cell in model.cells_and_names()]
    parameters = [[p.name, list(p.shape), str(p.dtype)] for p in model.get_parameters()]
    return cells, parameters


def cache_key(model, shapes, input_dtypes=INPUT_DTYPES):
    """Folder name for the graphs of ``model`` compiled for input ``shapes`` in this order.

    Keyed by everything that shapes the graph: albert_min's source (every file, ``source_digest``:
    the traced code reaches modeling, heads, kernels' layers, dropout and this module), MindSpore's
    version, the model's config, cells and parameter dtypes (``graph_inputs``), the compiled kernels'
    sha256 (their build records it), the thread counts and ALBERT_MIN_KERNELS, and the inputs' shapes
    and dtypes. A change to any of them is a new folder, so an upgrade never loads an old graph."""
    from ..common.device import cpu_threads
    from ..model import kernels
    library = kernels.built() if kernels.uses_kernels(model) else None
    blob = json.dumps({
        "mindspore": ms.__version__, "source": source_digest(PACKAGE_DIR), "config": model.config.to_dict(),
        "graph": graph_inputs(model), "kernels": library_digest(library),
        "threads": [cpu_threads(), kernels.KERNEL_THREADS], "kernels_on": kernels.enabled(),
        "shapes": [list(s) for s in shapes], "dtypes": [str(d) for d in input_dtypes]}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


@contextlib.contextmanager
def compile_cache(root, model, shapes):
    """Let MindSpore save/load the compiled graphs of this run under ``root``.

    MindSpore's compile cache numbers graphs by the order a process compiles
    them and does not check that a cached graph is the one asked for (a
    different config or shape order loads the wrong graph: a crash, or wrong
    numbers; other code loads the old graph: stale numbers). So each folder is
    keyed by everything that makes the graphs (``cache_key``); weights are
    inputs of the graph, not part of it. A new folder is
    filled under a temporary name and renamed when the run succeeded, so
    concurrent or interrupted runs never leave a half-written cache. Once
    per process, and meant for a process whose first compiles these are
    (evaluate.py): MindSpore counts every compile of the process. Later
    calls, root=None and scripts without a file (``python -c``) run without it.
    """
    global _CACHE_USED
    if not _cache_applies(root):
        yield
        return
    _CACHE_USED = True
    final = _cache_folder(root, model, shapes)
    ready = os.path.isdir(final)
    path = final if ready else f"{final}.tmp-{os.getpid()}"
    try:   # made here, not by MindSpore, which logs a raw [ERROR] line per failed step and goes on
        os.makedirs(path, exist_ok=True)
        if not os.access(path, os.R_OK | os.W_OK | os.X_OK):
            raise PermissionError(errno.EACCES, "not writable", path)
    except OSError as err:
        if under(err.filename, root):   # once per process and folder, also if the kernels said it first
            cache_not_usable(root, err, "no compiled graphs kept")
        else:
            print(f"albert_min: compile cache not used ({os_error_text(err)}); compiling without it", file=sys.stderr)
        yield
        return
    ms.set_context(enable_compile_cache=True, compile_cache_path=path)
    try:
        yield
    except BaseException:
        if not ready:
            shutil.rmtree(path, ignore_errors=True)
        raise
    finally:
        ms.set_context(enable_compile_cache=False)
    if not ready:
        try:
            os.rename(path, final)            # atomic; fails if another run got there first
        except OSError:
            shutil.rmtree(path, ignore_errors=True)


def predict(model, tokenizer, sentences, batch_size=64, max_length=128, use_jit=True, progress=True,
            cache_dir=None):
    """Class probabilities ``[N, num_labels]`` for single ``sentences``, in input order.

    Returns (probabilities, seconds spent); see ``predict_logits``.
    """
    logits, seconds = predict_logits(model, tokenizer, sentences, None, batch_size, max_length, use_jit, progress,
                                     cache_dir)
    return softmax(logits), seconds


def predict_logits(model, tokenizer, texts, text_pairs=None, batch_size=64, max_length=128, use_jit=True,
                   progress=True, cache_dir=None):
    """Raw model outputs ``[N, num_labels]`` for single sentences or sentence pairs, in
    input order (pairs as ``[CLS] a [SEP] b [SEP]`` with token type ids 0 / 1).
    For a regression model (num_labels = 1) column 0 is the predicted score.

    With ``use_jit``, a model asked for GRAPH_FROM_ROWS rows or more (this call and the
    ones before, or its graph in ``cache_dir``) runs one graph with a dynamic batch and length
    (``dynamic_graph``), fewer rows run op by op (PyNative: nothing to compile);
    ``cache_dir`` keeps the graph on disk for the next process
    (``compile_cache``). Rows sorted by length go in batches of ``batch_size``,
    each padded to its longest row rounded up to 8. Padding changes no logit:
    padded keys get exactly zero attention.
    Returns (logits, seconds spent).
    """
    ids, types = encode_examples(tokenizer, texts, text_pairs, max_length)
    return predict_encoded_logits(model, ids, types, tokenizer.pad_token_id, batch_size, use_jit, progress, cache_dir)


def predict_encoded_logits(model, ids, types, pad_id, batch_size=64, use_jit=True, progress=True, cache_dir=None):
    """``predict_logits`` on examples already encoded (``batching.encode_examples``' ids and token
    type ids, as ``GlueTask.prepare`` keeps them). Returns (logits, seconds spent)."""
    model.set_train(False)
    graph = use_jit and graph_pays(model, len(ids), cache_dir)
    forward = dynamic_graph(model) if graph else model
    logits = np.zeros((len(ids), model.config.num_labels), np.float32)
    start = time.perf_counter()
    with compile_cache(cache_dir if graph else None, model, [DYNAMIC_SHAPE]), \
            tqdm(total=len(ids), desc="evaluating", unit="ex", disable=not progress) as bar:
        for idx, rows in eval_batches(ids, batch_size):
            batch = pad_with_types(rows, [types[i] for i in idx], pad_id)
            logits[idx] = forward(*[ms.Tensor(x) for x in batch]).asnumpy()
            bar.update(len(idx))
    return logits, time.perf_counter() - start


def softmax(logits):
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)
