"""Conflicts learned from failed compiles' messages: what a message names is learned, what it cannot be mapped to is
not, a config that compiled overrules one, and the search never asks a config in a learned conflict again (resumed
runs included). Combinations a compile ignored are learned by the same mechanism."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from compileiq_lab import Search, SearchConfiguration
from compileiq_lab import space as ss
from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.measure import Measurement
from compileiq_lab.search.conflicts import NamedConflicts, conflicts_in
from compileiq_lab.space import SearchSpace
from compileiq_lab.store import load_results
from compileiq_lab.testing import tool_available

MIN = "ptxas fatal   : Conflicting options -opt-level=<0,2,3> and --Ofast-compile=min specified"
MAX = "ptxas fatal   : Conflicting options -opt-level=<1,2,3> and --Ofast-compile=max specified"


def _plain() -> dict:
    # as a CompileIQ user writes it: one choice per control, "unset" among its values
    return {"opt_level": ss.choice([0, 1, 2, 3, "unset"]), "fast_compile": ss.choice(["min", "mid", "max", "unset"]),
            "restrict": ss.choice(["--restrict", "unset"]), "unroll": ss.choice([1, 2, 4, 8])}


def _rejected(config: dict) -> str | None:
    """ptxas 13.0's answer to the two conflicts (as in bench/tables)."""
    opt, fast = config.get("opt_level", "unset"), config.get("fast_compile", "unset")
    if fast == "min" and opt in (0, 2, 3):
        return MIN
    if fast == "max" and opt in (1, 2, 3):
        return MAX
    return None


def _learner(space: SearchSpace, configs: list[dict], messages: list[str | None]) -> NamedConflicts:
    learner = NamedConflicts(space)
    X = np.array([space.encode(c) for c in configs])
    learner.observe(X, [m is None for m in messages], messages)
    return learner


def _in_conflict(learner: NamedConflicts, space: SearchSpace, config: dict) -> bool:
    return learner.conflict(space.encode(config)) is not None


def test_a_message_naming_two_controls_is_learned_with_the_values_it_lists() -> None:
    space = SearchSpace(_plain())
    failed = {"opt_level": 2, "fast_compile": "min", "restrict": "unset", "unroll": 4}
    learner = _learner(space, [failed], [f"TableCompileError: compile_error: ptxas: {MIN}"])
    assert [learner.describe(c) for c in learner.conflicts] == [
        "opt_level in (0, 2, 3) and fast_compile = 'min' fail to compile"]
    for opt in (0, 2, 3):  # the values the message lists, whatever the other controls
        assert _in_conflict(learner, space, {**failed, "opt_level": opt, "unroll": 8, "restrict": "--restrict"})
    assert not _in_conflict(learner, space, {**failed, "opt_level": 1})  # not listed: it compiles
    assert not _in_conflict(learner, space, {**failed, "opt_level": "unset"})
    assert not _in_conflict(learner, space, {**failed, "fast_compile": "mid"})


def test_catalog_controls_absent_and_flags_spelled_as_options() -> None:
    space = SearchSpace({"opt_level": ss.choice([0, 1, 2, 3], knockout_prob=0.5),
                         "fast_compile": ss.choice(["min", "mid", "max"], knockout_prob=0.5),
                         "r": ss.flag("--restrict")})
    learner = _learner(space, [{"fast_compile": "max", "r": "--restrict"}],
                       ["nvcc fatal : option --restrict is not allowed with --Ofast-compile=max"])
    assert [learner.describe(c) for c in learner.conflicts] == [
        "fast_compile = 'max' and r = '--restrict' fail to compile"]
    assert _in_conflict(learner, space, {"fast_compile": "max", "r": "--restrict", "opt_level": 1})
    assert not _in_conflict(learner, space, {"fast_compile": "max"})


@pytest.mark.parametrize("message", [
    "ptxas fatal   : Conflicting options -opt-level=<0,2,3> and --foo=1 specified",  # an option it does not hold
    "kernel.cu(12): error: identifier \"tile\" is undefined",  # names no control
    "",
])
def test_messages_that_do_not_name_every_option_teach_nothing(message: str) -> None:
    space = SearchSpace(_plain())
    learner = _learner(space, [{"opt_level": 2, "fast_compile": "min", "restrict": "unset", "unroll": 1}], [message])
    assert learner.conflicts == []


