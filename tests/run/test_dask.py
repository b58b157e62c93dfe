"""Evaluations on a real Dask LocalCluster (worker processes on loopback): the same rows as the local executor for a
seed, a worker killed mid-run, the asynchronous mode, the client killed and resumed, and the clear errors."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import compileiq_lab.space as ss
from compileiq_lab import Search, SearchConfiguration, load_results
from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.run.dask_executor import CLUSTER_SETTINGS
from compileiq_lab.run.events import EvaluationEvent

distributed = pytest.importorskip("distributed")
dask = pytest.importorskip("dask")

pytestmark = pytest.mark.slow
SPACE = {f"x{i}": ss.range(0, 9, default=0) for i in range(4)}
ROOT = Path(__file__).resolve().parents[2]


def make_objective(delay: float = 0.0, crash_on: int | None = None, marks: str | None = None):
    """A module-independent objective (cloudpickle sends it by value): a bowl with its minimum at 3, 3, 3, 3.
    ``crash_on``: the worker process dies (SIGKILL) evaluating configs with x0 == crash_on. ``marks``: a folder where
    each call holds a file named after its process id while it runs."""
    def objective(c):
        import os as _os
        import time as _time

        mark = Path(marks, str(_os.getpid())) if marks is not None else None
        if mark is not None:
            mark.touch()
        if crash_on is not None and c.get("x0") == crash_on:
            _os.kill(_os.getpid(), 9)
        _time.sleep(delay)
        if mark is not None:
            mark.unlink()
        return float(sum((v - 3) ** 2 for v in c.values()))
    return objective


@pytest.fixture(scope="module")
def client():
    with dask.config.set(CLUSTER_SETTINGS):
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                                           silence_logs=50)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def rows(results):
    return [(r.eval_id, r.generation, r.config_key, r.status, r.scores) for r in results.records]


def test_same_seed_gives_the_same_rows_as_the_local_executor(client):
    """Same seed and as many evaluation slots (the cluster's two worker threads): the same rows."""
    cfg = SearchConfiguration(generations=4, pool_size=6, seed=11)
    local = Search(make_objective(), SPACE, cfg, store=":memory:").start(workers=2)
    remote = Search(make_objective(), SPACE, cfg, store=":memory:", executor=client).start()
    assert remote.status == "finished"
    assert rows(remote) == rows(local)
    workers = {r.detail.get("worker") for r in remote.records}
    assert len(workers) == 2  # both worker processes took candidates, and each row says which


def test_a_worker_killed_mid_run_loses_nothing(client, tmp_path, caplog):
    marks = tmp_path / "marks"
    marks.mkdir()
    store = tmp_path / "run.db"
    cfg = SearchConfiguration(generations=3, pool_size=6, seed=5)
    killed: list[int] = []
    killers: list[threading.Thread] = []
    pids = set(client.run(os.getpid).values())

    def kill_busy() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # a worker that is evaluating a candidate right now
            busy = [int(p.name) for p in marks.iterdir() if p.name.isdigit() and int(p.name) in pids]
            if busy:
                os.kill(busy[0], signal.SIGKILL)  # a worker process of this test's own cluster, by its PID
                killed.append(busy[0])
                return
            time.sleep(0.01)

    def kill_one(event):
        # from a thread of its own: the loop goes on submitting meanwhile (it asks as many as the cluster has threads)
        if isinstance(event, EvaluationEvent) and event.record.eval_id >= 4 and not killers:
            killers.append(threading.Thread(target=kill_busy, daemon=True))
            killers[0].start()

    res = Search(make_objective(0.2, marks=str(marks)), SPACE, cfg, store=store, executor=client).start(kill_one)
    killers[0].join(30)
    assert killed
    assert "died (try 1 of 2)" in caplog.text  # the candidate it was evaluating was rescheduled
    assert res.status == "finished"
    keys = [r.config_key for r in res.records]
    assert len(keys) == len(set(keys)) == 3 * 6  # nothing evaluated twice, nothing lost (the baseline one of 18)
    assert {r.status for r in res.records} == {"ok"}  # the candidate that lost its worker was rescheduled
    assert len(load_results(store).records) == len(keys)
    client.wait_for_workers(2, timeout=30)  # the nanny restarted it


def test_a_candidate_that_kills_its_worker_twice_is_recorded_as_crashed(client):
    cfg = SearchConfiguration(generations=2, pool_size=6, seed=2)
    res = Search(make_objective(crash_on=5), SPACE, cfg, store=":memory:", executor=client).start()
    assert res.status == "finished"
    crashed = [r for r in res.records if r.status == "crashed"]
    assert crashed and all(r.params.get("x0") == 5 for r in crashed)
    assert "died 2 times" in crashed[0].error
    assert all(r.status == "ok" for r in res.records if r.params.get("x0") != 5)
    client.wait_for_workers(2, timeout=30)


def test_asynchronous_mode_spends_the_whole_budget_and_resumes(client, tmp_path):
    store = tmp_path / "async.db"
    cfg = SearchConfiguration(generations=5, pool_size=6, seed=1, asynchronous=True)
    res = Search(make_objective(0.01), SPACE, cfg, store=store, executor=client).start()
    assert res.status == "finished"
    keys = [r.config_key for r in res.records]
    assert len(keys) == len(set(keys)) == 1 + 5 * 6
    assert max(r.generation for r in res.records) == 5
    mean = {g: sum(r.scores[0] for r in res.records if r.generation == g) / 6 for g in (1, 5)}
    assert mean[5] < 0.5 * mean[1]  # it learns as results arrive (40 seeds locally: gen 5 at 0.17x of gen 1)
    more = Search.resume(store, make_objective(), generations=7, executor=client)
    assert len(more) == 1 + 7 * 6 and len({r.config_key for r in more.records}) == len(more)


def test_asynchronous_mode_runs_locally_with_threads():
    cfg = SearchConfiguration(generations=4, pool_size=4, seed=3, asynchronous=True)
    res = Search(make_objective(0.002), SPACE, cfg, store=":memory:").start(workers=3)
    assert res.status == "finished" and len(res) == 1 + 16


def test_the_client_killed_with_sigkill_is_resumed_to_the_same_rows(tmp_path):
    store = tmp_path / "killed.db"
    script = tmp_path / "client.py"
    script.write_text(textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_dask import SPACE, make_objective
        from compileiq_lab import Search, SearchConfiguration

        if __name__ == "__main__":
            cfg = SearchConfiguration(generations=4, pool_size=6, seed=9)
            Search(make_objective(0.15), SPACE, cfg, store={str(store)!r}, executor="dask").start(workers=2)
    """))
    proc = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and (not store.exists() or len(load_results(store).records) < 8):
            assert proc.poll() is None, "the client ended before it could be killed"
            time.sleep(0.2)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # this test's own process group: the cluster's workers, if left
        except ProcessLookupError:
            pass
    done = len(load_results(store).records)
    assert 8 <= done < 25
    resumed = Search.resume(store, make_objective(), workers=2)  # as many slots: the picks replay
    uninterrupted = Search(make_objective(), SPACE, SearchConfiguration(generations=4, pool_size=6, seed=9),
                           store=":memory:").start(workers=2)
    assert resumed.status == "finished"
    assert [r[2:] for r in rows(resumed)] == [r[2:] for r in rows(uninterrupted)]


def test_an_unreachable_scheduler_is_one_clear_error(monkeypatch, tmp_path):
    import socket

    from compileiq_lab.run import dask_executor

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once the socket is closed
    monkeypatch.setattr(dask_executor, "CONNECT_TIMEOUT_S", 1.0)
    search = Search(make_objective(), SPACE, SearchConfiguration(generations=1), store=tmp_path / "u.db",
                    executor=f"tcp://127.0.0.1:{port}")
    with pytest.raises(ConfigurationError, match=r"could not reach the Dask scheduler at 'tcp://127.0.0.1:\d+'.*"
                                                 r"dask scheduler"):
        search.start()
    header = load_results(tmp_path / "u.db").header
    assert header.status == "failed" and "could not reach" in header.stop_reason
    with pytest.raises(ConfigurationError, match="executor must be 'local', 'dask'"):
        Search(make_objective(), SPACE, SearchConfiguration(generations=1), store=":memory:",
               executor="sge").start()


def test_an_objective_that_cannot_travel_is_refused_before_the_search(client):
    lock = threading.Lock()
    with pytest.raises(ConfigurationError, match="must pickle"):
        Search(lambda c: lock.locked() + 1.0, SPACE, SearchConfiguration(generations=1), store=":memory:",
               executor=client).start()


class _NeedsGpu:
    """An objective that declares it must run where a GPU is."""

    def __init__(self) -> None:
        self.dask_resources = {"GPU": 1}

    def __call__(self, config):
        return 1.0


def test_a_gpu_objective_on_a_cluster_without_gpu_workers_is_refused(client):
    with pytest.raises(ConfigurationError, match=r"resources \{'GPU': 1\}.*--resources GPU=1"):
        Search(_NeedsGpu(), SPACE, SearchConfiguration(generations=1), store=":memory:", executor=client).start()


def _gpu_worker(address: str, name: str, speed: float, tmp_path: Path) -> subprocess.Popen[bytes]:
    """A `dask worker` process declaring GPU=1, its stand-in GPU ``speed`` times slower than 1 ns per byte."""
    env = {**os.environ, "COMPILEIQ_STANDIN_SPEED": str(speed), "COMPILEIQ_STANDIN_NAME": f"stand-in x{speed:g}"}
    return subprocess.Popen([sys.executable, "-m", "dask", "worker", address, "--nthreads", "1", "--name", name,
                             "--resources", "GPU=1", "--no-dashboard", "--local-directory", str(tmp_path / name)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def test_gpu_runs_compile_anywhere_run_on_gpu_workers_once_per_code_with_a_baseline_per_gpu(tmp_path):
    """A KernelRun timing GPU runs (the stand-in GPU backend) on a cluster of one CPU worker and two GPU workers whose
    stand-in GPUs differ 2x in speed."""
    from compileiq_lab.kernels import KernelRun
    from compileiq_lab.space.catalogs import PTXAS
    from compileiq_lab.testing import tool_available
    from compileiq_lab.testing.gpu_standin import STANDIN_BACKEND

    if not tool_available("nvcc") or not tool_available("ptxas"):
        pytest.skip("needs nvcc and ptxas")
    run = KernelRun("reduction", PTXAS.select(names=["opt_level", "maxrregcount"]), ["runtime"],
                    gpu_backend=STANDIN_BACKEND, remote=True, workdir=tmp_path)
    assert run.gpu is None and run.dask_resources == {"GPU": 1}  # nothing started in this process
    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0",
                                       silence_logs=50)
    gpus = [_gpu_worker(cluster.scheduler_address, name, speed, tmp_path) for name, speed in (("gpuA", 1), ("gpuB", 2))]
    try:
        with distributed.Client(cluster) as c:
            c.wait_for_workers(3, timeout=60)
            res = Search.of(run, store=tmp_path / "gpu.db", executor=c, generations=3, pool_size=6).start()
            more = Search.open(tmp_path / "gpu.db", run, generations=4, executor=c).start()
        assert run.gpu is None and run.timer is None  # the client measured nothing: no GPU worker of its own
    finally:
        run.close()
        for p in gpus:
            os.killpg(p.pid, signal.SIGTERM)  # the worker processes this test started
            p.wait(30)
        cluster.close()
    assert res.status == "finished" and {r.status for r in res.records} == {"ok"}
    measured_on = {r.detail["gpu"]["worker"] for r in res.records}
    assert measured_on <= {"gpuA", "gpuB"}
    assert "0" in {r.detail["worker"] for r in res.records}  # the CPU-only worker compiled some
    first_runs = [r for r in res.records if not r.detail["run_reused"]]
    keys = [r.detail["code_hash"] for r in first_runs]
    assert len(keys) == len(set(keys)) < len(res.records)  # one run per distinct code, across both GPU workers
    baselines = res.baselines
    assert set(baselines) == {"gpuA: stand-in x1", "gpuB: stand-in x2"}  # each measured its own baseline
    for r in first_runs:  # each speedup against the baseline of the GPU that measured it
        assert res.baseline_scores_of(r) == baselines[f"{r.detail['gpu']['worker']}: {r.detail['gpu']['name']}"]
    ratio = baselines["gpuB: stand-in x2"][0] / baselines["gpuA: stand-in x1"][0]
    assert 1.9 < ratio < 2.1
    norm = res.get_results(normalize=True)
    assert norm.loc[norm["is_baseline"], "norm_score_1"].iloc[0] == pytest.approx(1.0)
    resumed = [r for r in more.records if r.eval_id >= len(res) and not r.detail["run_reused"]]
    assert resumed and all(r.detail.get("baseline_scores") for r in resumed)  # measured again on each GPU


def test_a_worker_missing_the_compiler_is_named_before_the_search(tmp_path):
    from compileiq_lab.kernels import KernelRun
    from compileiq_lab.testing import tool_available

    if not tool_available("gcc"):
        pytest.skip("needs gcc")
    run = KernelRun("dot", "gcc", ["text_bytes"], remote=True, workdir=tmp_path)
    empty = tmp_path / "bin"
    empty.mkdir()
    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0",
                                       env={"PATH": str(empty)}, silence_logs=50)
    try:
        with distributed.Client(cluster) as c:
            with pytest.raises(ConfigurationError, match=r"1 of 1 Dask workers .* cannot evaluate .*gcc"):
                Search.of(run, store=":memory:", executor=c, generations=1).start()
    finally:
        cluster.close()


class _StagedRaises:
    """A staged objective whose compile stage raises for one config (as a bug in a user's stage would)."""

    def compile_stage(self, config):
        raise ValueError(f"cannot build {config}")

    def run_stage(self, built):
        raise RuntimeError("never reached")


def test_a_stage_that_raises_is_a_row_not_the_end_of_the_run():
    import cloudpickle

    from compileiq_lab.run.dask_worker import remote_stage

    blob = cloudpickle.dumps(_StagedRaises())
    m = remote_stage("t-raises", blob, "compile_stage", {"x0": 1})
    assert m.status == "error" and "ValueError: cannot build" in m.error and m.detail["failed_stage"] == "compile_stage"
    run = remote_stage("t-raises", blob, "run_stage", object())
    assert run["status"] == "error" and "RuntimeError: never reached" in run["error"]


def test_an_executor_object_given_is_left_running_for_its_owner():
    from compileiq_lab.run.executor import ThreadExecutor

    ex = ThreadExecutor(2)
    cfg = SearchConfiguration(generations=2, pool_size=4, seed=0)
    first = Search(make_objective(), SPACE, cfg, store=":memory:", executor=ex).start()
    again = Search(make_objective(), SPACE, cfg, store=":memory:", executor=ex).start()  # the same pool again
    assert first.status == again.status == "finished" and rows(first) == rows(again)
    ex.shutdown()


def test_cpu_timed_runs_are_evaluated_one_at_a_time_on_a_cluster(client, tmp_path, caplog):
    from compileiq_lab.kernels import KernelRun
    from compileiq_lab.testing import tool_available

    if not tool_available("gcc"):
        pytest.skip("needs gcc")
    timed = KernelRun("dot", "gcc", ["runtime"], remote=True, workdir=tmp_path)
    assert timed.exclusive_runs and not KernelRun("dot", "gcc", ["text_bytes"], remote=True).exclusive_runs
    res = Search.of(timed, store=":memory:", executor=client, generations=1, pool_size=3).start()
    assert res.status == "finished" and "one candidate at a time" in caplog.text
    starts = sorted((r.started_at, r.started_at + r.elapsed_s) for r in res.records)
    assert all(b[0] >= a[1] - 0.05 for a, b in itertools.pairwise(starts))  # no two overlapped


class _Checked:
    """An objective with its own preflight() (no arguments), failing on the workers."""

    def preflight(self):
        return "the licence server is unreachable"

    def __call__(self, config):
        return 1.0


def test_an_objectives_own_preflight_is_run_on_the_workers(client):
    with pytest.raises(ConfigurationError, match=r"2 of 2 Dask workers .*the licence server is unreachable"):
        Search(_Checked(), SPACE, SearchConfiguration(generations=1), store=":memory:", executor=client).start()


def test_combinations_the_compiler_ignored_on_the_workers_are_learned_by_the_search(client, tmp_path):
    from compileiq_lab.kernels import KernelRun
    from compileiq_lab.search.conflicts import NamedConflicts, lessons
    from compileiq_lab.space import SearchSpace
    from compileiq_lab.testing import tool_available

    if not tool_available("nvcc"):
        pytest.skip("needs nvcc")
    # the evaluator runs on the workers: the rule of each "ignoring ..." warning comes back in the row
    run = KernelRun("sgemm", "ptxas", ["sass_instructions"], arch="sm_90", remote=True, workdir=tmp_path)
    res = Search.of(run, store=str(tmp_path / "r.db"), executor=client, generations=6, pool_size=8, seed=0).start()
    taught = [r for r in res.records if r.detail.get("ignored_rules")]
    assert taught, "no compile ignored a control: nothing to learn"
    assert any(" is ignored" in line for line in res.learned_conflicts())
    space = SearchSpace.from_spec(res.header.space)
    for g in sorted({r.generation for r in taught}):  # nothing learned by generation g is asked after it
        learner = NamedConflicts(space)
        done = [r for r in res.records if r.generation <= g and not r.is_baseline]
        told = [lessons(r.status, r.error, r.detail) for r in done]
        learner.observe(np.array([space.encode(r.params) for r in done]), [r.status == "ok" for r in done],
                        [m for m, _ in told], [rules for _, rules in told])
        later = [r for r in res.records if r.generation > g]
        assert not [r.eval_id for r in later if learner.conflict(space.encode(r.params)) is not None]
