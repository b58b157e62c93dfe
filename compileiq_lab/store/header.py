"""The run header as typed data: RunHeader, the kernel facts of a kernel run (KernelMeta) and a stored Validation."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from compileiq_lab.space.objectives import METRICS, Objective, objectives_from_settings

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["HEADER_KEYS", "SCHEMA_VERSION", "KernelMeta", "RunHeader", "Validation", "build_setup"]

#: Version of the run store's layout (tables and header keys); a change bumps it.
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Validation:
    """Re-measured speedups of some points of a run over its baseline (stored in the header and in ACFs).

    Attributes:
        rows: One dict per point: eval_id, runtime_median (s), runtime_ci, speedup, low, high, win,
            loss, energy_ratio (candidate/baseline energy per launch; None without NVML), and with
            other workloads ``workloads`` (name -> speedup, low, high, win, loss or error) and ``mixed``.
        baseline: The baseline's runtime_median, runtime_ci, mean energy per launch, the A/A
            comparison ("aa": speedup, low, high) and ``noise_floor``.
        rounds, confidence, method: How it was measured.
        gpu: Clocks and temperature after the measurement.
        created: ISO-8601 time of the measurement.
        samples: The per-launch times behind the figures, one per round: "baseline" and each eval id (as text).
        workloads: The kernel's other workloads every point was also re-measured on.
        cache: "warm" or "cold" (L2 flushed before every timed launch).
        timer: ``resolution_s`` of one timed sample and ``launches`` (label -> launches per sample), where known.
        device: The GPU's facts a certificate records (``compileiq_lab.analysis.certify.DEVICE_FACTS``).
        Rows also carry the certification (``certified``, ``why_not``, ``p_value``, ``adjusted_low``/``_high``,
        ``holm_confidence``); a validation stored by an earlier version has none of these (read as not certified).
    """

    rows: list[dict[str, Any]]
    baseline: dict[str, Any]
    rounds: int
    confidence: float
    method: str
    gpu: dict[str, Any] = field(default_factory=dict)
    created: str = ""
    samples: dict[str, list[float]] = field(default_factory=dict)
    workloads: list[str] = field(default_factory=list)
    cache: str = "warm"
    timer: dict[str, Any] = field(default_factory=dict)
    device: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (stored in the run header and in exported ACFs)."""
        return {"rows": self.rows, "baseline": self.baseline, "rounds": self.rounds, "confidence": self.confidence,
                "method": self.method, "gpu": self.gpu, "created": self.created, "samples": self.samples,
                "workloads": self.workloads, "cache": self.cache, "timer": self.timer, "device": self.device}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Validation:
        """Inverse of ``to_dict``."""
        return cls(rows=list(data["rows"]), baseline=dict(data["baseline"]), rounds=int(data["rounds"]),
                   confidence=float(data["confidence"]), method=str(data["method"]), gpu=dict(data.get("gpu", {})),
                   created=str(data.get("created", "")), samples=dict(data.get("samples", {})),
                   workloads=list(data.get("workloads", [])), cache=str(data.get("cache", "warm")),
                   timer=dict(data.get("timer") or {}), device=dict(data.get("device") or {}))

    def row(self, eval_id: int) -> dict[str, Any] | None:
        """The row of one evaluation, or None if it was not re-measured."""
        return next((r for r in self.rows if r["eval_id"] == eval_id), None)

    def to_frame(self) -> pd.DataFrame:
        """The rows as a DataFrame."""
        import pandas as pd

        return pd.DataFrame(self.rows)

    @property
    def noise_floor(self) -> float:
        """How far an A/A comparison of the baseline with itself strayed from 1: 0 when its interval covers 1,
        else the distance of its far end from 1."""
        return float(self.baseline.get("noise_floor", 0.0))

    @property
    def wins(self) -> list[int]:
        """Eval ids whose speedup CI lies above 1 + noise_floor."""
        return [r["eval_id"] for r in self.rows if r["win"]]

    @property
    def wrong_output(self) -> dict[int, list[str]]:
        """Eval id -> the other workloads on which it computed wrong output (no export picks such a point)."""
        return {int(r["eval_id"]): list(r["wrong_output_on"]) for r in self.rows if r.get("wrong_output_on")}


