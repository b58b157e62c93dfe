"""What a kernel run is reopened from: a stored run's header, or an ACF's recorded point, as KernelRun arguments."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.kernels.load import acf_kernel_ref, acf_nvidia_file, load_kernel, without_knob_defines
from compileiq_lab.kernels.spec import GPU_LANGUAGES, KernelSpec
from compileiq_lab.space.catalogs import Catalog, get_catalog
from compileiq_lab.space.catalogs.base import NON_CONTROLS
from compileiq_lab.space.objectives import METRICS
from compileiq_lab.store.header import RunHeader
from compileiq_lab.toolchain.context import BuildContext

__all__ = ["RecordedPoint", "acf_arguments", "header_arguments"]

#: KernelRun's positional arguments (kernel, catalog, objectives) and its keyword arguments.
Arguments = tuple[tuple[str | KernelSpec, Catalog, list[str] | None], dict[str, Any]]


class RecordedPoint(Protocol):
    """What ``KernelRun.from_acf`` reads of a recorded point (an ``compileiq_lab.acf.ACF``)."""

    @property
    def kernel(self) -> str: ...

    @property
    def compiler(self) -> str: ...

    @property
    def arch(self) -> str | None: ...

    @property
    def objectives(self) -> Mapping[str, float]: ...

    @property
    def build(self) -> Mapping[str, Any]: ...

    def build_context(self, kernel_folder: str | os.PathLike[str]) -> BuildContext: ...


def header_arguments(header: RunHeader, kernel: str | None = None) -> Arguments:
    """The KernelRun arguments a stored run was made with (``KernelRun.from_header``): its kernel (or ``kernel``
    instead), the catalog's recorded controls, objectives, arch, entry, block, build context and NVIDIA ACFs.

    Raises:
        ConfigurationError: The run was not made by a KernelRun (its header names no kernel).
    """
    meta = header.kernel
    if meta is None:
        raise ConfigurationError("this run was not made by `compileiq-lab tune` (nor by the lab's form or "
                                 "Search.of(kernel_run)): its header names no kernel and catalog, so its points cannot "
                                 "be turned into compiler arguments. A KernelRun passed to Search(...) as a plain "
                                 "objective function records neither: make the search with Search.of(kernel_run, ...) "
                                 "(it also names the objectives)")
    names = [k for k in header.space if k not in NON_CONTROLS]
    extra = meta.extra
    context = BuildContext.make(**extra["build"]) if isinstance(extra.get("build"), dict) else None
    files = extra.get("nvidia_acfs")
    path = str(kernel or extra.get("kernel_path") or meta.kernel)
    ref: str | KernelSpec = path
    if kernel is None and isinstance(extra.get("origin"), dict):  # a generated kernel (Triton): its PTX, its name
        ref = dataclasses.replace(load_kernel(path), name=meta.kernel, origin=dict(extra["origin"]))
    if context is not None and context.defines:
        try:
            context = without_knob_defines(context, ref if isinstance(ref, KernelSpec) else load_kernel(path))
        except ConfigurationError:
            pass  # a kernel that cannot be loaded: the run's own loading says why
    return (ref, get_catalog(meta.catalog).select(names=names), list(meta.objectives)), {
        "arch": meta.arch, "catalog_name": meta.catalog, "entry": extra.get("entry"), "build": context,
        "block": tuple(extra["block"]) if extra.get("block") else None,
        "nvidia_acfs": [f["file"] for f in files.values()] if isinstance(files, dict) and files else None}


def acf_arguments(acf: RecordedPoint, kernel: str | None = None, acf_folder: Path | None = None,
                  objectives: list[str] | None = None) -> Arguments:
    """The KernelRun arguments that build an ACF's point as its tuning run did (``KernelRun.from_acf``): the same
    kernel (its ``build.source``, else its bundled name; or ``kernel`` instead), entry and build context, build
    only (``measure=False``), for ``objectives`` or else the ACF's.

    Raises:
        ConfigurationError: A CUDA ACF without arch, or a kernel that cannot be found or loaded.
    """
    build = acf.build
    spec = load_kernel(kernel or acf_kernel_ref(acf.kernel, build.get("source"), acf_folder))
    if spec.language in GPU_LANGUAGES and not acf.arch:
        raise ConfigurationError(f"the ACF of {spec.language} kernel {acf.kernel!r} records no arch; it cannot be "
                                 "rebuilt")
    context = without_knob_defines(acf.build_context(spec.source_path.parent), spec)
    entry = build.get("entry") if spec.spec_file is None else None
    # built as the tune built it: an executable with the timing harness where CPU runs were measured
    names = objectives or [n for n in acf.objectives if n in METRICS] or None
    files = [acf_nvidia_file(label, f, acf_folder) for label, f in (build.get("nvidia_acfs") or {}).items()]
    return (spec, get_catalog(acf.compiler), names), {
        "arch": acf.arch, "catalog_name": acf.compiler, "measure": False, "entry": entry, "build": context or None,
        "nvidia_acfs": files or None}
