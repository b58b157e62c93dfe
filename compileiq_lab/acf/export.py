"""The ACF of one evaluated point of a kernel run (controls spelled out, re-measured speedups included)."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compileiq_lab.acf.format import ACF, NO_BUILD
from compileiq_lab.acf.shape import ENTRY_NAME, _rel_path_ok
from compileiq_lab.analysis.certify import certificate
from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.kernels.headers import changes_since
from compileiq_lab.measure.entries import REGEX_PREFIX
from compileiq_lab.measure.evaluator import config_argv
from compileiq_lab.measure.unitnames import stable_symbol
from compileiq_lab.store.header import KernelMeta, Validation
from compileiq_lab.toolchain.nvidia_acf import KEY as NVIDIA_ACF_KEY

if TYPE_CHECKING:
    from compileiq_lab.kernels.spec import KernelSpec
    from compileiq_lab.space.catalogs.base import Catalog
    from compileiq_lab.store.results import Results
    from compileiq_lab.store.sqlite import EvalRecord

__all__ = ["build_section", "effective_params", "full_controls", "point_acf"]

log = logging.getLogger(__name__)


def effective_params(rec: EvalRecord) -> dict[str, Any]:
    """A point's controls without those the compiler said it ignored (what the point really was)."""
    eff = rec.detail.get("effective_params") if isinstance(rec.detail, Mapping) else None
    return dict(eff) if isinstance(eff, Mapping) else dict(rec.params)


def _relative(path: Path, root: Path) -> str | None:
    text = Path(os.path.relpath(path, root)).as_posix()
    return text if _rel_path_ok(text) else None


def _relative_to_first(path: Path, roots: list[Path]) -> str | None:
    """``path`` relative to the first of ``roots`` it is near enough to (``_relative``), or None."""
    return next((r for r in (_relative(path, root) for root in roots) if r is not None), None)


def build_section(kernel: KernelSpec, bundled: bool, nvidia_acf: str | None = None,
                  acf_folder: Path | None = None) -> dict[str, Any]:
    """The ACF's build section of a kernel: its source relative to the folder the ACF is written to (``acf_folder``,
    default the working folder; relative to the working folder where the ACF's is too far from it; None for a
    bundled kernel or one too far from both, with a warning: verify then needs --kernel), its
    entry, include directories relative to the source's folder, fixed defines and extra arguments; with
    ``nvidia_acf`` (a label), that NVIDIA control file relative to the ACF's folder with its sha256. Relative to the
    ACF's folder, an ACF finds its kernel from any working folder while the two keep their places.

    Raises:
        ConfigurationError: An include directory more than 8 levels above the kernel source's folder.
    """
    where = kernel.source_path.parent
    dirs = []
    for d in kernel.build.include_dirs:
        rel = _relative(d, where)
        if rel is None:
            raise ConfigurationError(f"an ACF records include directories relative to the kernel source's folder "
                                     f"(at most 8 levels up, printable names), but {d} is not; keep the headers in "
                                     "the kernel's project")
        dirs.append(rel)
    bases = [Path.cwd()] if acf_folder is None else [Path(acf_folder).resolve(), Path.cwd()]
    ref = kernel.source_path if kernel.spec_file is None else kernel.folder
    source = None if bundled else _relative_to_first(ref, bases)
    if source is None and not bundled:
        log.warning("the ACF records no kernel source: %s is more than 8 folders from the ACF's folder and from the "
                    "working folder, so verify and validate --acf need --kernel %s", ref, ref)
    out = {**NO_BUILD, "source": source, "entry": kernel.entry,
           "include_dirs": dirs, "defines": dict(kernel.build.defines), "args": list(kernel.build.args)}
    if nvidia_acf is not None:
        files = {}
        for acf in [kernel.nvidia_acfs[nvidia_acf]]:
            rel = _relative_to_first(acf.path, bases)
            if rel is None:
                raise ConfigurationError(f"an ACF records NVIDIA control files relative to its own folder (at most 8 "
                                         f"levels up), but {acf.path} is not; write the ACF nearer to it")
            files[acf.label] = {"file": rel, "sha256": acf.sha256}
        out["nvidia_acfs"] = files
    return out


def _recorded_entry(entry: str | None, symbol: Any) -> str | None:
    """The entry an ACF records: the run's, or, for a ``regex:`` entry with characters an ACF keeps out of a kernel
    name (``^ + ? | { } \\``, which a shell reads), the symbol it found for the point, without the parts of it that
    nvcc makes unique per compile (an anonymous namespace's hashes of the file's path).

    Raises:
        ConfigurationError: Such an entry whose symbol an ACF cannot hold either (over 1,024 characters).
    """
    if entry is None or not entry.startswith(REGEX_PREFIX) or ENTRY_NAME.match(entry):
        return entry
    stable = stable_symbol(symbol) if isinstance(symbol, str) else ""
    if ENTRY_NAME.match(stable):
        return stable
    raise ConfigurationError(f"an ACF records the kernel's entry in letters, digits and _$.:<>,()*& ~[]-, but the "
                             f"run's entry {entry!r} holds other characters and its kernel's symbol is too long to "
                             "record; tune with a regex: entry made of those characters and .* (the run lists one), "
                             "or the kernel's C++ name")


