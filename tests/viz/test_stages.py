"""A widening search's stages on one history: bands named by their tiers, the best so far carried across stages."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from compileiq_lab.exceptions import ConfigurationError

pytest.importorskip("plotly")


def test_stages_of_a_real_widening_search(tmp_path: Path) -> None:
    from compileiq_lab import load_results, widening_search
    from compileiq_lab.kernels import KernelRun
    from compileiq_lab.testing import tool_available
    from compileiq_lab.viz.stages import stage_label, stages_history_figure

    if not tool_available("nvcc"):
        pytest.skip("needs nvcc")
    run = KernelRun("reduction", "ptxas", ["sass_instructions", "registers"], measure=False)
    widened = widening_search(run.kernel, run.catalog, ["sass_instructions", "registers"], tmp_path / "w",
                              stall_generations=1, generations_per_stage=2, pool_size=6, workers=2,
                              evaluator_options={"workdir": str(tmp_path / "work")})
    stages = [load_results(s.store) for s in widened.stages]
    fig = stages_history_figure(stages, "sass_instructions")
    labels = [a.text for a in fig.layout.annotations]
    assert labels == [stage_label(r, i) for i, r in enumerate(stages, start=1)]
    assert labels[0] == "stage 1: common" and labels[-1].endswith("common+advanced+exotic")
    best = next(t for t in fig.data if t.name == "best so far")
    ys = [y for y in best.y if y is not None]
    assert all(b <= a for a, b in itertools.pairwise(ys))  # carried over: never worse from one stage to the next
    assert min(ys) == min(r.scores[0] for s in stages for r in s.records if r.status == "ok" and r.scores)
    n_gens = sum(len({r.generation for r in s.records}) for s in stages)
    assert list(best.x) == list(range(1, n_gens + 1))  # numbered on across the stages
    with pytest.raises(ConfigurationError, match="no objective 'runtime'"):
        stages_history_figure(stages, "runtime")
    with pytest.raises(ConfigurationError, match="got none"):
        stages_history_figure([])
