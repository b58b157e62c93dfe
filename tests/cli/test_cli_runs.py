"""show, export, flags, verify and report end to end on real tune runs, in a subprocess."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

needs_cuda = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "compileiq_lab.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=600)


@pytest.fixture(scope="module")
def cuda_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not installed")
    d = tmp_path_factory.mktemp("cuda")
    out = cli("tune", "sgemm", "--space", "ptxas", "--objectives", "registers,sass_instructions",
              "--generations", "2", "--pool-size", "6", "--store", "run.db", cwd=d)
    assert out.returncode == 0, out.stderr
    return d


@needs_cuda
def test_export_flags_and_verify_round_trip(cuda_run):
    ex = cli("export", "run.db", "--eval-id", "3", "-o", "p3.acf", cwd=cuda_run)
    assert ex.returncode == 0, ex.stderr
    doc = json.loads((cuda_run / "p3.acf").read_text())
    assert doc["format"] == "compileiq-lab-acf/1" and doc["run"]["eval_id"] == 3 and doc["kernel"] == "sgemm"
    flags = cli("flags", "p3.acf", cwd=cuda_run)
    assert flags.returncode == 0 and "-DTILE=" in flags.stdout
    ptxas = cli("flags", "p3.acf", "--stage", "ptxas", cwd=cuda_run)
    assert ptxas.returncode == 0 and "-DTILE" not in ptxas.stdout
    # the printed flags alone rebuild the recorded machine code
    from compileiq_lab.kernels import load_kernel
    from compileiq_lab.measure.binary import inspect_elf

    src = load_kernel("sgemm").source_path
    rebuilt = subprocess.run(["nvcc", "-cubin", *flags.stdout.split(), str(src), "-o", "re.cubin"], cwd=cuda_run,
                             capture_output=True, text=True, timeout=300)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert inspect_elf(cuda_run / "re.cubin").code_hash == doc["code_hash"]
    ok = cli("verify", "p3.acf", cwd=cuda_run)
    assert ok.returncode == 0 and "verify: OK" in ok.stdout, ok.stdout + ok.stderr
    # the recorded machine code no longer matches: verify says so and fails
    doc["code_hash"] = "0" * 64
    (cuda_run / "bad.acf").write_text(json.dumps(doc))
    bad = cli("verify", "bad.acf", cwd=cuda_run)
    assert bad.returncode == 1 and "MISMATCH" in bad.stdout


@needs_cuda
def test_tampered_acf_is_rejected_by_flags(cuda_run):
    cli("export", "run.db", "-o", "best.acf", cwd=cuda_run)
    doc = json.loads((cuda_run / "best.acf").read_text())
    doc["argv"]["backend"] = doc["argv"]["backend"] + ["-o", "/etc/passwd"]
    (cuda_run / "evil.acf").write_text(json.dumps(doc))
    out = cli("flags", "evil.acf", cwd=cuda_run)
    assert out.returncode == 1 and "Traceback" not in out.stderr and "-o" in out.stderr


@needs_cuda
def test_show_and_report(cuda_run):
    show = cli("show", "run.db", cwd=cuda_run)
    assert show.returncode == 0 and "kernel sgemm (ptxas, sm_90)" in show.stdout and "Pareto front" in show.stdout
    pytest.importorskip("plotly")
    rep = cli("report", "run.db", "-o", "report.html", cwd=cuda_run)
    assert rep.returncode == 0, rep.stderr
    html = (cuda_run / "report.html").read_text()
    assert "sgemm" in html and "<script src=\"http" not in html


def test_export_refuses_runs_without_a_kernel(tmp_path):
    demo = cli("demo", "--generations", "2", "--store", "d.db", cwd=tmp_path)
    assert demo.returncode == 0
    out = cli("export", "d.db", "-o", "x.acf", cwd=tmp_path)
    assert out.returncode == 1 and "not made by `compileiq-lab tune`" in out.stderr


@needs_gcc
def test_export_when_the_baseline_failed(tmp_path):
    from compileiq_lab import load_acf, load_results
    from compileiq_lab.store.sqlite import RunStore

    out = cli("tune", "dot", "--objectives", "text_bytes", "--generations", "1", "--pool-size", "4",
              "--store", "r.db", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    store = RunStore(tmp_path / "r.db")  # mark the baseline as failed, as a broken default build would be
    store._conn.execute("UPDATE evals SET status='compile_error', scores=NULL WHERE is_baseline=1")
    store.close()
    assert load_results(str(tmp_path / "r.db")).baseline["status"] == "compile_error"
    ex = cli("export", "r.db", "-o", "p.acf", cwd=tmp_path)
    assert ex.returncode == 0, ex.stderr
    assert load_acf(tmp_path / "p.acf").baseline == {"text_bytes": None}


@needs_gcc
def test_verify_a_c_point_tuned_for_runtime(tmp_path):
    out = cli("tune", "matmul_c", "--objectives", "text_bytes,runtime", "--generations", "1", "--pool-size", "3",
              "--store", "m.db", "--export", "rt.acf", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    ok = cli("verify", "rt.acf", cwd=tmp_path)
    assert ok.returncode == 0 and "verify: OK" in ok.stdout, ok.stdout + ok.stderr
    bad_path = cli("export", "m.db", "-o", str(tmp_path / "missing" / "x.acf"), cwd=tmp_path)
    assert bad_path.returncode == 1 and "Traceback" not in bad_path.stderr


@pytest.mark.parametrize("command", [[], ["demo"], ["tune"], ["catalog"], ["show"], ["export"], ["flags"], ["verify"],
                                     ["validate"], ["report"]])
def test_every_help_page_prints_and_exits_0(command, tmp_path):
    out = cli(*command, "--help", cwd=tmp_path)
    assert out.returncode == 0 and "usage: compileiq-lab" in out.stdout and "Traceback" not in out.stderr, out.stderr
