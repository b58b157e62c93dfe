"""NVIDIA's control files as one more searched control (--nvidia-acf): searched with the public controls, applied
with ptxas --apply-controls where the tool has it, recorded by file hash, exported and verified; a file the tool
rejects is a compile_error row. No valid NVIDIA control file ships here: a fake ptxas that takes a made-up file format
stands in for the tool's decryption, and the 13.5 wheel's real ptxas shows how a real tool rejects a bad file."""

from __future__ import annotations

import hashlib
import shlex
import sys
import textwrap
from pathlib import Path

import pytest

from compileiq_lab.acf import load_acf
from compileiq_lab.cli.main import main
from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.kernels import KernelRun
from compileiq_lab.store import load_results
from compileiq_lab.testing import tool_available
from compileiq_lab.toolchain.tools import find_tool

pytestmark = pytest.mark.skipif(not tool_available("nvcc"), reason="needs nvcc and ptxas")

#: The 13.5 wheel's ptxas, put beside the venv by `make test` (scripts/ptxas_wheel.py); not on PATH.
PTXAS_13_5 = Path(sys.prefix) / "ptxas-13.5" / "ptxas"

TUNE = ["tune", "sgemm", "--space", "ptxas", "--objectives", "sass_instructions,registers", "--generations", "4",
        "--pool-size", "8", "--warm-start", "none", "--seed", "2"]


