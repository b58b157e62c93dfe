"""SearchConfiguration: how long and how a search runs, validated with actionable messages."""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.search.factory import STRATEGIES
from compileiq_lab.space.grid import plain
from compileiq_lab.space.objectives import Objective, objectives_from_settings

if TYPE_CHECKING:
    from compileiq_lab.space.space import SearchSpace

__all__ = ["MAX_GENERATIONS", "MAX_OBJECTIVES", "MAX_POOL_SIZE", "MAX_WARM_START", "MODELS", "TRAJECTORY_KEYS",
           "ResolvedConfiguration", "SearchConfiguration", "default_pool_size"]

#: The largest pool_size: the strategies hold several arrays of pool_size genomes per generation (4x with the
#: surrogate), and every candidate is compiled and measured; real pools hold 4-64.
MAX_POOL_SIZE = 100_000
#: The most generations a run may ask for (each one compiles pool_size candidates; real runs ask for 5-200).
MAX_GENERATIONS = 1_000_000
#: The most objectives (one Objective and one score column each; NSGA-II ranks poorly past a handful).
MAX_OBJECTIVES = 100
#: The most warm-start configs (each is encoded and held; they open the first generation, so more than
#: MAX_POOL_SIZE could never all be asked first).
MAX_WARM_START = MAX_POOL_SIZE

_DIRECTIONS = ("min", "max")
# settings that change which candidates the strategy asks for: a resumed run must keep them
TRAJECTORY_KEYS = ("pool_size", "problem_type", "num_objectives", "seed", "mutate_rate",
                   "crossover_rate", "strategy", "baseline", "warm_start", "surrogate", "normalize", "asynchronous",
                   "model", "learn_conflicts", "baseline_in_pool")
#: The offspring screens of GA/NSGA-II runs: "density" (the default) or "none".
MODELS = ("density", "none")
#: CompileIQ 1.1 settings that have no effect there either: accepted (with a warning naming what does the job here).
RETIRED = {
    "cull_size": "the GA keeps the pool_size best of parents and offspring (elitist survival); set pool_size",
    "objective_weights": "NSGA-II ranks by Pareto dominance; pick a point off the front instead of weighting",
    "init_with_true_random_threshold": "ss.range(seed_low=, seed_high=) bound every initial sample",
    "enable_large_fail_pool": "failed candidates are infeasible and replaced by the next generation",
}
#: Settings stored only when given (so runs that never use them store what earlier versions stored).
_OPTIONAL = ("normalize", "max_evaluations", "time_budget_s", *RETIRED)


#: With one objective, spaces of up to this many genes (the largest measured) get SMALL_POOL_SIZE candidates per
#: generation.
SMALL_SPACE_GENES = 32
SMALL_POOL_SIZE = 5


