"""Compile throughput (cached PTX + ptxas vs full nvcc per candidate) and code-hash dedup savings."""

from __future__ import annotations

import argparse
import tempfile
import time
from typing import Any

import numpy as np
from _common import markdown_table, write

from compileiq_lab.kernels import KernelRun, list_kernels, load_kernel
from compileiq_lab.space import SearchSpace


def sample_configs(evaluator: KernelRun, n: int, seed: int, defines: bool = True) -> list[dict[str, Any]]:
    """``n`` distinct configs drawn from the prior that the compiler accepts (known conflicts skipped).

    With ``defines=False`` the kernel's -D knobs stay at their defaults (back-end genes only).
    """
    sp = evaluator.search_space()
    if not defines:
        sp.pop("defines", None)
    space = SearchSpace(sp)
    rng = np.random.default_rng(seed)
    seen, out = set(), []
    while len(out) < n:
        for x in space.sample(rng, 4 * n):
            c = space.decode(x)
            key = repr(sorted(c.items()))
            if key not in seen and evaluator.constraint(c) is None:
                seen.add(key)
                out.append(c)
                if len(out) == n:
                    break
    return out


def throughput(kernel: Any, n: int) -> dict[str, float]:
    """Candidates per minute for ptxas-only genes, two-stage vs one full nvcc call per candidate."""
    res: dict[str, float] = {}
    for label, two_stage in (("two_stage", True), ("full_nvcc", False)):
        with tempfile.TemporaryDirectory() as d:
            ev = KernelRun(kernel, "ptxas", ["registers"], workdir=d, two_stage=two_stage, unsafe_math=True)
            configs = sample_configs(ev, n, seed=1, defines=False)
            t0 = time.perf_counter()
            statuses = [ev(c).status for c in configs]
            dt = time.perf_counter() - t0
            res[f"{label}_per_min"] = 60 * n / dt
            res[f"{label}_ok"] = float(statuses.count("ok"))
    res["ratio"] = res["two_stage_per_min"] / res["full_nvcc_per_min"]
    return res


def dedup(kernel: Any, n: int) -> dict[str, float]:
    """Share of compiled configs whose machine code equals an earlier config's (benchmarks saved)."""
    with tempfile.TemporaryDirectory() as d:
        ev = KernelRun(kernel, "nvcc", ["sass_instructions"], workdir=d)
        ok = [m for m in (ev(c) for c in sample_configs(ev, n, seed=2)) if m.ok]
    dup = sum(m.detail["duplicate_code"] for m in ok)
    return {"compiled": float(len(ok)), "distinct_code": float(len(ok) - dup),
            "saved_share": dup / len(ok) if ok else 0.0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-n", type=int, default=30, help="configs per kernel")
    args = ap.parse_args()
    cuda = [k for k in list_kernels() if load_kernel(k).language == "cuda"]
    rows_t, rows_d, data = [], [], {}
    for name in cuda:
        k = load_kernel(name)
        t, dd = throughput(k, args.n), dedup(k, 2 * args.n)
        data[name] = {"throughput": t, "dedup": dd}
        rows_t.append([name, t["two_stage_per_min"], t["full_nvcc_per_min"], t["ratio"]])
        rows_d.append([name, int(dd["compiled"]), int(dd["distinct_code"]), f"{100 * dd['saved_share']:.0f} %"])
        print(rows_t[-1], rows_d[-1], flush=True)
    table = (markdown_table(["kernel", "cached PTX + ptxas (cand/min)", "full nvcc (cand/min)", "ratio"], rows_t)
             + "\n\n" + markdown_table(["kernel", "configs compiled", "distinct machine code",
                                        "runtime benchmarks saved by code-hash dedup"], rows_d))
    write("compile", {"n": args.n, "kernels": data},
          "Compile throughput and code-hash dedup (CUDA kernels, sm_90, no GPU needed)", table,
          f"Throughput: {args.n} distinct prior samples of the ptxas catalog per kernel (-D knobs at their "
          "defaults: ptxas-only genes), compiled one after the other (1 process); the two-stage path compiles "
          "the PTX once, timed with it; goal >= 5x. Front-end genes (nvcc flags, -D knobs) need one nvcc -ptx "
          "per distinct set, cached on disk. "
          f"Dedup: {2 * args.n} distinct samples of the nvcc front-end + ptxas catalog (precision-changing "
          "controls excluded); a config whose .text sections hash like an earlier config's needs no runtime "
          "benchmark; goal >= 30 %.")


if __name__ == "__main__":
    main()
