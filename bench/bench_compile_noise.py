"""How noisy compile_time is: one config (the compiler defaults) compiled again and again, each in a fresh folder:
the CUDA kernels with nvcc + ptxas, the C kernels with gcc."""

from __future__ import annotations

import argparse
import statistics

from _common import markdown_table, write

from compileiq_lab.kernels import KernelRun, list_kernels, load_kernel

#: The compiler each language is compiled with, and a static metric to ask beside compile_time.
COMPILERS = {"cuda": ("nvcc", "registers"), "c": ("gcc", "text_bytes")}


def compile_times(run: KernelRun, repeats: int) -> list[float]:
    """Seconds of ``repeats`` compiles of the compiler defaults, each in a new folder (nothing cached)."""
    times = []
    for _ in range(repeats):
        status, seconds = run.scratch_compile({})
        if status != "ok":
            raise RuntimeError(f"{run.kernel.name}: the defaults do not compile ({status})")
        times.append(seconds)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()
    rows, data = [], {}
    for name in list_kernels():
        language = load_kernel(name).language
        if language not in COMPILERS:
            continue
        compiler, metric = COMPILERS[language]
        run = KernelRun(name, compiler, ["compile_time", metric], measure=False)
        t = compile_times(run, args.repeats)
        first, warm = t[0], t[1:]
        med = statistics.median(warm)
        cv = 100 * statistics.stdev(warm) / statistics.mean(warm)
        spread = 100 * (max(warm) - min(warm)) / med
        data[name] = {"compiler": compiler, "seconds": t, "first": first, "median_warm": med, "cv_percent": cv,
                      "spread_percent": spread}
        rows.append([name, compiler, first, med, f"{cv:.1f} %", f"{spread:.0f} %",
                     f"{100 * (first / med - 1):+.0f} %"])
    write("compile_noise", data,
          "compile_time noise: the compiler defaults compiled again and again (nvcc -ptx + ptxas; gcc)",
          markdown_table(["kernel", "compiler", "first s", "median s (rest)", "CV", "max-min / median",
                          "first vs median"], rows),
          f"{args.repeats} compiles per kernel in one run, each in a fresh scratch folder (no PTX cache). The first "
          "compile of a process pays for cold caches: the lab and the CLI warm the compiler up before the "
          "baseline when compile_time is an objective. Differences smaller than the spread are not wins.")


if __name__ == "__main__":
    main()
