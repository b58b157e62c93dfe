"""The ACF reader's bounds: file size and kind, entry and argument counts, nesting: one clean error, quickly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from compileiq_lab.acf.argcheck import MAX_ARG_CHARS, check_argument
from compileiq_lab.acf.format import ACF, MAX_ACF_BYTES, load_acf
from compileiq_lab.acf.shape import MAX_ACF_ARGS, MAX_ACF_ENTRIES
from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.space.catalogs import get_catalog

#: Keys in the "many keys" documents: at this size a quadratic check takes minutes, a linear one well under 1 s.
MANY = 200_000


def _doc() -> dict[str, Any]:
    """A valid version-2 ACF document (ptxas catalog: no compiler needed to build it)."""
    controls = {"opt_level": 1}
    acf = ACF.from_choice(compiler="ptxas", controls=controls, argv=get_catalog("ptxas").stage_argv(controls),
                          objectives={"registers": 20.0}, baseline={"registers": 24.0}, kernel="k",
                          source_sha256="0" * 64, arch="sm_90a", toolchain={"ptxas": "13.0"}, code_hash="ab" * 32)
    return json.loads(acf.to_json())


def _one_line(exc: pytest.ExceptionInfo[ConfigurationError]) -> str:
    text = str(exc.value)
    assert "\n" not in text and len(text) < 1200, text
    return text


def test_a_real_acf_is_far_below_the_bound(tmp_path: Path) -> None:
    path = tmp_path / "a.acf"
    path.write_text(json.dumps(_doc()), encoding="utf-8")
    assert path.stat().st_size * 100 < MAX_ACF_BYTES
    assert load_acf(path).kernel == "k"
    link = tmp_path / "link.acf"
    link.symlink_to(path)  # a link to a regular file is a regular file
    assert load_acf(link).kernel == "k"


@pytest.mark.parametrize("size", [MAX_ACF_BYTES + 1, 60 * 2**20])
def test_a_file_over_the_bound_is_refused_before_it_is_read(tmp_path: Path, size: int) -> None:
    path = tmp_path / "big.acf"
    with path.open("wb") as f:
        f.write(b"{")
        f.truncate(size)  # a real file of that size (sparse: cheap to make)
    with pytest.raises(ConfigurationError, match=r"MAX_ACF_BYTES") as exc:
        load_acf(path)
    assert f"{size} bytes" in _one_line(exc)


def test_a_file_at_the_bound_is_read_as_json(tmp_path: Path) -> None:
    text = json.dumps(_doc())
    path = tmp_path / "padded.acf"
    path.write_text(text + " " * (MAX_ACF_BYTES - len(text)), encoding="utf-8")
    assert path.stat().st_size == MAX_ACF_BYTES
    assert load_acf(path).kernel == "k"


def test_text_over_the_bound_is_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"MAX_ACF_BYTES") as exc:
        load_acf("{" + " " * MAX_ACF_BYTES + "}")
    _one_line(exc)


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero here")
def test_dev_zero_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="regular file") as exc:
        load_acf("/dev/zero")
    assert "/dev/zero" in _one_line(exc)


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="regular file") as exc:
        load_acf(tmp_path)
    assert "directory" in _one_line(exc)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.acf"
    os.mkfifo(fifo)
    done = threading.Event()

    def unblock() -> None:  # should the reader ever block in open(), a writer lets it go (and the test fail)
        if not done.wait(10):
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            os.close(fd)

    helper = threading.Thread(target=unblock, daemon=True)
    helper.start()
    try:
        with pytest.raises(ConfigurationError, match="regular file") as exc:
            load_acf(fifo)
    finally:
        done.set()
        helper.join()
    assert "FIFO" in _one_line(exc)


def test_a_missing_file_is_one_clean_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="exists") as exc:
        load_acf(tmp_path / "missing.acf")
    _one_line(exc)


def test_non_utf8_is_one_clean_error(tmp_path: Path) -> None:
    path = tmp_path / "latin1.acf"
    path.write_bytes(b'{"kernel": "\xe9"}')
    with pytest.raises(ConfigurationError, match="UTF-8") as exc:
        load_acf(path)
    _one_line(exc)


def _with_keys(n: int, duplicate: bool = False) -> str:
    text = json.dumps(_doc())
    extra = "".join(f', "x{i}": 0' for i in range(n)) + (', "x7": 1' if duplicate else "")
    return text[:-1] + extra + "}"


def test_many_extra_keys_are_refused_in_linear_time(tmp_path: Path) -> None:
    path = tmp_path / "keys.acf"
    path.write_text(_with_keys(MANY), encoding="utf-8")
    assert path.stat().st_size < MAX_ACF_BYTES
    with pytest.raises(ConfigurationError, match=r"extra") as exc:
        load_acf(path)
    assert f"{MANY} extra keys" in _one_line(exc)


def test_a_duplicate_among_many_keys_is_named_in_linear_time() -> None:
    with pytest.raises(ConfigurationError, match=r"no key appears twice") as exc:
        load_acf(_with_keys(MANY, duplicate=True))
    assert "'x7'" in _one_line(exc)


@pytest.mark.parametrize("depth", [5_000, 1_000_000])
@pytest.mark.parametrize("opener,closer", [("[", "]"), ('{"a":', "}")])
def test_deep_nesting_is_one_clean_error(depth: int, opener: str, closer: str) -> None:
    text = json.dumps(_doc())[:-1] + ', "deep": ' + opener * depth + "0" + closer * depth + "}"
    if len(text) > MAX_ACF_BYTES:
        text = text[:MAX_ACF_BYTES]  # still deep, now also cut short
    with pytest.raises(ConfigurationError, match="nest") as exc:
        load_acf(text)
    _one_line(exc)


def test_deep_nesting_in_parsed_data_is_one_clean_error() -> None:
    deep: list[Any] = []
    node = deep
    for _ in range(100_000):
        node.append([])
        node = node[0]
    with pytest.raises(ConfigurationError, match="controls") as exc:
        load_acf({**_doc(), "controls": {"opt_level": deep}})
    _one_line(exc)


def test_a_huge_wrapped_argument_is_one_clean_error() -> None:
    with pytest.raises(ConfigurationError, match="MAX_ARG_CHARS") as exc:
        check_argument("argv.backend[0]", "-Xptxas=" * (MAX_ACF_BYTES // 8) + "-O3")
    assert f"{MAX_ACF_BYTES + 3} characters" in _one_line(exc)


def test_wrapped_arguments_are_unwrapped_to_the_option() -> None:
    deep = "-Xptxas=" * ((MAX_ARG_CHARS - 3) // 8)
    check_argument("argv.backend[0]", deep + "-O3")  # every level unwrapped, the option itself is plain
    with pytest.raises(ConfigurationError, match="outputs") as exc:
        check_argument("argv.backend[0]", deep + "-o")
    _one_line(exc)
    with pytest.raises(ConfigurationError, match="outputs"):
        check_argument("argv.backend[0]", "-Xptxas=-O3,--ptxas-options=-Xptxas=-v,-o")
    with pytest.raises(ConfigurationError, match="non-empty"):
        check_argument("argv.backend[0]", "-Xptxas=-O3,,-v")
    check_argument("argv.backend[0]", "-Xptxas=")  # nothing handed on: an option of its own, as before


def _workloads(n: int) -> dict[str, Any]:
    return {"speedup": 1.2, "low": 1.1, "high": 1.3, "win": True, "noise_floor": 0.01, "confidence": 0.95,
            "method": "bootstrap", "rounds": 5, "runtime": 1e-5, "baseline_runtime": 1.2e-5, "energy_ratio": None,
            "gpu": None, "workloads": {f"w{i}": {"speedup": 1.2, "low": 1.1, "high": 1.3, "win": True}
                                       for i in range(n)}}


@pytest.mark.parametrize("where", ["objectives", "toolchain", "ci", "host", "dropped", "controls.defines",
                                   "build.defines", "validation.workloads"])
def test_an_object_over_the_entry_bound_is_refused(where: str) -> None:
    n = MAX_ACF_ENTRIES + 1
    doc = _doc()
    entries = {"objectives": {f"o{i}": 1.0 for i in range(n)}, "toolchain": {f"t{i}": "1" for i in range(n)},
               "ci": {f"c{i}": [] for i in range(n)}, "host": {"platform": "p", "gpu": None,
                                                             **{f"h{i}": None for i in range(n)}},
               "dropped": {f"d{i}": "no effect" for i in range(n)}}
    if where in entries:
        doc[where] = entries[where]
    elif where == "controls.defines":
        doc["controls"]["defines"] = {f"K{i}": 1 for i in range(n)}
    elif where == "build.defines":
        doc["build"]["defines"] = {f"D{i}": "1" for i in range(n)}
    else:
        doc["validation"] = _workloads(n)
    with pytest.raises(ConfigurationError, match=rf"ACF {where}: `it holds at most MAX_ACF_ENTRIES") as exc:
        load_acf(doc)
    assert f"{len(doc[where]) if where in entries else n} entries" in _one_line(exc)


def test_an_object_at_the_entry_bound_is_read() -> None:
    doc = _doc()
    doc["objectives"] = {f"o{i}": 1.0 for i in range(MAX_ACF_ENTRIES)}
    doc["validation"] = _workloads(MAX_ACF_ENTRIES)
    acf = load_acf(json.dumps(doc))
    assert len(acf.objectives) == MAX_ACF_ENTRIES and acf.validation is not None


def test_an_argv_stage_over_the_argument_bound_is_refused() -> None:
    doc = _doc()
    doc["argv"]["backend"] = ["-O1"] * (MAX_ACF_ARGS + 1)
    with pytest.raises(ConfigurationError, match=r"argv.backend: `it holds at most MAX_ACF_ARGS") as exc:
        load_acf(doc)
    assert f"{MAX_ACF_ARGS + 1} arguments" in _one_line(exc)


def test_a_wrapped_argument_in_a_document_is_one_clean_error() -> None:
    doc = _doc()
    doc["argv"]["backend"] = ["-Xptxas=" * 100_000 + "-O1"]
    with pytest.raises(ConfigurationError, match="argv.backend") as exc:
        load_acf(doc)
    _one_line(exc)


@pytest.mark.parametrize("kind", ["zero", "fifo", "dir", "big", "keys"])
def test_the_cli_answers_in_one_line(tmp_path: Path, kind: str) -> None:
    if kind == "zero":
        if not Path("/dev/zero").exists():
            pytest.skip("no /dev/zero here")
        target = Path("/dev/zero")
    elif kind == "fifo":
        if not hasattr(os, "mkfifo"):
            pytest.skip("no FIFOs here")
        target = tmp_path / "pipe.acf"
        os.mkfifo(target)
    elif kind == "dir":
        target = tmp_path
    elif kind == "big":
        target = tmp_path / "big.acf"
        with target.open("wb") as f:
            f.truncate(60 * 2**20)
    else:
        target = tmp_path / "keys.acf"
        target.write_text(_with_keys(40_000), encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "compileiq_lab.cli", "flags", str(target)], capture_output=True,
                         text=True, cwd=tmp_path, timeout=60)
    assert out.returncode in (1, 2) and out.stdout == "", out.stdout + out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr and "ACF" in lines[0], out.stderr
