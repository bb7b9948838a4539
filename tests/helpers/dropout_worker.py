"""A child process for tests/model/kernels/test_dropout.py: prints, as one JSON line, MindSpore's CPU thread count
here and SHA-256s of (a) the kernels' dropout masks of a few calls and (b) the weights and losses of
three train steps of a small ALBERT with dropout, so that runs at other thread counts compare.

    ALBERT_MIN_CPU_THREADS=2 python tests/helpers/dropout_worker.py [kernel threads]
"""

import hashlib
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from albert_min.common.device import cpu_threads, use_device  # noqa: E402
from albert_min.model import kernels  # noqa: E402

use_device("CPU", cpu_setup=kernels.prepare_cpu)

import mindspore as ms  # noqa: E402
from mindspore import ops  # noqa: E402

from albert_min.model.config import AlbertConfig  # noqa: E402
from albert_min.model.heads import AlbertForSequenceClassification  # noqa: E402
from albert_min.training.step import (kernel_dropouts, linear_warmup_decay, make_optimizer,  # noqa: E402
                                      make_train_step, start_dropout_step)


def digest(arrays):
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def main():
    if len(sys.argv) > 1:
        kernels.set_kernel_threads(int(sys.argv[1]))
    config = AlbertConfig(vocab_size=300, embedding_size=64, hidden_size=128, num_hidden_layers=2,
                          num_attention_heads=4, intermediate_size=512, hidden_dropout_prob=0.1,
                          attention_probs_dropout_prob=0.1, classifier_dropout_prob=0.1, num_labels=2)
    ms.set_seed(0)
    model = kernels.accelerate(AlbertForSequenceClassification(config))
    dropout = kernel_dropouts(model)[0]
    dropout.set_train(True)
    start_dropout_step(seed=7, step=3)
    ones = ms.Tensor(np.ones((64, 4, 32, 32), np.float32))              # 262144 elements: split over threads
    masks = [dropout(ones).asnumpy() for _ in range(3)]

    model.set_train(True)
    optimizer = make_optimizer(model, linear_warmup_decay(1e-3, 3, 0.1), 0.01)
    rng = np.random.default_rng(0)

    def loss_fn(ids, mask, labels):
        return ops.cross_entropy(model(ids, None, mask), labels)
    step = make_train_step(loss_fn, optimizer, 1.0)
    losses = []
    for index in range(3):
        ids = rng.integers(5, config.vocab_size, (64, 32)).astype(np.int32)
        mask = np.ones_like(ids)
        mask[::3, 20:] = 0
        labels = rng.integers(0, 2, 64).astype(np.int32)
        start_dropout_step(seed=7, step=index)
        losses.append(float(step(ms.Tensor(ids), ms.Tensor(mask), ms.Tensor(labels)).asnumpy()))
    print(json.dumps({"threads": cpu_threads(), "dropout": type(dropout).__name__, "masks": digest(masks),
                      "kept": float(np.mean([m != 0 for m in masks])),
                      "weights": digest([p.asnumpy() for p in model.trainable_params()]), "losses": losses}))


if __name__ == "__main__":
    main()