def test_a_config_that_compiled_overrules_a_conflict() -> None:
    space = SearchSpace(_plain())
    ok = {"opt_level": 0, "fast_compile": "min", "restrict": "unset", "unroll": 1}
    failed = {**ok, "opt_level": 2}
    assert _learner(space, [ok, failed], [None, MIN]).conflicts == []  # compiled before: never learned
    learner = _learner(space, [failed], [MIN])
    learner.observe(space.encode(ok)[None, :], [True], [None])  # compiled after (a warm start): dropped
    assert learner.conflicts == []


def _run(seed: int, learn: bool, generations: int = 12, store: str = ":memory:",
         calls: list | None = None, **settings: bool) -> list[tuple[dict, str | None]]:
    calls = [] if calls is None else calls

    def objective(config: dict) -> float:
        why = _rejected(config)
        calls.append((dict(config), why))
        if why:
            raise RuntimeError(why)
        return float(abs(config["unroll"] - 4) + (config["opt_level"] == 3) + (config["fast_compile"] == "mid"))

    cfg = SearchConfiguration(generations=generations, seed=seed, learn_conflicts=learn, **settings)
    search = Search(objective, _plain(), cfg, store=store)
    search.start()
    search.close()
    return calls


def _asked_after_learning(calls: list[tuple[dict, str | None]]) -> list[dict]:
    """The calls made after a message was first seen that hit that message's conflict again."""
    seen: set[str] = set()
    again = []
    for config, why in calls:
        if why in seen:
            again.append(config)
        if why:
            seen.add(why)
    return again


def test_the_search_never_asks_a_learned_conflict_again_and_fails_less() -> None:
    learned = [_run(seed, True) for seed in range(4)]
    unlearned = [_run(seed, False) for seed in range(4)]
    assert all(_asked_after_learning(calls) == [] for calls in learned)
    assert sum(len(_asked_after_learning(calls)) for calls in unlearned) > 0
    fails = [sum(why is not None for _, why in calls) for calls in learned]
    fails_off = [sum(why is not None for _, why in calls) for calls in unlearned]
    assert sum(fails) < sum(fails_off), (fails, fails_off)
    assert all(f <= 2 for f in fails)  # each of the two conflicts costs one failed compile at most


def test_the_steady_state_search_learns_too() -> None:
    calls = [_run(seed, True, asynchronous=True) for seed in range(3)]
    assert all(_asked_after_learning(c) == [] for c in calls)
    assert any(why for c in calls for _, why in c)  # (it met a conflict to learn)


def test_a_resumed_run_keeps_what_its_stored_failures_taught(tmp_path) -> None:
    path = str(tmp_path / "run.db")
    calls: list[tuple[dict, str | None]] = []
    for seed in range(40):  # a first session that met a conflict
        calls.clear()
        _run(seed, True, generations=3, store=str(tmp_path / f"first{seed}.db"), calls=calls)
        if any(why for _, why in calls):
            break
    first = list(calls)
    (tmp_path / f"first{seed}.db").rename(path)
    more: list[tuple[dict, str | None]] = []

    def objective(config: dict) -> float:
        why = _rejected(config)
        more.append((dict(config), why))
        if why:
            raise RuntimeError(why)
        return float(config["unroll"])

    Search.resume(path, objective, generations=12)
    assert more, "the resumed run evaluated nothing new"
    assert _asked_after_learning(first + more) == []


def test_learn_conflicts_is_a_bool_and_runs_stored_before_it_did_not_learn() -> None:
    with pytest.raises(ConfigurationError, match="learn_conflicts is True or False"):
        SearchConfiguration(generations=2, learn_conflicts="yes")  # type: ignore[arg-type]
    assert SearchConfiguration.defaults()["learn_conflicts"] is False
    assert SearchConfiguration(generations=2).learn_conflicts is True


def test_conflicts_in_a_runs_rows_in_words() -> None:
    space = SearchSpace(_plain())
    base = {"opt_level": 1, "fast_compile": "max", "restrict": "unset", "unroll": 2}
    rows = [({**base, "opt_level": 0}, "ok", "", {}), (base, "error", f"RuntimeError: {MAX}", None),
            ({**base, "unroll": 4}, "timeout", MIN, None), ({"not": "a point"}, "error", MAX, None)]
    assert conflicts_in(space, rows) == ["opt_level in (1, 2, 3) and fast_compile = 'max' fail to compile"]
    assert conflicts_in(space, rows[:1] + rows[2:]) == []  # a timeout's text is not a compiler's answer


