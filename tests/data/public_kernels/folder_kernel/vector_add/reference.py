"""NumPy reference of the cuda-samples vectorAdd kernel: C = A + B, element by element."""

from __future__ import annotations

import numpy as np


def reference(inputs: dict[str, np.ndarray], params: dict[str, int]) -> dict[str, np.ndarray]:
    """Return {"C": A + B}, added in float64."""
    return {"C": inputs["A"].astype(np.float64) + inputs["B"].astype(np.float64)}
