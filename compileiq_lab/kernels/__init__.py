"""Kernels: specs (kernel.toml), finding them, the tuning choices per language, and KernelRun, the one composition."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from compileiq_lab.kernels.choices import (
    CATALOG_NAMES,
    CATALOGS,
    CONTROL_NAMES,
    DEFAULT_ARCH,
    TARGETS,
    active_catalog,
    controls_fixed_by,
    default_objectives,
    gpu_arch,
    gpu_reason,
    objective_choices,
    offered_catalog,
    targets,
)
from compileiq_lab.kernels.load import (
    BLOCK_RULE,
    ENV_VAR,
    kernels_root,
    list_kernels,
    load_kernel,
    load_triton_kernel,
    valid_block,
)
from compileiq_lab.kernels.spec import GPU_LANGUAGES, BufferSpec, KernelSpec, eval_expr, refuse_fixed_controls
from compileiq_lab.kernels.triton_args import TRITON_PREFIX, parse_triton_ref, triton_usage_error
from compileiq_lab.kernels.triton_autotune import autotune_choice
from compileiq_lab.space.catalogs.base import CATEGORIES, one_line, shown_argv
from compileiq_lab.space.objectives import METRICS, Objective
from compileiq_lab.toolchain.context import BuildContext

__all__ = [
    "BLOCK_RULE",
    "CATALOGS",
    "CATALOG_NAMES",
    "CATEGORIES",
    "CONTROL_NAMES",
    "DEFAULT_ARCH",
    "ENV_VAR",
    "GPU_LANGUAGES",
    "METRICS",
    "TARGETS",
    "TRITON_PREFIX",
    "BufferSpec",
    "BuildContext",
    "CanaryResult",
    "KernelRun",
    "KernelSpec",
    "Minimal",
    "Objective",
    "active_catalog",
    "autotune_choice",
    "canary",
    "check_canary",
    "controls_fixed_by",
    "default_objectives",
    "eval_expr",
    "gpu_arch",
    "gpu_reason",
    "kernels_root",
    "list_kernels",
    "load_kernel",
    "load_triton_kernel",
    "minimal_controls",
    "objective_choices",
    "offered_catalog",
    "one_line",
    "optimisation_controls",
    "parse_triton_ref",
    "refuse_fixed_controls",
    "shown_argv",
    "targets",
    "triton_usage_error",
    "valid_block",
]

if TYPE_CHECKING:
    from compileiq_lab.kernels.canary import CanaryResult, canary, check_canary, optimisation_controls
    from compileiq_lab.kernels.minimal import Minimal, minimal_controls
    from compileiq_lab.kernels.run import KernelRun


def __getattr__(name: str) -> Any:
    # KernelRun pulls in the compile backends and the evaluator: loaded on first use (a GPU worker that only
    # unpickles a KernelSpec never needs them)
    if name == "KernelRun":
        return importlib.import_module("compileiq_lab.kernels.run").KernelRun
    if name in ("Minimal", "minimal_controls"):
        return getattr(importlib.import_module("compileiq_lab.kernels.minimal"), name)
    if name in ("CanaryResult", "canary", "check_canary", "optimisation_controls"):
        return getattr(importlib.import_module("compileiq_lab.kernels.canary"), name)
    raise AttributeError(f"module 'compileiq_lab.kernels' has no attribute {name!r}")
