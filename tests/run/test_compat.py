"""Code written against CompileIQ 1.1 runs here: its published examples' calls, with only the import changed.

The examples live in NVIDIA's CompileIQ repository (github.com/NVIDIA/CompileIQ, commit
9db0355d0481707b400f20824cf0b928751cdb31, under the NVIDIA Software License Agreement, which does not let
them be redistributed). So each test below does not copy an example: it makes the same calls, with the same
arguments, that the named example makes (its objective, space, SearchConfiguration, Search and start
arguments, and the result accessors it reads), imported from compileiq_lab instead of compileiq.*, and
asserts what they do here.
"""

from __future__ import annotations

import logging
import math
import os
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import compileiq_lab as ss
from compileiq_lab import (
    BASELINE_CONFIG,
    INVALID_SCORE,
    EngineConfig,
    MultiProcessWorker,
    Run,
    Score,
    Search,
    SearchConfiguration,
    Worker,
    WorkerTypes,
    load_results,
)
from compileiq_lab.exceptions import ConfigurationError, SearchFailedError, SearchStateError


def _toy_space(with_literal: bool) -> dict[str, Any]:
    space: dict[str, Any] = {"x": ss.range(start=1.0, end=20.0, step=0.5), "y": ss.choice([1, 2, 3])}
    if with_literal:
        space["z"] = ss.literal("this is a constant", knockout_prob=0.5)
    return space


