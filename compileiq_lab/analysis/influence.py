"""Which controls matter: a random-forest model of an objective vs the controls, with grouped permutation importance."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import numpy as np

from compileiq_lab.analysis.table import control_columns, ok_records
from compileiq_lab.exceptions import ConfigurationError, OptionalDependencyError

if TYPE_CHECKING:
    import pandas as pd

    from compileiq_lab.store.results import Results

__all__ = ["MIN_EVALUATIONS", "control_influence", "control_interactions"]

log = logging.getLogger(__name__)
#: Fewer successful evaluations than this give no influence estimate.
MIN_EVALUATIONS = 12


def _design(results: Results, objective: int | str) -> tuple[np.ndarray, np.ndarray, list[str], list[int], str]:
    """Features (one column per control: numbers, or codes with "default" = knocked out), target, names,
    distinct values per control and the objective's name. Positive skewed targets are modelled in log."""
    names = results.objective_names
    k = results.objective_index(objective)
    controls = control_columns(results)
    y = np.asarray([(r.scores or [])[k] for r in ok_records(results)], dtype=float)
    if len(y) < MIN_EVALUATIONS:
        raise ConfigurationError(f"control influence needs at least {MIN_EVALUATIONS} successful evaluations, "
                                 f"but the run has {len(y)}; run more generations first")
    X = np.column_stack([np.asarray(c["values"], dtype=float) for c in controls]) if controls else np.empty((len(y), 0))
    distinct = [len(set(map(repr, c["raw"]))) for c in controls]
    if np.all(y > 0) and y.max() / y.min() > 10:
        y = np.log(y)
    return X, y, [c["name"] for c in controls], distinct, names[k]


def _forest(seed: int, n_trees: int) -> Any:
    try:
        from sklearn.ensemble import RandomForestRegressor
    except ImportError:
        raise OptionalDependencyError("control influence needs scikit-learn: "
                                      "pip install 'compileiq-lab[lab]'") from None
    return RandomForestRegressor(n_estimators=n_trees, min_samples_leaf=2, random_state=seed, n_jobs=1)


def _permutation_loss(model: Any, X: np.ndarray, y: np.ndarray, cols: list[int], rng: np.random.Generator,
                      base_mse: float) -> float:
    Xp = X.copy()
    perm = rng.permutation(len(X))
    Xp[:, cols] = X[perm][:, cols]
    return float(np.mean((model.predict(Xp) - y) ** 2) - base_mse)


def _bootstrap_importances(results: Results, objective: int | str, groups: list[list[int]] | None, rounds: int,
                           n_trees: int, seed: int) -> tuple[np.ndarray, list[str], list[int], str, float]:
    """Permutation importance of each column group on out-of-bag rows of ``rounds`` bootstrap forests,
    as a share of the target's variance: array (rounds, groups)."""
    X, y, names, distinct, objective_name = _design(results, objective)
    groups = groups if groups is not None else [[j] for j in range(X.shape[1])]
    rng = np.random.default_rng(seed)
    var = float(np.var(y)) or 1.0
    out = np.full((rounds, len(groups)), np.nan)
    fits = []
    for b in range(rounds):
        idx = rng.integers(0, len(y), len(y))
        oob = np.setdiff1d(np.arange(len(y)), idx)
        if len(oob) < 3:
            continue
        model = _forest(seed + b, n_trees).fit(X[idx], y[idx])
        base = float(np.mean((model.predict(X[oob]) - y[oob]) ** 2))
        fits.append(1 - base / var)
        for g, cols in enumerate(groups):
            out[b, g] = _permutation_loss(model, X[oob], y[oob], cols, rng, base) / var
    return out, names, distinct, objective_name, float(np.mean(fits)) if fits else float("nan")


