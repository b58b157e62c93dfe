"""The built wheel: it ships every bundled kernel, and the installed copy (not the checkout) tunes one elsewhere."""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import site
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from compileiq_lab import load_results
from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.kernels import ENV_VAR
from compileiq_lab.toolchain.tools import find_tool

REPO = Path(__file__).resolve().parents[1]
KERNELS = REPO / "kernels"
SHIPPED = "compileiq_lab/_kernels"  # where the wheel puts the repository's kernels/
# top-level entries of a checkout that are no input of the build (build outputs, run stores)
NOT_SOURCES = {"build", "dist", "compileiq_runs"}


def _files(root: Path) -> set[str]:
    """The paths (relative, with /) of the files under root, leaving out Python's bytecode caches."""
    return {p.relative_to(root).as_posix() for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}


def _ignore(folder: str, names: list[str]) -> set[str]:
    if Path(folder) != REPO:
        return set()
    return {n for n in names if n.startswith(".") or n in NOT_SOURCES or n.endswith(".egg-info")}


def _isolation_flags() -> list[str]:
    """``--no-build-isolation`` where this environment has the build backend (fast, offline), else none."""
    requires = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["build-system"]["requires"]
    for req in map(Requirement, requires):
        try:
            version = importlib.metadata.version(req.name)
        except importlib.metadata.PackageNotFoundError:
            return []
        if not req.specifier.contains(version, prereleases=True):
            return []
    return ["--no-build-isolation"]


def _clean_env() -> dict[str, str]:
    """This environment without what would point an installed copy back at the checkout."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", ENV_VAR)}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built from a copy of the checkout (the build leaves build/ and *.egg-info beside its sources)."""
    src, out = tmp_path_factory.mktemp("src") / "compileiq-lab", tmp_path_factory.mktemp("wheel")
    shutil.copytree(REPO, src, ignore=_ignore)
    # output checks import reference.py and leave bytecode beside it: the wheel must not ship that
    stray = src / "kernels" / "reduction" / "__pycache__" / "reference.cpython-311.pyc"
    stray.parent.mkdir(exist_ok=True)
    stray.write_bytes(b"not shipped")
    flags = _isolation_flags()
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", *flags, "-w", str(out), str(src)],
                          capture_output=True, text=True, cwd=out, timeout=300)
    if proc.returncode and not flags and "setuptools" in proc.stderr and (
            "No matching distribution" in proc.stderr or "Could not find a version" in proc.stderr):
        pytest.skip("building the wheel needs the build backend from pyproject.toml ([build-system] requires), "
                    "which is neither installed here nor reachable on a package index")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (built,) = out.glob("compileiq_lab-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the wheel installed; its dependencies come from this environment."""
    folder = tmp_path_factory.mktemp("venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    python = _bin(folder, "python")
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                           "--no-index", str(wheel)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # This environment's site folders go on the new one's path only after the install (with them there, pip
    # would see the checkout's editable install as compileiq-lab already installed), as plain entries: they come
    # after the new site-packages and their .pth files (the editable install's finder among them) are not run,
    # so `import` finds the wheel's copy (the tests check it).
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    dirs = [*site.getsitepackages(), *([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])]
    (Path(purelib) / "current_environment.pth").write_text("".join(f"{d}\n" for d in dirs), encoding="utf-8")
    return folder


def _bin(venv: Path, name: str) -> Path:
    return venv / ("Scripts" if os.name == "nt" else "bin") / name


def test_the_wheel_ships_every_kernel_file_and_every_module(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {n.removeprefix(f"{SHIPPED}/") for n in names if n.startswith(f"{SHIPPED}/")}
    assert shipped == _files(KERNELS), "pyproject.toml's package-data leaves kernel files out (or adds some)"
    modules = {f"compileiq_lab/{p}" for p in _files(REPO / "compileiq_lab") if p.endswith(".py")}
    assert modules <= names, f"add their packages to [tool.setuptools] packages: {sorted(modules - names)}"
    assert {"compileiq_lab/acf/schema.json", "compileiq_lab/measure/harness.c"} <= names


def test_the_installed_copy_lists_every_bundled_kernel(venv: Path, tmp_path: Path) -> None:
    code = ("import json, compileiq_lab\n"
            "from compileiq_lab.kernels import kernels_root, list_kernels\n"
            "print(json.dumps([compileiq_lab.__file__, str(kernels_root()), list_kernels()]))")
    proc = subprocess.run([str(_bin(venv, "python")), "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          env=_clean_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    module, root, names = json.loads(proc.stdout)
    assert Path(module).resolve().is_relative_to(venv.resolve()), f"imported {module}, not the installed copy"
    assert Path(root).is_relative_to(venv.resolve()) and Path(root).parts[-2:] == ("compileiq_lab", "_kernels")
    assert "reduction" in names and names == sorted(p.parent.name for p in KERNELS.glob("*/kernel.toml"))
    assert _files(Path(root)) == _files(KERNELS)


def _missing_cuda_tool() -> str | None:
    """Why nvcc or ptxas cannot be found (on PATH or from the CUDA wheels of this environment), or None."""
    for name in ("nvcc", "ptxas"):
        try:
            find_tool(name)
        except ConfigurationError as exc:
            return str(exc)
    return None


MISSING_CUDA_TOOL = _missing_cuda_tool()


@pytest.mark.skipif(MISSING_CUDA_TOOL is not None, reason=f"tune reduction compiles with them: {MISSING_CUDA_TOOL}")
def test_the_installed_cli_tunes_a_bundled_kernel_from_another_folder(venv: Path, tmp_path: Path) -> None:
    # static objective: nvcc and ptxas only, no GPU (the nvrtc catalog would not do here: cuda-bindings looks for
    # the NVRTC library in the new environment's own site folders only)
    proc = subprocess.run([str(_bin(venv, "compileiq-lab")), "tune", "reduction", "--space", "ptxas", "--objectives",
                           "registers", "--generations", "1", "--pool-size", "4", "--export", "reduction.acf"],
                          capture_output=True, text=True, cwd=tmp_path, env=_clean_env(), timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (store,) = (tmp_path / "compileiq_runs").glob("*.db")
    results = load_results(str(store))
    assert results.status == "finished" and results.header.metadata["kernel"] == "reduction"
    assert json.loads((tmp_path / "reduction.acf").read_text())["kernel"] == "reduction"