def test_a_runs_results_name_what_it_learned(tmp_path) -> None:
    path = str(tmp_path / "run.db")
    for seed in range(40):
        calls = _run(seed, True, generations=6, store=path)
        if any(why for _, why in calls):
            break
        (tmp_path / "run.db").unlink()
    learned = load_results(path).learned_conflicts()
    assert learned and set(learned) <= {"opt_level in (0, 2, 3) and fast_compile = 'min' fail to compile",
                                        "opt_level in (1, 2, 3) and fast_compile = 'max' fail to compile"}


def test_a_listed_value_set_never_takes_in_an_empty_value() -> None:
    # "<0,2>" splits into "0", "2" and empty words: a choice's "" (pass nothing) is not among the values listed
    space = SearchSpace({"opt_level": ss.choice(["", "0", "2", "3"]), "fast_compile": ss.choice(["min", "max", ""])})
    learner = _learner(space, [{"opt_level": "2", "fast_compile": "min"}],
                       ["ptxas fatal : Conflicting options -opt-level=<0,2> and --Ofast-compile=min specified"])
    assert [learner.describe(c) for c in learner.conflicts] == [
        "opt_level in ('0', '2') and fast_compile = 'min' fail to compile"]
    assert not _in_conflict(learner, space, {"opt_level": "", "fast_compile": "min"})


def test_what_a_pooled_baseline_taught_is_among_what_the_run_learned() -> None:
    space = {"restrict": ss.range(1, 8, 1, default=1), "fmad": ss.choice(["unset", "slow", "fast"], default="unset"),
             "vectorize": ss.log_sampling(0.001, 1.0, 6, knockout_prob=0.5)}

    def objective(config):
        raise RuntimeError(f"ptxas fatal : bad fmad={config['fmad']}")  # every config fails, naming its fmad

    for pooled in (True, False):
        s = Search(objective, space, SearchConfiguration(generations=5, pool_size=8, seed=0, baseline_in_pool=pooled),
                   store=":memory:")
        res = s.start()
        engine = [s.engine.conflicts.describe(c) for c in s.engine.conflicts.conflicts]
        assert res.learned_conflicts() == engine, pooled  # what the search learned, no more, no less
        assert len(engine) == 3 and res.status == "exhausted"  # (nothing left to ask: that is why it ended)


def test_controls_named_with_a_prefix_of_their_own_are_named_by_the_option() -> None:
    space = SearchSpace({"ptxas_opt_level": ss.choice([0, 1, 2, 3, "unset"]),
                         "ptxas_fast_compile": ss.choice(["min", "mid", "max", "unset"])})
    learner = _learner(space, [{"ptxas_opt_level": 0, "ptxas_fast_compile": "min"}], [MIN])
    assert [learner.describe(c) for c in learner.conflicts] == [
        "ptxas_opt_level in (0, 2, 3) and ptxas_fast_compile = 'min' fail to compile"]


def test_a_control_named_by_mistake_only_narrows_the_conflict() -> None:
    space = SearchSpace({**_plain(), "compile": ss.choice([1, 2, 3])})  # "--Ofast-compile" ends with its name
    failed = {"opt_level": 0, "fast_compile": "min", "restrict": "unset", "unroll": 1, "compile": 2}
    learner = _learner(space, [failed], [MIN])
    assert [learner.describe(c) for c in learner.conflicts] == [
        "opt_level in (0, 2, 3) and fast_compile = 'min' and compile = 2 fail to compile"]
    assert not _in_conflict(learner, space, {**failed, "compile": 1})  # so it rejects less, never more


def test_one_conflict_however_many_messages_say_it() -> None:
    space = SearchSpace(_plain())
    failed = {"opt_level": 2, "fast_compile": "min", "restrict": "unset", "unroll": 4}
    learner = _learner(space, [failed, {**failed, "unroll": 8}], [f"RuntimeError: {MIN}", f"compile_error: {MIN}"])
    assert len(learner.conflicts) == 1


@pytest.mark.skipif(not tool_available("nvcc"), reason="needs nvcc (CUDA toolkit or the nvidia-cuda-nvcc wheel)")
def test_a_real_compilers_message_is_read_and_its_conflict_never_asked_again(tmp_path) -> None:
    from compileiq_lab.kernels import KernelRun, load_kernel

    # TILE = 64 makes 4096 threads a block: sgemm.cu's static_assert ("TILE * TILE <= 1024") fails with it
    kernel = dataclasses.replace(load_kernel("sgemm"), defines={"TILE": (16, 64, 32)})
    run = KernelRun(kernel, "ptxas", ["sass_instructions", "registers"], arch="sm_90", workers=2)
    try:
        results = Search.of(run, store=str(tmp_path / "sgemm.db"), generations=3, seed=0).start()
    finally:
        run.close()
    tiles = [(r.params.get("defines", {}).get("TILE"), r.status) for r in results.records if not r.is_baseline]
    failed = [i for i, (tile, status) in enumerate(tiles) if status == "compile_error"]
    assert failed and all(tiles[i][0] == 64 for i in failed)
    learned = results.learned_conflicts()
    assert "defines.TILE = 64 fails to compile" in learned
    # (and what ptxas ignored)
    assert all(line == "defines.TILE = 64 fails to compile" or " is ignored" in line for line in learned)
    # a generation asked together may hold more than one; none is asked after the first failure's part was told
    after = [tile for tile, _ in tiles[failed[0] + 2:]]
    assert 64 not in after and len(after) >= 10


