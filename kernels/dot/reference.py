"""NumPy reference of the dot kernel: the float64 dot product of two float32 vectors."""

from __future__ import annotations

import numpy as np


def reference(inputs: dict[str, np.ndarray], params: dict[str, int]) -> dict[str, np.ndarray]:
    """Return {"out": [x . y]}, the float32 products summed in float64."""
    return {"out": np.array([np.dot(inputs["x"].astype(np.float64), inputs["y"].astype(np.float64))])}
