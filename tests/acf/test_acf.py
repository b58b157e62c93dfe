"""Tests of the open ACF format: round trips, stage arguments, rejections and a fuzzed reader."""

from __future__ import annotations

import copy
import functools
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compileiq_lab.acf.format import (
    _FIELDS,
    ACF,
    ACF_FORMAT,
    ACF_FORMATS,
    SCHEMA_PATH,
    _check_token,
    load_acf,
)
from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.kernels import KernelRun, load_kernel
from compileiq_lab.space.catalogs import CATALOGS, get_catalog
from compileiq_lab.testing import tool_available
from compileiq_lab.toolchain.tools import find_tool

needs_nvcc = pytest.mark.skipif(not tool_available("nvcc"), reason="needs nvcc")
needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

_COMMON: dict[str, Any] = {"objectives": {"text_bytes": 120.0}, "baseline": {"text_bytes": 160.0},
                           "ci": {"text_bytes": []}, "code_hash": "ab" * 32,
                           "run": {"store": "run.db", "run_id": "r1", "eval_id": 7, "seed": 0}}


def _cuda_config() -> dict[str, Any]:
    cat = get_catalog("nvcc")
    return {"use_fast_math": "--use_fast_math", "ftz": True, "cicc_opt": 2, "opt_level": 3,
            "maxrregcount": cat["maxrregcount"].param.values[2], "def_load_cache": "cg", "defines": {"BLOCK": 128}}


def _c_config() -> dict[str, Any]:
    return {"opt_level": 3, "unroll_loops": "-funroll-loops", "tree_vectorize": "-fno-tree-vectorize",
            "defines": {"ACCUMULATORS": 2}}


def _make(kernel_name: str, compiler: str, config: dict[str, Any], objective: str, tmp: Path, **kw: Any) -> ACF:
    kernel = load_kernel(kernel_name)
    ev = KernelRun(kernel, get_catalog(compiler), [objective], workdir=tmp, **kw)
    return ACF.from_choice(compiler=compiler, controls=config, argv=ev.argv(config), kernel=kernel.name,
                           source_sha256=kernel.source_sha256(), arch="sm_90" if compiler != "gcc" else None,
                           toolchain={compiler: "test"}, **_COMMON)


@functools.lru_cache(maxsize=1)
def _c_doc() -> str:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        return _make("dot", "gcc", _c_config(), "text_bytes", Path(tmp)).to_json()


@pytest.fixture
def c_acf(tmp_path: Path) -> ACF:
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc")
    return load_acf(_c_doc())


@pytest.fixture
def cuda_acf(tmp_path: Path) -> ACF:
    if not tool_available("nvcc"):
        pytest.skip("needs nvcc")
    return _make("reduction", "nvcc", _cuda_config(), "registers", tmp_path)


def _tampered(acf: ACF, tmp_path: Path, edit: Any) -> Path:
    path = acf.write(tmp_path / "best.acf")
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))
    return path


def test_round_trip_c(c_acf: ACF, tmp_path: Path) -> None:
    path = c_acf.write(tmp_path / "dot.acf")
    back = load_acf(path)
    assert back == c_acf and back.to_json() == path.read_text() and path.read_text().endswith("}\n")
    assert back.c_args() == back.args("c") == ["-std=c11", "-DACCUMULATORS=2", "-O2", "-O3", "-funroll-loops",
                                               "-fno-tree-vectorize"]
    with pytest.raises(ConfigurationError, match="CUDA catalog"):
        back.nvcc_args()
    with pytest.raises(ConfigurationError, match="stage is one of"):
        back.args("link")


@needs_nvcc
def test_round_trip_cuda_and_stage_args(cuda_acf: ACF, tmp_path: Path) -> None:
    back = load_acf(cuda_acf.write(tmp_path / "r.acf"))
    assert back == cuda_acf and back.format == ACF_FORMAT
    assert back.argv["frontend"][0] == "-DBLOCK=128" and "-dlcm=cg" in back.ptxas_args()
    assert back.nvcc_args() == ["-arch=sm_90", *back.argv["frontend"],
                                *(a for t in back.argv["backend"] for a in ("-Xptxas", t))]
    assert back.ptxas_args() == ["-arch=sm_90", *back.argv["backend"]]
    assert "-Xcicc" in back.argv["frontend"]  # NVRTC has no -Xcicc: refused, not silently wrong
    with pytest.raises(ConfigurationError, match="NVRTC options have no -Xcicc"):
        back.nvrtc_options()
    doc = back.to_dict()
    doc["controls"].pop("cicc_opt")
    doc["argv"]["frontend"] = [t for t in doc["argv"]["frontend"] if t != "-Xcicc" and not t.startswith("-O")]
    plain = load_acf(doc)
    assert plain.nvrtc_options()[0] == "-arch=sm_90"
    assert plain.nvrtc_options()[-len(plain.argv["backend"]):] == [f"-Xptxas={t}" for t in plain.argv["backend"]]
    assert back.args("ptxas") == back.ptxas_args() and plain.args("nvrtc") == plain.nvrtc_options()
    assert back.options_file_text().splitlines() == back.nvcc_args()
    with pytest.raises(ConfigurationError, match="gcc or clang"):
        back.c_args()


