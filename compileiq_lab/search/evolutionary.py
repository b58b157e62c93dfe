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
from compileiq_lab.search.screen import DensityScreen
from compileiq_lab.search.surrogate import SurrogateScreen

__all__ = ["GAStrategy", "NSGA2Strategy", "PymooStrategy"]


class PymooStrategy(Strategy):
    """Shared ask/tell plumbing for pymoo genetic algorithms with compileiq-lab's operators.

    Args:
        screen: Optional offspring screen (``compileiq_lab.search.screen.DensityScreen``, the engine's default, or
            ``compileiq_lab.search.surrogate.SurrogateScreen``): more offspring are mated than evaluated (a density
            screen adds configs of its own) and it keeps the most promising. Other arguments as for ``Strategy``.
    """

    #: pymoo's mating rounds per ask (its default), and with a screen (which asks for ``factor`` times more)
    mating_rounds = 100
    screened_mating_rounds = 3
    #: A part of a generation picked in parts is chosen among at most this many of the generation's candidates (a
    #: random subset of those left, where a large pool left more) and the best configs' neighbours.
    part_candidates = 64

    def __init__(self, *args: Any, screen: SurrogateScreen | DensityScreen | None = None, **kwargs: Any) -> None:
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
        # the generation being asked: an unscreened one's rows not handed out yet, a screened one's candidates not
        # picked yet, the genomes handed out so far and the results of its parts told so far
        self._queue: list[np.ndarray] = []
        self._candidates = np.zeros((0, space.n_genes), dtype=np.int64)
        self._picked: list[np.ndarray] = []
        self._told: list[tuple[np.ndarray, np.ndarray]] = []
        self._parts = False  # whether the current generation is picked part by part
        self._part_rng = np.random.default_rng([self.seed, 0x9A27])
        self.screen: SurrogateScreen | DensityScreen | None = screen
        # steady-state use (propose/observe): pymoo's initial pool, handed out first, and the results that
        # arrive before all of it is out (pymoo is initialised with them in one go)
        self._initial: list[np.ndarray] | None = None
        self._initial_keys: set[bytes] = set()  # of the initial pool: pymoo starts once every one has its result
        self._early: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._steady_slot = 0  # picks made of the screened generation being proposed (see _steady_picks)
        self._out: dict[bytes, np.ndarray] = {}  # proposed genomes without a result yet (steady state)

    def _make_algorithm(self, **kwargs: Any) -> Any:
        raise NotImplementedError

    def _ask(self, n: int) -> np.ndarray:
        """The next ``n`` genomes of the current generation. Unscreened (pymoo's initial pool, a run without a screen
        or before it is ready) the generation is pymoo's population, handed out in parts when asked in parts. Screened
        by a density screen with neighbours of the best (one objective), it is picked part by part from the offspring
        and the screen's proposals made when it opened (with the best configs' neighbours renewed for each part), each
        part with every result told before it. Otherwise (several objectives: on the multi-objective tune half of
        bench/tables, 40 seeds, picking in parts needed as many calls to the whole front, 675 in sum either way, at
        three times the cost) the screen picks the generation whole when it opens."""
        if self.slot == 0:  # a new generation (the last one's queue, if any, was all handed out)
            self._picked, self._told = [], []
            screen = self._ready_screen()
            self._parts = isinstance(screen, DensityScreen) and screen.hill > 0  # (one objective, few controls)
            pop = self._offspring(screen, neighbours=not self._parts)
            X = np.asarray(pop.get("X"), dtype=np.int64).reshape(len(pop), self.space.n_genes)
            if screen is None:
                self._queue, self._candidates = list(X), X[:0]
            else:
                self._candidates = X
                if not self._parts:  # picked whole, handed out in parts
                    self._queue = list(self._pick(self.pool_size))
        if self._parts:
            rows = list(self._pick(n))
        else:  # a queue shorter than the generation (nothing more was new) ends it short
            rows, self._queue = self._queue[:n], self._queue[n:]
            rows = self._unrejected(rows, self._queue)
        self._picked.extend(rows)
        return np.array(rows, dtype=np.int64).reshape(len(rows), self.space.n_genes)

    def _unrejected(self, rows: list[np.ndarray], rest: list[np.ndarray]) -> list[np.ndarray]:
        """``rows`` drawn earlier, those rejected since (in a conflict learned from a result told since: see
        ``search.conflicts``) each replaced by an unseen prior sample (none of ``rest``, the rows still to come)."""
        if not rows:
            return rows
        taken: set[bytes] = set()
        kept = list(self.fresh(np.array(rows, dtype=np.int64), taken))  # (a rejected row is remembered as seen)
        if len(kept) < len(rows):
            taken.update(self.space.keys(np.array(rest, dtype=np.int64).reshape(-1, self.space.n_genes)))
            kept += list(self.draw_unseen(self.algorithm.random_state, len(rows) - len(kept), exclude=taken))
        return kept

    def _ready_screen(self) -> SurrogateScreen | DensityScreen | None:
        """The screen, once it can rank (and pymoo has a population to mate)."""
        usable = self.screen is not None and self.screen.ready and self.algorithm.pop is not None
        return self.screen if usable else None

    def _pick(self, n: int) -> np.ndarray:
        """``n`` of the generation's candidates not asked yet (with the best configs' neighbours as they are now),
        picked by the screen for their roles in the generation; unseen prior samples fill any shortfall."""
        screen = self.screen
        assert screen is not None
        taken: set[bytes] = set()
        X = np.array(list(self.fresh(self._candidates, taken)), dtype=np.int64).reshape(-1, self.space.n_genes)
        kept = len(X)  # the generation's own candidates come first; the neighbours after them are drawn anew
        if self._parts:  # the best configs' neighbours as they are at this part
            assert isinstance(screen, DensityScreen)
            cap = max(self.part_candidates, screen.factor * n)  # a part's cost bounded however large the pool
            if len(X) > cap:
                X = X[np.sort(self._part_rng.choice(len(X), cap, replace=False))]
                kept, taken = cap, set(self.space.keys(X))
            more = np.array(list(self.fresh(screen.neighbours(), taken)), dtype=np.int64)
            X = np.vstack([X, more.reshape(-1, self.space.n_genes)])
        if len(X) > n:
            pick = screen.select(X, n, first=self.slot, of=self.pool_size, pending=self._pending()) \
                if isinstance(screen, DensityScreen) else screen.select(X, n)
            rest = np.setdiff1d(np.arange(len(X)), pick)
            X, self._candidates = X[pick], X[rest[rest < kept]]
        else:
            self._candidates = X[:0]
        if len(X) < n:
            # mating found too few unseen offspring (a crowded corner of the space): fill the generation with unseen
            # prior samples rather than end the search early
            extra = self.draw_unseen(self.algorithm.random_state, n - len(X), exclude=set(self.space.keys(X)))
            X = np.vstack([X, extra.reshape(-1, self.space.n_genes)]) if len(extra) else X
        return X

    def _offspring(self, screen: SurrogateScreen | DensityScreen | None, neighbours: bool = True) -> Any:
        """pymoo's next population: its initial pool the first time, then a pool of offspring of the survivors (with a
        screen: ``factor`` times more, and the screen's own proposals, the best configs' neighbours among them when
        ``neighbours``); unscreened, unseen prior samples fill any shortfall."""
        mating = self.algorithm.mating
        # propose more offspring than we evaluate when screening; the screen keeps the promising ones. In a crowded
        # space pymoo would mate up to 100 times for unseen offspring: a few rounds give enough to screen, and
        # unseen prior samples fill any shortfall
        if screen is not None:
            self.algorithm.n_offsprings = self.pool_size * screen.factor
            mating.n_max_iterations = self.screened_mating_rounds
        try:
            pop = self.algorithm.ask()
        finally:
            self.algorithm.n_offsprings = self.pool_size
            mating.n_max_iterations = self.mating_rounds
            # pymoo ends a run whose mating found nothing new; ours goes on (prior samples, the screen's proposals)
            self.algorithm.termination.force_termination = False
        if pop is None:
            pop = Population.empty()
        if isinstance(screen, DensityScreen):
            return self._with_proposals(pop, screen, neighbours)
        if screen is None and len(pop) < self.pool_size:
            extra = self.draw_unseen(self.algorithm.random_state, self.pool_size - len(pop),
                                     exclude=set(self.space.keys(pop.get("X"))) if len(pop) else None)
            if len(extra):
                pop = Population.merge(pop, Population.new("X", extra))
        return pop

    def _with_proposals(self, pop: Any, screen: DensityScreen, neighbours: bool = True) -> Any:
        """The offspring plus the screen's own proposals (for a pool of picks) that are new (neither asked nor among
        the offspring)."""
        extra = screen.propose(round(self.pool_size * screen.proposals), neighbours)
        if not len(extra):
            return pop
        taken = set(self.space.keys(pop.get("X"))) if len(pop) else set()
        rows = list(self.fresh(extra, taken))
        if not rows:
            return pop
        new = Population.new("X", np.array(rows, dtype=np.int64))
        return Population.merge(pop, new) if len(pop) else new

    def _tell(self, X: np.ndarray, F: np.ndarray, feasible: np.ndarray) -> None:
        """The screen learns every part at once; pymoo gets the generation whole, once every genome of it has its
        result."""
        if self.screen is not None:
            self.screen.observe(X, F, feasible)
        self._told.append((F, feasible))
        if not self.in_generation:  # the generation is all asked (its queue, if any, is empty)
            self._feed(Population.new("X", np.array(self._picked, dtype=np.int64)),
                       np.vstack([t[0] for t in self._told]), np.concatenate([t[1] for t in self._told]))
            self._picked, self._told = [], []

    def _feed(self, pop: Any, F: np.ndarray, feasible: np.ndarray) -> None:
        """Give pymoo the scores of ``pop`` (failures as constraint violations) and let it select survivors."""
        F = np.where(feasible[:, None], F, 0.0)
        G = np.where(feasible, 0.0, 1.0)[:, None]
        # evaluate through the algorithm's evaluator so its budget counters stay right
        self.algorithm.evaluator.eval(StaticProblem(self.problem, F=F, G=G), pop)
        self.algorithm.tell(infills=pop)

    # -- steady state: offspring of the current population whenever a worker is free ---------------------
    def _propose(self, n: int) -> np.ndarray:
        """pymoo's initial pool first (seeds, then prior samples); then offspring mated from the survivors so far
        (pymoo's ask with ``n_offsprings=n``); unseen prior samples fill any shortfall, e.g. while the initial
        pool's results are still out."""
        if self._initial is None:
            self._draw_initial()
        rows: list[np.ndarray] = []
        while self._initial and len(rows) < n:
            x = self._initial.pop(0)
            key = self.space.keys(x[None, :])[0]
            if self.known(key, x):  # in a conflict learned since it was drawn: pymoo starts without it
                self._initial_keys.discard(key)
            else:
                rows.append(x)
        if len(rows) < n and self.algorithm.is_initialized and self._ready_screen() is not None:
            keys = self.space.keys(np.array(rows, dtype=np.int64).reshape(len(rows), self.space.n_genes))
            self.seen.update(keys)
            self._out.update(zip(keys, rows))
            rows.extend(self._steady_picks(n - len(rows)))
        elif len(rows) < n and self.algorithm.is_initialized:
            self.algorithm.n_offsprings = n - len(rows)
            try:
                pop = self.algorithm.ask()
            finally:
                self.algorithm.n_offsprings = self.pool_size
                self.algorithm.termination.force_termination = False
            if pop is not None and len(pop):
                rows.extend(np.asarray(pop.get("X"), dtype=np.int64)[: n - len(rows)])
        if len(rows) < n:
            taken = set(self.space.keys(np.array(rows, dtype=np.int64).reshape(len(rows), self.space.n_genes)))
            rows.extend(self.draw_unseen(self.algorithm.random_state, n - len(rows), exclude=taken))
        X = np.array(rows, dtype=np.int64).reshape(len(rows), self.space.n_genes)
        self._out.update(zip(self.space.keys(X), X))
        return X

    def _draw_initial(self) -> None:
        """pymoo's initial pool (seeds, then prior samples), handed out by ``_propose``, waited for by ``_observe``."""
        pop = self.algorithm.ask()
        self._initial = [] if pop is None else list(np.asarray(pop.get("X"), dtype=np.int64))
        self._initial_keys = set(self.space.keys(np.array(self._initial, dtype=np.int64).reshape(
            len(self._initial), self.space.n_genes)))

    def observe(self, X: np.ndarray, F: np.ndarray, feasible: np.ndarray) -> None:
        """As ``Strategy.observe``; results of genomes the first pool was opened with (``open_with``: the baseline,
        evaluated before anything is proposed) open pymoo's initial pool first, so that they join it (and are not
        proposed again) as in a generational run, where other results before any proposal (a resumed run's stored
        rows) start pymoo from themselves."""
        X = np.asarray(X, dtype=np.int64).reshape(-1, self.space.n_genes)
        if self._initial is None and len(X) and self.space.n_genes and len(self.seeds) and \
                set(self.space.keys(X)) <= set(self.space.keys(self.seeds)):
            self._draw_initial()  # (before they count as seen: pymoo's duplicate check would leave them out)
        super().observe(X, F, feasible)

    def _pending(self) -> np.ndarray | None:
        """The proposals still without a result (steady state; None when there are none)."""
        return np.array(list(self._out.values()), dtype=np.int64) if self._out else None

    def _steady_picks(self, n: int) -> list[np.ndarray]:
        """Steady state with a ready screen: ``n`` picks of a generation of ``pool_size`` (mated from pymoo's survivors
        as they are when it opens, with the screen's proposals), each picked as a generational run picks its parts
        (``_ask``) with every result that has arrived; the next generation opens once one is all picked."""
        rows: list[np.ndarray] = []
        while len(rows) < n:
            self.slot = self._steady_slot
            k = min(n - len(rows), self.pool_size - self.slot)
            X = self._ask(k)
            self._picked = []  # (pymoo hears each result as it arrives: see _observe)
            keys = self.space.keys(X)
            self.seen.update(keys)
            self._out.update(zip(keys, X))  # in flight from now on, for the next part's picks
            rows.extend(X)
            self._steady_slot = 0 if len(X) < k else (self.slot + len(X)) % self.pool_size
            if not len(X) and self.slot == 0:  # a new generation had nothing new: the caller draws prior samples
                break
        return rows

    def _observe(self, X: np.ndarray, F: np.ndarray, feasible: np.ndarray) -> None:
        """Late results are never dropped: each joins the survivors' selection (pymoo's (mu + lambda) survival)
        whenever it arrives, so a slow candidate competes on its score, not on its speed. pymoo starts from the whole
        initial pool: results are held until every one of its candidates has its result (prior samples fill the
        slots meanwhile)."""
        for key in self.space.keys(X):
            self._out.pop(key, None)
        if self.screen is not None:
            self.screen.observe(X, F, feasible)
        if self._initial is None:  # results before any proposal (a resumed run's stored rows): pymoo starts from them
            self._initial = []
        self._initial_keys.difference_update(self.space.keys(X))
        if not self.algorithm.is_initialized and (self._initial or self._initial_keys):
            self._early.append((X, F, feasible))  # pymoo starts from the whole initial pool, not its first result
            return
        if self._early:
            X = np.vstack([*(e[0] for e in self._early), X])
            F = np.vstack([*(e[1] for e in self._early), F])
            feasible = np.concatenate([*(e[2] for e in self._early), feasible])
            self._early = []
        self._feed(Population.new("X", X), F, feasible)


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
