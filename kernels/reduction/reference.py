"""NumPy reference of the reduction kernel: the float64 sum of x."""

from __future__ import annotations

import numpy as np


def reference(inputs: dict[str, np.ndarray], params: dict[str, int]) -> dict[str, np.ndarray]:
    """Return {"out": [sum(x)]}, summed in float64."""
    return {"out": np.array([inputs["x"].astype(np.float64).sum()])}
