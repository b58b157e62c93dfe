"""Twins: moves the objective ignores are learned as neutral (per pair of states), noisy scores teach none, the
density screen passes twins over, and the default search spends fewer calls on configs whose scores it knew."""

from __future__ import annotations

import numpy as np

from compileiq_lab import SearchConfiguration
from compileiq_lab import space as ss
from compileiq_lab.run.build import build_strategy
from compileiq_lab.search.screen import DensityScreen, states_of
from compileiq_lab.search.twins import TwinModel
from compileiq_lab.space import SearchSpace


def _space() -> SearchSpace:
    # "o" left unset is the compiler's default, 3 (unset and 3 compile alike); "dead" is ignored by the compiler
    return SearchSpace({"o": ss.choice([0, 1, 2, 3], knockout_prob=0.5), "dead": ss.choice(["a", "b", "c"]),
                        "c": ss.range(0, 5)})


def _score(config: dict) -> float:
    return float(10 * config.get("o", 3) + config["c"])


def _all(space: SearchSpace) -> np.ndarray:
    rows = {}
    for x in space.sample(np.random.default_rng(0), 3000):
        rows.setdefault(space.keys(x[None, :])[0], x)
    return np.array(list(rows.values()))


def _empty(space: SearchSpace, **kwargs: float) -> TwinModel:
    return TwinModel(np.array([p.n_values + p.can_knockout for _, p in space.params]), 1, **kwargs)


def _model(space: SearchSpace, X: np.ndarray, F: np.ndarray) -> TwinModel:
    model = _empty(space)
    model.observe(states_of(space, X), F, np.ones(len(X), dtype=bool))
    return model


def _p(model: TwinModel, space: SearchSpace, a: dict, b: dict) -> float:
    S = states_of(space, np.array([space.encode(a), space.encode(b)]))
    return float(np.exp(model.log_twin(S[:1], S[1:]))[0])


def test_ignored_moves_are_learned_neutral_and_effective_ones_not():
    space = _space()
    X = _all(space)
    rng = np.random.default_rng(1)
    sub = X[rng.choice(len(X), 40, replace=False)]  # a run's worth of evaluations, not the whole space
    model = _model(space, sub, np.array([[_score(space.decode(x))] for x in sub]))
    assert _p(model, space, {"o": 1, "dead": "a", "c": 2}, {"o": 1, "dead": "c", "c": 2}) > 0.8
    assert _p(model, space, {"dead": "b", "c": 4}, {"o": 3, "dead": "b", "c": 4}) > 0.6  # unset is the default
    assert _p(model, space, {"o": 0, "dead": "a", "c": 2}, {"o": 1, "dead": "a", "c": 2}) < 0.2
    assert _p(model, space, {"o": 1, "dead": "a", "c": 1}, {"o": 1, "dead": "a", "c": 3}) < 0.2
    # two neutral moves still make a twin; a neutral and an effective one do not
    assert _p(model, space, {"o": 2, "dead": "a", "c": 0}, {"o": 2, "dead": "b", "c": 0}) > \
        _p(model, space, {"o": 2, "dead": "a", "c": 0}, {"o": 1, "dead": "b", "c": 0})


def test_scores_that_are_never_equal_teach_no_twins():
    space = _space()
    X = _all(space)
    noisy = np.array([[_score(space.decode(x)) + 1e-3 * i] for i, x in enumerate(X)])  # timings: never equal
    model = _model(space, X[::2], noisy[::2])
    assert np.exp(model.log_twin(states_of(space, X[1::2]))).max() < 0.05  # of the configs not evaluated


def test_the_twin_model_stays_bounded():
    space = SearchSpace({f"p{i}": ss.range(0, 999, knockout_prob=0.5) for i in range(6)})
    model = _empty(space, window=50)
    X = space.sample(np.random.default_rng(2), 200)
    model.observe(states_of(space, X), np.zeros((200, 1)), np.ones(200, dtype=bool))
    assert len(model.S) == 50
    assert all(m.shape == (TwinModel.MAX_STATES, TwinModel.MAX_STATES) for m in model._neutral)


