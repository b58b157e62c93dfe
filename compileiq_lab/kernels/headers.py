"""What a kernel's code is made of beyond its source: the headers it reads, hashed, and what changed since a run."""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.kernels.choices import DEFAULT_ARCH
from compileiq_lab.kernels.spec import KernelSpec
from compileiq_lab.measure.deps import headers_digest, scan_deps
from compileiq_lab.measure.nvcc import DEPS_TIMEOUT_S, header_deps, nvcc_input
from compileiq_lab.toolchain.tools import find_tool

__all__ = ["changes_since", "headers_sha256"]

log = logging.getLogger(__name__)


def headers_sha256(kernel: KernelSpec, arch: str | None, compiler: str) -> str | None:
    """SHA-256 of the headers ``kernel``'s source reads outside the toolchain (``headers_digest`` of its compiler's
    ``-MM`` scan under the fixed build arguments; ``compiler``: a C kernel's, nvcc for CUDA), part of a run's identity
    as the source is; None for a source that reads none, a PTX module, or where no compiler answers the scan."""
    argv = kernel.build.argv()
    try:
        if kernel.language == "cuda":
            with tempfile.TemporaryDirectory(prefix="headers-") as tmp:  # what nvcc is given: a device part, -x cu
                source, extra, _ = nvcc_input(kernel.source_path, Path(tmp))
                deps = header_deps(find_tool("nvcc"), arch or DEFAULT_ARCH, source, [*extra, *argv])
            if source != kernel.source_path:  # the device part's folder, gone now, is not a header of the kernel
                deps = tuple(d for d in deps if not d.is_relative_to(tmp))
        elif kernel.language == "c":
            deps = scan_deps([find_tool(compiler), "-MM", *argv], kernel.source_path, DEPS_TIMEOUT_S)
        else:
            return None
    except ConfigurationError as exc:
        log.info("the headers of %s are not part of this run's identity: %s", kernel.source_path, exc)
        return None
    return headers_digest(kernel.source_path, deps)


def changes_since(kernel: KernelSpec, source_sha256: str | None, headers: str | None, arch: str | None,
                  compiler: str, since: str) -> list[str]:
    """What changed in ``kernel``'s code since ``since`` ("the run", "the ACF was made") recorded its source's
    ``source_sha256`` and its headers' digest ``headers`` (``headers_sha256``): a fact not recorded, as runs and ACFs
    of earlier versions did not record the headers, is not compared."""
    changes = []
    source = kernel.source_sha256()
    if source_sha256 and source_sha256 != source:
        changes.append(f"the kernel source changed since {since} (sha256 {source_sha256[:12]} -> {source[:12]}, "
                       f"{kernel.source_path.name})")
    now = headers_sha256(kernel, arch, compiler) if headers else None
    if headers and now is not None and now != headers:
        changes.append(f"a header {kernel.source_path.name} includes changed since {since} (sha256 of the headers "
                       f"{headers[:12]} -> {now[:12]})")
    return changes