def build_setup(build: Any, headers_sha256: str | None) -> tuple[dict[str, Any], list[str] | None]:
    """What of a run's recorded build context (``extra["build"]``) is part of its setup: its defines and fixed arguments
    (those given), and its include folders only where the headers' digest is not recorded (else None; see
    ``KernelMeta.identity``)."""
    recorded = build if isinstance(build, Mapping) else {}
    folders = recorded.get("include_dirs")
    return ({k: v for k, v in recorded.items() if k != "include_dirs" and v},
            list(folders) if folders and headers_sha256 is None else None)


@dataclass(frozen=True)
class KernelMeta:
    """What a kernel run tuned (the header's ``metadata`` of runs made by a KernelRun).

    Attributes:
        kernel: Kernel name (bundled), folder or file it was loaded from.
        catalog: Catalog name ("nvcc", "ptxas", "nvrtc", "gcc", "clang", ...).
        objectives: Objective names, in score order.
        language: "cuda" or "c".
        source_sha256: SHA-256 of the kernel source.
        arch: CUDA target (None for C kernels).
        toolchain: Compiler versions.
        gpu: The GPU's facts for runs measured on one.
        extra: Other facts stored with it (warm-start sources, widening stage, ...), kept as they are.
    """

    kernel: str
    catalog: str
    objectives: tuple[str, ...]
    language: str | None = None
    source_sha256: str | None = None
    arch: str | None = None
    toolchain: dict[str, str] = field(default_factory=dict)
    gpu: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    _KEYS = ("kernel", "language", "source_sha256", "catalog", "arch", "objectives", "toolchain", "gpu")

    @property
    def entry(self) -> str | None:
        """The kernel the run tuned within its source: a bare file's entry, else its kernel.toml's (None: not
        recorded, the only kernel of its file or a run of an earlier version)."""
        value = self.extra.get("entry") or self.extra.get("spec_entry")
        return str(value) if value else None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> KernelMeta | None:
        """The kernel facts of a header's metadata, or None when it names no kernel, catalog and objectives."""
        if not data or not {"kernel", "catalog", "objectives"} <= set(data):
            return None
        return cls(kernel=str(data["kernel"]), catalog=str(data["catalog"]),
                   objectives=tuple(str(o) for o in data["objectives"]), language=data.get("language"),
                   source_sha256=data.get("source_sha256"), arch=data.get("arch"),
                   toolchain=dict(data.get("toolchain") or {}), gpu=data.get("gpu"),
                   extra={k: v for k, v in data.items() if k not in cls._KEYS})

    def identity(self) -> dict[str, Any]:
        """What makes two kernel runs comparable: kernel, source and the headers it reads, a kernel folder's
        kernel.toml and reference.py (its inputs and output check), catalog, objectives, arch,
        toolchain and GPU model, and the build context a bare file is tuned in (its entry, launch block, include
        folders, defines and fixed arguments: none recorded means none given); not where the kernel was loaded from,
        the GPU's clocks of the day, or how the run was seeded. A kernel folder's entry (``spec_entry``) counts where
        both runs recorded it (earlier versions did not). The include folders count only where the headers' digest is
        not recorded: the digest holds each header the source reads, by its path relative to the source and its
        bytes, which is what the folders decide, so a copy of the whole tree elsewhere is the same setup."""
        gpu = (self.gpu or {}).get("name")
        build, folders = build_setup(self.extra.get("build"), self.extra.get("headers_sha256"))
        out = {"kernel": self.kernel, "language": self.language, "source_sha256": self.source_sha256,
               "catalog": self.catalog, "arch": self.arch, "objectives": list(self.objectives),
               "toolchain": dict(self.toolchain) or None, "gpu": gpu, "entry": self.extra.get("entry", ""),
               "block": self.extra.get("block", []), "build": build, "include_dirs": folders,
               "headers_sha256": self.extra.get("headers_sha256"), "spec_entry": self.extra.get("spec_entry"),
               "spec_sha256": self.extra.get("spec_sha256")}
        return {k: v for k, v in out.items() if v is not None}

    def to_dict(self) -> dict[str, Any]:
        """The stored form (the header's ``metadata``)."""
        out: dict[str, Any] = {"kernel": self.kernel, "language": self.language, "source_sha256": self.source_sha256,
                               "catalog": self.catalog, "arch": self.arch, "objectives": list(self.objectives),
                               "toolchain": dict(self.toolchain)}
        if self.gpu is not None:
            out["gpu"] = dict(self.gpu)
        return {**out, **self.extra}


