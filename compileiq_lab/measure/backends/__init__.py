"""Compile paths behind one protocol: CUDA two-stage, full nvcc, NVRTC and C host builds."""

from __future__ import annotations

from compileiq_lab.measure.backends.base import CUBIN_METRICS, HOST_METRICS, Backend

__all__ = ["CUBIN_METRICS", "HOST_METRICS", "Backend"]
