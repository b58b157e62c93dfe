"""Deterministic objectives with known optima: the quickstart toy and synthetic flag problems."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from compileiq_lab import space as ss

__all__ = ["FlagProblem", "toy_objective", "toy_space"]


def toy_space() -> dict[str, Any]:
    """The CompileIQ documentation's example space (optimum 2.0 at x=1.0, y=1)."""
    return {"x": ss.range(start=1.0, end=20.0, step=0.5), "y": ss.choice([1, 2, 3]),
            "z": ss.literal("this is a constant", knockout_prob=0.5)}


def toy_objective(config: dict[str, Any]) -> float:
    """``x**2 + y``; raises KeyError on the empty (baseline) config, as the documented example does."""
    return float(config["x"] ** 2 + config["y"])


@dataclass
class FlagProblem:
    """A synthetic compiler-flag problem: a runtime-like cost over on/off flags and ordered levels.

    A few flags help, a few hurt, one pair only helps together (an interaction), the level
    parameters have an interior optimum, and the rest do nothing, as on real flag spaces.

    Args:
        n_flags: Number of on/off flags.
        n_levels: Number of ordered level parameters (0..15, knock-out-able).
        seed: Seed for the effect sizes.
    """

    n_flags: int = 12
    n_levels: int = 3
    seed: int = 0
    effects: np.ndarray = field(init=False)
    level_opt: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        rng = np.random.default_rng(self.seed)
        eff = np.zeros(self.n_flags)
        k = max(2, self.n_flags // 4)
        eff[:k] = -rng.uniform(0.02, 0.08, size=k)          # helpful flags
        eff[k:2 * k] = rng.uniform(0.02, 0.10, size=k)      # harmful flags
        self.effects = eff
        self.level_opt = rng.integers(3, 13, size=self.n_levels)

    def space(self) -> dict[str, Any]:
        """The search space: ``f0..f{n-1}`` flags and ``L0..`` levels."""
        sp: dict[str, Any] = {f"f{i}": ss.flag(f"-f{i}") for i in range(self.n_flags)}
        sp.update({f"L{j}": ss.range(0, 15, knockout_prob=0.5) for j in range(self.n_levels)})
        return sp

    def __call__(self, config: dict[str, Any]) -> float:
        """Relative runtime (1.0 for the empty config); lower is better."""
        on = np.array([f"f{i}" in config for i in range(self.n_flags)])
        cost = 1.0 + float(self.effects[on].sum())
        if self.n_flags >= 2 * max(2, self.n_flags // 4) + 2:
            a, b = self.n_flags - 2, self.n_flags - 1
            cost -= 0.06 if (on[a] and on[b]) else 0.0   # only the pair helps
        for j in range(self.n_levels):
            level = config.get(f"L{j}", 8)  # absent: the compiler's default level 8
            cost += 0.004 * (level - self.level_opt[j]) ** 2 / 4
        return round(cost, 9)

    def optimum(self) -> float:
        """The exact minimum, by construction."""
        best = 1.0 + float(self.effects[self.effects < 0].sum())
        if self.n_flags >= 2 * max(2, self.n_flags // 4) + 2:
            best -= 0.06
        return round(best, 9)
