"""Held-out MLM, SOP and NSP accuracy: fixed pairs and masks from held-out documents (the
paper's Table 5: every model scored on both sentence tasks).
"""

import random

import mindspore as ms
import numpy as np

from ...common.parallel import SingleProcess
from .features import make_nsp_examples, make_sop_examples
from .loss import masked_lm_logits


SCORES = ("mlm", "sop", "nsp")   # the held-out accuracies, every model on both sentence tasks


class HeldOut:
    """Fixed held-out SOP and NSP pairs, with fixed masks, from held-out documents."""

    def __init__(self, documents_ids, batcher, max_length, batch_size, seed):
        self.batcher, self.batch_size = batcher, batch_size
        self.sets = {"sop": make_sop_examples(documents_ids, max_length, random.Random(seed)),
                     "nsp": make_nsp_examples(documents_ids, max_length, random.Random(seed))}
        self.batches = {name: self._batches(examples, np.random.default_rng(seed))
                        for name, examples in self.sets.items()}

    def _batches(self, examples, rng):
        return [self.batcher(examples[i:i + self.batch_size], rng) for i in range(0, len(examples), self.batch_size)]

    def counts(self, model, rank=0, size=1, progress=True):
        """``[[right], [total]]`` for each of ``SCORES`` over every ``size``-th held-out batch from
        ``rank`` (MLM over both sets): data-parallel workers each score a share, and the sums are the whole's."""
        from tqdm import tqdm
        model.set_train(False)
        right = dict.fromkeys(SCORES, 0)
        total = dict.fromkeys(SCORES, 0)
        jobs = [(name, batch) for name, batches in self.batches.items() for batch in batches][rank::size]
        for name, (ids, tt, am, flat_pos, mlm_ids, weights, labels) in tqdm(
                jobs, desc="held-out", unit="batch", disable=not progress, leave=False):
            sequence_output, pooled = model.albert(ms.Tensor(ids), ms.Tensor(tt), ms.Tensor(am))
            predicted = masked_lm_logits(model, sequence_output, ms.Tensor(flat_pos)).asnumpy().argmax(-1)
            used = weights > 0
            right["mlm"] += int((predicted[used] == mlm_ids[used]).sum())
            total["mlm"] += int(used.sum())
            right[name] += int((model.sop_classifier(pooled).asnumpy().argmax(-1) == labels).sum())
            total[name] += len(labels)
        return np.array([[right[k] for k in SCORES], [total[k] for k in SCORES]])

    def evaluate(self, model, progress=True, parallel=None):
        """{"heldout_mlm_accuracy", "heldout_sop_accuracy", "heldout_nsp_accuracy"}. With ``parallel``
        (albert_min.common.parallel), each worker scores its share of the batches and the counts are summed."""
        parallel = parallel or SingleProcess()
        right, total = parallel.sum(self.counts(model, parallel.rank, parallel.size, progress))
        return {f"heldout_{k}_accuracy": float(r) / max(1, float(t)) for k, r, t in zip(SCORES, right, total)}
