"""The gpu extra installed on a machine without a GPU: CuPy imports, the probe says why there is no GPU (not that
CuPy is missing), and GPU objectives are refused before any search with what to do."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from compileiq_lab.exceptions import ConfigurationError
from tests.conftest import gpu_reason

pytestmark = pytest.mark.skipif(importlib.util.find_spec("cupy") is None, reason="the gpu extra is not installed")


def test_cupy_imports_without_opening_a_gpu_context():
    out = subprocess.run([sys.executable, "-c", "import cupy; print(cupy.__version__)"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().split(".")[0].isdigit()


def test_without_a_gpu_the_probe_names_the_cause_and_runtime_objectives_are_refused(tmp_path):
    reason = gpu_reason()
    if reason is None:
        pytest.skip("a GPU is usable here")
    assert "not installed" not in reason and reason.startswith("CuPy sees no")
    from compileiq_lab.kernels import KernelRun

    with pytest.raises(ConfigurationError, match=r"GPU worker could not start: .*install the gpu extra.*static "
                                                 r"objectives"):
        KernelRun("reduction", "ptxas", ["runtime"], workdir=tmp_path)
