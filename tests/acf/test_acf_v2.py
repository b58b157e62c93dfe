"""ACF version 2: the build section and dropped controls; version 1 documents still read; a script's export."""

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
    assert "--kernel PATH" in str(err.value) and f"{(tmp_path / 'acfs').resolve()} nor under {tmp_path.resolve()}" \
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


def test_an_acf_written_elsewhere_finds_its_kernel_from_its_own_folder(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Exported from the kernel's folder into another one (``--export ../../best.acf``), the ACF records the source
    relative to itself: verify finds it from the ACF's folder or any other, as long as the two stay where they are."""
    from compileiq_lab.acf.export import build_section
    from compileiq_lab.kernels import load_kernel
    from compileiq_lab.kernels.load import acf_kernel_ref

    project, acfs, elsewhere = tmp_path / "repo" / "lecture_12", tmp_path / "acfs", tmp_path / "elsewhere"
    for folder in (project, acfs, elsewhere):
        folder.mkdir(parents=True)
    (project / "flash.cu").write_text("__global__ void k(float* x) { x[threadIdx.x] *= 2.f; }\n")
    monkeypatch.chdir(project)  # exported from the kernel's folder
    section = build_section(load_kernel("flash.cu"), False, acf_folder=acfs)
    assert section["source"] == "../repo/lecture_12/flash.cu"
    for cwd in (acfs, elsewhere, project):
        monkeypatch.chdir(cwd)
        assert Path(acf_kernel_ref("flash", section["source"], acfs)).resolve() == (project / "flash.cu").resolve()
    monkeypatch.chdir(project)
    assert build_section(load_kernel("flash.cu"), False)["source"] == "flash.cu"  # no folder given: the working one
    deep = tmp_path.joinpath(*(f"d{i}" for i in range(10)))  # too far above the kernel: the working folder's path
    assert build_section(load_kernel("flash.cu"), False, acf_folder=deep)["source"] == "flash.cu"


def test_an_acf_knows_the_folder_it_was_read_from_or_written_to(tmp_path: Path) -> None:
    acf = _acf(build=BUILD)
    assert acf.folder is None and "folder" not in acf.to_dict()
    (tmp_path / "out").mkdir()
    acf.write(tmp_path / "out" / "a.acf")
    assert acf.folder == (tmp_path / "out").resolve()
    again = load_acf(tmp_path / "out" / "a.acf")
    assert again.folder == (tmp_path / "out").resolve() and again == acf and "folder" not in again.to_json()


def test_a_script_exports_a_point_as_the_lab_does(tmp_path: Path) -> None:
    import compileiq_lab as cil

    results = cil.Search(lambda c: float(c["x"]), {"x": cil.range(1, 9)}, cil.SearchConfiguration(
        generations=2, pool_size=3, seed=0), store=str(tmp_path / "run.db")).start()
    best = results.best_record()
    assert best is not None
    out = cil.export_point(results, best.eval_id, path="best.json", folder=tmp_path / "exports")
    assert json.loads(out.read_text())["params"] == best.params and out.parent == (tmp_path / "exports").resolve()
    other = next(r for r in results.records if r.scores != best.scores)
    with pytest.raises(ConfigurationError, match="never replaces another point's file"):
        cil.export_point(results, other.eval_id, path="best.json", folder=tmp_path / "exports")
    for store_file in ("run.db-wal", "run.db"):  # the store itself: said as a run, not as "another file"
        with pytest.raises(ConfigurationError, match="never writes over a run"):
            cil.export_point(results, best.eval_id, path=tmp_path / store_file)
