"""Reference of the test kernel: y = 2 x."""

from __future__ import annotations

import numpy as np


def reference(inputs: dict[str, np.ndarray], params: dict[str, int]) -> dict[str, np.ndarray]:
    """Return {"y": 2 x}."""
    return {"y": 2.0 * inputs["x"]}
