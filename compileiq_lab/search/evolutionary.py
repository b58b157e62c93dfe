"""GA (one objective) and NSGA-II (several) on pymoo's problem-independent ask/tell loop."""

from __future__ import annotations

from typing import Any

import numpy as np
from pymoo.core.population import Population
from pymoo.core.problem import Problem
from pymoo.core.termination import NoTermination
from pymoo.problems.static import StaticProblem

from compileiq_lab.search.base import Strategy
from compileiq_lab.search.operators import GeneMutation, GeneUniformCrossover, HistoryDedup, PriorSampling
from compileiq_lab.search.surrogate import SurrogateScreen

__all__ = ["GAStrategy", "NSGA2Strategy", "PymooStrategy"]


class PymooStrategy(Strategy):
    """Shared ask/tell plumbing for pymoo genetic algorithms with compileiq-lab's operators.

    Args:
        screen: Optional surrogate screen (``compileiq_lab.search.surrogate.SurrogateScreen``): more offspring
            are proposed and it keeps the most promising. Other arguments as for ``Strategy``.
    """

    def __init__(self, *args: Any, screen: SurrogateScreen | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        space = self.space
        self.problem = Problem(n_var=space.n_genes, n_obj=self.n_objectives, n_ieq_constr=1,
                               xl=space.xl, xu=space.xu, vtype=int)
        self.algorithm = self._make_algorithm(
            pop_size=self.pool_size,
            n_offsprings=self.pool_size,
            sampling=PriorSampling(space, self.take_seeds),
            crossover=GeneUniformCrossover(prob=self.crossover_rate),
            mutation=GeneMutation(space, self.mutate_rate),
            eliminate_duplicates=HistoryDedup(space, self.known),
        )
        if space.n_genes:
            self.algorithm.setup(self.problem, termination=NoTermination(), seed=self.seed, verbose=False)
        self._pop: Any = None
        self.screen = screen

    def _make_algorithm(self, **kwargs: Any) -> Any:
        raise NotImplementedError

    def _ask(self) -> np.ndarray:
        screen = self.screen if self.screen is not None and self.screen.ready and self.algorithm.pop is not None \
            else None
        if screen is not None:  # propose more offspring than we evaluate; the surrogate keeps the promising ones
            self.algorithm.n_offsprings = self.pool_size * screen.factor
        try:
            pop = self.algorithm.ask()
        finally:
            self.algorithm.n_offsprings = self.pool_size
        if pop is None:
            pop = Population.empty()
        if screen is not None and len(pop) > self.pool_size:
            pop = pop[screen.select(np.asarray(pop.get("X")), self.pool_size)]
        if len(pop) < self.pool_size:
            # mating found too few unseen offspring (a crowded corner of the space): fill the
            # generation with unseen prior samples rather than end the search early
            extra = self.draw_unseen(self.algorithm.random_state, self.pool_size - len(pop),
                                     exclude=set(self.space.keys(pop.get("X"))) if len(pop) else None)
            if len(extra):
                pop = Population.merge(pop, Population.new("X", extra))
            self.algorithm.termination.force_termination = False
        if len(pop) == 0:
            return np.zeros((0, self.space.n_genes), dtype=np.int64)
        self._pop = pop
        return np.asarray(pop.get("X"), dtype=np.int64)

    def _tell(self, X: np.ndarray, F: np.ndarray, feasible: np.ndarray) -> None:
        if self.screen is not None:
            self.screen.observe(X, F, feasible)
        F = np.where(feasible[:, None], F, 0.0)
        G = np.where(feasible, 0.0, 1.0)[:, None]
        # evaluate through the algorithm's evaluator so its budget counters stay right
        self.algorithm.evaluator.eval(StaticProblem(self.problem, F=F, G=G), self._pop)
        self.algorithm.tell(infills=self._pop)
        self._pop = None


class GAStrategy(PymooStrategy):
    """Elitist single-objective genetic algorithm (pymoo GA: tournament + (mu+lambda) survival)."""

    name = "ga"

    def _make_algorithm(self, **kwargs: Any) -> Any:
        from pymoo.algorithms.soo.nonconvex.ga import GA

        return GA(**kwargs)


class NSGA2Strategy(PymooStrategy):
    """Multi-objective NSGA-II (pymoo: rank and crowding survival, failures as constraint violations)."""

    name = "nsga2"

    def _make_algorithm(self, **kwargs: Any) -> Any:
        from pymoo.algorithms.moo.nsga2 import NSGA2

        return NSGA2(**kwargs)
