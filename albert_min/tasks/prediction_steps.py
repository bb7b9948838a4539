"""What the task families' ``predict`` share: the model's eval-mode forward pass (compiled
once per model, ``prediction_engine.compiled``), batches of few distinct shapes, and the progress bar."""

import numpy as np

from .batching import bucket_length, pad_with_types


def forward_fn(model, use_jit=True):
    """The model's forward pass in eval mode, as a graph unless ``use_jit`` is False."""
    from .prediction_engine import compiled
    model.set_train(False)
    return compiled(model, use_jit)


def run(forward, arrays):
    """``forward`` on numpy arrays -> numpy outputs (one array, or a tuple of them)."""
    import mindspore as ms
    out = forward(*[ms.Tensor(a) for a in arrays])
    return tuple(o.asnumpy() for o in out) if isinstance(out, tuple) else out.asnumpy()


def padded(rows, types, pad_id, max_length, num_rows, use_jit):
    """(input_ids, token_type_ids, attention_mask), int32 ``(num_rows or len(rows), S)``.

    A compiled graph is made once per input shape, so with ``use_jit`` every batch has
    ``num_rows`` rows (filler rows the caller drops) and S is a bucket length (16, 32, 64...
    capped at ``max_length``): a dev set compiles a handful of shapes. PyNative pays for
    padding, not shapes: S is the longest row rounded up to 8.
    """
    if use_jit:
        length = bucket_length(max(len(r) for r in rows), max_length)
        return pad_with_types(rows, types, pad_id, length=length, num_rows=num_rows)
    return pad_with_types(rows, types, pad_id)


def chunks(items, size):
    """Lists of ``size`` consecutive items (the last one shorter) of any iterable."""
    chunk = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def progress_bar(total, unit, progress):
    """tqdm counting ``unit``s ("123 windows [00:04, 30.1 windows/s]"); ``total`` None when not
    known yet (a count and a rate, no ETA)."""
    from tqdm import tqdm
    return tqdm(total=total, desc="predicting", unit=f" {unit}s", disable=not progress)


def check_finite(array, where):
    """Non-finite model outputs are broken weights, never a score."""
    from ..model.folder import CheckpointError
    if not np.isfinite(array).all():
        raise CheckpointError(f"the model gives non-finite outputs (NaN/Inf) on {where}; its weights or "
                              "config are broken")


class Replay:
    """``predict``'s outputs where they are small (RACE's logits, CoNLL's word tags): batches
    are computed when first read and kept, so that ``score`` and ``write_predictions`` can
    each read the outputs of one prediction pass."""

    def __init__(self, batches):
        self._source, self._seen = iter(batches), []

    def __iter__(self):
        position = 0
        while True:
            if position == len(self._seen):
                item = next(self._source, self)   # self: the end of the source
                if item is self:
                    return
                self._seen.append(item)
            yield self._seen[position]
            position += 1