def test_single_objective_example(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """examples/single_objective.py: no default anywhere, so no baseline row; every row is ok, said once."""
    def objective(config: dict[str, Any]) -> float:
        return config["x"] ** 2 + config["y"]

    main_config = SearchConfiguration(generations=5, problem_type="min", num_objectives=1)
    tuner = Search(objective_function=objective, search_space=_toy_space(True), search_config=main_config,
                   store=tmp_path / "run.db")
    with caplog.at_level(logging.WARNING, logger="compileiq_lab"):
        results = tuner.start()
    df = results.get_results()
    assert set(df["status"]) == {"ok"}
    assert not df["is_baseline"].any()
    assert sorted(set(df["generation"])) == [1, 2, 3, 4, 5]
    warned = [r.getMessage() for r in caplog.records if "no baseline row" in r.getMessage()]
    assert len(warned) == 1 and "x, y" in warned[0]
    best = results.get_best_result()
    assert best is not None and best["score_1"] == df["score_1"].min()
    assert best["score_1"] == objective(best["params"])


def test_multi_objective_example_with_two_workers(tmp_path: Path) -> None:
    """examples/multi_objective.py: pool 12, mutate_rate 0.5, start(num_workers=2), pareto_front()."""
    def multiobjective(config: dict[str, Any]) -> tuple[float, float]:
        return config["x"] ** 2 + config["y"], config["y"] ** 2 + config["x"]

    main_config = SearchConfiguration(pool_size=12, generations=3, mutate_rate=0.5, problem_type="min",
                                      num_objectives=2)
    tuner = Search(objective_function=multiobjective, search_space=_toy_space(False), search_config=main_config,
                   store=tmp_path / "run.db")
    results = tuner.start(num_workers=2)
    assert len(results) == 36 and {r.status for r in results.records} == {"ok"}
    front = results.pareto_front()
    points = [(r["score_1"], r["score_2"]) for r in results.get_results().to_dict("records")]
    for p in front:
        a = (p["score_1"], p["score_2"])
        assert not any(b[0] <= a[0] and b[1] <= a[1] and b != a for b in points)


def test_custom_worker_example_is_refused_naming_ask_tell(tmp_path: Path) -> None:
    """examples/custom_worker.py subclasses Worker; here such a class is refused, and the message names the
    equivalent (MANUAL with ask()/tell()). Its start(dummy_arg=...) keyword is refused too."""
    class SequentialWorker(Worker):
        pass

    def objective(params: dict[str, Any]) -> float:
        return 2 if params == {} else params["x"] - params["y"] ** 2

    main_config = SearchConfiguration(normalize=True, pool_size=12, generations=3, mutate_rate=0.5,
                                      problem_type="min", num_objectives=1)
    with pytest.raises(ConfigurationError, match=r"WorkerTypes\.MANUAL.*ask\(\)/tell\(\)"):
        Search(objective_function=objective, search_space=_toy_space(False), search_config=main_config,
               worker_type=SequentialWorker, store=tmp_path / "a.db")
    tuner = Search(objective_function=objective, search_space=_toy_space(False), search_config=main_config,
                   store=tmp_path / "b.db")
    with pytest.raises(ConfigurationError, match=r"\['dummy_arg'\].*functools\.partial"):
        tuner.start(dummy_arg="You can pass in many custom keyword arguments to the worker.")


def test_normalizing_example_runs_in_worker_processes(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """examples/normalizing.py: normalize=True calls the objective with BASELINE_CONFIG first; with
    MultiProcessWorker and start(num_workers=5) the calls run in worker processes, never in this one."""
    pids = tmp_path / "pids"
    pids.mkdir()

    def objective(config: dict[str, Any]) -> float:
        (pids / str(os.getpid())).touch()
        if config == BASELINE_CONFIG:
            return 0.001
        if "z" in config:
            return config["x"] ** 2 + config["y"]
        return config["y"] ** 2 + config["x"]

    main_config = SearchConfiguration(normalize=True, pool_size=12, generations=2, mutate_rate=0.25,
                                      problem_type="min", num_objectives=1)
    tuner = Search(objective_function=objective, search_space=_toy_space(True), search_config=main_config,
                   worker_type=MultiProcessWorker, store=tmp_path / "run.db")
    results = tuner.start(num_workers=5)
    assert any("x, y have no default" in r.getMessage() and "BASELINE_CONFIG" in r.getMessage()
               for r in caplog.records)
    df = results.get_results()
    assert df.loc[0, "params"] == {} and bool(df.loc[0, "is_baseline"]) and df.loc[0, "score_1"] == 0.001
    assert set(df["status"]) == {"ok"} and len(df) == 1 + 2 * 12
    assert list(df["score_1"] / 0.001) == pytest.approx(list(df["norm_score_1"]))
    seen = {int(p.name) for p in pids.iterdir()}
    assert os.getpid() not in seen and 1 <= len(seen) <= 5


def test_manual_ask_tell_with_amber_engine_and_scores(tmp_path: Path) -> None:
    """CompileIQ 1.1's manual pattern (its wheel's API: no published example exists): WorkerTypes.MANUAL,
    EngineConfig("amber", {"seed": ...}), a loop on current_generation telling Score objects; same seed,
    same candidates."""
    def run(seed: int, store: Path) -> pd.DataFrame:
        s = Search(objective_function=lambda c: 0.0, search_space=_toy_space(False),
                   search_config=SearchConfiguration(generations=2, pool_size=8, num_objectives=2),
                   worker_type=WorkerTypes.MANUAL, engine=EngineConfig(name="amber", options={"seed": seed}),
                   disable_progress_bar=True, store=store)
        with pytest.raises(SearchStateError, match="ask\\(\\) and tell\\(\\)"):
            s.start()
        while s.current_generation < 2:
            cands = s.ask()
            s.tell([Score(score=(c.params["x"] + c.params["y"], c.params["x"] * c.params["y"]),
                          param_id=c.param_id, num_objectives=2) for c in cands])
        assert s.result.pareto_front()
        return s.result.get_results()

    a, b = run(1, tmp_path / "a.db"), run(1, tmp_path / "b.db")
    assert {"generation", "score_1", "score_2", "params"} <= set(a.columns)
    assert len(a) == 16 and list(a["params"]) == list(b["params"])
    assert list(run(2, tmp_path / "c.db")["params"]) != list(a["params"])


def test_tell_scores_checks_param_ids_and_records_invalid(tmp_path: Path) -> None:
    s = Search(objective_function=lambda c: 0.0, search_space=_toy_space(False),
               search_config=SearchConfiguration(generations=1, pool_size=4), worker_type="manual",
               store=tmp_path / "run.db")
    cands = s.ask()
    with pytest.raises(SearchStateError, match="not awaiting"):
        s.tell([Score(score=1.0, param_id="nope")])
    with pytest.raises(ConfigurationError, match="twice"):
        s.tell([Score(score=1.0, param_id=cands[0].param_id)] * 2)
    records = s.tell([Score(score=INVALID_SCORE if i == 0 else float(i), param_id=c.param_id)
                      for i, c in enumerate(cands)])
    assert [r.status for r in records] == ["invalid", "ok", "ok", "ok"]


def test_retired_settings_warn_with_their_equivalent() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        SearchConfiguration(generations=2, cull_size=4, mutate_rate=0.3)
    messages = [str(w.message) for w in caught if issubclass(w.category, FutureWarning)]
    assert len(messages) == 1 and "cull_size" in messages[0] and "pool_size" in messages[0]


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"worker_type": WorkerTypes.RAY}, "start\\(workers=N\\)"),
    ({"worker_type": WorkerTypes.ASYNC}, "plain \\(synchronous\\) function"),
    ({"worker_type": "threads"}, "worker_type must be one of"),
    ({"tracker_config": {"name": "mlflow"}}, "Run.subscribe"),
    ({"cache_folder": "/tmp/ciq"}, "store="),
    ({"engine": "cma"}, "engine must be one of"),
    ({"engine": EngineConfig("amber", {"survivor_count": 4})}, "pool_size"),
])
def test_arguments_without_an_equivalent_are_refused_naming_one(tmp_path: Path, kwargs: dict[str, Any],
                                                                match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        Search(lambda c: 1.0, _toy_space(False), SearchConfiguration(generations=1), store=tmp_path / "r.db",
               **kwargs)


def test_engine_seed_clashing_with_settings_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="given twice"):
        Search(lambda c: 1.0, _toy_space(False), SearchConfiguration(generations=1, seed=3),
               engine=EngineConfig("amber", {"seed": 4}), store=tmp_path / "r.db")


