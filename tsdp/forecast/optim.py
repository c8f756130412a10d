"""Adam, as wrapped by Opacus' DPOptimizer in Schuchardt et al. (2025, section B.4.2): PyTorch's Adam
with L2 weight decay added to the (already privatised) gradient.

    g <- g + wd theta;  m <- b1 m + (1 - b1) g;  v <- b2 v + (1 - b2) g^2
    theta <- theta - lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)

(Kingma and Ba 2015, Algorithm 1). The update only post-processes the noisy gradient, so it costs no
privacy.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Adam:
    lr: float = 1e-3
    weight_decay: float = 1e-8
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    t: int = 0
    m: np.ndarray | None = field(default=None, repr=False)
    v: np.ndarray | None = field(default=None, repr=False)

    def step(self, theta: np.ndarray, grad: np.ndarray) -> np.ndarray:
        """Return the updated parameters (``theta`` is updated in place as well)."""
        if self.m is None:
            self.m = np.zeros_like(theta)
            self.v = np.zeros_like(theta)
        g = grad + self.weight_decay * theta if self.weight_decay else grad
        self.t += 1
        self.m *= self.beta1
        self.m += (1.0 - self.beta1) * g
        self.v *= self.beta2
        self.v += (1.0 - self.beta2) * g * g
        m_hat = self.m / (1.0 - self.beta1 ** self.t)
        v_hat = self.v / (1.0 - self.beta2 ** self.t)
        theta -= self.lr * m_hat / (np.sqrt(v_hat) + self.eps)
        return theta
