"""CompileIQ 1.1's engine on a recorded table, driven call by call; runs in its own venv (see bench_peers.py).

Reads a job (JSON) on stdin: {"controls": {name: [values...]}, "rows": {key: [scores] | null}, "seeds": [...],
"budget": n, "directions": ["min", ...]}; a key is the JSON list of the chosen values. Writes one JSON line per
seed: {"seed": s, "keys": [...], "engine_s": seconds spent outside the objective}.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any


def _unused(config: dict[str, Any]) -> float:
    raise RuntimeError("driven call by call: ask() and tell()")


def run(job: dict[str, Any], seed: int) -> dict[str, Any]:
    from compileiq.backends import EngineConfig  # type: ignore[import-not-found]
    from compileiq.ciq import Search  # type: ignore[import-not-found]
    from compileiq.search_spaces import base as ss  # type: ignore[import-not-found]
    from compileiq.types import SearchConfiguration, WorkerTypes  # type: ignore[import-not-found]
    from compileiq.utils.validation import Score  # type: ignore[import-not-found]

    names = list(job["controls"])
    # values travel as their JSON text: CompileIQ hands choices back as strings
    space = {n: ss.choice([json.dumps(x) for x in v]) for n, v in job["controls"].items()}
    k = len(job["directions"])
    budget = int(job["budget"])
    # its defaults: the pool it derives from the number of objectives, its own engine options
    cfg = SearchConfiguration(generations=budget, num_objectives=k, problem_type=job["directions"][0])
    search = Search(objective_function=_unused, search_space=space, search_config=cfg, worker_type=WorkerTypes.MANUAL,
                    engine=EngineConfig(name="amber", options={"seed": seed}),
                    disable_progress_bar=True, exit_on_failure=False)
    penalty = job["penalty"]
    keys: list[str] = []
    t0 = time.perf_counter()
    objective_s = 0.0
    while len(keys) < budget:
        cands = search.ask()
        if not cands:
            break
        scores = []
        for c in cands:
            t1 = time.perf_counter()
            key = json.dumps([json.loads(c.params[n]) if n in c.params else "unset" for n in names])
            keys.append(key)
            row = job["rows"].get(key)
            vals = penalty if row is None else row
            scores.append(Score(score=vals if k > 1 else vals[0], param_id=c.param_id, num_objectives=k))
            objective_s += time.perf_counter() - t1
        search.tell(scores)
    return {"seed": seed, "keys": keys[:budget], "engine_s": time.perf_counter() - t0 - objective_s,
            "calls": len(keys)}


def main() -> None:
    job = json.load(sys.stdin)
    for seed in job["seeds"]:
        print(json.dumps(run(job, seed)), flush=True)


if __name__ == "__main__":
    main()