def test_exit_on_failure_stops_after_a_failed_first_generation(tmp_path: Path) -> None:
    calls: list[dict[str, Any]] = []

    def broken(config: dict[str, Any]) -> float:
        calls.append(config)
        raise RuntimeError("kernel did not build")

    s = Search(broken, _toy_space(False), SearchConfiguration(generations=4, pool_size=4), exit_on_failure=True,
               store=tmp_path / "run.db")
    with pytest.raises(SearchFailedError, match="kernel did not build.*exit_on_failure=False"):
        s.start()
    assert len(calls) == 4  # one generation, not four
    header = load_results(str(tmp_path / "run.db")).header
    assert (header.status, header.stop_reason) == ("stopped", "exit_on_failure")  # the store says why it stopped
    quiet = Search(broken, _toy_space(False), SearchConfiguration(generations=2, pool_size=4),
                   store=tmp_path / "other.db")
    assert len(quiet.start()) == 8


def test_a_run_ended_by_exit_on_failure_fails_and_never_says_it_finished(tmp_path: Path) -> None:
    def broken(config: dict[str, Any]) -> float:
        raise RuntimeError("kernel did not build")

    s = Search(broken, _toy_space(False), SearchConfiguration(generations=4, pool_size=4), exit_on_failure=True,
               store=tmp_path / "run.db")
    run = Run(s)
    kinds: list[str] = []
    run.subscribe(lambda event: kinds.append(type(event).__name__))
    run.start()
    with pytest.raises(SearchFailedError):
        run.join(timeout=60)
    assert kinds[-1] == "FailedEvent" and "FinishedEvent" not in kinds, kinds
    assert run.state == "failed"


def test_exit_on_failure_leaves_a_baseline_that_ran_out(tmp_path: Path) -> None:
    """CompileIQ's usual setup: the compiler defaults build (the baseline, {}), every searched config fails."""
    def objective(config: dict[str, Any]) -> float:
        if not config:
            return 1.0
        raise RuntimeError("nvcc failed")

    s = Search(objective, {"x": ss.range(1, 50)}, SearchConfiguration(generations=3, pool_size=4, normalize=True),
               exit_on_failure=True, store=tmp_path / "run.db")
    with pytest.raises(SearchFailedError, match="nvcc failed"):
        s.start()
    stored = load_results(str(tmp_path / "run.db"))
    assert stored.baseline_record.status == "ok" and max(r.generation for r in stored.records) == 1


@pytest.mark.parametrize("kwargs, rule", [({"task_timeout": 0}, "0 < task_timeout"),
                                           ({"task_timeout": -1}, "0 < task_timeout"),
                                           ({"task_timeout": float("nan")}, "0 < task_timeout"),
                                           ({"num_workers": 0}, "workers is an int >= 1"),
                                           ({"num_workers": 2, "workers": 3}, "given twice")])
