"""show, export, flags, verify and report end to end on real tune runs, in a subprocess."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from compileiq_lab.store import load_results
from compileiq_lab.testing import tool_available
from compileiq_lab.toolchain.tools import find_tool

needs_cuda = pytest.mark.skipif(not tool_available("nvcc"), reason="nvcc not installed")
needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "compileiq_lab.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=600)


@pytest.fixture(scope="module")
def cuda_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not tool_available("nvcc"):
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
    assert doc["format"] == "compileiq-lab-acf/2" and doc["run"]["eval_id"] == 3 and doc["kernel"] == "sgemm"
    flags = cli("flags", "p3.acf", cwd=cuda_run)
    assert flags.returncode == 0 and "-DTILE=" in flags.stdout
    ptxas = cli("flags", "p3.acf", "--stage", "ptxas", cwd=cuda_run)
    assert ptxas.returncode == 0 and "-DTILE" not in ptxas.stdout
    # the printed flags alone rebuild the recorded machine code
    from compileiq_lab.kernels import load_kernel
    from compileiq_lab.measure.binary import inspect_elf

    src = load_kernel("sgemm").source_path
    rebuilt = subprocess.run([find_tool("nvcc"), "-cubin", *flags.stdout.split(), str(src), "-o", "re.cubin"],
                             cwd=cuda_run, capture_output=True, text=True, timeout=300)
    assert rebuilt.returncode == 0, rebuilt.stderr
    from compileiq_lab.measure.entries import cubin_entries, resolve_entry

    symbol = resolve_entry(doc["build"]["entry"], cubin_entries(cuda_run / "re.cubin"))
    assert inspect_elf(cuda_run / "re.cubin", entry=symbol).code_hash == doc["code_hash"]  # the entry's own code
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


def test_no_output_ever_writes_over_a_run_store(tmp_path):
    assert cli("demo", "--generations", "2", "--store", "d.db", cwd=tmp_path).returncode == 0
    shutil.copy(tmp_path / "d.db", tmp_path / "other.db")
    (tmp_path / "link.db").symlink_to("d.db")
    kept = (tmp_path / "d.db").read_bytes(), (tmp_path / "other.db").read_bytes()
    for command, store, output in (("report", "d.db", "d.db"), ("report", "d.db", "link.db"),
                                   ("export", "d.db", "d.db-wal"), ("report", "d.db", "other.db"),
                                   ("report", "link.db", "d.db-shm"), ("export", "link.db", "d.db.lock"),
                                   ("report", "d.db", "other.db-wal"), ("export", "d.db", "other.db.lock")):
        out = cli(command, store, "-o", output, cwd=tmp_path)
        assert out.returncode == 1 and "writing there would destroy" in out.stderr, (command, output, out.stderr)
    assert ((tmp_path / "d.db").read_bytes(), (tmp_path / "other.db").read_bytes()) == kept
    tune = cli("tune", "stencil_c", "--objectives", "text_bytes", "--store", "d.db", "--export", "d.db", cwd=tmp_path)
    assert tune.returncode == 1 and "it is the run store it comes from" in tune.stderr
    assert (tmp_path / "d.db").read_bytes() == kept[0] and not (tmp_path / "d.db-wal").exists()
    assert cli("report", "d.db", "-o", "", cwd=tmp_path).returncode == 2


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
    point = load_acf(tmp_path / "p.acf").run["eval_id"]
    asked = cli("export", "r.db", "--eval-id", str(point), "-o", "q.acf", cwd=tmp_path)
    assert asked.returncode == 0 and "(the point asked for) to q.acf" in asked.stderr, asked.stderr
    both = cli("export", "r.db", "--eval-id", str(point), "--pick", "knee", "-o", "q.acf", cwd=tmp_path)
    assert both.returncode == 2 and "--eval-id or --pick, not both" in both.stderr, both.stderr


@needs_gcc
def test_verify_a_c_point_tuned_for_runtime(tmp_path):
    out = cli("tune", "matmul_c", "--objectives", "text_bytes,runtime", "--generations", "1", "--pool-size", "3",
              "--store", "m.db", "--export", "rt.acf", "--validate", "0", cwd=tmp_path)
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


@pytest.fixture
def c_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A tuned, exported point of the dot kernel, from a copy of the kernels the CLI reads (the tests edit it)."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc not installed")
    from compileiq_lab.kernels import load_kernel

    shutil.copytree(load_kernel("dot").folder, tmp_path / "kernels" / "dot")
    monkeypatch.setenv("COMPILEIQ_KERNELS", str(tmp_path / "kernels"))  # the CLI subprocesses inherit it
    out = cli("tune", "dot", "--objectives", "text_bytes", "--generations", "1", "--pool-size", "3",
              "--store", "d.db", "--export", "p.acf", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    ok = cli("verify", "p.acf", cwd=tmp_path)
    assert ok.returncode == 0 and ok.stdout.splitlines()[-1].startswith("verify: OK"), ok.stdout + ok.stderr
    return tmp_path


def _verdict(out: subprocess.CompletedProcess[str]) -> str:
    return out.stdout.splitlines()[-1] if out.stdout.strip() else ""


def test_verify_fails_when_the_kernel_source_changed(c_point):
    with (c_point / "kernels" / "dot" / "dot.c").open("a") as f:
        f.write("\n/* edited after the export */\n")  # same machine code, another source
    out = cli("verify", "p.acf", cwd=c_point)
    assert out.returncode == 1, out.stdout + out.stderr
    assert _verdict(out).startswith("verify: CHANGED: the kernel source changed since the ACF was made"), out.stdout
    assert "pass --ignore-changes to compare anyway" in _verdict(out) and "OK" not in out.stdout
    # told to ignore it, verify warns and compares: the comment left the machine code as it was
    anyway = cli("verify", "p.acf", "--ignore-changes", cwd=c_point)
    assert anyway.returncode == 0 and _verdict(anyway).startswith("verify: OK"), anyway.stdout + anyway.stderr
    assert "warning: the kernel source changed since the ACF was made" in anyway.stderr


def test_verify_ignore_changes_reports_the_comparison_of_changed_code(c_point):
    with (c_point / "kernels" / "dot" / "dot.c").open("a") as f:
        f.write("\nint compileiq_added_after_export(int x) { return 3 * x + 1; }\n")  # more machine code
    out = cli("verify", "p.acf", cwd=c_point)
    assert out.returncode == 1 and _verdict(out).startswith("verify: CHANGED: "), out.stdout + out.stderr
    anyway = cli("verify", "p.acf", "--ignore-changes", cwd=c_point)
    assert anyway.returncode == 1 and _verdict(anyway).startswith("verify: MISMATCH"), anyway.stdout + anyway.stderr
    assert "warning: the kernel source changed" in anyway.stderr


def test_verify_fails_when_the_toolchain_changed(c_point):
    # the ACF as another compiler version would have recorded it (the same machine code, another gcc)
    doc = json.loads((c_point / "p.acf").read_text())
    doc["toolchain"] = dict.fromkeys(doc["toolchain"], "0.0-recorded-elsewhere")
    (c_point / "old.acf").write_text(json.dumps(doc))
    out = cli("verify", "old.acf", cwd=c_point)
    assert out.returncode == 1, out.stdout + out.stderr
    assert _verdict(out).startswith("verify: CHANGED: the installed toolchain differs from the recorded one")
    assert "0.0-recorded-elsewhere" in _verdict(out) and "--ignore-changes" in _verdict(out)
    anyway = cli("verify", "old.acf", "--ignore-changes", cwd=c_point)
    assert anyway.returncode == 0 and _verdict(anyway).startswith("verify: OK"), anyway.stdout + anyway.stderr
    assert "warning: the installed toolchain differs" in anyway.stderr


def test_verify_help_documents_ignore_changes_and_exit_codes(tmp_path):
    out = cli("verify", "--help", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "--ignore-changes" in out.stdout and "compileiq-lab verify best.acf --ignore-changes" in out.stdout
    for verdict in ("0  OK", "1  CHANGED", "1  MISMATCH", "1  FAILED", "1  UNKNOWN", "2  bad arguments"):
        assert verdict in out.stdout, verdict


def test_an_export_that_lowers_an_optimisation_level_is_named():
    from types import SimpleNamespace

    from compileiq_lab.acf.lowered import lowered_optimisation
    from compileiq_lab.space.catalogs import GCC, NVCC

    nvcc = SimpleNamespace(catalog=NVCC)
    assert lowered_optimisation(nvcc, {"cicc_opt": 0, "opt_level": 1, "maxrregcount": 64}) == [
        "cicc_opt = 0 against the default 3", "opt_level = 1 against the default 3"]
    assert lowered_optimisation(nvcc, {"opt_level": 3, "fast_compile": "max"}) == ["fast_compile = 'max'"]
    assert lowered_optimisation(nvcc, {"maxrregcount": 64}) == []
    gcc = SimpleNamespace(catalog=GCC)  # the C build's base is -O2: -O1 and -Os (size before speed) lower it
    assert lowered_optimisation(gcc, {"opt_level": 1}) == ["opt_level = 1 against the default 2"]
    assert lowered_optimisation(gcc, {"opt_level": "s"}) == ["opt_level = 's', code size before speed, against "
                                                             "the default 2"]
    assert lowered_optimisation(gcc, {"opt_level": "g"}) == ["opt_level = 'g', debugging before speed, against "
                                                             "the default 2"]
    assert lowered_optimisation(gcc, {"opt_level": 3}) == []
    # and where to measure it: a bare file first needs the inputs a kernel folder gives
    from compileiq_lab.acf.lowered import _how_to_measure

    def run(language: str, spec_file: object) -> SimpleNamespace:
        return SimpleNamespace(kernel=SimpleNamespace(language=language, spec_file=spec_file))

    assert _how_to_measure(run("cuda", "kernel.toml")) == "on a GPU"
    assert _how_to_measure(run("c", "kernel.toml")) == "on this CPU"
    assert "once it is a kernel folder whose kernel.toml gives its inputs" in _how_to_measure(run("cuda", None))


@needs_cuda
def test_a_file_and_a_header_folder_named_as_users_name_them_export_and_verify(tmp_path):
    """Spaces and brackets in a kernel file's name and an include folder's: the run's kernel name is the stem in
    plain characters, the ACF records both paths as they are, and verify rebuilds the point from them."""
    (tmp_path / "my headers").mkdir()
    (tmp_path / "my headers" / "scale.h").write_text("#define SCALE 3.0f\n")
    (tmp_path / "my kernel(1).cu").write_text(
        '#include "scale.h"\n__global__ void k(float *x, int n) { int i = threadIdx.x;\n'
        "  for (int j = 0; j < n; ++j) x[i] = x[i] * SCALE + j; }\n")
    out = cli("tune", "my kernel(1).cu", "-I", "my headers", "--space", "ptxas", "--objectives", "registers",
              "--generations", "1", "--pool-size", "3", "--export", "k.acf", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    from compileiq_lab import load_acf

    acf = load_acf(tmp_path / "k.acf")
    assert acf.kernel == "my_kernel_1_" and acf.build["source"] == "my kernel(1).cu"
    assert acf.build["include_dirs"] == ["my headers"]
    ok = cli("verify", "k.acf", cwd=tmp_path)
    assert ok.returncode == 0 and "verify: OK" in ok.stdout, ok.stdout + ok.stderr


@needs_cuda
def test_a_changed_header_is_refused_by_resume_and_export_and_named_by_verify(tmp_path):
    (tmp_path / "inc").mkdir()
    header = tmp_path / "inc" / "params.h"
    header.write_text("#define N_ITEMS 4\n")
    (tmp_path / "k.cu").write_text('#include "params.h"\nextern "C" __global__ void k(float* x) {\n  float acc = 0.f;\n'
                                   "  for (int i = 0; i < N_ITEMS; ++i) acc += x[threadIdx.x * N_ITEMS + i] * x[i];\n"
                                   "  x[threadIdx.x] = acc;\n}\n")
    tune = ("tune", "k.cu", "-I", "inc", "--space", "ptxas", "--objectives", "registers,sass_instructions",
            "--pool-size", "4", "--store", "run.db")
    first = cli(*tune, "--generations", "1", "--export", "a.acf", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert len(json.loads((tmp_path / "a.acf").read_text())["build"]["headers_sha256"]) == 64
    assert cli("verify", "a.acf", cwd=tmp_path).returncode == 0
    header.write_text("#define N_ITEMS 16\n")  # the source is unchanged: only what it includes
    resumed = cli(*tune, "--generations", "2", cwd=tmp_path)
    assert resumed.returncode != 0 and "a header the kernel source includes changed" in resumed.stderr
    exported = cli("export", "run.db", "-o", "b.acf", cwd=tmp_path)
    assert exported.returncode != 0 and "a header k.cu includes changed since the run" in exported.stderr
    assert not (tmp_path / "b.acf").exists()
    verified = cli("verify", "a.acf", cwd=tmp_path)
    assert verified.returncode == 1 and "CHANGED: a header k.cu includes changed" in verified.stdout
    header.write_text("#define N_ITEMS 4\n")  # restored: the run continues and exports again
    assert cli(*tune, "--generations", "2", cwd=tmp_path).returncode == 0
    assert cli("export", "run.db", "-o", "b.acf", cwd=tmp_path).returncode == 0


@needs_cuda
def test_a_copy_of_the_whole_tree_resumes_its_run_and_a_changed_include_folder_does_not(tmp_path):
    """Include folders are stored absolute; the headers' digest (each header by its path relative to the source, and
    its bytes) is what decides the build, so a copied tree is the same setup, and a folder with other headers is not."""
    tree = tmp_path / "project"
    (tree / "inc").mkdir(parents=True)
    (tree / "inc" / "params.h").write_text("#define N_ITEMS 4\n")
    (tree / "k.cu").write_text('#include "params.h"\nextern "C" __global__ void k(float* x) {\n  float acc = 0.f;\n'
                               "  for (int i = 0; i < N_ITEMS; ++i) acc += x[threadIdx.x * N_ITEMS + i] * x[i];\n"
                               "  x[threadIdx.x] = acc;\n}\n")
    tune = ("tune", "k.cu", "-I", "inc", "--space", "ptxas", "--objectives", "registers", "--pool-size", "4",
            "--store", "run.db")
    assert cli(*tune, "--generations", "1", cwd=tree).returncode == 0
    copy = tmp_path / "elsewhere" / "project"
    shutil.copytree(tree, copy)
    resumed = cli(*tune, "--generations", "2", cwd=copy)
    assert resumed.returncode == 0, resumed.stderr
    # the run records where its kernel and include folder now are: export and validate rebuild from the copy
    extra = load_results(str(copy / "run.db")).header.kernel.extra
    assert extra["build"]["include_dirs"] == [str((copy / "inc").resolve())]
    assert extra["kernel_path"] == str((copy / "k.cu").resolve())
    shutil.rmtree(tree)
    assert cli("export", "run.db", "-o", "k.acf", cwd=copy).returncode == 0
    (copy / "other").mkdir()
    (copy / "other" / "params.h").write_text("#define N_ITEMS 8\n")
    other = cli(*tune[:3], "other", *tune[4:], "--generations", "3", cwd=copy)
    assert other.returncode == 1 and "a header the kernel source includes changed" in other.stderr, other.stderr


@needs_cuda
def test_export_to_a_missing_folder_is_refused_before_any_compile(cuda_run):
    out = cli("export", "run.db", "-o", "no such folder/p.acf", cwd=cuda_run)
    assert out.returncode != 0 and "-o/--output must name a file in an existing folder" in out.stderr
    assert "'no such folder'" in out.stderr and "minimis" not in out.stderr


@needs_cuda
def test_validating_a_static_only_point_says_what_a_timed_kernel_needs(tmp_path):
    (tmp_path / "my dir").mkdir()
    (tmp_path / "k.cu").write_text('extern "C" __global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n')
    out = cli("tune", "k.cu", "--space", "ptxas", "--objectives", "registers", "--generations", "1", "--store",
              "run.db", "--export", "my dir/k.acf", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    check = cli("validate", "--acf", "my dir/k.acf", cwd=tmp_path)
    assert check.returncode != 0 and "'k' is a static-only kernel (a bare file)" in check.stderr
    assert "--kernel FOLDER" in check.stderr and "use static objectives" not in check.stderr


def test_validate_refuses_an_eval_id_with_an_acf_as_a_usage_error(tmp_path, capsys):
    from compileiq_lab.cli.main import main

    code = main(["validate", "--acf", str(tmp_path / "best.acf"), "--eval-id", "3"])
    assert code == 2 and "`--eval-id is for a run store, not --acf` must hold" in capsys.readouterr().err


@needs_gcc
def test_show_names_no_config_as_best_where_none_beat_the_baseline(tmp_path):
    """Unrolling never shrinks the code: the best text size is the baseline's, and show says so rather than naming
    a config that ties with it."""
    tune = cli("tune", "stencil_c", "--objectives", "text_bytes", "--controls", "unroll_loops", "--generations", "1",
               "--store", "s.db", cwd=tmp_path)
    assert tune.returncode == 0, tune.stderr
    show = cli("show", "s.db", cwd=tmp_path)
    assert "the baseline's: no config beat the compiler defaults on text_bytes" in show.stdout, show.stdout
    assert "best text_bytes (bytes, lower is better): " in show.stdout and " at eval " not in show.stdout.split(
        "best text_bytes")[1].splitlines()[0]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_show_gives_a_failures_message_whole(tmp_path):
    (tmp_path / "two.cu").write_text("__global__ void scale(float* y) { y[threadIdx.x] *= 2.f; }\n"
                                     "__global__ void shift(float* y) { y[threadIdx.x] += 1.f; }\n")
    cli("tune", "two.cu", "--entry", "bogus", "--objectives", "registers", "--generations", "1", "--store", "e.db",
        cwd=tmp_path)
    show = cli("show", "e.db", cwd=tmp_path)
    assert "compile_error: 1 (e.g. eval 0: " in show.stdout and "the kernels are: scale(float*)" in show.stdout