@needs_nvcc
def test_nvcc_compiles_with_args_and_options_file(cuda_acf: ACF, tmp_path: Path) -> None:
    src = str(load_kernel("reduction").source_path)
    base = [find_tool("nvcc"), "-cubin", src]  # the target comes from the ACF
    res = subprocess.run([*base, *cuda_acf.nvcc_args(), "-o", "a.cubin"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    (tmp_path / "best.opts").write_text(cuda_acf.options_file_text())
    res = subprocess.run([*base, "--options-file", "best.opts", "-o", "b.cubin"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "a.cubin").stat().st_size > 0 and (tmp_path / "b.cubin").stat().st_size > 0


_DANGEROUS = [
    "-o", "-oout.bin", "--output-file=x", "-odir", "--output-directory", "--run", "-run", "--options-file",
    "-optf", "--compiler-bindir=/tmp", "-ccbin", "-Xlinker", "-Wl,-rpath,/tmp", "-B/tmp", "--sysroot=/",
    "-include", "-imacros", "-specs=x.specs", "-I/usr/include", "-I..", "-isystem/x", "-L/tmp",
    "@args.rsp", "-O2;id", "a|b", "a&b", "$HOME", "`id`", "<in", ">out", "$(id)", "{a}", "*.c", "?",
    "!x", "~/x", "a\nb", "'q'", '"q"', "a\\b", "a\x00b", "a b", "", "-DX=1;id", "-D1X=2", "-DX", "-DX=$(id)",
]


@needs_gcc
@pytest.mark.parametrize("token", _DANGEROUS)
def test_rejects_dangerous_argument(c_acf: ACF, tmp_path: Path, token: str) -> None:
    path = _tampered(c_acf, tmp_path, lambda d: d["argv"]["c"].insert(1, token))
    with pytest.raises(ConfigurationError) as err:
        load_acf(path)
    assert "argv.c[1]" in str(err.value) and repr(token) in str(err.value)


def test_every_catalog_value_passes_the_token_checks() -> None:
    for name, catalog in CATALOGS.items():
        for control in catalog.controls:
            for value in control.param.values:
                for i, tok in enumerate(control.argv(value)):
                    _check_token(f"{name}.{control.name}[{i}]", tok)


@needs_gcc
@pytest.mark.parametrize("edit, message", [
    (lambda d: d["controls"].update(bogus=1), "controls.bogus"),
    (lambda d: d["controls"].update(opt_level=7), "`value in the catalog domain` must hold, but got 7"),
    (lambda d: d["controls"].update(opt_level=2), "argv.c: `argv is what the catalog renders"),
    (lambda d: d["controls"]["defines"].update(ACCUMULATORS=8), "argv.c"),
    (lambda d: d.update(format="compileiq-lab-acf/3"), "'compileiq-lab-acf/3'"),
    (lambda d: d.pop("format"), "['compileiq-lab-acf/1', 'compileiq-lab-acf/2']"),
    (lambda d: d.pop("build"), "missing ['build']"),
    (lambda d: d.update(compiler="icc"), "compiler is one of"),
    (lambda d: d.update(kernel="../../etc/x"), "kernel is a name"),
    (lambda d: d.pop("host"), "missing ['host']"),
    (lambda d: d.update(extra=1), "extra ['extra']"),
    (lambda d: d.update(argv={"frontend": [], "backend": []}), "exactly the stages ['c']"),
    (lambda d: d["objectives"].update(text_bytes="fast"), "objectives.text_bytes"),
    (lambda d: d["ci"].update(text_bytes=[3, 1]), "ci.text_bytes"),
    (lambda d: d["run"].update(eval_id=True), "run.eval_id"),
    (lambda d: d.update(created="yesterday"), "ISO-8601"),
    (lambda d: d.update(source_sha256="x" * 64), "source_sha256"),
])
def test_rejects_invalid_document(c_acf: ACF, tmp_path: Path, edit: Any, message: str) -> None:
    with pytest.raises(ConfigurationError, match=None) as err:
        load_acf(_tampered(c_acf, tmp_path, edit))
    assert message in str(err.value)


@needs_gcc
def test_rejects_conflict_and_accepts_ptxas_acf(c_acf: ACF) -> None:
    doc = c_acf.to_dict()
    doc.update(compiler="ptxas", arch="sm_90", controls={"opt_level": 1, "fast_compile": "min"},
               argv={"frontend": [], "backend": ["-O1", "--Ofast-compile=min"]})
    acf = load_acf(doc)
    assert acf.nvcc_args() == ["-arch=sm_90", "-Xptxas", "-O1", "-Xptxas", "--Ofast-compile=min"]
    doc["controls"]["opt_level"], doc["argv"]["backend"][0] = 3, "-O3"
    with pytest.raises(ConfigurationError, match="no known compiler conflict"):
        load_acf(doc)


@needs_gcc
def test_from_choice_validates() -> None:
    with pytest.raises(ConfigurationError, match="argv.c"):
        ACF.from_choice(compiler="gcc", controls={"opt_level": 3}, argv={"c": ["-O3"]}, kernel="dot",
                        source_sha256="0" * 64, arch=None, toolchain={}, **_COMMON)
    with pytest.raises(ConfigurationError, match="from_choice"):
        ACF.from_choice(compiler="gcc", controls={"opt_level": object()}, argv={"c": []}, kernel="dot",
                        source_sha256="0" * 64, arch=None, toolchain={}, **_COMMON)


@pytest.mark.parametrize("text", ["", "{", "{\"format\": NaN}", "[1, 2]", "{\"a\": 1, \"a\": 2}", "[" * 100000,
                                  "{\"format\": \"compileiq-lab-acf/1\"}", "/no/such/file.acf"])
def test_malformed_input_is_a_clean_error(text: str) -> None:
    with pytest.raises(ConfigurationError):
        load_acf(text)


def test_schema_matches_the_fields() -> None:
    schema = json.loads(SCHEMA_PATH.read_text())
    assert schema["$schema"].endswith("2020-12/schema") and sorted(schema["required"]) == sorted(_FIELDS)
    assert schema["properties"]["format"]["enum"] == list(ACF_FORMATS) and ACF_FORMATS[-1] == ACF_FORMAT
    assert {"build", "dropped"} <= set(schema["properties"])  # version 2; not required, so version 1 validates


@needs_gcc
def test_schema_accepts_a_valid_document(c_acf: ACF) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(c_acf.to_dict(), json.loads(SCHEMA_PATH.read_text()))


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                     lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=10), kids, max_size=4),
                     max_leaves=20)
_FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@_FUZZ
@given(value=_JSON)
def test_fuzz_random_json_raises_only_configuration_error(value: Any) -> None:
    for arg in (value, json.dumps(value)):
        try:
            load_acf(arg)
        except ConfigurationError:
            pass


@needs_gcc
@_FUZZ
@given(key=st.sampled_from(_FIELDS + ("controls.opt_level", "controls.defines", "argv.c", "run.seed", "host.gpu",
                                      "ci.text_bytes", "controls.defines.ACCUMULATORS")), value=_JSON)
def test_fuzz_one_field_replaced(key: str, value: Any) -> None:
    doc = json.loads(_c_doc())
    *parents, last = key.split(".")
    target = functools.reduce(lambda d, k: d[k], parents, doc)
    target[last] = copy.deepcopy(value)
    try:
        text = json.dumps(doc)
    except ValueError:
        return
    try:
        assert isinstance(load_acf(text), ACF)
    except ConfigurationError:
        pass


def test_wrapped_tool_options_are_checked_too(c_acf: ACF) -> None:
    from compileiq_lab.acf.format import _check_token

    for tok in ("-Xptxas=-o,/tmp/x", "--ptxas-options=--output-file=/x", "-Wa,-adhln=/x", "-Xclang",
                "-fpass-plugin=/tmp/p.so", "-MD", "--fdevice-time-trace=/x"):
        with pytest.raises(ConfigurationError):
            _check_token("argv.frontend[0]", tok)
    _check_token("argv.frontend[0]", "-Xptxas=-O3")  # a plain option handed to ptxas is fine


def test_cuda_acf_needs_an_sm_arch(c_acf: ACF) -> None:
    doc = c_acf.to_dict()
    doc.update(compiler="ptxas", arch=None, controls={"opt_level": 1}, argv={"frontend": [], "backend": ["-O1"]})
    with pytest.raises(ConfigurationError, match="arch is sm_XY"):
        load_acf(doc)
    doc["arch"] = "compute_90"
    with pytest.raises(ConfigurationError, match="arch is sm_XY"):
        load_acf(doc)


_VALIDATION_OK = {"speedup": 1.05, "low": 1.02, "high": 1.08, "win": True, "noise_floor": 0.004, "confidence": 0.95,
                  "method": "paired-bootstrap", "rounds": 40, "runtime": 1e-5, "baseline_runtime": 1.05e-5,
                  "energy_ratio": None, "gpu": "NVIDIA H200"}


def test_validation_is_optional_and_checked(c_acf: ACF) -> None:
    doc = c_acf.to_dict()
    assert doc["validation"] is None
    del doc["validation"]
    assert load_acf(doc).validation is None  # documents without the field stay valid
    assert load_acf({**doc, "validation": _VALIDATION_OK}).validation == _VALIDATION_OK
    for bad, match in (({**_VALIDATION_OK, "low": 1.09}, "low <= high"),
                       ({**_VALIDATION_OK, "win": "yes"}, "true or false"),
                       ({**_VALIDATION_OK, "extra": 1}, "exactly the keys"),
                       ({**_VALIDATION_OK, "rounds": 0}, "positive integer")):
        with pytest.raises(ConfigurationError, match=match):
            load_acf({**doc, "validation": bad})
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate({**doc, "validation": _VALIDATION_OK}, json.loads(SCHEMA_PATH.read_text()))
