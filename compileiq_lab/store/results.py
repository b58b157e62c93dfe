"""Results: the evaluations of a run as a table, its best point and its exact Pareto front."""

from __future__ import annotations

import logging
import math
import numbers
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from compileiq_lab.search.pareto import pareto_mask
from compileiq_lab.store.sqlite import EvalRecord, RunStore

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Results", "load_results"]

log = logging.getLogger(__name__)


class Results:
    """Evaluations of one run, in call order.

    Args:
        records: The stored evaluations.
        directions: "min"/"max" per objective.
        objective_names: Display names per objective (defaults to score_1..score_k).
        status: How the run ended ("finished", "interrupted", "exhausted", "running", ...).
        store_path: Where the run is stored (":memory:" if nowhere).
        header: The store header (space, configuration, seed, ...).
    """

    def __init__(self, records: Sequence[EvalRecord], *, directions: Sequence[str],
                 objective_names: Sequence[str] | None = None, status: str = "finished",
                 store_path: str = ":memory:", header: dict[str, Any] | None = None) -> None:
        self.records = list(records)
        self.directions = list(directions)
        self.n_objectives = len(self.directions)
        self.objective_names = list(objective_names) if objective_names else [
            f"score_{i + 1}" for i in range(self.n_objectives)]
        self.status = status
        self.store_path = store_path
        self.header = header or {}
        self._sign = np.array([1.0 if d == "min" else -1.0 for d in self.directions])

    @classmethod
    def from_store(cls, store: RunStore) -> "Results":
        """Build from a run store's header and rows."""
        h = store.header()
        cfg = h.get("config", {})
        n = cfg.get("num_objectives", 1)
        pt = cfg.get("problem_type", "min")
        directions = [pt] * n if isinstance(pt, str) else list(pt)
        return cls(store.records(), directions=directions, objective_names=cfg.get("objective_names"),
                   status=h.get("status", "unknown"), store_path=store.path, header=h)

    # -- tables ------------------------------------------------------------------------------
    def _row(self, r: EvalRecord) -> dict[str, Any]:
        row: dict[str, Any] = {"eval_id": r.eval_id, "generation": r.generation, "status": r.status,
                               "error": r.error}
        for i in range(self.n_objectives):
            row[f"score_{i + 1}"] = r.scores[i] if r.scores is not None else math.nan
        row.update(params=r.params, elapsed_s=r.elapsed_s, is_baseline=r.is_baseline,
                   started_at=r.started_at, detail=r.detail)
        return row

    def get_results(self, normalize: bool = False, detail: bool = False) -> "pd.DataFrame":
        """One row per objective call, in call order.

        Args:
            normalize: Add ``norm_score_k = score_k / baseline score_k`` (1.0 = the compiler
                defaults; NaN where the baseline failed or scored 0).
            detail: Add a ``detail`` column (tracebacks, compiler output, extra metrics).

        Returns:
            A DataFrame with eval_id, generation, status, error, score_1..score_k, params,
            elapsed_s, is_baseline and started_at.
        """
        import pandas as pd

        cols = ["eval_id", "generation", "status", "error",
                *[f"score_{i + 1}" for i in range(self.n_objectives)],
                "params", "elapsed_s", "is_baseline", "started_at"] + (["detail"] if detail else [])
        df = pd.DataFrame([self._row(r) for r in self.records], columns=cols)
        df["eval_id"] = df["eval_id"].astype("int64")
        df["generation"] = df["generation"].astype("int64")
        if normalize:
            base = self.baseline
            for i in range(self.n_objectives):
                b = base[f"score_{i + 1}"] if base and base["status"] == "ok" else math.nan
                if not (isinstance(b, numbers.Real) and math.isfinite(b) and b != 0):
                    if base is not None:
                        log.warning("baseline has no usable score_%d (%s); normalised scores are NaN",
                                    i + 1, base["status"] if base else "missing")
                    b = math.nan
                df[f"norm_score_{i + 1}"] = df[f"score_{i + 1}"] / b
        return df

    @property
    def baseline(self) -> dict[str, Any] | None:
        """The evaluation of the empty config (compiler defaults), if the run made one."""
        for r in self.records:
            if r.is_baseline:
                return self._row(r)
        return None

    # -- best and front ----------------------------------------------------------------------
    def _ok(self) -> tuple[list[EvalRecord], np.ndarray]:
        ok = [r for r in self.records if r.status == "ok" and r.scores is not None]
        F = np.array([r.scores for r in ok], dtype=float).reshape(len(ok), self.n_objectives)
        return ok, F * self._sign

    def pareto_front(self) -> list[dict[str, Any]]:
        """Every successful evaluation that no other one dominates, in call order.

        Exact: a point tied with another on some objectives and worse on one is dominated and
        left out; points with identical scores are all kept. With one objective this is every
        evaluation that reached the best score.
        """
        ok, F = self._ok()
        return [self._row(r) for r, keep in zip(ok, pareto_mask(F)) if keep]

    def get_best_result(self) -> dict[str, Any] | list[dict[str, Any]] | None:
        """The best row (one objective; earliest on ties) or the Pareto front (several); None if nothing succeeded."""
        if self.n_objectives > 1:
            return self.pareto_front()
        ok, F = self._ok()
        if not ok:
            return None
        return self._row(ok[int(np.argmin(F[:, 0]))])

    @property
    def validation(self) -> Any:
        """The latest interleaved re-measurement of a GPU run (``compileiq_lab.analysis.validation.Validation``), or None."""
        from compileiq_lab.analysis.validation import HEADER_KEY, Validation

        stored = self.header.get(HEADER_KEY)
        return Validation.from_dict(stored) if stored else None

    # -- static figures (plotly) ----------------------------------------------------------------
    def plot_pareto(self, x: int | str = 0, y: int | str = 1) -> Any:
        """The Pareto scatter of objective ``x`` against ``y`` as a plotly Figure (the dashboard's view, static)."""
        from compileiq_lab.viz.figures import pareto_figure

        return pareto_figure(self, x, y)

    def plot_history(self) -> Any:
        """Best-so-far and median per generation per objective, and failures, as a plotly Figure."""
        from compileiq_lab.viz.figures import history_figure

        return history_figure(self)

    def control_influence(self, objective: int | str = 0, **options: Any) -> "pd.DataFrame":
        """Per-control influence on an objective with uncertainty ("not explored" where a control never
        varied); see ``compileiq_lab.analysis.influence.control_influence`` (needs scikit-learn)."""
        from compileiq_lab.analysis.influence import control_influence

        return control_influence(self, objective, **options)

    # -- summaries ---------------------------------------------------------------------------
    def status_counts(self) -> dict[str, int]:
        """Number of evaluations per status."""
        counts: dict[str, int] = {}
        for r in self.records:
            counts[r.status] = counts.get(r.status, 0) + 1
        return counts

    def __len__(self) -> int:
        return len(self.records)

    def __repr__(self) -> str:
        return (f"Results({len(self)} evaluations, status={self.status!r}, "
                f"statuses={self.status_counts()}, store={self.store_path!r})")


def load_results(path: str) -> Results:
    """Open a stored run read-only as Results.

    Args:
        path: The run's .db file.
    """
    store = RunStore(path, readonly=True)
    try:
        return Results.from_store(store)
    finally:
        store.close()
