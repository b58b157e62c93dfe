"""The run form keeps its choices across kernels and targets, offers GPU targets, hides empty categories and replays
stored runs."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("ipywidgets")

from compileiq_lab import Search, SearchConfiguration, load_results
from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.kernels import DEFAULT_ARCH, gpu_arch, offered_catalog
from compileiq_lab.testing import tool_available, toy_objective, toy_space
from compileiq_lab.widgets.setup import REPLAY, TOY, RunForm, ptxas_archs

needs_ptxas = pytest.mark.skipif(not tool_available("ptxas"), reason="needs ptxas")


def _static_reduction(form: RunForm) -> None:
    form.kernel.value = "reduction"
    form.target.value = "static"


@needs_ptxas
def test_a_new_kernel_keeps_the_catalog_categories_and_objectives():
    form = RunForm()
    _static_reduction(form)
    form.catalog.value = "ptxas"
    form.categories.value = ("register_allocation", "scheduling")
    form.objectives.value = ("registers",)
    form.kernel.value = "softmax"  # CUDA too: every choice still applies
    assert form.catalog.value == "ptxas" and form.target.value == "static"
    assert form.categories.value == ("register_allocation", "scheduling")
    assert form.objectives.value == ("registers",)
    assert "maxrregcount" in form.docs.value  # the docs follow the kept choice


@needs_ptxas
def test_a_choice_left_at_its_default_follows_the_new_default():
    form = RunForm()
    _static_reduction(form)
    assert form.catalog.value == "nvcc" and set(form.categories.value) == set(form.categories.options)
    form.catalog.value = "ptxas"  # all categories were chosen (the default): all of ptxas's are
    assert set(form.categories.value) == set(form.categories.options) == set(form.offered_categories())


@needs_ptxas
def test_a_c_kernel_hides_the_arch_and_falls_back_where_choices_do_not_apply():
    form = RunForm()
    _static_reduction(form)
    form.catalog.value = "ptxas"
    form.categories.value = ("compile_speed",)  # gcc has no such category
    form.objectives.value = ("registers",)  # nor a C kernel such an objective
    assert form.arch.layout.display != "none"
    form.kernel.value = "dot"
    assert form.arch.layout.display == "none"
    assert form.catalog.value == "gcc" and form.target.value == "cpu"  # the reduction's only target was its default
    assert set(form.categories.value) == set(form.offered_categories()) and form.categories.value
    assert form.objectives.value == ("runtime",)
    form.kernel.value = TOY
    assert form.arch.layout.display == "none" and form.objectives.value == ("toy objective",)


def test_a_new_target_keeps_the_objectives_still_offered():
    form = RunForm()
    form.kernel.value = "dot"
    form.objectives.value = ("runtime", "text_bytes")
    form.target.value = "static"  # runtime is not measured from a build; text_bytes is
    assert form.objectives.value == ("text_bytes",)
    form.target.value = "cpu"
    assert form.objectives.value == ("text_bytes",)


@needs_ptxas
def test_the_arch_picker_offers_what_ptxas_accepts_and_defaults_to_sm_90_for_static():
    form = RunForm()
    _static_reduction(form)
    assert form.arch.description == "arch" and form.arch.value == DEFAULT_ARCH == "sm_90"
    assert tuple(form.arch.options) == ptxas_archs() and "sm_80" in form.arch.options
    form.arch.value = "sm_80"
    form.kernel.value = "softmax"  # a target the user picked stays
    assert form.arch.value == "sm_80"


@needs_ptxas
def test_build_passes_the_arch(tmp_path):
    form = RunForm()
    _static_reduction(form)
    form.catalog.value = "ptxas"
    form.categories.value = ("register_allocation",)
    form.arch.value = "sm_80"
    run, kernel_run = form.build(str(tmp_path / "run.db"))
    try:
        assert kernel_run is not None and kernel_run.arch == "sm_80"
        assert run.search.objectives and run.state == "idle"
    finally:
        assert kernel_run is not None
        kernel_run.close()


@pytest.mark.gpu
def test_the_arch_defaults_to_the_gpus_own_for_gpu_runs():
    form = RunForm()
    form.kernel.value = "reduction"
    assert form.target.value == "gpu" and form.arch.value == gpu_arch() and gpu_arch() in form.arch.options


@pytest.mark.parametrize("kernel", ["reduction", "dot"])
def test_no_offered_category_is_empty(kernel):
    form = RunForm()
    form.kernel.value = kernel
    for catalog in form.catalog.options:
        form.catalog.value = catalog
        controls = offered_catalog(catalog).catalog
        assert form.categories.options
        for category in form.categories.options:  # each has controls a run searches (unsafe ones left out)
            assert controls.select(categories=[category]).controls, (catalog, category)
        if catalog in ("nvcc", "ptxas"):
            assert "math_precision" not in form.categories.options  # only precision-changing controls


def test_every_label_shows_whole():
    form = RunForm()
    labelled = [form.kernel, form.path, form.target, form.catalog, form.arch, form.speed, form.categories,
                form.objectives, form.generations, form.pool, form.seed, form.max_evals, form.time_budget, form.timeout,
                form.folder]
    assert all(x.style.description_width == "initial" for x in labelled)
    assert form.pool.description == "pool (0=auto)"


def test_replay_is_always_offered_and_needs_a_run_store(tmp_path):
    form = RunForm()
    assert REPLAY in form.target.options and form.speed.layout.display == "none"
    form.kernel.value = "dot"
    assert REPLAY in form.target.options
    form.target.value = REPLAY
    assert form.speed.layout.display != "none"
    assert "run store" in form.note.value
    with pytest.raises(ConfigurationError, match=r"must name a \.db file"):
        form.build()
    form.path.value = str(tmp_path / "missing.db")
    assert tuple(form.target.options) == (REPLAY,) and form.target.value == REPLAY
    assert "no run store" in form.note.value
    with pytest.raises(ConfigurationError, match="no run store at"):
        form.build()
    form.path.value = ""  # back to a search of the kernel chosen
    assert form.target.value == "cpu" and form.speed.layout.display == "none"


def _toy_store(tmp_path: Path) -> str:
    path = str(tmp_path / "t.db")
    Search(toy_objective, toy_space(), SearchConfiguration(generations=2, seed=0), store=path).start()
    return path


def test_a_stored_run_replays(tmp_path):
    pytest.importorskip("compileiq_lab.run.replay")
    path = _toy_store(tmp_path)
    form = RunForm()
    form.path.value = path
    form.speed.value = 100.0
    assert form.target.value == REPLAY and "replays the run stored" in form.note.value
    replay, kernel_run = form.build()
    assert kernel_run is None  # the toy run names no kernel
    assert replay.search.config.generations == 2 and replay.state == "idle"
    replay.start()
    final = replay.join(timeout=60)
    stored = load_results(path).records
    assert final is not None and replay.state == "finished"
    assert [r.eval_id for r in replay.results().records] == [r.eval_id for r in stored]


@needs_ptxas
def test_a_stored_kernel_run_replays_with_its_kernel_run(tmp_path):
    pytest.importorskip("compileiq_lab.run.replay")
    form = RunForm()
    _static_reduction(form)
    form.catalog.value = "ptxas"
    form.categories.value = ("register_allocation",)
    form.arch.value = "sm_80"
    form.generations.value = 1
    store = str(tmp_path / "k.db")
    run, made = form.build(store)
    assert made is not None
    try:
        run.start()
        assert run.join(timeout=120) is not None
    finally:
        made.close()
    form.path.value = store
    replay, kernel_run = form.build()
    assert kernel_run is not None
    try:  # the detail panel's build-only kernel run, as the stored run was made
        assert kernel_run.arch == "sm_80" and kernel_run.catalog_name == "ptxas" and not kernel_run.measures
        assert replay.store_path and replay.state == "idle"
    finally:
        kernel_run.close()


@needs_ptxas
def test_a_bare_files_launch_block_keeps_maxntid_values_it_cannot_launch_with_out(tmp_path, monkeypatch):
    """Without a block the lab says what the CLI says (--maxntid values below it build but fail to launch); with
    the form's launch block those values are not offered; a block that is no CUDA block is refused with the rule."""
    from compileiq_lab.widgets import Dashboard

    monkeypatch.chdir(tmp_path)
    (tmp_path / "k.cu").write_text("__global__ void k(float* y) { y[blockIdx.x * blockDim.x + threadIdx.x] *= 2.f; }\n")

    def started(block: str) -> Dashboard:
        dash = Dashboard(store=str(tmp_path / f"run{len(block)}.db"))
        form = dash.form
        form.path.value = "k.cu"
        form.target.value = "static"
        form.catalog.value = "ptxas"
        form.categories.value = ("register_allocation",)
        form.objectives.value = ("registers",)
        form.generations.value = 1
        form.block.value = block
        dash.start()
        return dash

    bare = started("")
    assert bare.error.value == "" and bare.form.block.layout.display == ""  # shown for a bare CUDA file
    assert "--maxntid is searched without the kernel&#x27;s launch block" in bare.notes.value
    assert "launch block field" in bare.notes.value
    bare.wait(timeout=120)
    given = started("256")
    assert given.error.value == "" and "--maxntid is searched without" not in given.notes.value
    assert given.kernel_run is not None and given.kernel_run.kernel.block == (256,)
    values = given.run.search.space["maxntid"].values
    assert 64 not in values and 128 not in values and 256 in values
    given.wait(timeout=120)
    bad = started("16x16")
    assert "launch block: `the block is 1 to 3 ints" in bad.error.value and "16x16" in bad.error.value


