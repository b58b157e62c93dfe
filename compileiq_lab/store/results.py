"""Results: a snapshot of a run's evaluations as a table, its best point and its exact Pareto front."""

from __future__ import annotations

import logging
import math
import numbers
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.search.config import SearchConfiguration
from compileiq_lab.search.conflicts import conflicts_in
from compileiq_lab.search.pareto import pareto_mask
from compileiq_lab.space.objectives import Objective, objectives_from_settings, signs
from compileiq_lab.space.space import SearchSpace
from compileiq_lab.store.header import RunHeader, Validation
from compileiq_lab.store.sqlite import MEMORY, EvalRecord, RunStore

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Results", "gpu_label", "load_results", "representative"]

log = logging.getLogger(__name__)


def representative(records: Sequence[EvalRecord]) -> EvalRecord:
    """The one evaluation that stands for several with identical scores: the fewest parameters set (the
    shortest compiler command line: every parameter present is an argument), then the earliest.

    The one rule for identical points: the CLI (tune, show, export), the report and the lab all use it.
    """
    return min(records, key=lambda r: (_n_set(r.params), r.eval_id))


def _n_set(params: Mapping[str, Any]) -> int:
    """Parameters set in a config, those of a nested group (``{"defines": {...}}``) counted one by one."""
    return sum(_n_set(v) if isinstance(v, Mapping) else 1 for v in params.values())


