"""Widening from common to exotic controls on a real compiler problem (static metrics)."""

from __future__ import annotations

import pytest

from compileiq_lab import load_results
from compileiq_lab.analysis.widening import StageEvent, widening_search
from compileiq_lab.kernels import load_kernel
from compileiq_lab.space.catalogs import PTXAS
from compileiq_lab.testing import tool_available

needs_cuda = pytest.mark.skipif(not tool_available("nvcc"), reason="nvcc/ptxas not installed")


@needs_cuda
def test_stages_widen_tier_by_tier_and_carry_the_population(tmp_path):
    events: list[dict] = []
    out = widening_search(load_kernel("reduction"), PTXAS, ["sass_instructions", "registers"], tmp_path,
                          stall_generations=1, generations_per_stage=3, pool_size=6, workers=2,
                          callback=lambda e: events.append(e) if isinstance(e, StageEvent) else None,
                          evaluator_options={"workdir": tmp_path / "work"})
    tiers = [s.tiers for s in out.stages]
    assert tiers == [["common"], ["common", "advanced"], ["common", "advanced", "exotic"]]
    assert [s.controls for s in out.stages] == sorted(s.controls for s in out.stages) and out.stages[0].controls == 2
    assert [e.stage for e in events] == [1, 2, 3] and events[0].kind == "widened"
    assert all(s.reason for s in out.stages)
    first = load_results(out.stages[0].store)
    second = load_results(out.stages[1].store)
    assert out.stages[1].warm_start > 0
    carried = {repr(sorted(r["params"].items())) for r in first.pareto_front() if r["params"]}
    opened = {repr(sorted(r.params.items())) for r in second.records if r.generation == 1}
    assert carried <= opened  # the first stage's front opens the second
    assert second.header.metadata["tiers"] == ["common", "advanced"]


@pytest.mark.skipif(not tool_available("gcc"), reason="gcc not installed")
def test_a_kernel_and_a_catalog_may_be_named_as_for_a_kernel_run(tmp_path):
    """widening_search("dot", "gcc", ...) as KernelRun("dot", "gcc", ...) takes them, where it raised AttributeError."""
    out = widening_search("dot", "gcc", ["text_bytes"], tmp_path, tiers=["common", "advanced"], stall_generations=1,
                          generations_per_stage=1, pool_size=3, evaluator_options={"workdir": tmp_path / "work"})
    assert [s.tiers for s in out.stages] == [["common"], ["common", "advanced"]]
    assert load_results(out.stages[0].store).header.kernel.kernel == "dot"
