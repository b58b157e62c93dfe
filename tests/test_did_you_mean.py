"""Spelling suggestions in the messages of a mistyped objective, control, catalog, kernel or --pick."""

from __future__ import annotations

import pytest

from compileiq_lab.exceptions import ConfigurationError, SpaceDefinitionError, did_you_mean
from compileiq_lab.kernels import load_kernel
from compileiq_lab.kernels.choices import check_objectives
from compileiq_lab.space.catalogs import get_catalog


def test_did_you_mean_names_the_closest_valid_name_or_nothing():
    assert did_you_mean("registrs", ["registers", "runtime"]) == " (did you mean 'registers'?)"
    assert did_you_mean("RUNTIME", ["registers", "runtime"]) == " (did you mean 'runtime'?)"  # case ignored
    assert did_you_mean("power_draw_total", ["registers", "runtime"]) == ""
    several = did_you_mean(["registrs", "zzz", "runtim"], ["registers", "runtime"])
    assert several == " (did you mean 'registers' for 'registrs', 'runtime' for 'runtim'?)"
    assert did_you_mean("-O", ["opt_level"], {"-O": ["opt_level"]}) == " (did you mean 'opt_level'?)"


def test_a_control_written_as_its_option_or_misspelt_is_answered_with_its_name():
    with pytest.raises(SpaceDefinitionError) as bad:
        get_catalog("ptxas").select(["--maxrregcount=32", "def_load_cach", "--def-store-cache"])
    text = str(bad.value)
    assert ("(did you mean 'def_store_cache' for '--def-store-cache', 'maxrregcount' for '--maxrregcount=32', "
            "'def_load_cache' for 'def_load_cach'?); valid names:") in text
    # an option two controls share (nvcc's front-end --fmad and ptxas' --fmad) may mean either
    with pytest.raises(SpaceDefinitionError, match=r"\(did you mean 'fmad' or 'ptxas_fmad'\?\)"):
        get_catalog("nvcc").select(["--fmad"])


def test_a_mistyped_objective_kernel_or_catalog_is_answered_with_the_valid_one():
    with pytest.raises(ConfigurationError, match=r"\(did you mean 'registers' for 'registrs', 'runtime' for 'runtme'"):
        check_objectives(load_kernel("sgemm"), ["registrs", "runtme"])
    with pytest.raises(ConfigurationError, match=r"but got 'sgem' \(did you mean 'sgemm'\?\)"):
        load_kernel("sgem")
    with pytest.raises(SpaceDefinitionError, match=r"but got 'ptxs' \(did you mean 'ptxas'\?\)"):
        get_catalog("ptxs")