def test_the_screen_passes_over_twins_of_evaluated_and_of_picked_configs():
    space = _space()
    X = _all(space)
    configs = [space.decode(x) for x in X]
    # evaluated: every "o" with "dead" at a or b and c up to 2; twins left: "dead" at c and c up to 2, scores that
    # are known and the best there are; new scores: c from 3
    seen = np.array([x for x, c in zip(X, configs) if c["dead"] != "c" and c["c"] <= 2])
    keys = set(space.keys(seen))
    screen = DensityScreen(space, 1, seed=0, explore=0.0)
    screen.observe(seen, np.array([[_score(space.decode(x))] for x in seen]), np.ones(len(seen), dtype=bool))
    fresh = np.array([x for x in X if space.keys(x[None, :])[0] not in keys])
    picked = [space.decode(x) for x in fresh[screen.select(fresh, 6)]]
    known = {(c.get("o", 3), c["c"]) for c in (space.decode(x) for x in seen)}  # what decides the score
    assert all((c.get("o", 3), c["c"]) not in known for c in picked)  # no twin of an evaluated config
    assert len({(c.get("o", 3), c["c"]) for c in picked}) == len(picked)  # nor of another pick
    blind = DensityScreen(space, 1, seed=0, explore=0.0, twin_weight=0.0)
    blind.observe(seen, np.array([[_score(space.decode(x))] for x in seen]), np.ones(len(seen), dtype=bool))
    picked = [space.decode(x) for x in fresh[blind.select(fresh, 6)]]
    assert any((c.get("o", 3), c["c"]) in known for c in picked)  # without the model it asks some


def _repeats(twin_weight: float, seed: int) -> tuple[int, int]:
    """Calls (and of them, calls whose score was already seen) until the optimum, on a space where most controls
    are ignored."""
    sp = {f"f{i}": ss.flag(f"-f{i}") for i in range(8)}
    sp.update({f"l{i}": ss.choice([0, 1, 2, 3], knockout_prob=0.3) for i in range(3)})
    space = SearchSpace(sp)

    def score(c: dict) -> float:  # only f0, f1, l0 and l1 matter
        return float(3 * (not c.get("f0")) + 2 * bool(c.get("f1")) + abs(c.get("l0", 0) - 2)
                     + 2 * abs(c.get("l1", 0) - 1))

    strategy = build_strategy(space, SearchConfiguration(seed=seed, generations=30), None)
    strategy.screen.twin_weight = twin_weight
    seen: set[float] = set()
    calls = repeats = 0
    for _ in range(30):
        X = strategy.ask()
        F = np.array([[score(space.decode(x))] for x in X])
        for f in F[:, 0]:
            calls += 1
            repeats += f in seen
            seen.add(f)
            if f == 0.0:
                return calls, repeats
        strategy.tell(F, np.ones(len(X), dtype=bool))
    return calls, repeats


def test_the_default_search_asks_fewer_configs_whose_score_it_knew():
    with_twins = [_repeats(3.0, s) for s in range(8)]
    without = [_repeats(0.0, s) for s in range(8)]
    assert sum(r for _, r in with_twins) < 0.6 * sum(r for _, r in without)  # measured: 244 vs 649
    assert sum(c for c, _ in with_twins) < sum(c for c, _ in without)  # and it reaches the optimum sooner


def test_a_failure_is_an_outcome_its_twins_share():
    space = _space()
    X = _all(space)
    configs = [space.decode(x) for x in X]
    fails = np.array([c.get("o") == 0 and c["c"] >= 3 for c in configs])  # a rejected combination
    rng = np.random.default_rng(4)
    sub = rng.choice(len(X), 45, replace=False)
    model = _empty(space)
    model.observe(states_of(space, X[sub]), np.array([[_score(configs[i])] for i in sub]), ~fails[sub])
    failed = X[sub][fails[sub]]
    assert len(failed)
    rest = np.setdiff1d(np.arange(len(X)), sub)
    p = np.exp(model.log_twin(states_of(space, X[rest]), states_of(space, failed)))
    assert p[fails[rest]].mean() > 3 * p[~fails[rest]].mean()  # the untried failures look like the seen ones


def test_a_move_not_yet_seen_is_less_likely_neutral_than_the_moves_seen():
    # "dead" was only ever moved between "a" and "b", always without effect: a move to "c" is untried
    space = _space()
    X = np.array([space.encode({"o": o, "dead": d, "c": c}) for o in (0, 1) for c in (1, 2) for d in ("a", "b")])
    F = np.array([[_score(space.decode(x))] for x in X])
    model, trusting = _empty(space), _empty(space, unseen=1.0)  # trusting: the control's rate for untried moves
    for m in (model, trusting):
        m.observe(states_of(space, X), F, np.ones(len(X), dtype=bool))
    base = {"o": 1, "dead": "a", "c": 2}
    seen = _p(model, space, base, {**base, "dead": "b"})
    untried = _p(model, space, base, {**base, "dead": "c"})
    assert seen > 0.8 and untried < seen
    assert untried < _p(trusting, space, base, {**base, "dead": "c"})
