"""How many candidates carry a control the compiler ignored, with and without learning those combinations."""

from __future__ import annotations

import argparse
import tempfile

from _common import markdown_table, write

from compileiq_lab.kernels import KernelRun, list_kernels, load_kernel
from compileiq_lab.run import Search


def ignored_share(name: str, learn: bool, seed: int, generations: int) -> tuple[int, int, int]:
    """(compiled candidates, candidates with an ignored control, evaluations) of one static ptxas run."""
    with tempfile.TemporaryDirectory() as tmp:
        run = KernelRun(name, "ptxas", ["registers", "sass_instructions"], workdir=tmp, learn=learn)
        results = Search.of(run, generations=generations, seed=seed).start(workers=run.workers)
        compiled = [r for r in results.records if r.status == "ok"]
        ignored = [r for r in compiled if r.detail.get("ignored_controls")]
        run.close()
        return len(compiled), len(ignored), len(results.records)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--generations", type=int, default=8)
    args = ap.parse_args()
    rows, data = [], {}
    for name in list_kernels():
        if load_kernel(name).language != "cuda":
            continue
        entry: dict[str, dict[str, int]] = {}
        for learn in (False, True):
            totals = [ignored_share(name, learn, seed, args.generations) for seed in range(args.seeds)]
            entry["learned" if learn else "not_learned"] = {"compiled": sum(t[0] for t in totals),
                                                            "ignored": sum(t[1] for t in totals),
                                                            "evaluations": sum(t[2] for t in totals)}
        data[name] = entry
        before, after = entry["not_learned"], entry["learned"]
        rows.append([name, before["compiled"], f"{100 * before['ignored'] / max(1, before['compiled']):.1f} %",
                     after["compiled"], f"{100 * after['ignored'] / max(1, after['compiled']):.1f} %"])
    tot = {side: {k: sum(d[side][k] for d in data.values()) for k in ("compiled", "ignored")}
           for side in ("not_learned", "learned")}
    rows.append(["all", tot["not_learned"]["compiled"],
                 f"{100 * tot['not_learned']['ignored'] / max(1, tot['not_learned']['compiled']):.1f} %",
                 tot["learned"]["compiled"],
                 f"{100 * tot['learned']['ignored'] / max(1, tot['learned']['compiled']):.1f} %"])
    write("ignored", data,
          "Candidates with a control the compiler ignored (ptxas space, static objectives)",
          markdown_table(["kernel", "compiled (no learning)", "with an ignored control",
                          "compiled (learning)", "with an ignored control"], rows),
          f"{args.seeds} seeds x {args.generations} generations per kernel and side, registers + sass_instructions, "
          "the ptxas catalog; the same seeds on both sides. Learning: the row of a compile that ignored a control "
          "keeps the rule (detail.ignored_rules) and the search learns it with the conflicts failed compiles name "
          "(SearchConfiguration.learn_conflicts), asking no config in it again; the first candidate that shows it is "
          "still compiled, and a generation asked together may hold several.")


if __name__ == "__main__":
    main()
