"""A Triton kernel's @triton.autotune configs, read from its file without running it, offered when constexprs lack
values."""

from __future__ import annotations

import pytest

from compileiq_lab.cli.main import main
from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.kernels import load_triton_kernel
from compileiq_lab.kernels.triton_autotune import autotune_choice, autotune_configs, autotune_hint
from compileiq_lab.kernels.triton_src import triton_ptx

KERNEL = '''
@triton.jit
def k(x_ptr, n, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * BLOCK_N, mask=offs < n)
'''
HEAD = "import triton\nimport triton.language as tl\n\n"
LITERAL = HEAD + '''
@triton.autotune(configs=[
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 64}, num_warps=8, num_stages=3),
    triton.Config(kwargs={"BLOCK_M": 64, "BLOCK_N": 32}, num_warps=4),
], key=["n"])''' + KERNEL


def test_literal_configs_are_read_with_their_options():
    found, source = autotune_configs(LITERAL, "k")
    assert source.lstrip().startswith("[")
    assert [(c.values, c.options) for c in found] == [
        ({"BLOCK_M": 128, "BLOCK_N": 64}, {"num_warps": 8, "num_stages": 3}),
        ({"BLOCK_M": 64, "BLOCK_N": 32}, {"num_warps": 4})]
    assert found[0].flags() == "--define BLOCK_M=128 --define BLOCK_N=64 --num-warps 8 --num-stages 3"


def test_configs_a_helper_returns_are_read_through_its_calls_first_return_first():
    """As Triton's matmul tutorial writes them: get_autotune_config() returns get_cuda_autotune_config() (a list of
    literals) in its first branch and another backend's list in its second."""
    text = HEAD + '''
def is_cuda():
    return triton.runtime.driver.active.get_current_target().backend == "cuda"


def cuda_configs():
    return [triton.Config({"BLOCK_M": 256, "BLOCK_N": 128}, num_stages=4, num_warps=8)]


def get_autotune_config():
    if is_cuda():
        return cuda_configs()
    else:
        return [triton.Config({"BLOCK_M": 16, "BLOCK_N": 16, "waves_per_eu": 2}, num_warps=4)]


@triton.autotune(configs=get_autotune_config(), key=["n"])''' + KERNEL
    found, source = autotune_configs(text, "k")
    assert source == "get_autotune_config()" and [c.values for c in found] == [{"BLOCK_M": 256, "BLOCK_N": 128}]
    hint = autotune_hint(text, "k", ["BLOCK_M", "BLOCK_N"])
    assert "lists 1 config (from get_autotune_config())" in hint
    assert "--define BLOCK_M=256 --define BLOCK_N=128 --num-warps 8 --num-stages 4" in hint


OTHER_BACKEND_FIRST = {
    "a HIP branch first": '''
def is_hip():
    return triton.runtime.driver.active.get_current_target().backend == "hip"


def get_autotune_config():
    if is_hip():
        return [triton.Config({"BLOCK_M": 16, "BLOCK_N": 16}, num_warps=4)]
    return [triton.Config({"BLOCK_M": 256, "BLOCK_N": 128}, num_warps=8)]
''',
    "helpers named after their backend": '''
def get_hip_autotune_config():
    return [triton.Config({"BLOCK_M": 16, "BLOCK_N": 16}, num_warps=4)]


def get_cuda_autotune_config():
    return [triton.Config({"BLOCK_M": 256, "BLOCK_N": 128}, num_warps=8)]


def get_autotune_config():
    if torch.version.hip is not None:
        return get_hip_autotune_config()
    return get_cuda_autotune_config()
''',
    "the branch of not CUDA first": '''
def get_autotune_config():
    if not is_cuda():
        return [triton.Config({"BLOCK_M": 16, "BLOCK_N": 16}, num_warps=4)]
    else:
        return [triton.Config({"BLOCK_M": 256, "BLOCK_N": 128}, num_warps=8)]
''',
    "an XPU device first": '''
def get_autotune_config():
    if DEVICE.type == "xpu":
        return [triton.Config({"BLOCK_M": 16, "BLOCK_N": 16}, num_warps=4)]
    return [triton.Config({"BLOCK_M": 256, "BLOCK_N": 128}, num_warps=8)]
''',
}


@pytest.mark.parametrize("helper", list(OTHER_BACKEND_FIRST.values()), ids=list(OTHER_BACKEND_FIRST))
def test_cudas_configs_are_read_where_another_backends_come_first_in_the_file(helper):
    """The tuner compiles for an NVIDIA GPU: a helper's return under a test naming another backend (or calling a
    helper named after one) is read last, whatever its place in the file."""
    text = HEAD + helper + '\n\n@triton.autotune(configs=get_autotune_config(), key=["n"])' + KERNEL
    found, _ = autotune_configs(text, "k")
    assert [c.values for c in found] == [{"BLOCK_M": 256, "BLOCK_N": 128}]
    assert found[0].options == {"num_warps": 8}


@pytest.mark.parametrize("configs", [
    '[triton.Config({"BLOCK_M": m, "BLOCK_N": 64}) for m in (64, 128)]',  # a comprehension
    '[triton.Config({"BLOCK_M": SIZE, "BLOCK_N": 64})]',  # a value that is a name
    'configs_from(triton.runtime.driver.active)',  # a call with arguments
])
def test_configs_that_only_code_makes_are_named_by_that_code(configs):
    text = HEAD + f"\n@triton.autotune(configs={configs}, key=['n'])" + KERNEL
    found, source = autotune_configs(text, "k")
    assert found is None and source == configs
    assert f"takes its configs from {configs}, which is not run here" in autotune_hint(text, "k", ["BLOCK_M"])


