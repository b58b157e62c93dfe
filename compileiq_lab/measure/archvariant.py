"""Code only an arch-specific target builds: a CUDA source whose PTX for sm_90 differs from its PTX for sm_90a."""

from __future__ import annotations

import logging
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.measure.nvcc import CudaCompiler, arch_problem

__all__ = ["FEATURE_MACROS", "feature_test", "variant_problem"]

log = logging.getLogger(__name__)

#: The macros nvcc defines only for an arch-specific target (``sm_90a``: ``__CUDA_ARCH_FEAT_SM90_ALL`` and
#: ``__CUDA_ARCH_SPECIFIC__``; ``sm_100f``: ``__CUDA_ARCH_FAMILY_SPECIFIC__``): code under them (wgmma, tcgen05, TMA
#: multicast) is left out of a plain ``sm_90`` build.
FEATURE_MACROS = re.compile(r"\b(__CUDA_ARCH_FEAT_SM\d+_ALL|__CUDA_ARCH_SPECIFIC__|__CUDA_ARCH_FAMILY_SPECIFIC__)\b")
#: The first compute capability with arch-specific targets.
_FIRST_VARIANT = 90
#: What is not code in a PTX module: comments, and the ``.target`` line, which names the arch itself.
_NOT_CODE = re.compile(r"//[^\n]*|/\*.*?\*/|^\s*\.target\b[^\n]*", re.S | re.M)


def feature_test(files: Sequence[Path]) -> tuple[str, Path] | None:
    """The first arch-specific feature macro (``FEATURE_MACROS``) the files mention, and the file; None for none."""
    for f in files:
        try:
            text = f.read_text(errors="replace")
        except OSError:
            continue
        found = FEATURE_MACROS.search(text)
        if found:
            return found.group(1), f
    return None


def _code(ptx: Path) -> str:
    return _NOT_CODE.sub("", ptx.read_text(errors="replace"))


def variant_problem(cc: CudaCompiler, source: Path, frontend_argv: Sequence[str]) -> str:
    """Why a build of ``source`` for ``cc.arch`` (a plain target such as sm_90) is not the code the kernel was written
    to run, or "": the source (or a header it reads) tests an arch-specific feature macro, and its PTX under
    ``frontend_argv`` differs from the PTX for the arch-specific target (sm_90a), which the toolchain builds.

    Only a source that mentions such a macro is compiled again (once, for the variant, in a scratch folder); a source
    whose PTX is the same for both (CuTe's SIMT GEMMs, which include the wgmma headers and use none) is not named.
    Never raises: a check that cannot run says nothing.
    """
    plain = re.fullmatch(r"sm_(\d+)", cc.arch)
    if plain is None or int(plain.group(1)) < _FIRST_VARIANT or not cc.nvcc:
        return ""
    try:
        found = feature_test([source, *(h for h in cc.headers(source, frontend_argv) if h != source)])
        variant = f"{cc.arch}a"
        if found is None or arch_problem(cc.nvcc, variant):
            return ""
        ours = cc.ptx(source, frontend_argv)
        if not ours.ok or ours.path is None:
            return ""
        with tempfile.TemporaryDirectory(prefix="variant-", dir=cc.workdir) as tmp:
            other = CudaCompiler(variant, tmp, cc.timeout_s, cc.context).ptx(source, frontend_argv)
            if not other.ok or other.path is None or _code(other.path) == _code(ours.path):
                return ""
    except (ConfigurationError, OSError) as exc:
        log.debug("the %s/%sa check of %s could not run: %s", cc.arch, cc.arch, source.name, exc)
        return ""
    macro, where = found
    shown = where.name if where == source else f"{where.name}, which it includes"
    return (f"{source.name} compiles to other code for {variant} than for {cc.arch}: it tests {macro} (in {shown}), "
            f"which nvcc defines only for an arch-specific target, and this run builds for {cc.arch}, where that "
            f"code is left out (CUTLASS and CuTe put a trap in its place), so the search would tune code the kernel "
            f"does not run on its GPU; build for {variant} (the CLI's --arch {variant}, KernelRun(arch=\"{variant}\"))")