def test_start_refuses_bad_worker_settings_before_any_call(kwargs: dict[str, Any], rule: str) -> None:
    calls: list[dict[str, Any]] = []
    s = Search(lambda c: calls.append(c) or 1.0, _toy_space(False), SearchConfiguration(generations=1, pool_size=4),
               store=":memory:")
    with pytest.raises(ConfigurationError, match=rule):
        s.start(**kwargs)
    assert calls == []


def test_dump_results_writes_the_table_as_csv(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="names a CSV file to write, but got the folder"):
        Search(lambda c: c["x"], _toy_space(False), SearchConfiguration(generations=2), dump_results=tmp_path)
    with pytest.raises(ConfigurationError, match="it is the run store it comes from"):  # the CSV over the run
        Search(lambda c: c["x"], _toy_space(False), SearchConfiguration(generations=2), dump_results=tmp_path / "k.db",
               store=tmp_path / "k.db")
    assert not (tmp_path / "k.db").exists()
    out = tmp_path / "new" / "results.csv"  # its folder made as the run is made, as a store's is
    s = Search(lambda c: c["x"], _toy_space(False), SearchConfiguration(generations=2, pool_size=4),
               dump_results=out, store=tmp_path / "run.db")
    results = s.start()
    table = pd.read_csv(out)
    assert len(table) == len(results) == 8
    assert list(table["score_1"]) == [r.scores[0] for r in results.records]


def test_dump_results_goes_on_being_written_by_the_run_resumed(tmp_path: Path) -> None:
    """A resumed run writes the CSV its run was made with (Search.resume has no dump_results): the file a CompileIQ
    user reads does not stop at the rows before the interruption."""
    out, store = tmp_path / "results.csv", tmp_path / "run.db"
    Search(lambda c: c["x"], _toy_space(False), SearchConfiguration(generations=2, pool_size=4),
           dump_results=out, store=store).start()
    assert len(pd.read_csv(out)) == 8
    results = Search.resume(store, lambda c: c["x"], generations=4)
    table = pd.read_csv(out)
    assert len(table) == len(results) == 16
    assert list(table["score_1"]) == [r.scores[0] for r in results.records]
    elsewhere = tmp_path / "other.csv"  # a new file given for the reopened run is the one written from then on
    reopened = Search(lambda c: c["x"], _toy_space(False), SearchConfiguration(generations=5, pool_size=4),
                      dump_results=elsewhere, store=store).start()
    assert len(pd.read_csv(elsewhere)) == len(reopened) == 20 and len(pd.read_csv(out)) == 16
    assert len(Search.resume(store, lambda c: c["x"], generations=6)) == len(pd.read_csv(elsewhere)) == 24


def test_task_timeout_kills_slow_calls(tmp_path: Path) -> None:
    def slow(config: dict[str, Any]) -> float:
        import time
        if config["y"] == 3:
            time.sleep(30)
        return config["x"]

    s = Search(slow, {"x": ss.range(1, 4), "y": ss.choice([1, 3])},
               SearchConfiguration(generations=1, pool_size=4, seed=0), store=tmp_path / "run.db")
    results = s.start(task_timeout=1.0, num_workers=2)
    assert {r.params["y"] for r in results.records} == {1, 3}
    assert all(r.status == ("timeout" if r.params["y"] == 3 else "ok") for r in results.records)
    assert all(math.isfinite(r.elapsed_s) and r.elapsed_s < 10 for r in results.records)


@pytest.mark.parametrize("given", [Path("main.config"), "main.config", 10])
def test_a_search_config_that_is_not_settings_is_refused_with_the_fix(given: Any) -> None:
    with pytest.raises(ConfigurationError, match="search_config is a SearchConfiguration or a dict"):
        Search(lambda c: 1.0, _toy_space(False), given, store=":memory:")