def test_no_autotune_no_hint():
    assert autotune_configs(HEAD + KERNEL, "k") is None and autotune_hint(HEAD + KERNEL, "k", ["BLOCK_M"]) == ""
    assert autotune_configs("def broken(:\n", "k") is None
    assert autotune_configs(LITERAL, "other") is None


def test_the_config_that_covers_every_missing_value_is_offered():
    text = LITERAL.replace('triton.Config({"BLOCK_M": 128, "BLOCK_N": 64}', 'triton.Config({"BLOCK_M": 128}')
    hint = autotune_hint(text, "k", ["BLOCK_M", "BLOCK_N"])
    assert "lists 2 configs, which the tuner does not try" in hint
    assert "config 2 reads: --define BLOCK_M=64 --define BLOCK_N=32 --num-warps 4" in hint


def test_a_kernel_without_its_constexprs_is_refused_with_its_autotune_config(tmp_path):
    pytest.importorskip("triton")
    (tmp_path / "tuned.py").write_text(LITERAL)
    with pytest.raises(ConfigurationError) as err:
        triton_ptx(tmp_path / "tuned.py", "k", "*fp32,i32", {}, "sm_90", tmp_path / "out")
    said = str(err.value)
    assert "every tl.constexpr parameter without a default has a value" in said and "Give BLOCK_M=<value>" in said
    assert ("Its @triton.autotune lists 2 configs, which the tuner does not try (it compiles one config, as yours "
            "would run after autotuning); config 1 reads: --define BLOCK_M=128 --define BLOCK_N=64 --num-warps 8 "
            "--num-stages 3") in said
    # and what it offers compiles
    got = triton_ptx(tmp_path / "tuned.py", "k", "*fp32,i32", {"BLOCK_M": 128, "BLOCK_N": 64}, "sm_90",
                     tmp_path / "out", num_warps=8, num_stages=3)
    assert got.entry == "k"


def test_a_config_of_the_list_is_taken_whole_and_what_is_given_overrides_it(tmp_path):
    pytest.importorskip("triton")
    (tmp_path / "tuned.py").write_text(LITERAL)
    ref = f"triton:{tmp_path / 'tuned.py'}:k"
    second = load_triton_kernel(ref, "*fp32,i32", {}, "sm_90", tmp_path / "out", autotune_config=2)
    made = second.origin["triton"]
    assert made["constexprs"] == {"BLOCK_M": 64, "BLOCK_N": 32}
    assert (made["num_warps"], made["num_stages"]) == (4, 3)  # config 2 gives no num_stages: Triton's default
    assert second.block == (128,)
    first = load_triton_kernel(ref, "*fp32,i32", {"BLOCK_N": "16"}, "sm_90", tmp_path / "out", autotune_config=1,
                               num_stages=2)
    made = first.origin["triton"]
    assert made["constexprs"] == {"BLOCK_M": 128, "BLOCK_N": 16} and (made["num_warps"], made["num_stages"]) == (8, 2)


@pytest.mark.parametrize(("text", "number", "said"), [
    (LITERAL, 3, "`the number is one of its configs, 1 to 2` must hold, but got 3. Pick one of 1..2; config 1 reads: "
                 "--define BLOCK_M=128 --define BLOCK_N=64 --num-warps 8 --num-stages 3"),
    (HEAD + KERNEL, 1, "`the function has a @triton.autotune(configs=...) decorator` must hold"),
    (HEAD + "\n@triton.autotune(configs=make_configs(4), key=['n'])" + KERNEL, 1,
     "`its configs are written out as triton.Config literals (or a helper without arguments returns them)` must hold, "
     "but got 'make_configs(4)'"),
])
def test_a_config_that_cannot_be_taken_is_refused_naming_why(tmp_path, text, number, said):
    (tmp_path / "tuned.py").write_text(text)
    with pytest.raises(ConfigurationError) as err:
        autotune_choice(tmp_path / "tuned.py", "k", number)
    assert said in str(err.value)


def test_autotune_config_is_refused_for_a_kernel_that_is_not_triton(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["tune", "reduction", "--autotune-config", "1", "--generations", "1"]) != 0
    assert "--autotune-config is a Triton kernel's option, but got kernel 'reduction'" in capsys.readouterr().err


def test_a_return_under_a_switch_naming_no_backend_is_not_taken_for_the_list():
    """Liger-Kernel's MoE helper returns one config when an environment switch turns autotuning off and builds its
    list in loops otherwise: the list is not written out, so there is none to offer, not the switch's one config.
    A backend's branch is still read as before."""
    text = HEAD + '''import os
AUTOTUNE_OFF = os.environ.get("AUTOTUNE_OFF") == "1"


def configs():
    if AUTOTUNE_OFF:
        return [triton.Config({"BLOCK_M": 64, "BLOCK_N": 32}, num_warps=8)]
    out = []
    for m in (64, 128):
        out.append(triton.Config({"BLOCK_M": m, "BLOCK_N": 32}, num_warps=4))
    return out


def hip_first():
    if is_hip():
        return [triton.Config({"BLOCK_M": 16, "BLOCK_N": 16})]
    return [triton.Config({"BLOCK_M": 128, "BLOCK_N": 64})]


@triton.autotune(configs=configs(), key=["n"])''' + KERNEL
    assert autotune_configs(text, "k") == (None, "configs()")
    hip = text.replace("configs=configs()", "configs=hip_first()")
    assert [c.values for c in autotune_configs(hip, "k")[0]] == [{"BLOCK_M": 128, "BLOCK_N": 64}]