def _fake_ptxas(folder: Path) -> Path:
    """A ptxas that takes --apply-controls: a file starting with "FAKE-ACF:" adds the arguments after it, any
    other file is "Invalid compiler controls file" (as the real tool says); everything else is the real ptxas."""
    folder.mkdir(parents=True, exist_ok=True)
    fake = folder / "ptxas"
    fake.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import os, sys
        real = {find_tool("ptxas")!r}
        args = sys.argv[1:]
        if "--help" in args:
            import subprocess
            out = subprocess.run([real, "--help"], capture_output=True, text=True).stdout
            print(out + "\\n--apply-controls   (-apply-controls)\\n        Specify compiler controls file.")
            sys.exit(0)
        if "--apply-controls" in args:
            i = args.index("--apply-controls")
            text = open(args[i + 1]).read()
            if not text.startswith("FAKE-ACF:"):
                print("ptxas fatal   : Invalid compiler controls file", file=sys.stderr)
                sys.exit(255)
            args = [*args[:i], *text[len("FAKE-ACF:"):].split(), *args[i + 2:]]
        os.execv(real, [real, *args])
    """))
    fake.chmod(0o755)
    return fake


def _files(tmp_path: Path) -> tuple[Path, Path]:
    good, bad = tmp_path / "fast.acf", tmp_path / "broken.acf"
    good.write_text("FAKE-ACF: -O1\n")
    bad.write_bytes(b"\x00\x01 not a controls file")
    return good, bad


def test_nvidia_acfs_are_searched_recorded_exported_and_verified(tmp_path, monkeypatch):
    fake = _fake_ptxas(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{fake.parent}:{Path(find_tool('ptxas')).parent}:{Path(find_tool('nvcc')).parent}"
                               f":/usr/bin:/bin")
    good, bad = _files(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main([*TUNE, "--store", "run.db", "--nvidia-acf", good.name, bad.name]) == 0
    res = load_results("run.db")
    files = res.header.kernel.extra["nvidia_acfs"]
    sha = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (good, bad)}
    assert sorted(f["sha256"] for f in files.values()) == sorted(sha.values())
    label = {Path(f["file"]).name: lbl for lbl, f in files.items()}
    assert res.header.space["nvidia_acf"]["values"] == sorted(files)
    with_good = [r for r in res.records if r.params.get("nvidia_acf") == label["fast.acf"]]
    with_bad = [r for r in res.records if r.params.get("nvidia_acf") == label["broken.acf"]]
    assert with_good and with_bad and res.baseline_record.params == {"defines": {"TILE": 16}}
    assert all(r.status == "compile_error" and "Invalid compiler controls file" in r.error for r in with_bad)
    ok = [r for r in with_good if r.status == "ok"]
    assert ok and all(r.detail["argv"]["backend"][-2:] == ["--apply-controls", str(good)] for r in ok)
    point = ok[0]
    assert main(["export", "run.db", "--eval-id", str(point.eval_id), "--no-minimize", "-o", "p.acf"]) == 0
    acf = load_acf("p.acf")
    assert acf.controls["nvidia_acf"] == label["fast.acf"]
    assert acf.build["nvidia_acfs"] == {label["fast.acf"]: {"file": "fast.acf", "sha256": sha["fast.acf"]}}
    assert acf.argv["backend"][-2:] == ["--apply-controls", "fast.acf"]
    try:
        import jsonschema
    except ImportError:  # the schema is checked where jsonschema is installed
        jsonschema = None
    if jsonschema is not None:
        import json

        from compileiq_lab.acf import format as acf_format

        schema = json.loads((Path(acf_format.__file__).parent / "schema.json").read_text())
        jsonschema.validate(json.loads(Path("p.acf").read_text()), schema)
    assert main(["verify", "p.acf"]) == 0
    good.write_text("FAKE-ACF: -O2\n")  # another file under the recorded name
    with pytest.raises(ConfigurationError, match="recorded content"):
        KernelRun.from_acf(acf)


def test_a_ptxas_without_apply_controls_is_a_clear_error(tmp_path, monkeypatch, capsys):
    good, _ = _files(tmp_path)
    no_flag = tmp_path / "bin"
    no_flag.mkdir()
    (no_flag / "ptxas").write_text(f"#!/bin/sh\nexec {find_tool('ptxas')} \"$@\"\n")  # 13.0: no --apply-controls
    (no_flag / "ptxas").chmod(0o755)
    monkeypatch.setenv("PATH", f"{no_flag}:{Path(find_tool('nvcc')).parent}:/usr/bin:/bin")
    code = main([*TUNE, "--store", str(tmp_path / "x.db"), "--nvidia-acf", str(good)])
    err = capsys.readouterr().err
    assert code == 1 and "--apply-controls (CUDA 13.3 or newer)" in err and "Traceback" not in err
    with pytest.raises(ConfigurationError, match="regular file"):
        KernelRun("sgemm", "ptxas", ["registers"], nvidia_acfs=[tmp_path])
    with pytest.raises(ConfigurationError, match="same content"):
        KernelRun("sgemm", "ptxas", ["registers"], nvidia_acfs=[good, good])
    with pytest.raises(ConfigurationError, match="CUDA and PTX kernels"):
        KernelRun("stencil_c", objectives=["text_bytes"], nvidia_acfs=[good])


@pytest.mark.skipif(not PTXAS_13_5.is_file(), reason="the 13.5 wheel's ptxas is not beside the venv (make test puts "
                                                    "it there)")
def test_the_13_5_ptxas_applies_or_rejects_control_files(tmp_path, monkeypatch):
    _, bad = _files(tmp_path)
    monkeypatch.setenv("PATH", f"{PTXAS_13_5.parent}:{Path(find_tool('nvcc')).parent}:/usr/bin:/bin")
    monkeypatch.chdir(tmp_path)
    assert main([*TUNE, "--store", "run.db", "--nvidia-acf", bad.name]) == 0
    res = load_results("run.db")
    assert "13.5" in res.header.kernel.toolchain["ptxas"]
    with_bad = [r for r in res.records if r.params.get("nvidia_acf")]
    assert with_bad and all(r.status == "compile_error" and "Invalid compiler controls file" in r.error
                            for r in with_bad)
    assert any(r.status == "ok" for r in res.records if "nvidia_acf" not in r.params)
    argv = shlex.join(with_bad[0].detail["argv"]["backend"])
    assert "--apply-controls" in argv


def test_kernel_toml_names_control_files_inside_its_folder(tmp_path):
    folder = tmp_path / "k"
    folder.mkdir()
    (folder / "k.cu").write_text('extern "C" __global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n')
    (folder / "fast.acf").write_text("FAKE-ACF: -O1\n")
    toml = 'name = "k"\nlanguage = "cuda"\nsource = "k.cu"\nentry = "k"\n'
    (folder / "kernel.toml").write_text(toml + 'nvidia_acfs = ["fast.acf"]\n')
    from compileiq_lab.kernels import load_kernel

    spec = load_kernel(folder)
    (label,) = spec.nvidia_acfs
    assert label.startswith("fast-") and spec.nvidia_acfs[label].path == (folder / "fast.acf").resolve()
    outside = tmp_path / "outside.acf"
    outside.write_text("x")
    (folder / "kernel.toml").write_text(toml + 'nvidia_acfs = ["../outside.acf"]\n')
    with pytest.raises(ConfigurationError, match="inside the kernel folder"):
        load_kernel(folder)
