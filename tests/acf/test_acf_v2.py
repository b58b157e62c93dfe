"""ACF version 2: the build section and dropped controls; version 1 documents still read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from compileiq_lab.acf.format import ACF, ACF_FORMATS, load_acf
from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.space.catalogs import get_catalog

BUILD = {"source": "src/k.cu", "entry": "Mandelbrot0<float>", "include_dirs": ["../../Common", "."],
         "defines": {"N": "4"}, "args": ["-std=c++17"]}


def _acf(**kw: Any) -> ACF:
    controls = {"opt_level": 1}
    return ACF.from_choice(compiler="ptxas", controls=controls, argv=get_catalog("ptxas").stage_argv(controls),
                           objectives={"registers": 20.0}, baseline={"registers": 24.0}, kernel="k",
                           source_sha256="0" * 64, arch="sm_90a", toolchain={"ptxas": "13.0"}, code_hash="ab" * 32,
                           **kw)


def test_round_trip_with_build_and_dropped(tmp_path: Path) -> None:
    acf = _acf(build=BUILD, dropped={"split_compile": "no effect: the machine code is identical without it"})
    back = load_acf(acf.write(tmp_path / "a.acf"))
    assert back == acf and back.format == ACF_FORMATS[-1] and back.build == BUILD
    (tmp_path / "Common").mkdir()
    (tmp_path / "x" / "src").mkdir(parents=True)
    ctx = back.build_context(tmp_path / "x" / "src")
    assert [d.name for d in ctx.include_dirs] == ["Common", "src"] and ctx.args == ("-std=c++17",)


def test_a_moved_kernel_is_never_taken_for_the_bundled_one_of_its_name(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from compileiq_lab.kernels.load import acf_kernel_ref

    monkeypatch.chdir(tmp_path)
    assert acf_kernel_ref("softmax", None, tmp_path) == "softmax"  # an ACF of the bundled kernel records no source
    with pytest.raises(ConfigurationError, match="'softmax.cu' .* must be found, but it is not under") as err:
        acf_kernel_ref("softmax", "softmax.cu", tmp_path / "acfs")  # a user's softmax.cu, moved away
    assert "--kernel PATH" in str(err.value) and f"{tmp_path.resolve()} nor under {(tmp_path / 'acfs').resolve()}" \
        in str(err.value)
    with pytest.raises(ConfigurationError) as once:  # the ACF in the working folder: the folder said once
        acf_kernel_ref("softmax", "softmax.cu", tmp_path)
    assert "nor under" not in str(once.value)
    (tmp_path / "acfs").mkdir()
    (tmp_path / "acfs" / "softmax.cu").write_text("__global__ void k() {}\n")
    assert acf_kernel_ref("softmax", "softmax.cu", tmp_path / "acfs") == str(tmp_path / "acfs" / "softmax.cu")
    with pytest.raises(ConfigurationError, match=r"relative to the kernel source's folder, here .*--kernel PATH"):
        _acf(build=BUILD).build_context(tmp_path / "acfs")  # its include folders did not move with it


def test_version_1_documents_are_still_read(tmp_path: Path) -> None:
    doc = json.loads(_acf().to_json())
    doc.pop("build"), doc.pop("dropped")
    doc["format"] = ACF_FORMATS[0]
    v1 = load_acf(doc)
    assert v1.format == ACF_FORMATS[0] and v1.build["include_dirs"] == [] and v1.dropped == {}
    assert json.loads(v1.to_json()).keys() == doc.keys()  # written back as version 1
    with pytest.raises(ConfigurationError, match="exactly"):
        load_acf({**doc, "build": BUILD})


@pytest.mark.parametrize("field,value,match", [
    ("include_dirs", ["/usr/include"], "relative"),
    ("include_dirs", ["../" * 9 + "x"], "relative"),
    ("include_dirs", ["a/../../b"], "relative"),
    ("source", "/home/me/k.cu", "relative path"),
    ("args", ["-o"], "must hold"),
    ("args", ["-Xcompiler"], "must hold"),
    ("args", ["-I/etc"], "must hold"),
    ("defines", {"N": "$(x)"}, "NAME=VALUE"),
    ("entry", "k;rm -rf", "kernel name"),
])
def test_bad_build_sections_are_refused(field: str, value: Any, match: str) -> None:
    doc = json.loads(_acf(build=BUILD).to_json())
    doc["build"][field] = value
    with pytest.raises(ConfigurationError, match=match):
        load_acf(doc)