class Results:
    """Evaluations of one run, in call order: plain data; plots, influence and validation are functions over it
    (``compileiq_lab.viz``, ``compileiq_lab.analysis``).

    Args:
        records: The stored evaluations.
        directions: "min"/"max" per objective (or give ``objectives``).
        objective_names: Names per objective (defaults to score_1..score_k).
        objectives: The objectives (name, direction, unit); wins over ``directions``/``objective_names``.
        status: How the run ended ("finished", "interrupted", "exhausted", "running", ...); default: the header's.
        store_path: Where the run is stored (":memory:" if nowhere).
        header: The run's header (space, configuration, seed, ...).
    """

    def __init__(self, records: Sequence[EvalRecord], directions: Sequence[str] | None = None, *,
                 objective_names: Sequence[str] | None = None, objectives: Sequence[Objective] | None = None,
                 status: str | None = None, store_path: str = MEMORY, header: RunHeader | None = None) -> None:
        self.records = list(records)
        self.header = header if header is not None else RunHeader()
        if objectives is None:
            objectives = (objectives_from_settings(len(directions), directions, objective_names)
                          if directions is not None else self.header.objectives)
            widths = {len(r.scores) for r in self.records if r.scores is not None}
            if directions is None and len(widths) == 1 and widths != {len(objectives)}:
                objectives = objectives_from_settings(widths.pop())  # a header that lost its settings
        self.objectives: list[Objective] = list(objectives)
        self.status = status if status is not None else (self.header.status if header is not None else "finished")
        self.store_path = store_path
        #: What could not be read from a damaged store (empty when intact): these results hold the rest.
        self.damage: list[str] = []
        self._sign = signs(self.objectives)

    @classmethod
    def from_store(cls, store: RunStore) -> Results:
        """A snapshot of a run store's header and rows."""
        header = store.header() or RunHeader()
        results = cls(store.records(), header=header, status=header.status, store_path=store.path)
        results.damage = store.damage
        return results

    # -- what was measured -------------------------------------------------------------------
    @property
    def directions(self) -> list[str]:
        """"min"/"max" per objective."""
        return [o.direction for o in self.objectives]

    @property
    def objective_names(self) -> list[str]:
        """Objective names, in score order."""
        return [o.name for o in self.objectives]

    @property
    def n_objectives(self) -> int:
        """How many objectives the run has."""
        return len(self.objectives)

    def objective_index(self, which: int | str) -> int:
        """The index of an objective given by name or index.

        Raises:
            ConfigurationError: ``which`` names no objective of the run (the message lists them).
        """
        names = self.objective_names
        if isinstance(which, str) and which in names:
            return names.index(which)
        if isinstance(which, numbers.Integral) and not isinstance(which, bool) and 0 <= which < len(names):
            return int(which)
        raise ConfigurationError(f"objective must be one of {names} or an index below {len(names)}, but got "
                                 f"{which!r}")

    @property
    def validation(self) -> Validation | None:
        """The latest interleaved re-measurement of a GPU run (see ``compileiq_lab.analysis.validation``), or None."""
        return self.header.validation

    # -- tables ------------------------------------------------------------------------------
    def _row(self, r: EvalRecord) -> dict[str, Any]:
        row: dict[str, Any] = {"eval_id": r.eval_id, "generation": r.generation, "status": r.status,
                               "error": r.error}
        for i in range(self.n_objectives):
            row[f"score_{i + 1}"] = r.scores[i] if r.scores is not None else math.nan
        row.update(params=r.params, elapsed_s=r.elapsed_s, is_baseline=r.is_baseline,
                   started_at=r.started_at, detail=r.detail)
        return row

    def get_results(self, normalize: bool | None = None, detail: bool = False) -> pd.DataFrame:
        """One row per objective call, in call order.

        Args:
            normalize: Add ``norm_score_k = score_k / baseline score_k`` (1.0 = the compiler
                defaults; NaN where the baseline failed or scored 0); default: the run's
                ``SearchConfiguration(normalize=...)``.
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
        if normalize is None:
            normalize = bool(self.header.config.get("normalize"))
        if normalize:
            base = self.baseline_record
            if base is None:
                log.warning("normalised scores are NaN: the run has no baseline row (%s)", self._no_baseline_why())
            for i in range(self.n_objectives):
                b = base.scores[i] if base is not None and base.status == "ok" and base.scores else math.nan
                if not (isinstance(b, numbers.Real) and math.isfinite(b) and b != 0):
                    if base is not None:
                        log.warning("normalised scores are NaN: the baseline's score_%d is %s, which nothing divides "
                                    "by", i + 1, f"{b:g}" if isinstance(b, numbers.Real) and base.status == "ok"
                                    else f"missing (its status: {base.status})")
                    b = math.nan
                elif b < 0:
                    log.warning("normalised score_%d divides by the baseline's negative score (%g), which reverses its "
                                "order (a lower score gives a higher ratio); compare score_%d itself, or make the "
                                "objective positive", i + 1, b, i + 1)
                own = [_usable(s[i]) if s is not None and len(s) > i else b
                       for s in (_own_baseline(r) for r in self.records)]
                df[f"norm_score_{i + 1}"] = df[f"score_{i + 1}"] / pd.Series(own, index=df.index, dtype=float)
        return df

    def baseline_scores_of(self, rec: EvalRecord) -> list[float] | None:
        """The baseline scores a row compares with: those its own GPU measured (a run on several GPUs records them
        per row), else the run's baseline row's (None when it has no successful one)."""
        own = _own_baseline(rec)
        if own is not None:
            return own
        base = self.baseline_record
        return list(base.scores) if base is not None and base.status == "ok" and base.scores else None

    @property
    def baselines(self) -> dict[str, list[float]]:
        """The baseline scores per GPU that measured rows of this run (empty for a run measured on one device)."""
        out: dict[str, list[float]] = {}
        for r in self.records:
            own = _own_baseline(r)
            if own is not None:
                out.setdefault(gpu_label(r.detail.get("gpu")), own)
        return out

    def _no_baseline_why(self) -> str:
        blockers = SearchSpace.from_spec(self.header.space).baseline_blockers() if self.header.space else []
        if blockers:
            return (f"parameters {', '.join(blockers)} can be neither knocked out nor left at a default; declare "
                    "default= for them to get one")
        return "it was made with baseline=False" if self.header.config.get("baseline") is False else "none stored"

    @property
    def baseline_record(self) -> EvalRecord | None:
        """The stored evaluation of the baseline (compiler defaults), if the run made one."""
        return next((r for r in self.records if r.is_baseline), None)

    @property
    def baseline(self) -> dict[str, Any] | None:
        """The evaluation of the baseline (compiler defaults) as a row, if the run made one."""
        rec = self.baseline_record
        return self._row(rec) if rec is not None else None

    def record(self, eval_id: int) -> EvalRecord | None:
        """The stored evaluation with this id, or None."""
        return next((r for r in self.records if r.eval_id == eval_id), None)

    # -- best and front ----------------------------------------------------------------------
    def _ok(self) -> tuple[list[EvalRecord], np.ndarray]:
        ok = [r for r in self.records if r.status == "ok" and r.scores is not None]
        F = np.array([r.scores for r in ok], dtype=float).reshape(len(ok), self.n_objectives)
        return ok, F * self._sign

    def front_records(self) -> list[EvalRecord]:
        """The records on the exact Pareto front, in call order (see ``pareto_front``)."""
        ok, F = self._ok()
        return [r for r, keep in zip(ok, pareto_mask(F)) if keep]

    def pareto_front(self) -> list[dict[str, Any]]:
        """Every successful evaluation that no other one dominates, in call order.

        Exact: a point tied with another on some objectives and worse on one is dominated and
        left out; points with identical scores are all kept. With one objective this is every
        evaluation that reached the best score.
        """
        return [self._row(r) for r in self.front_records()]

    def distinct_front(self) -> list[tuple[EvalRecord, int]]:
        """The front with identical score vectors folded: each one's ``representative`` and how many other
        evaluations share its scores, in the order of the representatives' eval ids."""
        groups: dict[tuple[float, ...], list[EvalRecord]] = {}
        for rec in self.front_records():
            groups.setdefault(tuple(rec.scores or ()), []).append(rec)
        folded = [(representative(recs), len(recs) - 1) for recs in groups.values()]
        return sorted(folded, key=lambda pair: pair[0].eval_id)

    def learned_conflicts(self) -> list[str]:
        """What the search learned the compiler rejects or ignores, in words: the conflicts its failed compiles'
        messages name and the combinations its compiles were seen to ignore (see
        ``SearchConfiguration.learn_conflicts``); none for a run made without learning them."""
        if not self.header.config.get("learn_conflicts"):
            return []
        space = SearchSpace.from_spec(self.header.space)
        base = next((r for r in self.records if r.is_baseline), None)
        try:  # a baseline that was one of generation 1's candidates taught the search as they did
            config = SearchConfiguration.reopened(self.header.config)
            pooled = config.pools_baseline(space, base.params if base is not None else None)
        except (ConfigurationError, TypeError, ValueError):  # a damaged header: its searched rows alone
            pooled = False
        return conflicts_in(space, [(r.params, r.status, r.error, r.detail) for r in self.records
                                    if pooled or not r.is_baseline])

    def best_record(self, objective: int | str = 0) -> EvalRecord | None:
        """The best evaluation on one objective (index or name), ties broken first by the other objectives (a point
        on the front) and then by ``representative``; None if nothing succeeded."""
        objective = self.objective_index(objective)
        front = self.front_records()
        if not front:
            return None
        sign = self._sign[objective]
        best = min(sign * (r.scores or [0.0])[objective] for r in front)
        return representative([r for r in front if sign * (r.scores or [0.0])[objective] == best])

    def representative_of(self, eval_id: int) -> EvalRecord | None:
        """The ``representative`` of the successful evaluations whose scores equal this one's (itself when
        none does); None when the id names no successful evaluation."""
        rec = self.record(eval_id)
        if rec is None or rec.status != "ok" or rec.scores is None:
            return None
        return representative([rec, *self.identical_to(rec)])

    def identical_to(self, rec: EvalRecord) -> list[EvalRecord]:
        """The other successful evaluations with exactly ``rec``'s scores, in call order."""
        return [r for r in self.records
                if r.status == "ok" and r.scores == rec.scores and r.eval_id != rec.eval_id]

    def get_best_result(self) -> dict[str, Any] | list[dict[str, Any]] | None:
        """The best row (one objective; on ties the ``representative``) or the Pareto front (several); None if
        nothing succeeded."""
        if self.n_objectives > 1:
            return self.pareto_front()
        best = self.best_record(0)
        return self._row(best) if best is not None else None

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


def gpu_label(gpu: Any) -> str:
    """How a row's GPU is named: its worker and device name (``detail["gpu"]`` of a run on a cluster)."""
    if not isinstance(gpu, Mapping):
        return "?"
    return f"{gpu.get('worker') or '?'}: {gpu.get('name') or 'GPU'}"


def _own_baseline(rec: EvalRecord) -> list[float] | None:
    scores = rec.detail.get("baseline_scores") if isinstance(rec.detail, Mapping) else None
    if isinstance(scores, list) and all(isinstance(v, (int, float)) for v in scores):
        return [float(v) for v in scores]
    return None


def _usable(b: float) -> float:
    return b if math.isfinite(b) and b != 0 else math.nan