def test_a_resumed_run_keeps_the_per_call_limit_it_was_started_with(tmp_path: Path) -> None:
    """start(task_timeout=...) is CompileIQ's per-call limit: the run resumed (which has no such argument) runs each
    call under it too, where a hanging call would otherwise run in this process for as long as it hangs."""
    def hangs(config: dict[str, Any]) -> float:
        import time
        if config["y"] == 3:
            time.sleep(30)
        return config["x"]

    store = tmp_path / "run.db"
    space = {"x": ss.range(1, 40), "y": ss.choice([1, 3])}
    Search(hangs, space, SearchConfiguration(generations=1, pool_size=4, seed=0), store=store).start(task_timeout=1.0)
    assert Search.open(store).config.timeout_s == 1.0
    # continued by the script that made it, the settings given again without a limit: the limit holds too
    again = Search(hangs, space, SearchConfiguration(generations=2, pool_size=4, seed=0), store=store)
    assert again.config.timeout_s == 1.0
    again.close()
    results = Search.resume(store, hangs, generations=3)
    late = [r for r in results.records if r.generation > 1]
    assert {r.params["y"] for r in late} == {1, 3}
    assert all(r.status == ("timeout" if r.params["y"] == 3 else "ok") and r.elapsed_s < 10 for r in late)
    isolated = Search(lambda c: c["x"], space, SearchConfiguration(generations=1, pool_size=2),
                      worker_type=WorkerTypes.ISOLATED, store=tmp_path / "iso.db")
    isolated.start()
    assert Search.open(tmp_path / "iso.db").config.timeout_s is not None  # resumed in a killable worker as well


def test_a_tell_of_what_ask_did_not_return_says_what_to_pass(tmp_path: Path) -> None:
    s = Search(None, _toy_space(False), SearchConfiguration(generations=2, pool_size=3), store=tmp_path / "r.db")
    batch = s.ask()
    for wrong, said in [([c.config for c in batch], r"takes the Candidate objects ask\(\) returned, but got dict"),
                        ([c.param_id for c in batch], r"takes the Candidate objects ask\(\) returned, but got str")]:
        with pytest.raises(ConfigurationError, match=said):
            s.tell(wrong, [1.0] * len(batch))
    scores = [Score(score=1.0, param_id=c.param_id) for c in batch]
    with pytest.raises(ConfigurationError, match="a Score carries its own score"):
        s.tell(scores, [1.0] * len(batch))
    with pytest.raises(ConfigurationError, match="a Score names its candidate itself"):
        s.tell(batch, scores)
    with pytest.raises(ConfigurationError, match=r"`scores is a list, one item per candidate` must hold, but got "
                                                 r"float 1.0; pass a list even for one candidate"):
        s.tell(batch, 1.0)
    with pytest.raises(ConfigurationError, match="candidates is a list"):
        s.tell(batch[0], [1.0])
    assert not s.results.records  # nothing was recorded by the refused tells
    rows = s.tell(batch, (float(i) for i in range(len(batch))))  # any iterable of scores
    assert [list(r.scores or ()) for r in rows] == [[float(i)] for i in range(len(batch))]


def test_a_scores_metadata_is_kept_and_invalid_score_is_said_as_a_failure(tmp_path: Path) -> None:
    s = Search(None, _toy_space(False), SearchConfiguration(generations=2, pool_size=3), store=tmp_path / "r.db")
    a, b, c = s.ask()
    s.tell([Score(score=2.0, param_id=a.param_id, metadata="regs=32 spill=0"),
            Score(score=INVALID_SCORE, param_id=b.param_id, metadata={"log": "ptxas: error"}),
            Score(score=1.0, param_id=c.param_id)])
    by_config = {str(r.params): r for r in s.results.records}
    assert by_config[str(a.config)].detail["metadata"] == "regs=32 spill=0"
    assert "metadata" not in by_config[str(c.config)].detail
    failed = by_config[str(b.config)]
    assert failed.detail["metadata"] == {"log": "ptxas: error"}  # as given, not its text
    assert failed.status == "invalid" and failed.error == ("objective returned INVALID_SCORE: a failed evaluation, as "
                                                           "it marks one")
    ran = Search(lambda cfg: INVALID_SCORE if cfg["y"] == 2 else cfg["x"], _toy_space(False),
                 SearchConfiguration(generations=1, pool_size=6, seed=1), store=":memory:").start()
    assert any(r.params["y"] == 2 for r in ran.records)
    assert all(("INVALID_SCORE" in r.error) == (r.params["y"] == 2) for r in ran.records)
