"""Pre-training as a task: n-gram masked LM plus a sentence objective (``sop``: ALBERT's
sentence order, ``nsp``: BERT's next sentence, ``mlm``: none) on one raw text file, scored
by held-out MLM accuracy. The objectives themselves are ``reading`` (documents),
``features`` (pairs, masks), ``loss`` and ``metric`` (held-out accuracy) beside this file.
"""

import random

import numpy as np

from ..errors import DataError
from ..task_base import Prepared, Task
from . import features, loss, metric, reading


OBJECTIVES = ("sop", "nsp", "mlm")
HELDOUT_FRACTION = 0.05   # share of the documents held out (at most pretraining.split_documents' 100)
# The fewest documents whose held-out share is 2 documents: NSP draws its negatives from another document.
MIN_DOCUMENTS = next(n for n in range(2, 1000) if round(n * HELDOUT_FRACTION) >= 2)


class PretrainingTask(Task):
    """``mask_prob``: the share of pieces masked in training; held-out masks stay at 15% so that
    held-out MLM accuracy compares across runs."""
    model_class = "AlbertForPreTraining"
    head_prefixes = ("predictions.", "sop_classifier.")
    inputs = ("text",)
    pretraining = True

    def __init__(self, name: str, mask_prob: float = features.MASK_PROB):
        if name not in OBJECTIVES:
            raise DataError(f"unknown pre-training objective {name!r}; choose from {', '.join(OBJECTIVES)}")
        if not 0.0 < mask_prob < 1.0:
            raise DataError(f"mask_prob must be in (0, 1), got {mask_prob!r}")
        self.name, self.mask_prob = name, mask_prob

    def read(self, path):
        documents = reading.read_documents(path)
        if len(documents) < MIN_DOCUMENTS:
            raise DataError(f"{path}: pre-training holds out {HELDOUT_FRACTION:.0%} of its documents (2 at least, for "
                            f"NSP's negatives) to score on, so it needs {MIN_DOCUMENTS}+ documents (a blank line "
                            f"between them), got {len(documents)}")
        return documents

    def tokenizer_text(self, documents):
        return [s for d in documents for s in d]

    def configure_model(self, config, documents):
        config.num_labels = 2   # the sentence objective's two classes

    def training_sets(self, train_examples, dev_examples, tokenizer, max_length, *, seed, batch_size):
        """Held-out DOCUMENTS of the one text file are the dev set (``dev_examples`` must be None)."""
        if dev_examples is not None:
            raise DataError("pre-training holds out part of its text as the dev set; it takes no dev file")
        train_docs, heldout_docs = reading.split_documents(train_examples, HELDOUT_FRACTION, random.Random(seed))
        train = self.prepare(train_docs, tokenizer, max_length)
        heldout_ids = [[tokenizer.encode_ids(s) for s in d] for d in heldout_docs]
        heldout = metric.HeldOut(heldout_ids, features.PretrainingBatcher(tokenizer, max_length),
                                      max_length, batch_size, seed)
        print(f"{len(train_docs)} training documents, {len(heldout_docs)} held out "
              f"({len(heldout.sets['sop'])} SOP + {len(heldout.sets['nsp'])} NSP pairs)", flush=True)
        return train, Prepared(heldout_docs, heldout, max_length)

    def prepare(self, documents, tokenizer, max_length):
        ids = [[tokenizer.encode_ids(s) for s in d] for d in documents]
        batcher = features.PretrainingBatcher(tokenizer, max_length, self.mask_prob)
        return Prepared(documents, {"ids": ids, "batcher": batcher}, max_length)

    def _epoch_examples(self, train, epoch, seed):
        # New cuts, swaps / negatives and masks every epoch from the same documents.
        examples = features.make_sentence_examples(self.name, train.features["ids"], train.max_length,
                                                      random.Random(seed + 1000 + epoch))
        random.Random(seed + epoch).shuffle(examples)
        return examples

    def steps_per_epoch(self, train, batch_size, seed, parallel):
        # Epoch 0's pair count; later epochs differ by a few cuts.
        return parallel.steps(len(self._epoch_examples(train, 0, seed)), batch_size)

    def train_batches(self, train, epoch, batch_size, seed, parallel):
        examples, rng = self._epoch_examples(train, epoch, seed), np.random.default_rng(seed + epoch)
        batcher = train.features["batcher"]
        for start in range(0, len(examples), batch_size):
            batch = batcher(examples[start:start + batch_size], rng, train.train_lengths)   # masks for the global batch
            rows = parallel.shard(len(batch[-1]))
            if rows is not None:
                yield self.split_batch(batch, rows) if parallel.size > 1 else batch

    def split_batch(self, batch, rows):
        return features.shard_batch(batch, rows)

    def loss_fn(self, model):
        return loss.make_loss_fn(model, self.name)

    def evaluate(self, model, dev, *, batch_size=64, use_jit=True, progress=False, parallel=None):
        return dev.features.evaluate(model, progress=progress, parallel=parallel)   # each worker a share

    def selection_score(self, metrics):
        return metrics["heldout_mlm_accuracy"]