def full_controls(kernel: KernelSpec, params: Mapping[str, Any]) -> dict[str, Any]:
    """A point's controls with every -D knob spelled out (the baseline leaves them at their defaults)."""
    if not kernel.defines:
        return dict(params)
    return {**params, "defines": dict(kernel.define_values(params.get("defines")))}


def _summary(validation: Validation, row: dict[str, Any], gpu: str | None, code_hash: str | None,
             acf_name: str) -> dict[str, Any]:
    """The ACF's ``validation`` field: one point's re-measured speedup, how it was measured, and its certificate."""
    summary = {"speedup": row["speedup"], "low": row["low"], "high": row["high"], "win": row["win"],
               "noise_floor": validation.noise_floor, "confidence": validation.confidence,
               "method": validation.method, "rounds": validation.rounds, "runtime": row["runtime_median"],
               "baseline_runtime": validation.baseline["runtime_median"], "energy_ratio": row["energy_ratio"],
               "gpu": gpu}
    if row.get("workloads"):
        summary["workloads"] = {w: {k: v for k, v in e.items() if k in ("speedup", "low", "high", "win", "error")}
                                for w, e in row["workloads"].items()}
    if "certified" in row:  # validations stored by earlier versions have no certification
        summary["certificate"] = certificate(validation, row, code_hash, acf_name)
    return summary


def point_acf(results: Results, rec: EvalRecord, kernel: KernelSpec, catalog: Catalog,
              meta: KernelMeta | Mapping[str, Any] | None = None, validation: Validation | None = None,
              controls: Mapping[str, Any] | None = None, dropped: Mapping[str, str] | None = None,
              acf_path: str | Path | None = None) -> ACF:
    """The ACF of one evaluated point of a kernel run, with its re-measured speedup where the run has one.

    Args:
        results: The run.
        rec: The point (a successful evaluation of the run).
        kernel: The kernel spec the run tuned.
        catalog: The catalog its controls come from.
        meta: The run's kernel facts (default: its header's).
        validation: A re-measurement (default: the run's latest one).
        controls: The controls to write (default: the point's, without those the compiler ignored), e.g. a
            minimal set (``compileiq_lab.kernels.minimal_controls``) with ``dropped`` saying what was left out.
        dropped: {control: why} of controls left out.
        acf_path: The file the ACF is written to (default: ``this.acf`` in the working folder): the certificate's
            re-check command names it, and its paths are relative to its folder.

    Raises:
        ConfigurationError: The run records no kernel facts, or the point breaks a rule of the format.
    """
    acf_name = Path(acf_path).name if acf_path is not None else "this.acf"
    acf_folder = Path(acf_path).resolve().parent if acf_path is not None else None
    facts = meta if isinstance(meta, KernelMeta) else KernelMeta.from_dict(meta) if meta is not None \
        else results.header.kernel
    if facts is None:
        raise ConfigurationError("an ACF needs the kernel facts of the run (kernel, catalog, objectives), but its "
                                 "header has none; pass meta=kernel_run.metadata()")
    changes = changes_since(kernel, facts.source_sha256, facts.extra.get("headers_sha256"), facts.arch,
                            catalog.compiler, "the run")
    if changes:
        raise ConfigurationError(f"a point is exported with the code it was measured on, but {'; '.join(changes)}: "
                                 "its scores and machine-code hash are those of the old code; restore the file, or "
                                 "tune the current code in a new run store")
    ignored = rec.detail.get("ignored_controls", {}) if isinstance(rec.detail, Mapping) else {}
    why = {k: f"ignored by the compiler: {v}" for k, v in (ignored if isinstance(ignored, Mapping) else {}).items()}
    why.update(dropped or {})
    controls = full_controls(kernel, controls if controls is not None else effective_params(rec))
    validation = validation if validation is not None else results.validation
    row = validation.row(rec.eval_id) if validation is not None else None
    gpu = (facts.gpu or {}).get("name") or (rec.detail.get("gpu") or {}).get("name")
    ci: dict[str, list[float]] = {}
    summary = None
    if validation is not None and row is not None:
        ci = {"runtime": row["runtime_ci"], "speedup": [row["low"], row["high"]]}
        summary = _summary(validation, row, gpu, rec.detail.get("code_hash"), acf_name)
    own = results.baseline_scores_of(rec)  # the baseline its own GPU measured, on a cluster of several
    build = build_section(kernel, "kernel_path" not in facts.extra, controls.get(NVIDIA_ACF_KEY), acf_folder)
    build["entry"] = _recorded_entry(kernel.entry, rec.detail.get("entry_symbol"))
    if facts.extra.get("headers_sha256"):
        build["headers_sha256"] = facts.extra["headers_sha256"]
    files = {label: f["file"] for label, f in build.get("nvidia_acfs", {}).items()}
    return ACF.from_choice(
        compiler=facts.catalog, controls=controls, argv=config_argv(kernel, catalog, controls, files),
        objectives=dict(zip(facts.objectives, rec.scores or [])), kernel=kernel.name,
        source_sha256=kernel.source_sha256(),
        baseline={n: own[i] if own is not None and len(own) > i else None for i, n in enumerate(facts.objectives)},
        arch=facts.arch, toolchain=facts.toolchain, code_hash=rec.detail.get("code_hash"),
        run={"store": results.store_path, "eval_id": rec.eval_id, "seed": results.header.config.get("seed")},
        ci=ci, validation=summary, gpu=gpu, build=build,
        dropped={k: v for k, v in why.items() if k not in controls})