_FIELDS = ("schema_version", "created_at", "space", "config", "objective", "package_version", "status", "resolved",
           "metadata", "validation", "updated_at", "stop_reason", "run_time_s")
#: The header keys this version writes (and reads one by one from a damaged store).
HEADER_KEYS = _FIELDS


@dataclass(frozen=True)
class RunHeader:
    """The header of a stored run: what was searched, how, by which objective, and how it stands.

    Attributes:
        schema_version: The store layout version.
        created_at: Creation time (seconds since the epoch).
        space: The search space (``SearchSpace.to_spec()``).
        config: The search settings (``SearchConfiguration.to_dict()``).
        objective: A description of the objective function.
        package_version: The compileiq-lab version that made the run.
        status: How the run stands ("idle" until it first starts, "running", "finished", "stopped", "interrupted",
            "exhausted", "baseline_failed", ...).
        resolved: The automatic settings made concrete (pool_size, strategy, mutate_rate).
        metadata: Facts stored with a new run (a kernel run's are read by ``kernel``).
        validation: The latest interleaved re-measurement, if any.
        updated_at: When the status last changed.
        stop_reason: Why the run ended: with status "finished", the limit it reached ("generations",
            "max_evaluations" or "time_budget"); with "baseline_failed", why no control can help; with "failed", the
            error; else "".
        run_time_s: Wall time its ``start()`` calls have taken in all (what ``time_budget_s`` counts).
        extra: Header keys this version does not know, kept as they are.
    """

    schema_version: int = SCHEMA_VERSION
    created_at: float = 0.0
    space: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    objective: str = ""
    package_version: str = ""
    status: str = "unknown"
    resolved: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    validation: Validation | None = None
    updated_at: float | None = None
    stop_reason: str = ""
    run_time_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> RunHeader:
        """Read the stored key/values (the one place header keys are read)."""
        known = {k: values[k] for k in _FIELDS if k in values}
        if known.get("validation") is not None:
            known["validation"] = Validation.from_dict(known["validation"])
        if known.get("metadata") is None:
            known.pop("metadata", None)
        return cls(**known, extra={k: v for k, v in values.items() if k not in _FIELDS})

    def to_values(self) -> dict[str, Any]:
        """The key/values to store (the one place header keys are written); empty optional parts are left out."""
        out = {k: getattr(self, k) for k in _FIELDS}
        out["validation"] = self.validation.to_dict() if self.validation is not None else None
        for optional in ("metadata", "validation", "updated_at", "stop_reason", "run_time_s"):
            if not out[optional]:
                del out[optional]
        return {**self.extra, **out}

    def replace(self, **changes: Any) -> RunHeader:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    @property
    def kernel(self) -> KernelMeta | None:
        """The kernel facts of a kernel run (None for runs of a Python objective)."""
        return KernelMeta.from_dict(self.metadata)

    def setup(self) -> dict[str, Any]:
        """The facts a continued run must share with this one: a kernel run's identity, else the metadata given."""
        kernel = self.kernel
        facts = kernel.identity() if kernel is not None else dict(self.metadata)
        return {k: v for k, v in facts.items() if v is not None}

    @property
    def objectives(self) -> list[Objective]:
        """The run's objectives (names and directions from the settings; units of kernel metrics where known)."""
        cfg = self.config
        kernel = self.kernel
        if "num_objectives" not in cfg and kernel is not None and all(o in METRICS for o in kernel.objectives):
            return [METRICS[o] for o in kernel.objectives]  # settings lost (a damaged header): the kernel's facts
        return objectives_from_settings(int(cfg.get("num_objectives", 1)), cfg.get("problem_type", "min"),
                                        cfg.get("objective_names"), METRICS if kernel is not None else None)
