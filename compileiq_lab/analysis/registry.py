"""Earlier runs by kernel, architecture and toolchain: find them, warm-start from their fronts, compare fronts."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compileiq_lab.exceptions import CompileIQLabError
from compileiq_lab.space.space import config_key
from compileiq_lab.store.header import build_setup
from compileiq_lab.store.results import load_results
from compileiq_lab.store.sqlite import DEFAULT_DIR

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["RunInfo", "build_key", "compare_fronts", "find_runs", "warm_start_configs"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunInfo:
    """One stored `tune` run: where it is and what it tuned."""

    path: str
    kernel: str
    arch: str | None
    catalog: str
    objectives: tuple[str, ...]
    toolchain: dict[str, str]
    source_sha256: str | None
    evaluations: int
    status: str
    created_at: float
    entry: str | None = None
    build: str = ""


def find_runs(directory: str | os.PathLike[str] = DEFAULT_DIR, kernel: str | None = None,
              arch: str | None = None) -> list[RunInfo]:
    """Stored runs under ``directory`` (newest first), optionally of one kernel and architecture.

    Files that are not run stores, or runs not made by `tune` (no kernel in their header), are skipped.
    """
    root = Path(directory)
    found = []
    for path in sorted(root.glob("*.db")) if root.is_dir() else []:
        try:
            res = load_results(str(path))
        except (CompileIQLabError, OSError) as exc:
            log.debug("skipping %s: %s", path, exc)
            continue
        meta = res.header.kernel
        if meta is None or (kernel and meta.kernel != kernel) or (arch and meta.arch != arch):
            continue
        found.append(RunInfo(str(path), meta.kernel, meta.arch, meta.catalog, meta.objectives, dict(meta.toolchain),
                             meta.source_sha256, len(res), res.status, float(res.header.created_at),
                             meta.entry, build_key(meta.extra.get("build"), meta.extra.get("headers_sha256"))))
    return sorted(found, key=lambda r: r.created_at, reverse=True)


def build_key(build: Any, headers_sha256: str | None = None) -> str:
    """A stable text of what of a run header's build context (``extra["build"]``) is part of its setup
    (``build_setup``: its include folders count only without the headers' digest), "" for none."""
    given, folders = build_setup(build, headers_sha256)
    if not given and not folders:
        return ""
    return json.dumps({**given, "include_dirs": folders or []}, sort_keys=True)


def warm_start_configs(kernel: str, arch: str | None, catalog: str, directory: str | os.PathLike[str] = DEFAULT_DIR,
                       limit: int = 16, source_sha256: str | None = None, entry: str | None = None,
                       build: dict[str, Any] | None = None,
                       headers_sha256: str | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """Configs to open a new run with: the fronts of earlier runs of ``kernel`` with the same catalog, entry
    and build context (``build`` and the run's ``headers_sha256``, matched as ``build_key`` says; and, when
    ``source_sha256`` is given, the same source: another kernel of a file, or another version of it, is another
    problem), runs on the same architecture first, then other
    architectures (their front is a good start on a new one), newest first.

    Returns:
        (configs, store paths they came from); both empty when there is no earlier run.
    """
    key = build_key(build, headers_sha256)
    runs = [r for r in find_runs(directory, kernel) if r.catalog == catalog and r.entry == entry
            and r.build == key and (source_sha256 is None or r.source_sha256 == source_sha256)]
    runs.sort(key=lambda r: r.arch != arch)
    configs: list[dict[str, Any]] = []
    seen, used = set(), []
    for info in runs:
        added = 0
        for rec in load_results(info.path).front_records():
            key = config_key(rec.params)
            if key not in seen and rec.params:
                seen.add(key)
                configs.append(rec.params)
                added += 1
            if len(configs) >= limit:
                break
        if added:
            used.append(info.path)
        if len(configs) >= limit:
            break
    return configs, used


def compare_fronts(kernel: str, directory: str | os.PathLike[str] = DEFAULT_DIR) -> pd.DataFrame:
    """The Pareto fronts of every stored run of ``kernel``, one row per front point, with its run's
    architecture and toolchain (for comparing how one kernel tunes on different GPUs)."""
    import pandas as pd

    rows = []
    for info in find_runs(directory, kernel):
        res = load_results(info.path)
        for rec in res.front_records():
            toolchain = " ".join(f"{k} {v}" for k, v in sorted(info.toolchain.items()))
            rows.append({"arch": info.arch, "toolchain": toolchain,
                         "run": info.path, "eval_id": rec.eval_id,
                         **dict(zip(res.objective_names, rec.scores or [])), "params": rec.params})
    return pd.DataFrame(rows)
