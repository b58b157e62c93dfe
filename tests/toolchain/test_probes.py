"""Startup probes of the installed compilers (--version, --help, arch probes, nvcc -MM, cu++filt) against fake
compilers on PATH: a hung one is killed with everything it started and reported, one that lists no options is
reported instead of becoming an empty catalog."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.kernels import choices
from compileiq_lab.measure import entries, nvcc
from compileiq_lab.space.catalogs import active, get_catalog, help_options, introspect
from compileiq_lab.toolchain import tools

pytestmark = pytest.mark.skipif(os.name != "posix", reason="fake compilers are POSIX shell scripts")

_VERSION = 'echo "ptxas: NVIDIA (R) Ptx optimizing assembler"; echo "Cuda compilation tools, release 13.0, V13.0.88"'
_HANG = 'sleep 300 & echo "$$ $!" >> "$PIDS"; wait'


def _clear_caches() -> None:
    for fn in (introspect._version_text, introspect._cached_version, introspect._cached_options,
               choices.active_catalog):
        fn.cache_clear()
    tools._VERSION_CACHE.clear()
    nvcc._ARCH_PROBES.clear()


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """Short probe limits, the fake folder first on PATH, no answer cached from the real compilers."""
    monkeypatch.setattr(tools, "PROBE_TIMEOUT_S", 1.0)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("PIDS", str(tmp_path / "pids"))
    _clear_caches()
    yield
    _clear_caches()


def _fake(tmp_path: Path, name: str, cases: dict[str, str], default: str = "exit 0") -> str:
    """An executable shell script ``name`` in tmp_path answering by its first argument."""
    body = "".join(f"  {pattern}) {action};;\n" for pattern, action in cases.items())
    path = tmp_path / name
    path.write_text(f'#!/bin/sh\ncase "$1" in\n{body}  *) {default};;\nesac\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return str(path)


def _alive(pid: int) -> bool:
    """Whether a process runs (a zombie waiting for its parent to reap it runs no more)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in ("Z", "X")


def _assert_nothing_left(tmp_path: Path) -> None:
    """Every process the fake scripts started (the shell and its sleep) is gone, allowing a moment for reaping."""
    pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
    assert len(pids) >= 2
    deadline = time.monotonic() + 5
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [p for p in pids if _alive(p)] == []


def _timed(fn: object, *args: object) -> tuple[ConfigurationError, float]:
    t0 = time.monotonic()
    with pytest.raises(ConfigurationError) as info:
        fn(*args)  # type: ignore[operator]
    return info.value, time.monotonic() - t0


# ---------------------------------------------------------------- hung probes

def test_hung_version_is_killed_and_reported(tmp_path: Path) -> None:
    path = _fake(tmp_path, "ptxas", {}, default=_HANG)
    err, took = _timed(tools.tool_version, path)
    text = str(err)
    assert "ptxas" in text and path in text and "--version" in text and "1 s" in text
    assert "fix:" in text and "PATH" in text and "\n" not in text
    assert took < 10
    _assert_nothing_left(tmp_path)


def test_hung_help_is_killed_and_reported(tmp_path: Path) -> None:
    path = _fake(tmp_path, "ptxas", {"--version": _VERSION, "--help": _HANG})
    err, took = _timed(help_options, "ptxas")
    assert "ptxas" in str(err) and path in str(err) and "--help" in str(err) and "fix:" in str(err)
    assert took < 10
    _assert_nothing_left(tmp_path)


def test_hung_version_stops_the_catalog_check(tmp_path: Path) -> None:
    """The path `tune --space ptxas` takes: an error, not a catalog of 0 controls."""
    path = _fake(tmp_path, "ptxas", {}, default=_HANG)
    err, took = _timed(choices.active_catalog, "ptxas")
    assert path in str(err) and "--version" in str(err)
    assert took < 10
    _assert_nothing_left(tmp_path)


def test_hung_gpu_arch_list_is_reported(tmp_path: Path) -> None:
    path = _fake(tmp_path, "nvcc", {"--list-gpu-arch": _HANG})
    err, _ = _timed(nvcc.supported_archs, path)
    assert "nvcc" in str(err) and path in str(err) and "--list-gpu-arch" in str(err)
    _assert_nothing_left(tmp_path)


def test_hung_arch_probe_compile_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nvcc, "ARCH_PROBE_TIMEOUT_S", 1.0)
    path = _fake(tmp_path, "nvcc", {"--list-gpu-arch": "echo compute_90"}, default=_HANG)
    err, took = _timed(nvcc.arch_problem, path, "sm_90a")
    assert "nvcc" in str(err) and path in str(err) and "sm_90a" in str(err) and "fix:" in str(err)
    assert took < 10
    _assert_nothing_left(tmp_path)


def test_hung_header_scan_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nvcc, "DEPS_TIMEOUT_S", 1.0)
    path = _fake(tmp_path, "nvcc", {}, default=_HANG)
    src = tmp_path / "k.cu"
    src.write_text("__global__ void k() {}\n")
    err, took = _timed(nvcc.header_deps, path, "sm_90", src, [])
    assert "nvcc" in str(err) and path in str(err) and "-MM" in str(err) and "fix:" in str(err)
    assert took < 10
    _assert_nothing_left(tmp_path)


