"""LAMB (You et al. 2019, "Large Batch Optimization for Deep Learning"), the ALBERT paper's
pre-training optimizer, in MindSpore operations that run on every device.

MindSpore's own ``nn.Lamb`` computes its update with the fused ``Lamb`` kernel, which has no
CPU implementation ("Unsupported op [Lamb] on CPU"; the class is also marked deprecated).
This optimizer computes the same update as ``nn.Lamb``'s documented formula, per tensor:

    m = b1 m + (1 - b1) g            v = b2 v + (1 - b2) g^2
    r = (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
    u = r + weight_decay * w
    w = w - lr * (||w|| / ||u||) * u          (trust ratio 1 where either norm is 0)

Layer: ``albert_min.training``, above ``tasks`` (the layers: ``albert_min/__init__.py``).
"""

import numpy as np
import mindspore as ms
from mindspore import nn, ops


class Lamb(nn.Optimizer):
    """LAMB over ``params`` (a list of Parameters or of groups with their own ``weight_decay``,
    as ``nn.AdamWeightDecay`` takes them); ``learning_rate``: a number or a per-step schedule."""

    def __init__(self, params, learning_rate=1e-3, beta1=0.9, beta2=0.999, eps=1e-6, weight_decay=0.0):
        super().__init__(learning_rate, params, weight_decay)
        self.beta1 = ms.Tensor(np.array([beta1], np.float32))
        self.beta2 = ms.Tensor(np.array([beta2], np.float32))
        self.eps = ms.Tensor(np.array([eps], np.float32))
        self.moments1 = self._parameters.clone(prefix="lamb_m", init="zeros")
        self.moments2 = self._parameters.clone(prefix="lamb_v", init="zeros")

    def construct(self, gradients):
        weight_decay = self.get_weight_decay()
        lr = self.get_lr()
        self.assignadd(self.global_step, self.global_step_increase_tensor)
        step = self.global_step.astype(ms.float32)   # t, from 1
        correction1 = 1.0 - ops.pow(self.beta1, step)
        correction2 = 1.0 - ops.pow(self.beta2, step)
        updated = ()
        for i in range(len(self._parameters)):
            decay = weight_decay[i] if self.is_group else weight_decay
            updated += (self._update(self._parameters[i], self.moments1[i], self.moments2[i], gradients[i], lr,
                                     decay, correction1, correction2),)
        return updated

    def _update(self, w, m, v, g, lr, decay, correction1, correction2):
        m_new = self.beta1 * m + (1.0 - self.beta1) * g
        v_new = self.beta2 * v + (1.0 - self.beta2) * g * g
        u = (m_new / correction1) / (ops.sqrt(v_new / correction2) + self.eps) + decay * w
        w_norm, u_norm = ops.norm(w), ops.norm(u)
        trust = ops.select((w_norm > 0) & (u_norm > 0), w_norm / ops.maximum(u_norm, 1e-30), ops.ones_like(w_norm))
        ops.assign(m, m_new)
        ops.assign(v, v_new)
        return ops.assign(w, w - lr * trust * u)
