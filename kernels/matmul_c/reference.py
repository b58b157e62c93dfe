"""NumPy reference of the matmul_c kernel: C = A @ B in float64."""

from __future__ import annotations

import numpy as np


def reference(inputs: dict[str, np.ndarray], params: dict[str, int]) -> dict[str, np.ndarray]:
    """Return {"C": A @ B}, computed in float64."""
    return {"C": inputs["A"].astype(np.float64) @ inputs["B"].astype(np.float64)}
