"""NumPy reference of the attention kernel: softmax(Q K^T / sqrt(d)) V in float64."""

from __future__ import annotations

import numpy as np


def reference(inputs: dict[str, np.ndarray], params: dict[str, int]) -> dict[str, np.ndarray]:
    """Return {"O": softmax(Q @ K.T / sqrt(head_dim)) @ V}, computed in float64."""
    q, k, v = (inputs[name].astype(np.float64) for name in ("Q", "K", "V"))
    s = q @ k.T / np.sqrt(params["head_dim"])
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return {"O": (p / p.sum(axis=1, keepdims=True)) @ v}
