"""kernel.toml and reference.py against hostile or broken input: a reference that raises or exits, sizes beyond
the bounds, expressions that would build huge numbers, files outside the kernel folder. Each is one line that
names the rule, the value and the fix, never a traceback, an exit from inside, or a giant allocation."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from compileiq_lab.exceptions import ConfigurationError
from compileiq_lab.kernels import eval_expr, kernels_root, load_kernel
from compileiq_lab.kernels import spec as spec_module


@pytest.fixture(autouse=True)
def _bundled_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COMPILEIQ_KERNELS", raising=False)


def _dot(tmp_path: Path) -> Path:
    folder = tmp_path / "dot"
    shutil.copytree(kernels_root() / "dot", folder)
    return folder


def _edit(folder: Path, old: str, new: str) -> None:
    toml = folder / "kernel.toml"
    text = toml.read_text()
    assert old in text, old
    toml.write_text(text.replace(old, new))


def _one_line(exc: BaseException, limit: int = 600) -> str:
    text = str(exc)
    assert "\n" not in text and len(text) < limit, text
    return text


def _reference_error(folder: Path) -> str:
    spec = load_kernel(folder)
    with pytest.raises(ConfigurationError) as info:
        spec.reference_outputs(spec.make_inputs())
    return _one_line(info.value)


# ---------------------------------------------------------------- reference.py

@pytest.mark.parametrize(("code", "fragments"), [
    ('raise RuntimeError("boom at import")\n', ["RuntimeError", "boom at import", "line 1"]),
    ("import sys\nsys.exit(3)\n", ["SystemExit", "3", "line 2"]),
    ("def reference(:\n", ["SyntaxError", "line 1"]),
    ("import no_such_module_4711\n", ["ModuleNotFoundError", "no_such_module_4711"]),
    ('raise RuntimeError("first\\nsecond\\n" + "x" * 5000)\n', ["RuntimeError", "first second"]),
])
def test_reference_that_fails_to_import_is_one_clean_error(tmp_path: Path, code: str, fragments: list[str]) -> None:
    folder = _dot(tmp_path)
    (folder / "reference.py").write_text(code)
    text = _reference_error(folder)
    assert "reference.py" in text and "importing" in text and "Fix" in text
    for fragment in fragments:
        assert fragment in text, text


@pytest.mark.parametrize(("body", "fragments"), [
    ('raise ValueError("boom at call")', ["ValueError", "boom at call", "line 3"]),
    ("sys.exit(4)", ["SystemExit", "4"]),
    ("return 42", ["returns a dict", "int"]),
    ("return {1: 2, None: 4}", ["returns a dict", "None"]),
    ("return {'out': object()}", ["out", "numbers", "object"]),
])
def test_reference_that_fails_when_called_is_one_clean_error(tmp_path: Path, body: str,
                                                              fragments: list[str]) -> None:
    folder = _dot(tmp_path)
    (folder / "reference.py").write_text(f"import sys\ndef reference(inputs, params):\n    {body}\n")
    text = _reference_error(folder)
    for fragment in fragments:
        assert fragment in text, text


def test_keyboard_interrupt_in_reference_still_stops(tmp_path: Path) -> None:
    folder = _dot(tmp_path)
    (folder / "reference.py").write_text("raise KeyboardInterrupt\n")
    spec = load_kernel(folder)
    with pytest.raises(KeyboardInterrupt):
        spec.reference_outputs(spec.make_inputs())


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")
@pytest.mark.parametrize("code", ["import sys\nsys.exit(3)\n",
                                  "def reference(inputs, params):\n    raise ValueError('boom at call')\n"])
def test_cli_says_one_line_for_a_broken_reference(tmp_path: Path, code: str) -> None:
    folder = _dot(tmp_path)
    (folder / "reference.py").write_text(code)
    out = subprocess.run([sys.executable, "-m", "compileiq_lab.cli", "tune", str(folder), "--generations", "1",
                          "--store", str(tmp_path / "y.db")], capture_output=True, text=True, cwd=tmp_path,
                         timeout=600)
    assert out.returncode == 1, (out.returncode, out.stderr)
    assert "Traceback" not in out.stderr
    lines = [ln for ln in out.stderr.splitlines() if ln.startswith("compileiq-lab: error:")]
    assert len(lines) == 1 and "reference.py" in lines[0], out.stderr


# ---------------------------------------------------------------- sizes

def test_shape_beyond_the_byte_bound_fails_at_load_before_allocating(tmp_path: Path) -> None:
    folder = _dot(tmp_path)
    _edit(folder, "n = 1048576", "n = 25000000000")
    t0 = time.monotonic()
    with pytest.raises(ConfigurationError) as info:
        load_kernel(folder)
    text = _one_line(info.value)
    assert time.monotonic() - t0 < 5
    assert "4 GiB" in text and "186.3 GiB" in text and "x: 93.1 GiB" in text and "smaller" in text, text


def test_byte_bound_is_a_module_constant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _dot(tmp_path)
    assert load_kernel(folder).params["n"] == 1048576  # 8 MiB of inputs: within the default bound
    monkeypatch.setattr(spec_module, "MAX_BUFFER_BYTES", 1 << 20)
    with pytest.raises(ConfigurationError, match="1 MiB"):
        load_kernel(folder)


def test_workload_beyond_the_byte_bound_names_the_workload(tmp_path: Path) -> None:
    folder = _dot(tmp_path)
    (folder / "kernel.toml").write_text((folder / "kernel.toml").read_text()
                                        + '\n[[workloads]]\nname = "huge"\nparams = { n = 4000000000 }\n')
    with pytest.raises(ConfigurationError, match="workload 'huge'") as info:
        load_kernel(folder)
    _one_line(info.value)


@pytest.mark.parametrize(("old", "new", "fragment"), [
    ("n = 1048576", "n = 0x" + "f" * 5000, "a 6021-digit number"),
    ("n = 1048576", "n = -9223372036854775809", "-9223372036854775809"),
    ('shape = [1]', "shape = [0x" + "f" * 5000 + "]", "a 6021-digit number"),
    ('shape = ["n"]', 'shape = ["(((2**64)**64)**64)**2"]', "2 ** 64"),
    ('shape = ["n"]', 'shape = ["(((n**64)**64)**64)**64"]', "n ** 64"),
    ('shape = ["n"]', 'shape = ["n*n*n*n*n*n*n*n"]', "n * n"),
    ('shape = ["n"]', 'shape = ["0x' + "f" * 400 + '"]', "a 482-digit number"),
    ('shape = ["n"]', 'shape = ["' + "+".join(["1"] * 400) + '"]', "characters"),
    ('shape = ["n"]', 'shape = [' + ", ".join(["1"] * 40) + "]", "dims"),
])
def test_huge_numbers_fail_fast_without_being_printed(tmp_path: Path, old: str, new: str, fragment: str) -> None:
    folder = _dot(tmp_path)
    _edit(folder, old, new)
    t0 = time.monotonic()
    with pytest.raises(ConfigurationError) as info:
        load_kernel(folder)
    text = _one_line(info.value)
    assert time.monotonic() - t0 < 5
    assert fragment in text, text
    assert "Exceeds the limit" not in text


@pytest.mark.parametrize(("old", "new", "fragment"), [
    ("repeats = 10", "repeats = 1000000000000", "repeats is an int >= 1 and <= 10000"),
    ("seed = 0", "seed = 9223372036854775808", "seed is an int >= 0 and <= 9223372036854775807"),
    ("ACCUMULATORS = [4, 1, 2, 8]", "ACCUMULATORS = [4, 0x" + "f" * 40 + "]", "ints fit 64 bits"),
    ("ACCUMULATORS = [4, 1, 2, 8]", "ACCUMULATORS = [4, 'a\\\";touch PWN;#']",  # a shell's, not a value
     "strings hold only [A-Za-z0-9_.+-]"),
])
def test_counts_and_seeds_are_bounded(tmp_path: Path, old: str, new: str, fragment: str) -> None:
    folder = _dot(tmp_path)
    _edit(folder, old, new)
    with pytest.raises(ConfigurationError, match="must hold") as info:
        load_kernel(folder)
    assert fragment in _one_line(info.value)


def test_decimal_literal_beyond_pythons_digit_limit_is_a_toml_error(tmp_path: Path) -> None:
    folder = _dot(tmp_path)
    _edit(folder, "n = 1048576", "n = " + "9" * 5000)
    with pytest.raises(ConfigurationError, match="valid TOML") as info:
        load_kernel(folder)
    _one_line(info.value)


def test_oversized_kernel_toml_is_refused_unread(tmp_path: Path) -> None:
    folder = _dot(tmp_path)
    with (folder / "kernel.toml").open("a") as f:
        f.write("# " + "x" * (2 << 20) + "\n")
    with pytest.raises(ConfigurationError, match="MiB") as info:
        load_kernel(folder)
    _one_line(info.value)


def test_reasonable_expressions_still_evaluate() -> None:
    names = {"n": 1 << 20, "TILE": 16}
    assert eval_expr("2**20", names) == 1 << 20
    assert eval_expr("(n + TILE - 1) // TILE", names) == (1 << 20) // 16
    assert eval_expr("n * n", names) == 1 << 40
    assert eval_expr("-(2**62) * 2 + 1", {}) == -(1 << 63) + 1
    assert eval_expr("1**64", {}) == 1 and eval_expr("0**64", {}) == 0 and eval_expr("(-1)**63", {}) == -1
    assert eval_expr("2**62 + (2**62 - 1)", {}) == (1 << 63) - 1
    with pytest.raises(ConfigurationError, match="0..64"):
        eval_expr("2**-1", {})
    with pytest.raises(ConfigurationError, match=r"2 \*\* 64"):
        eval_expr("2**64", {})
    with pytest.raises(ConfigurationError, match="int64"):
        eval_expr("2**62 + 2**62", {})


# ---------------------------------------------------------------- files outside the folder

@pytest.mark.parametrize("source", ["../../../../etc/hostname", "/etc/hostname", "../dot.c"])
def test_source_outside_the_folder_is_refused(tmp_path: Path, source: str) -> None:
    folder = _dot(tmp_path)
    (tmp_path / "dot.c").write_text("void cil_kernel(void **b, const long *p) {}\n")
    _edit(folder, 'source = "dot.c"', f'source = "{source}"')
    with pytest.raises(ConfigurationError) as info:
        load_kernel(folder)
    text = _one_line(info.value)
    assert "inside" in text and repr(source) in text and "Move the file into the folder" in text, text


def test_source_symlink_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    folder = _dot(tmp_path)
    outside = tmp_path / "outside.c"
    outside.write_text((folder / "dot.c").read_text())
    (folder / "evil.c").symlink_to(outside)
    _edit(folder, 'source = "dot.c"', 'source = "evil.c"')
    with pytest.raises(ConfigurationError, match="inside") as info:
        load_kernel(folder)
    assert str(outside) in _one_line(info.value)


def test_source_symlink_within_the_folder_and_subfolders_are_fine(tmp_path: Path) -> None:
    folder = _dot(tmp_path)
    (folder / "src").mkdir()
    shutil.move(folder / "dot.c", folder / "src" / "dot.c")
    (folder / "link.c").symlink_to(folder / "src" / "dot.c")
    _edit(folder, 'source = "dot.c"', 'source = "link.c"')
    assert load_kernel(folder).source_path == (folder / "src" / "dot.c").resolve()
    _edit(folder, 'source = "link.c"', 'source = "src/dot.c"')
    assert load_kernel(folder).source_path == (folder / "src" / "dot.c").resolve()


def test_folder_reached_through_a_symlink_still_loads(tmp_path: Path) -> None:
    folder = _dot(tmp_path)
    (tmp_path / "links").mkdir()
    (tmp_path / "links" / "dot").symlink_to(folder)
    assert load_kernel(tmp_path / "links" / "dot").name == "dot"


def test_reference_symlink_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    folder = _dot(tmp_path)
    outside = tmp_path / "ref_elsewhere.py"
    shutil.move(folder / "reference.py", outside)
    (folder / "reference.py").symlink_to(outside)
    with pytest.raises(ConfigurationError, match="inside") as info:
        load_kernel(folder)
    assert "reference.py" in _one_line(info.value)


def test_bundled_kernels_still_load() -> None:
    for name in ("dot", "sgemm", "softmax", "attention", "matmul_c", "stencil", "stencil_c", "reduction"):
        assert load_kernel(name).name == name
