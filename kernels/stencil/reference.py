"""NumPy reference of the stencil kernel: one 5-point Jacobi step with a fixed boundary."""

from __future__ import annotations

import numpy as np


def reference(inputs: dict[str, np.ndarray], params: dict[str, int]) -> dict[str, np.ndarray]:
    """Return {"v": one Jacobi step of u}, computed in float64; boundary cells keep u's values."""
    u = inputs["u"].astype(np.float64)
    v = u.copy()
    v[1:-1, 1:-1] = 0.25 * ((u[:-2, 1:-1] + u[2:, 1:-1]) + (u[1:-1, :-2] + u[1:-1, 2:]))
    return {"v": v}