def default_pool_size(n_genes: int, n_objectives: int = 1) -> int:
    """Pool size used when none is given: ``SMALL_POOL_SIZE`` for one objective on a space of at most
    ``SMALL_SPACE_GENES`` genes, else ``min(16, max(8, 4 + n_genes // 3))``.

    Chosen by measurement, when a generation was always picked whole (before it was picked one at a time with one
    evaluation slot). A small pool refits the offspring screen more often: on the tune half of the real-compiler
    tables (bench/tables, 5-7 controls, one objective, 80 seeds) a pool of 8 needed 107 / 105 calls
    to the optimum in sum (catalog / plain space), 5 needed 97 / 97 and 4 95 / 103; the seed toy 28 calls at 8 and
    20 at 5; on the 18- and 32-gene flag problems of bench/bench_defaults.py (40 seeds) 5 had a lower regret at 100,
    200 and 400 calls than the earlier default (10 and 14 there). A front needs a population: the multi-objective
    tables lost hypervolume at a pool of 4, so several objectives keep 8 or more. Measured again once a generation
    was picked one at a time (tune half, seeds 400-459, paired by seed, catalog / plain space,
    bench/results/variants_pool.md): a pool of 3 took 0.99 (90 % interval 0.91-1.08) / 1.24 (1.11-1.36) times the
    calls of 5, 4 took 1.08 (1.00-1.16) / 1.05 (0.94-1.17) and 8 1.02 (0.93-1.11) / 1.12 (1.02-1.23): 5 stays.
    Nor does it grow with the space's size: with the tune half's two tables of 15,120 configs added (six controls,
    bench/results/variants_pool_wide.md, same seeds) a pool of 8 took 1.04 (0.95-1.13) / 1.09 (1.00-1.20), 12
    1.15 (1.07-1.23) / 1.17 (1.06-1.28) and 16 1.22 (1.12-1.31) / 1.19 (1.10-1.29) times the calls of 5, on those
    two tables as on the small ones.
    """
    if n_objectives == 1 and n_genes <= SMALL_SPACE_GENES:
        return SMALL_POOL_SIZE
    return int(min(16, max(8, 4 + n_genes // 3)))


def _fail(rule: str, got: str, fix: str) -> ConfigurationError:
    return ConfigurationError(f"SearchConfiguration: `{rule}` must hold, but got {got}. {fix}")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


@dataclass
class SearchConfiguration:
    """How a search runs.

    Args:
        generations: Number of generations of ``pool_size`` candidates. The baseline call comes before
            generation 1 and, when the baseline is a point of the space, is one of generation 1's candidates (see
            ``baseline_in_pool``), so the run makes ``generations x pool_size`` calls in all.
        pool_size: Candidates per generation; None picks a measured default from the space size and the number of
            objectives (``default_pool_size``; a run stored with None resumes with the pool it was stored with).
        problem_type: "min" or "max", or one per objective.
        num_objectives: Number of values the objective returns.
        seed: Seed of the search; the same seed and scores give the same candidates.
        mutate_rate: Per-gene mutation probability; None means 1 / number of genes.
        crossover_rate: Probability that two parents are crossed (else copied, then mutated).
        timeout_s: Limit per objective call; set, the objective runs in a killable worker process.
        strategy: "auto" (GA for one objective, NSGA-II for several), "ga", "nsga2" or "random".
        baseline: Also evaluate the baseline once, before generation 1: the compiler defaults, i.e. every
            knock-out-able parameter absent and every other at its declared ``default`` (a space
            without one has no baseline row; see ``SearchSpace.baseline``).
        baseline_in_pool: The baseline, when it is a point of the space, is one of generation 1's ``pool_size``
            candidates: its result (replayed from its row, not evaluated again) joins the first pool, so the GA /
            NSGA-II and the offspring screen learn from it and one prior sample fewer is drawn. On the
            one-objective tables of bench/tables (catalog spaces, seeds 400-479, paired) that took the mean calls
            to the optimum from 87.1 to 81.6 in sum on the tune half and from 133.5 to 130.1 on the held-out half
            (bench/results/variants_baseline_in_pool*.md).
            With ``asynchronous=True`` it joins pymoo's initial pool and the screen's history the same way, but
            the run still proposes ``generations x pool_size`` searched candidates besides it (that budget and
            its generation events count proposals; before this, an asynchronous run ignored the setting).
            False: the baseline is evaluated besides ``generations x pool_size`` candidates and the search does
            not learn from it. Runs stored before this setting existed had False and resume with it.
        objective_names: Optional display names, one per objective.
        warm_start: Configs (dicts) that open the first generation before prior samples fill it,
            e.g. the front of an earlier run of the same kernel (see ``compileiq_lab.analysis.registry``).
            Configs outside the space are left out; asked configs are never asked again.
        model: How GA/NSGA-II choose which offspring to evaluate. "density" (the default): more offspring are mated
            than evaluated, joined by configs drawn from the controls' states that scored well and by one-control
            neighbours of good configs ("unset" counts as a state of every control); with one objective an additive
            model's chance of improving (each control state's effect on the score's rank), with several a density
            ratio of good to bad configs per control (failed compiles count as bad, and control pairs seen failing
            lower a config's odds in both), picks most of the generation, a random share the rest
            (``compileiq_lab.search.screen``; chosen on the tune half of bench/tables, see bench/results/peers.md).
            "none": pymoo's offspring as they are.
            Runs stored before this setting existed had "none" and resume with it.
        learn_conflicts: Learn from each failed compile's message which controls conflict (``search.conflicts``:
            "Conflicting options -opt-level=<0,2,3> and --Ofast-compile=min" names two controls and their states)
            and never ask a config in a learned conflict again, as for the catalog's known conflicts. A message is
            learned from only when every option it names is a control of the space; a conflict is dropped once a
            config in it compiles. Combinations a compile ignored (a kernel run's "ignoring ..." warnings, kept in
            the row) are learned by the same mechanism and never asked again either. Runs stored before this setting
            existed did not learn and resume that way.
        surrogate: Pre-screen GA/NSGA-II offspring with a random forest fitted on the evaluations so
            far: 4x more offspring are proposed and the most promising (plus a random quarter) are
            evaluated. Needs scikit-learn. See bench/results/surrogate.md for where it pays.
        asynchronous: Steady state instead of generations: a new candidate is proposed whenever an evaluation
            slot frees up (``Search.start(workers=...)`` or the executor's workers) and each result is told as it
            arrives, so no worker waits for the slowest candidate of a generation. The budget is
            ``generations x pool_size`` candidates besides the baseline; rows are numbered into generations of
            ``pool_size`` in the order they were proposed. Not reproducible call for call (arrival order decides),
            unlike the default.
        max_evaluations: Also end the run once it holds this many evaluations (objective calls, the baseline
            included, stored rows of earlier sessions too); the last generation is cut short so the total never
            exceeds it. None: no such limit. Not a trajectory setting: a resumed run may raise it.
        time_budget_s: Also end the run once its ``start()`` calls have taken this many seconds of wall time in all
            (a resumed run continues the count; a killed process's time counts too, as recorded once a second while
            it ran). No new call starts past it;
            calls already running finish and are kept. None: no such limit. Not a trajectory setting.
        normalize: CompileIQ's switch: the baseline is evaluated (the empty config, CompileIQ's
            BASELINE_CONFIG, where the space has no baseline of its own) and ``get_results()`` adds the
            ``norm_score_k`` columns.
        cull_size, objective_weights, init_with_true_random_threshold, enable_large_fail_pool: CompileIQ
            settings that have no effect in CompileIQ 1.1 either; accepted with a warning naming what
            does the job here.
    """

    generations: int
    pool_size: int | None = None
    problem_type: str | Sequence[str] = "min"
    num_objectives: int = 1
    seed: int = 0
    mutate_rate: float | None = None
    crossover_rate: float = 0.9
    timeout_s: float | None = None
    strategy: str = "auto"
    baseline: bool = True
    objective_names: Sequence[str] | None = field(default=None)
    warm_start: Sequence[dict[str, Any]] | None = field(default=None)
    surrogate: bool = False
    asynchronous: bool = False
    normalize: bool | None = None
    cull_size: int | None = None
    objective_weights: Sequence[float] | None = None
    init_with_true_random_threshold: float | None = None
    enable_large_fail_pool: bool | None = None
    max_evaluations: int | None = None
    time_budget_s: float | None = None
    model: str = "density"
    learn_conflicts: bool = True
    baseline_in_pool: bool = True

    def __post_init__(self) -> None:
        for f in fields(self):  # numpy numbers (a seed from np.random, a pool from a sweep) as Python's
            setattr(self, f.name, plain(getattr(self, f.name)))
        self._check_sizes()
        self._check_search()
        self._check_inputs()
        self._check_switches()
        ignored = [f"{name} ({equivalent})" for name, equivalent in RETIRED.items() if getattr(self, name) is not None]
        if ignored:
            warnings.warn("SearchConfiguration settings that have no effect (as in CompileIQ 1.1) are ignored: "
                          + "; ".join(ignored), FutureWarning, stacklevel=3)

    def _check_sizes(self) -> None:
        """generations, pool_size and num_objectives."""
        if not _is_int(self.generations) or self.generations < 1:
            raise _fail("generations is an int >= 1", f"generations={self.generations!r}", "Pass a positive int.")
        if self.generations > MAX_GENERATIONS:
            raise _fail(f"generations <= MAX_GENERATIONS = {MAX_GENERATIONS}", f"generations={self.generations!r}",
                        "Ask for fewer generations, and resume the run for more if it still improves.")
        if self.pool_size is not None and (not _is_int(self.pool_size) or self.pool_size < 2):
            raise _fail("pool_size is an int >= 2", f"pool_size={self.pool_size!r}",
                        "Pass an int of at least 2, or None for the default.")
        if self.pool_size is not None and self.pool_size > MAX_POOL_SIZE:
            raise _fail(f"pool_size <= MAX_POOL_SIZE = {MAX_POOL_SIZE}", f"pool_size={self.pool_size!r}",
                        "Pass a smaller pool (4-64 suit compiler spaces), or None for the measured default.")
        if not _is_int(self.num_objectives) or self.num_objectives < 1:
            raise _fail("num_objectives is an int >= 1", f"num_objectives={self.num_objectives!r}",
                        "Pass a positive int.")
        if self.num_objectives > MAX_OBJECTIVES:
            raise _fail(f"num_objectives <= MAX_OBJECTIVES = {MAX_OBJECTIVES}",
                        f"num_objectives={self.num_objectives!r}", "Optimise a few objectives; report the rest.")

    def _check_search(self) -> None:
        """The directions, the seed, the GA's rates, the timeout and the strategy."""
        self.problem_type = self._check_directions(self.problem_type)
        if not _is_int(self.seed) or self.seed < 0:
            raise _fail("seed is an int >= 0", f"seed={self.seed!r}", "Pass a non-negative int.")
        if self.mutate_rate is not None and not (_is_num(self.mutate_rate) and 0 < self.mutate_rate <= 1):
            raise _fail("0 < mutate_rate <= 1", f"mutate_rate={self.mutate_rate!r}",
                        "Pass a per-gene probability, or None for 1/number of genes.")
        if not (_is_num(self.crossover_rate) and 0 <= self.crossover_rate <= 1):
            raise _fail("0 <= crossover_rate <= 1", f"crossover_rate={self.crossover_rate!r}", "Pass a probability.")
        if self.timeout_s is not None and not (_is_num(self.timeout_s) and 0 < self.timeout_s < math.inf):
            raise _fail("0 < timeout_s < inf", f"timeout_s={self.timeout_s!r}",
                        "Pass seconds as a positive number, or None for no limit.")
        if self.strategy not in ("auto",) + STRATEGIES:
            raise _fail(f"strategy in {['auto', *STRATEGIES]}", f"strategy={self.strategy!r}", "Pick one of those.")
        if self.strategy == "ga" and self.num_objectives > 1:
            raise _fail("strategy 'ga' has num_objectives == 1", f"num_objectives={self.num_objectives}",
                        "Use strategy='nsga2' (or 'auto') for several objectives.")

    def _check_inputs(self) -> None:
        """objective_names and warm_start, each kept as a list of its own."""
        if self.objective_names is not None:
            if isinstance(self.objective_names, str):  # a list of its letters otherwise
                raise _fail("objective_names is a list of names", f"the str {self.objective_names!r}",
                            f"Pass a list: objective_names=[{self.objective_names!r}].")
            names = list(self.objective_names)
            if len(names) != self.num_objectives or not all(isinstance(n, str) and n for n in names):
                raise _fail("objective_names holds num_objectives non-empty strings",
                            f"objective_names={names!r} with num_objectives={self.num_objectives}",
                            "Give one name per objective, or None.")
            if len(set(names)) < len(names):
                raise _fail("objective_names are distinct", f"objective_names={names!r}",
                            "Name each objective differently: a name picks one objective (best_record, figures).")
            self.objective_names = names
        if self.warm_start is not None:
            configs = list(itertools.islice(self.warm_start, MAX_WARM_START + 1))  # an endless iterable ends here
            if len(configs) > MAX_WARM_START:
                total = len(self.warm_start) if isinstance(self.warm_start, Sequence) else f"over {MAX_WARM_START}"
                raise _fail(f"len(warm_start) <= MAX_WARM_START = {MAX_WARM_START}", f"{total} configs",
                            "Pass the best few configs (e.g. an earlier run's Pareto front).")
            if not all(isinstance(c, dict) for c in configs):
                raise _fail("warm_start is a list of config dicts", f"warm_start={configs!r:.120}",
                            "Pass configs as dicts (e.g. [row['params'] for row in results.pareto_front()]), or None.")
            self.warm_start = [dict(c) for c in configs]

    def _check_switches(self) -> None:
        """The mode, the budgets, the model and the on/off settings."""
        if not isinstance(self.asynchronous, bool):
            raise _fail("asynchronous is True or False", f"asynchronous={self.asynchronous!r}", "Pass a bool.")
        if self.asynchronous and self.surrogate:
            raise _fail("not (asynchronous and surrogate)", "asynchronous=True with surrogate=True",
                        "The surrogate screens whole generations; use one of the two.")
        if self.max_evaluations is not None and (not _is_int(self.max_evaluations) or self.max_evaluations < 1):
            raise _fail("max_evaluations is None or an int >= 1", f"max_evaluations={self.max_evaluations!r}",
                        "Pass the most objective calls the run may make (the baseline counts), or None for no limit.")
        if self.time_budget_s is not None and not (_is_num(self.time_budget_s) and self.time_budget_s > 0):
            raise _fail("time_budget_s is None or a finite number > 0", f"time_budget_s={self.time_budget_s!r}",
                        "Pass the run's wall-time limit in seconds (e.g. 600.0), or None for no limit.")
        if self.model not in MODELS:
            raise _fail(f"model in {list(MODELS)}", f"model={self.model!r}",
                        "Use 'density' (the default) or 'none' (pymoo's offspring unscreened).")
        if not isinstance(self.learn_conflicts, bool):
            raise _fail("learn_conflicts is True or False", f"learn_conflicts={self.learn_conflicts!r}", "Pass a bool.")
        if not isinstance(self.baseline_in_pool, bool):
            raise _fail("baseline_in_pool is True or False", f"baseline_in_pool={self.baseline_in_pool!r}",
                        "Pass a bool.")
        if self.normalize is not None and not isinstance(self.normalize, bool):
            raise _fail("normalize is True or False", f"normalize={self.normalize!r}", "Pass a bool.")

    def _check_directions(self, value: str | Sequence[str]) -> str | list[str]:
        if isinstance(value, str):
            if value not in _DIRECTIONS:
                raise _fail("problem_type in ['min', 'max']", f"problem_type={value!r}", "Use 'min' or 'max'.")
            return value
        dirs = list(value)
        if len(dirs) != self.num_objectives or any(d not in _DIRECTIONS for d in dirs):
            raise _fail("problem_type is 'min'/'max' or one of them per objective",
                        f"problem_type={dirs!r} with num_objectives={self.num_objectives}",
                        "Pass a single direction or a list as long as num_objectives.")
        return dirs

    @property
    def directions(self) -> list[str]:
        """One "min"/"max" per objective."""
        return [o.direction for o in self.objectives()]

    def objectives(self) -> list[Objective]:
        """The objectives these settings describe (names default to score_1..score_k)."""
        return objectives_from_settings(self.num_objectives, self.problem_type, self.objective_names)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable settings (the CompileIQ-only ones only where given)."""
        d = asdict(self)
        d["problem_type"] = self.problem_type if isinstance(self.problem_type, str) else list(self.problem_type)
        for name in _OPTIONAL:
            if d[name] is None:
                del d[name]
        return d

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """The value of every setting a stored run may lack (earlier versions did not store every one)."""
        out = {k: f.default for k, f in cls.__dataclass_fields__.items() if k != "generations"}
        out["model"] = "none"  # runs stored before the setting existed searched without a screen
        out["learn_conflicts"] = False  # nor learned conflicts from failed compiles' messages
        out["baseline_in_pool"] = False  # nor took the baseline into their first generation
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SearchConfiguration:
        """Rebuild from ``to_dict()`` output (unknown keys are rejected)."""
        known = set(cls.__dataclass_fields__)
        extra = set(data) - known
        if extra:
            raise ConfigurationError(f"unknown SearchConfiguration keys {sorted(extra)}; valid keys: {sorted(known)}")
        return cls(**data)

    @classmethod
    def reopened(cls, stored: Mapping[str, Any], **changes: Any) -> SearchConfiguration:
        """A stored run's settings (a header's ``config``) as it searched with them, a setting it predates at the value
        it then had (``defaults``), with the changes a resumed run may make (``generations``, ``timeout_s``,
        ``max_evaluations``, ``time_budget_s``; None keeps the stored value)."""
        legacy = {k: v for k, v in cls.defaults().items() if k in ("model", "learn_conflicts", "baseline_in_pool")}
        return cls.from_dict({**legacy, **stored, **{k: v for k, v in changes.items() if v is not None}})

    def pools_baseline(self, space: SearchSpace, baseline: Mapping[str, Any] | None) -> bool:
        """Whether ``baseline`` (the run's, None for none) is one of generation 1's candidates (of pymoo's initial
        pool in an asynchronous run): with ``baseline_in_pool``, where it is a point of ``space``."""
        return self.baseline_in_pool and baseline is not None and space.is_point(baseline)

    def resolve(self, n_genes: int) -> ResolvedConfiguration:
        """Fill the automatic settings for a space with ``n_genes`` genes."""
        strategy = self.strategy
        if strategy == "auto":
            strategy = "ga" if self.num_objectives == 1 else "nsga2"
        return ResolvedConfiguration(
            pool_size=self.pool_size or default_pool_size(n_genes, self.num_objectives),
            mutate_rate=self.mutate_rate if self.mutate_rate is not None else 1.0 / max(1, n_genes),
            strategy=strategy,
        )


@dataclass(frozen=True)
class ResolvedConfiguration:
    """The automatic settings of a SearchConfiguration, made concrete for one space."""

    pool_size: int
    mutate_rate: float
    strategy: str


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
