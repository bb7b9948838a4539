"""albert_min/training/step.py: the global-norm clipping of the train step."""

import numpy as np
import mindspore as ms
import pytest
from mindspore import ops

from albert_min.training.step import clip_by_global_norm


def gradients(scale):
    """Gradient-shaped tensors (a size not a multiple of 256 among them), values times ``scale``."""
    rng = np.random.default_rng(0)
    return tuple(ms.Tensor((scale * rng.standard_normal(shape)).astype(np.float32))
                 for shape in ((300, 128), (768,), (2,), (7, 3)))


@ms.jit
def clipped(grads, max_norm):
    return clip_by_global_norm(grads, max_norm)


@pytest.mark.parametrize("scale", [1.0, 1e-3])
def test_above_the_norm_every_gradient_is_scaled_by_one_factor(scale):
    grads = gradients(scale)
    norm = np.sqrt(sum(np.sum(g.asnumpy().astype(np.float64) ** 2) for g in grads))
    max_norm = 0.25 * norm
    ours = [c.asnumpy() for c in clipped(grads, max_norm)]
    for c, g in zip(ours, grads, strict=True):
        np.testing.assert_allclose(c, g.asnumpy() * (max_norm / norm), rtol=2e-6, atol=0)
    mindspore = ops.clip_by_global_norm(grads, float(max_norm))     # what it replaces: the same to float32 rounding
    for c, m in zip(ours, mindspore, strict=True):
        np.testing.assert_allclose(c, m.asnumpy(), rtol=2e-6, atol=0)
    total = np.sqrt(sum(np.sum(c.astype(np.float64) ** 2) for c in ours))
    assert abs(total - max_norm) <= 1e-5 * max_norm


def test_within_the_norm_the_gradients_are_unchanged_bit_for_bit():
    grads = gradients(1e-3)
    for c, g in zip(clipped(grads, 1e3), grads, strict=True):
        assert np.array_equal(c.asnumpy(), g.asnumpy())
