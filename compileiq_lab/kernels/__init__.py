"""Kernels: specs (kernel.toml), finding them, and KernelRun, the one place a kernel run is composed."""

from __future__ import annotations

from compileiq_lab.kernels.load import ENV_VAR, kernels_root, list_kernels, load_kernel
from compileiq_lab.kernels.spec import BufferSpec, KernelSpec, eval_expr

__all__ = ["BufferSpec", "ENV_VAR", "KernelSpec", "eval_expr", "kernels_root", "list_kernels", "load_kernel"]
