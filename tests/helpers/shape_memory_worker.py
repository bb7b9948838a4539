"""Run by tests/training/test_batch_shapes.py in a fresh process: the resident memory that each new batch
shape of a compiled train step keeps.

A tiny model's train step runs first on the longest batch (the memory pool grows to its size),
then on shorter batches of as many new lengths, each a new compiled graph; prints one JSON object:
the resident MB before and after the new lengths, and how many there were.

    python3 tests/helpers/shape_memory_worker.py [LONGEST] [NEW_LENGTHS]
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
os.environ.setdefault("GLOG_v", "3")


def resident_mb():
    with open("/proc/self/status") as f:
        return int(f.read().split("VmRSS:")[1].split()[0]) / 1e3


def main(longest=256, new_lengths=5, rows=32):
    import mindspore as ms
    import numpy as np
    from albert_min.common.device import set_cpu_threads, use_device
    from albert_min.model.config import AlbertConfig
    from albert_min.model import kernels
    from albert_min.model.heads import AlbertForQuestionAnswering
    from albert_min.tasks.squad.loss import make_qa_loss_fn
    from albert_min.training.step import make_optimizer, make_train_step, reseed_dropout
    use_device("CPU")
    set_cpu_threads(1)
    ms.set_seed(0)
    model = AlbertForQuestionAnswering(AlbertConfig(
        vocab_size=100, embedding_size=16, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=longest, hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1))
    kernels.accelerate(model)             # the kernels' head swap and products keep no index tables
    model.set_train(True)
    reseed_dropout(model, 0, 0)
    step = make_train_step(make_qa_loss_fn(model), make_optimizer(model, np.full(8, 1e-3, np.float32), 0.0), 1.0)
    rng = np.random.default_rng(0)

    def train_on(length):
        ids = rng.integers(4, 100, (rows, length)).astype(np.int32)
        mask = np.ones_like(ids)
        mask[:, length // 2:] = rng.integers(0, 2, (rows, length - length // 2))   # some padding keys
        positions = rng.integers(0, length, (2, rows)).astype(np.int32)
        return float(step(*[ms.Tensor(a) for a in (ids, np.zeros_like(ids), mask, *positions)]).asnumpy())

    train_on(longest)
    train_on(longest)
    before = resident_mb()
    for i in range(1, new_lengths + 1):
        train_on(longest - 8 * i)
    print(json.dumps({"before_mb": before, "after_mb": resident_mb(), "new_lengths": new_lengths}))


if __name__ == "__main__":
    main(*[int(a) for a in sys.argv[1:]])