IGNORING = "ptxas warning : Conflicting options '-O0' and '--level' specified, ignoring '--level' option"


def _ignoring_run(seed: int, learn: bool, seen: list[tuple[dict, bool]], store: str | None = None,
                  generations: int = 10, resume: bool = False) -> None:
    """A search whose compiles ignore ``level`` with ``opt_level = 0`` and say so in the row, as the kernel evaluator
    keeps an "ignoring" warning (``detail["ignored_rules"]``, see ``compileiq_lab.measure.ignored``)."""
    space = {"opt_level": ss.choice([0, 1, 2, 3], knockout_prob=0.3), "level": ss.range(0, 10, knockout_prob=0.3),
             "x": ss.range(0, 20)}
    rule = {"control": "level", "when": [{"control": "opt_level", "value": 0}], "message": IGNORING}

    def objective(config: dict) -> Measurement:
        ignored = config.get("opt_level") == 0 and "level" in config
        seen.append((dict(config), ignored))
        return Measurement("ok", scores=(float(abs(config["x"] - 7)),),
                           detail={"ignored_rules": [rule]} if ignored else {})

    if resume:
        Search.resume(store, objective, generations=generations)
        return
    cfg = SearchConfiguration(generations=generations, seed=seed, learn_conflicts=learn)
    search = Search(objective, space, cfg, store=store)
    search.start()
    search.close()


def _ignored_again(seen: list[tuple[dict, bool]], pool: int = 5) -> int:
    """Configs in the ignored combination asked after the generation of the first one's result."""
    first = next((i for i, (_, ignored) in enumerate(seen) if ignored), None)
    return 0 if first is None else sum(ignored for _, ignored in seen[(first // pool + 1) * pool + 1:])


def test_a_combination_a_compile_ignored_is_learned_with_the_conflicts_and_never_asked_again(tmp_path) -> None:
    runs = {learn: [] for learn in (True, False)}
    for learn, seen_by_seed in runs.items():
        for seed in range(4):
            seen: list[tuple[dict, bool]] = []
            _ignoring_run(seed, learn, seen)
            seen_by_seed.append(seen)
    assert all(any(ignored for _, ignored in seen) for seen in runs[True])  # each run met it
    assert [_ignored_again(seen) for seen in runs[True]] == [0] * 4
    assert sum(_ignored_again(seen) for seen in runs[False]) > 0  # without learning it is asked again
    # the run's results list it with the conflicts, and a resumed run relearns it from the stored rows
    path = str(tmp_path / "run.db")
    first: list[tuple[dict, bool]] = []
    _ignoring_run(0, True, first, store=path, generations=4)
    assert load_results(path).learned_conflicts() == ["level is ignored with opt_level = 0"]
    more: list[tuple[dict, bool]] = []
    _ignoring_run(0, True, more, store=path, generations=12, resume=True)
    assert more and not any(ignored for _, ignored in more)


def test_learning_stops_at_max_conflicts() -> None:
    space = SearchSpace({"opt_level": ss.choice([0, 1, 2, 3], knockout_prob=0.3),
                         "level": ss.range(0, 10, knockout_prob=0.3)})
    learner = NamedConflicts(space)
    learner.MAX_CONFLICTS = 3  # (256 by default)
    rules = [[{"control": "level", "when": [{"control": "level", "value": v}], "message": f"level {v} ignored"}]
             for v in range(6)]
    X = np.array([space.encode({"level": v}) for v in range(6)])
    assert len(learner.observe(X, [True] * 6, [None] * 6, rules)) == 3
    assert learner.observe(X[:1], [False], [f"Conflicting options -opt-level and --level=0 {MIN}"]) == []
    assert [learner.describe(c) for c in learner.conflicts] == [f"level = {v} is ignored" for v in range(3)]