def test_a_message_for_the_command_line_names_the_forms_fields(tmp_path, monkeypatch):
    """A launch block CUDA does not allow: the form's note says which of its fields is --block."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "k.cu").write_text("__global__ void k(float* y) { y[0] = 1.f; }\n")
    form = RunForm()
    form.path.value = "k.cu"
    form.block.value = "1,2,3,4"
    note = form.note.value
    assert "but got [1, 2, 3, 4]" in note and "(in the lab: --block is the launch block field)" in note, note


@needs_ptxas
def test_a_baseline_that_fails_for_a_missing_header_names_the_field_to_fix(tmp_path, monkeypatch):
    from compileiq_lab.widgets import Dashboard

    monkeypatch.chdir(tmp_path)
    (tmp_path / "k.cu").write_text('#include "missing_header.cuh"\n__global__ void k(float* y) { y[0] = 1.f; }\n')
    dash = Dashboard(store=str(tmp_path / "r.db"))
    dash.form.path.value = "k.cu"
    dash.form.target.value = "static"
    dash.form.catalog.value = "ptxas"
    dash.form.generations.value = 1
    dash.start()
    dash.wait(timeout=120)
    banner = dash.banner.value
    assert "missing_header.cuh" in banner and "include dirs (-I) field" in banner, banner
