"""Controls the compiler said it ignored: the warnings parsed, mapped to controls, and the rules the search learns from
them as it learns conflicts (one mechanism: ``search.conflicts``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from compileiq_lab.measure.ignored import ANY, UNSET, IgnoreRule, find_ignored, ignored_options
from compileiq_lab.search.conflicts import NamedConflicts
from compileiq_lab.space import SearchSpace
from compileiq_lab.space.catalogs import get_catalog
from compileiq_lab.testing import tool_available

# what ptxas 13.0 prints (measured)
CONFLICT = ("ptxas warning : Conflicting options '-O0' and '--register-usage-level' specified, ignoring "
            "'--register-usage-level' option")
TOO_BIG = "ptxas warning : Too big maxrregcount value specified 300, will be ignored"
RANGE = "ptxas warning : Value of RegUsageLevel (12) is out of valid range {0..10}, option will be ignored"
BOUNDS = ("ptxas warning : Value of threads per SM for entry _Z1kPf is out of range. .minnctapersm and .maxntid "
          "will be ignored")


def _learned(space: SearchSpace, config: dict[str, Any], rules: list[IgnoreRule]) -> NamedConflicts:
    """What the search learns from one compile of ``config`` whose row holds ``rules`` (as the evaluator keeps them)."""
    learner = NamedConflicts(space)
    learner.observe(space.encode(config)[None, :], [True], [None], [[r.record() for r in rules]])
    return learner


def _rejects(learner: NamedConflicts, config: dict[str, Any]) -> bool:
    return learner.conflict(learner.space.encode(config)) is not None


def test_warnings_are_parsed() -> None:
    found = ignored_options("\n".join(["ptxas info : Used 8 registers", CONFLICT, TOO_BIG, RANGE, BOUNDS]))
    assert [(i.option, i.because) for i in found] == [("--register-usage-level", "-O0"), ("maxrregcount", None),
                                                      ("RegUsageLevel", None), ("minnctapersm", None),
                                                      ("maxntid", None)]
    assert ignored_options("ptxas info : Used 8 registers\nptxas info : Compile time = 1.2 ms") == []


def test_ignored_controls_and_the_rule_learned() -> None:
    cat = get_catalog("ptxas")
    config = {"opt_level": 0, "register_usage_level": 3, "maxrregcount": 64}
    found = find_ignored(cat, config, CONFLICT)
    assert [name for name, _ in found] == ["register_usage_level"]
    rule = found[0][1]
    assert rule.when == (("opt_level", 0),)
    space = SearchSpace(cat.space())
    learner = _learned(space, {"opt_level": 0, "register_usage_level": 3}, [rule, rule])
    assert len(learner.conflicts) == 1  # a rule once however often it is seen
    assert learner.describe(learner.conflicts[0]) == "register_usage_level is ignored with opt_level = 0"
    assert _rejects(learner, {"opt_level": 0, "register_usage_level": 7})  # any value with -O0
    assert not _rejects(learner, {"opt_level": 1, "register_usage_level": 7})
    assert not _rejects(learner, {"opt_level": 0})  # nothing ignored without the control
    # a compile in it does not overrule it: it was learned from a compile
    learner.observe(space.encode({"opt_level": 0, "register_usage_level": 7})[None, :], [True], [None])
    assert _rejects(learner, {"opt_level": 0, "register_usage_level": 7})
    # an option that is ignored on its own is learned for its value only
    (name, alone), = find_ignored(cat, {"register_usage_level": 10}, RANGE)
    assert name == "register_usage_level" and alone.when == (("register_usage_level", 10),)
    learner = _learned(space, {"register_usage_level": 10}, [alone])
    assert learner.describe(learner.conflicts[0]) == "register_usage_level = 10 is ignored"
    assert _rejects(learner, {"register_usage_level": 10, "opt_level": 2})
    assert not _rejects(learner, {"register_usage_level": 8})


def test_threads_per_sm_out_of_range_is_learned_for_the_block_and_the_count_together() -> None:
    cat, space = get_catalog("ptxas"), SearchSpace(get_catalog("ptxas").space())
    line = "ptxas warning : Value of threads per SM for entry k is out of range. .minnctapersm will be ignored"
    config = {"maxntid": 1024, "minnctapersm": 4}  # 4 blocks of 1024 threads: more than an SM holds
    (name, rule), = find_ignored(cat, config, line)
    assert name == "minnctapersm" and rule.when == (("minnctapersm", 4), ("maxntid", 1024))
    learner = _learned(space, config, [rule])
    assert _rejects(learner, config)
    assert not _rejects(learner, {"maxntid": 256, "minnctapersm": 4})  # 4 blocks of 256 fit: asked
    (_, alone), = find_ignored(cat, {"minnctapersm": 6}, line)  # the kernel's own block (its __launch_bounds__)
    assert alone.when == (("minnctapersm", 6), ("maxntid", UNSET))
    learner = _learned(space, {"minnctapersm": 6}, [alone])
    assert learner.describe(learner.conflicts[0]) == "minnctapersm = 6 is ignored with maxntid unset"
    assert _rejects(learner, {"minnctapersm": 6, "opt_level": 2})
    assert not _rejects(learner, {"minnctapersm": 6, "maxntid": 256})  # a block of the config's own: asked
    without = SearchSpace({"minnctapersm": cat.space()["minnctapersm"]})  # a space that never sets the block
    assert _rejects(_learned(without, {"minnctapersm": 6}, [alone]), {"minnctapersm": 6})
    both = dict(find_ignored(cat, config, BOUNDS))
    assert dict(both["minnctapersm"].when) == dict(both["maxntid"].when) == {"minnctapersm": 4, "maxntid": 1024}


def test_unquoted_forms_of_ptxas_13() -> None:
    text = "\n".join([
        "ptxas warning : Conflicting options force-load-cache and def-load-cache specified, ignoring def-load-cache "
        "option",
        "ptxas warning : Conflicting options -maxrregcount and -maxntid specified, ignoring -maxntid option",
        "ptxas warning : Value of threads per SM for entry mod is out of range. .minnctapersm will be ignored",
        "ptxas warning : Command line option 'device-function-maxrregcount' not supported for 'whole program "
        "compilation', will be ignored"])
    assert [(i.option, i.because) for i in ignored_options(text)] == [
        ("def-load-cache", "force-load-cache"), ("-maxntid", "-maxrregcount"), ("minnctapersm", None),
        ("device-function-maxrregcount", None)]
    cat = get_catalog("ptxas")
    config = {"force_load_cache": "cg", "def_load_cache": "ca", "maxrregcount": 64, "maxntid": 256, "minnctapersm": 4}
    found = dict(find_ignored(cat, config, text))
    assert set(found) == {"def_load_cache", "maxntid", "minnctapersm"}
    # only the rival's name is printed: the rule holds for any of its values
    assert found["def_load_cache"].when == (("force_load_cache", ANY),)
    assert found["maxntid"].when == (("maxrregcount", ANY),)
    space = SearchSpace(cat.space())
    learner = _learned(space, {"maxrregcount": 56, "maxntid": 256}, [found["maxntid"]])
    assert learner.describe(learner.conflicts[0]) == "maxntid is ignored with maxrregcount set"
    assert _rejects(learner, {"maxrregcount": 120, "maxntid": 512})
    assert not _rejects(learner, {"maxntid": 512})


def test_options_no_control_produced_are_skipped() -> None:
    assert find_ignored(get_catalog("ptxas"), {"opt_level": 3}, CONFLICT) == []


def test_a_rule_naming_what_the_space_lacks_teaches_nothing() -> None:
    space = SearchSpace({"opt_level": get_catalog("ptxas").space()["opt_level"]})
    learner = NamedConflicts(space)
    x = np.array([space.encode({"opt_level": 0})])
    rules = [{"control": "register_usage_level", "when": [{"control": "opt_level", "value": 0}], "message": "m"},
             {"control": "opt_level", "when": [{"control": "opt_level", "value": 9}], "message": "no such value"},
             {"control": "opt_level", "when": "not a list"}, "not a rule"]
    assert learner.observe(x, [True], [None], [rules]) == []


@pytest.mark.skipif(not tool_available("nvcc"), reason="needs nvcc (CUDA toolkit or the nvidia-cuda-nvcc wheel)")
def test_a_real_compile_keeps_the_rule_in_its_row_and_the_search_learns_it(tmp_path: Path) -> None:
    from compileiq_lab.kernels import KernelRun, load_kernel

    run = KernelRun(load_kernel("sgemm"), "ptxas", ["sass_instructions"], arch="sm_90", workdir=tmp_path)
    try:
        config = {"opt_level": 0, "register_usage_level": 5, "defines": {"TILE": 16}}
        m = run(config)
        assert m.ok and set(m.detail["ignored_controls"]) == {"register_usage_level"}
        assert run.constraint({"opt_level": 0, "register_usage_level": 7}) is None  # the evaluator holds no rule
        space = SearchSpace(run.search_space())
        learner = NamedConflicts(space)
        learner.observe(space.encode(config)[None, :], [True], [None], [m.detail["ignored_rules"]])
        assert [learner.describe(c) for c in learner.conflicts] == [
            "register_usage_level is ignored with opt_level = 0"]
        assert _rejects(learner, {**config, "register_usage_level": 2})
        assert "ignored_rules" not in run({**config, "opt_level": 3}).detail
    finally:
        run.close()