def test_header_scan_takes_the_shorter_of_the_two_limits(tmp_path: Path) -> None:
    path = _fake(tmp_path, "nvcc", {}, default=_HANG)
    src = tmp_path / "k.cu"
    src.write_text("__global__ void k() {}\n")
    err, took = _timed(nvcc.header_deps, path, "sm_90", src, [], 1.0)  # DEPS_TIMEOUT_S stays at its 60 s
    assert "1.0 s" in str(err) or "1 s" in str(err)
    assert took < 10
    _assert_nothing_left(tmp_path)


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="needs ptxas (the compiler pair is made with it)")
def test_a_header_scan_cut_by_the_runs_compile_limit_says_so(tmp_path: Path) -> None:
    path = _fake(tmp_path, "nvcc", {"--version": _VERSION, "--list-gpu-arch": "echo compute_90"}, default=_HANG)
    src = tmp_path / "k.cu"
    src.write_text("__global__ void k() {}\n")
    cc = nvcc.CudaCompiler("sm_90", tmp_path / "w", timeout_s=1.0)
    assert cc.nvcc == path
    err, took = _timed(cc.ptx, src, [])
    assert "--timeout 1 s" in str(err) and "raise it if the compiler is only slow" in str(err) and took < 10
    _assert_nothing_left(tmp_path)


def test_hung_demangler_leaves_names_and_no_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """demangle never raises (documented): a hung cu++filt is killed and the names stay as they are."""
    monkeypatch.setattr(entries, "_DEMANGLE_TIMEOUT_S", 1.0)
    _fake(tmp_path, "cu++filt", {}, default=_HANG)
    _fake(tmp_path, "c++filt", {}, default=_HANG)
    t0 = time.monotonic()
    assert entries.demangle(["_Z4kernPf"]) == {"_Z4kernPf": "_Z4kernPf"}
    assert time.monotonic() - t0 < 10
    _assert_nothing_left(tmp_path)


def test_descendant_that_leaves_the_group_does_not_hold_the_probe(tmp_path: Path) -> None:
    """A child that starts its own session survives the group kill; its open pipes must not keep us waiting."""
    if not any((Path(d) / "setsid").is_file() for d in os.environ["PATH"].split(os.pathsep)):
        pytest.skip("no setsid here")
    escape = 'setsid sleep 30 & echo "$$ $!" >> "$PIDS"; sleep 300'
    path = _fake(tmp_path, "ptxas", {}, default=escape)
    err, took = _timed(tools.tool_version, path)
    assert "--version" in str(err)
    assert took < 10
    pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
    with contextlib.suppress(ProcessLookupError):
        os.kill(pids[1], signal.SIGKILL)  # the escaped sleep: ours to end


def test_unrunnable_compiler_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "ptxas"
    path.write_bytes(b"\x00\x01 not a program\n")
    path.chmod(0o755)
    err, _ = _timed(tools.tool_version, str(path))
    assert str(path) in str(err) and "could not be started" in str(err) and "fix:" in str(err)


# ---------------------------------------------------------------- help without options

@pytest.mark.parametrize(("help_action", "shown"), [
    ("echo 'segmentation fault (core dumped) while printing usage'", "segmentation fault"),
    ("exit 0", "nothing"),
    ("echo 'license expired' >&2; exit 3", "license expired"),
])
def test_help_without_options_is_an_error_not_an_empty_catalog(tmp_path: Path, help_action: str,
                                                               shown: str) -> None:
    path = _fake(tmp_path, "ptxas", {"--version": _VERSION, "--help": help_action})
    err, _ = _timed(help_options, "ptxas")
    text = str(err)
    assert path in text and "no options" in text and shown in text and "fix:" in text and "\n" not in text
    with pytest.raises(ConfigurationError, match="no options"):
        active(get_catalog("ptxas"))


def test_help_output_shown_in_the_error_is_truncated(tmp_path: Path) -> None:
    _fake(tmp_path, "ptxas", {"--version": _VERSION, "--help": "printf 'x%.0s' $(seq 1 5000); echo; echo second"})
    err, _ = _timed(help_options, "ptxas")
    assert len(str(err)) < 600 and "second" not in str(err)


def test_a_working_fake_help_still_parses(tmp_path: Path) -> None:
    """The check is on options found, not on the exit code alone."""
    usage = "echo '--maxrregcount <N>   (-maxrregcount)'; echo '--opt-level <N>   (-O)'; exit 1"
    _fake(tmp_path, "ptxas", {"--version": _VERSION, "--help": usage})
    assert {"--maxrregcount", "-maxrregcount", "--opt-level", "-O"} <= help_options("ptxas")


def test_cuda_headers_are_found_through_an_nvcc_wrapper_with_their_cccl_folder(tmp_path, monkeypatch):
    """nvcc on PATH may be a script that execs the real one (its folder has no include/): the folders nvcc passes
    its own front end (--dryrun) are used, each with its cccl folder (CUDA 13's cuda/std, which
    cooperative_groups.h includes)."""
    toolkit = tmp_path / "toolkit" / "targets" / "x86_64-linux" / "include"
    (toolkit / "cccl" / "cuda").mkdir(parents=True)
    (toolkit / "cuda_runtime.h").write_text("")
    wrapper = tmp_path / "bin" / "nvcc"
    wrapper.parent.mkdir()
    wrapper.write_text("#!/bin/sh\n"
                       f"echo '#$ INCLUDES=\"-I{toolkit}\"  ' >&2\n"
                       f"echo '#$ SYSTEM_INCLUDES=\"-isystem\" \"{toolkit}/cccl\"  ' >&2\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    found = tools.cuda_include_dirs()
    assert found[:2] == [str(toolkit.resolve()), str((toolkit / "cccl").resolve())]


def test_a_virtual_arch_is_refused_with_its_real_target_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"\(sm_90 for compute_90\), as `nvcc --list-gpu-code` lists them"):
        nvcc.CudaCompiler("compute_90", tmp_path)
    path = _fake(tmp_path, "nvcc", {"--list-gpu-arch": "echo compute_75 compute_100 compute_90"})
    assert nvcc.supported_archs(path) == ["sm_75", "sm_90", "sm_100"]  # by number, as the user reads them