def control_influence(results: Results, objective: int | str = 0, rounds: int = 10, n_trees: int = 100,
                      seed: int = 0) -> pd.DataFrame:
    """How much each control moves an objective, with uncertainty.

    A random forest is fitted to the run's successful evaluations (objective vs controls; a
    knocked-out control is its own value "default"; an objective spanning more than a factor of
    10 is modelled in log). A control's influence is the rise of the out-of-bag squared error
    when its column is shuffled, relative to the objective's variance (0: no effect; shuffling
    a control that explains everything gives about 2), averaged over
    ``rounds`` bootstrap fits; ``low``/``high`` are the 10th and 90th percentiles over them. A
    control that took one value in the whole run is reported as "not explored" (its influence is
    unknown, not zero).

    Args:
        results: The run.
        objective: Objective name or index.
        rounds: Bootstrap fits (uncertainty).
        n_trees: Trees per forest.
        seed: For the bootstraps, forests and shuffles.

    Returns:
        A DataFrame sorted by influence: control, influence, low, high, status ("explored"/"not
        explored"), values (distinct values seen), with ``attrs`` holding the objective and the
        model's out-of-bag R^2 (``r2``).

    Raises:
        ConfigurationError: Too few successful evaluations, or an unknown objective.
        OptionalDependencyError: scikit-learn is missing.
    """
    import pandas as pd

    imp, names, distinct, objective_name, r2 = _bootstrap_importances(results, objective, None, rounds, n_trees, seed)
    rows = []
    for j, name in enumerate(names):
        explored = distinct[j] > 1
        v = imp[:, j][~np.isnan(imp[:, j])] if explored else np.array([])
        rows.append({"control": name, "influence": float(np.mean(v)) if len(v) else float("nan"),
                     "low": float(np.percentile(v, 10)) if len(v) else float("nan"),
                     "high": float(np.percentile(v, 90)) if len(v) else float("nan"),
                     "status": "explored" if explored else "not explored", "values": distinct[j]})
    df = pd.DataFrame(rows, columns=["control", "influence", "low", "high", "status", "values"])
    df = df.sort_values(["status", "influence"], ascending=[True, False], na_position="last").reset_index(drop=True)
    df.attrs.update(objective=objective_name, r2=r2, evaluations=int(sum(r.status == "ok" for r in results.records)))
    return df


def _centered_pd(model: Any, X: np.ndarray, bg: np.ndarray, cols: list[int]) -> np.ndarray:
    """Partial dependence of the model on ``cols`` at each row of ``X`` (averaged over background rows ``bg``),
    centred."""
    grid = np.repeat(bg[None, :, :], len(X), axis=0)  # (n, m, p)
    grid[:, :, cols] = X[:, None, cols]
    pd_ = np.asarray(model.predict(grid.reshape(-1, X.shape[1]))).reshape(len(X), len(bg)).mean(axis=1)
    centred: np.ndarray = pd_ - pd_.mean()
    return centred


def control_interactions(results: Results, objective: int | str = 0, top: int = 5, rounds: int = 5,
                         n_trees: int = 100, seed: int = 0, sample: int = 60) -> pd.DataFrame:
    """The strongest pairwise interactions among the ``top`` most influential explored controls.

    Friedman's H statistic on the forest: the share of the joint partial dependence of two
    controls that their separate partial dependences do not explain (0: their effects add up;
    towards 1: they act only jointly), computed on ``sample`` rows per bootstrap fit, averaged
    over ``rounds`` fits (with 10th/90th percentiles).

    Returns:
        A DataFrame sorted by interaction: control_a, control_b, interaction, low, high.
    """
    import pandas as pd

    ranked = control_influence(results, objective, rounds=max(3, rounds), n_trees=n_trees, seed=seed)
    chosen = list(ranked.loc[ranked["status"] == "explored", "control"].head(top))
    X, y, names, _, _ = _design(results, objective)
    cols = [names.index(c) for c in chosen]
    pairs = [(a, b) for i, a in enumerate(cols) for b in cols[i + 1:]]
    rng = np.random.default_rng(seed)
    h = np.full((rounds, len(pairs)), np.nan)
    for r in range(rounds):
        idx = rng.integers(0, len(y), len(y))
        model = _forest(seed + 100 + r, n_trees).fit(X[idx], y[idx])
        rows = X[rng.choice(len(y), min(sample, len(y)), replace=False)]
        single = {c: _centered_pd(model, rows, rows, [c]) for c in cols}
        for p, (a, b) in enumerate(pairs):
            joint = _centered_pd(model, rows, rows, [a, b])
            denom = float(np.sum(joint ** 2))
            h[r, p] = float(np.sum((joint - single[a] - single[b]) ** 2)) / denom if denom > 0 else 0.0
    out = [{"control_a": names[a], "control_b": names[b], "interaction": float(np.mean(h[:, p])),
            "low": float(np.percentile(h[:, p], 10)), "high": float(np.percentile(h[:, p], 90))}
           for p, (a, b) in enumerate(pairs)]
    df = pd.DataFrame(out, columns=["control_a", "control_b", "interaction", "low", "high"])
    return df.sort_values("interaction", ascending=False).reset_index(drop=True)
