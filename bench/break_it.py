"""Try to break it: bad inputs (rejected cleanly?) and faults (survived with nothing lost?), counted by category.

"Rejected cleanly": the command ends within its time limit with exit 1 or 2, no traceback and one
`compileiq-lab: error:` line (or, in Python, a compileiq-lab exception whose message is one line).
"Survived": the run ends with a clear message or finishes, the store holds every row it reported, and the
same command run again finishes with no row made of the fault.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from _common import markdown_table, write

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "compileiq_lab.cli"]


@dataclass
class Attempt:
    category: str
    kind: str  # "input" or "fault"
    name: str
    ok: bool
    detail: str = ""


def cli(args: list[str], cwd: Path, timeout: float = 120, env: dict[str, str] | None = None) -> tuple[int, str, float]:
    t0 = time.monotonic()
    try:
        out = subprocess.run([*CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                             env={**os.environ, **(env or {})})
        return out.returncode, out.stdout + out.stderr, time.monotonic() - t0
    except subprocess.TimeoutExpired as exc:
        text = (exc.stdout or b"").decode() + (exc.stderr or b"").decode() if isinstance(exc.stdout, bytes) else ""
        return -1, f"TIMEOUT after {timeout} s {text[-200:]}", time.monotonic() - t0


def clean_rejection(code: int, text: str) -> tuple[bool, str]:
    errors = [ln for ln in text.splitlines() if ln.startswith(("compileiq-lab: error:", "usage:"))]
    ok = code in (1, 2) and "Traceback" not in text and (len(errors) == 1 or (code == 2 and errors))
    return ok, text.strip().splitlines()[-1][:160] if text.strip() else f"exit {code}, nothing printed"


# -- bad inputs ------------------------------------------------------------------------------------------------
def cli_numbers(work: Path) -> list[Attempt]:
    cases = [("--timeout", v) for v in ("nan", "-1", "0", "inf", "1e999", "x")]
    cases += [("--workers", v) for v in ("0", "-3", "two", "1.5")]
    cases += [("--validate", "-3"), ("--generations", "0"), ("--generations", "-1"), ("--pool-size", "1"),
              ("--pool-size", "1000000000"), ("--generations", "10" * 10), ("--seed", "-1")]
    out = []
    for option, value in cases:
        code, text, _ = cli(["tune", "stencil_c", option, value, "--store", "x.db"], work)
        ok, why = clean_rejection(code, text)
        ok = ok and not (work / "x.db").exists()
        out.append(Attempt("CLI numbers", "input", f"{option} {value}", ok, why))
    return out


def crafted_acfs(work: Path) -> list[Attempt]:
    good = _good_acf(work)
    doc = json.loads(good.read_text())
    cases: dict[str, Callable[[Path], None]] = {
        "empty file": lambda p: p.write_text(""),
        "binary junk": lambda p: p.write_bytes(os.urandom(4096)),
        "not JSON": lambda p: p.write_text("{controls: 1"),
        "JSON list": lambda p: p.write_text("[1, 2]"),
        "60 MB file": lambda p: p.write_text(json.dumps({**doc, "pad": "x" * 60_000_000})),
        "40k extra keys": lambda p: p.write_text(json.dumps({**doc, **{f"k{i}": i for i in range(40_000)}})),
        "200k duplicate keys": lambda p: p.write_text("{" + ",".join(f'"a": {i}' for i in range(200_000)) + "}"),
        "nesting 100k deep": lambda p: p.write_text("[" * 100_000 + "]" * 100_000),
        "argv with -o": lambda p: p.write_text(json.dumps({**doc, "argv": {**doc["argv"], "backend": ["-o", "/x"]}})),
        "argv with a shell": lambda p: p.write_text(json.dumps({**doc, "argv": {**doc["argv"],
                                                                                "backend": ["-O2;rm -rf /"]}})),
        "huge argument": lambda p: p.write_text(json.dumps({**doc, "argv": {**doc["argv"],
                                                                            "backend": ["-O" + "2" * 5_000_000]}})),
        "20k -Xptxas wrappers": lambda p: p.write_text(json.dumps({**doc, "argv": {
            **doc["argv"], "frontend": ["-Xptxas=" * 20_000 + "-O3"]}})),
    }
    hostile = set(cases)
    for key in doc:  # a field of another type: refused, or (where the field is optional) read without it
        for bad in (None, 7, "x", [1], {"a": {"b": 1}}):
            cases[f"{key} = {bad!r}"[:40]] = (lambda k, b: lambda p: p.write_text(json.dumps({**doc, k: b})))(key, bad)
    out = []
    for name, make in cases.items():
        path = work / "bad.acf"
        make(path)
        for command in ("flags", "verify"):
            code, text, took = cli([command, str(path)], work, timeout=60)
            ok, why = clean_rejection(code, text)
            if name not in hostile:
                ok = ok or (code in (0, 1) and "Traceback" not in text)
            out.append(Attempt("crafted ACF", "input", f"{command}: {name}", ok and took < 30, why))
        path.unlink()
    fifo = work / "fifo.acf"
    os.mkfifo(fifo)
    specials = {"/dev/zero": "/dev/zero", "a FIFO": str(fifo), "a directory": str(work), "/proc/self/mem":
                "/proc/self/mem"}
    link = work / "zero.acf"
    link.symlink_to("/dev/zero")
    specials["a symlink to /dev/zero"] = str(link)
    for name, target in specials.items():
        code, text, took = cli(["flags", target], work, timeout=30)
        ok, why = clean_rejection(code, text)
        out.append(Attempt("crafted ACF", "input", f"flags: {name}", ok, why))
    return out


def _good_acf(work: Path) -> Path:
    code, text, _ = cli(["tune", "stencil_c", "--objectives", "text_bytes", "--generations", "1", "--pool-size", "4",
                         "--store", "good.db", "--export", "good.acf", "--warm-start", "none"], work, timeout=300)
    assert code == 0, text
    return work / "good.acf"


def kernel_folders(work: Path) -> list[Attempt]:
    base = ROOT / "kernels" / "stencil_c"
    toml = (base / "kernel.toml").read_text()
    cases: dict[str, Callable[[Path], None]] = {
        "reference raises": lambda d: (d / "reference.py").write_text("raise RuntimeError('broken reference')\n"),
        "reference sys.exit(3)": lambda d: (d / "reference.py").write_text("import sys\nsys.exit(3)\n"),
        "reference import error": lambda d: (d / "reference.py").write_text("import no_such_module_xyz\n"),
        "reference syntax error": lambda d: (d / "reference.py").write_text("def (:\n"),
        "reference function raises": lambda d: (d / "reference.py").write_text(
            "def reference(inputs, params):\n    raise ValueError('no')\n"),
        "reference returns junk": lambda d: (d / "reference.py").write_text(
            "def reference(inputs, params):\n    return 5\n"),
        "n = 25e9": lambda d: _edit(d, toml.replace("nx = 512", "nx = 25000000000")),
        "tower of powers": lambda d: _edit(d, toml.replace('shape = ["ny", "nx"]\ninit',
                                                           'shape = ["ny", "9**9**9"]\ninit', 1)),
        "negative shape": lambda d: _edit(d, toml.replace("nx = 512", "nx = -4")),
        "source outside": lambda d: _edit(d, toml.replace('source = "stencil_c.c"',
                                                          'source = "../../../../etc/hostname"')),
        "source absolute": lambda d: _edit(d, toml.replace('source = "stencil_c.c"', 'source = "/etc/hostname"')),
        "source symlink out": lambda d: (os.remove(d / "stencil_c.c"), os.symlink("/etc/hostname", d / "stencil_c.c")),
        "source missing": lambda d: os.remove(d / "stencil_c.c"),
        "bad TOML": lambda d: _edit(d, toml + "\n[params\n"),
        "language cobol": lambda d: _edit(d, toml.replace('language = "c"', 'language = "cobol"')),
        "unknown dtype": lambda d: _edit(d, toml.replace('dtype = "float32"', 'dtype = "float1024"', 1)),
        "kernel.toml is a directory": lambda d: (os.remove(d / "kernel.toml"), os.mkdir(d / "kernel.toml")),
        "kernel.toml 50 MB": lambda d: _edit(d, toml + "#" + "x" * 50_000_000 + "\n"),
        "include dir absolute": lambda d: _edit(d, toml + '\n[build]\ninclude_dirs = ["/usr/include"]\n'),
        "define with a shell": lambda d: _edit(d, toml + '\n[build]\ndefines = { A = "1;rm" }\n'),
    }
    out = []
    for name, make in cases.items():
        folder = work / "kfolder"
        shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(base, folder)
        make(folder)
        code, text, _took = cli(["tune", str(folder), "--generations", "1", "--pool-size", "2", "--store", "k.db",
                                "--warm-start", "none"], work, timeout=120)
        ok, why = clean_rejection(code, text)
        ran_clean = code == 0 and "Traceback" not in text  # e.g. a reference failing at run time became rows
        out.append(Attempt("kernel folders", "input", name, ok or ran_clean, why))
        for leftover in work.glob("k.db*"):
            leftover.unlink()
    return out


def _edit(folder: Path, text: str) -> None:
    (folder / "kernel.toml").write_text(text)


def python_api() -> list[Attempt]:
    import compileiq_lab.space as ss
    from compileiq_lab import Search, SearchConfiguration
    from compileiq_lab.exceptions import CompileIQLabError
    from compileiq_lab.kernels import KernelRun
    from compileiq_lab.testing import FlagProblem

    p = FlagProblem(n_flags=6, n_levels=2, seed=0)
    cases: dict[str, Callable[[], object]] = {
        "range(0, 10**12)": lambda: ss.range(0, 10**12),
        "range(0.0, 1e9, 1e-3)": lambda: ss.range(0.0, 1e9, 1e-3),
        "range(0, 10**400)": lambda: ss.range(0, 10**400),
        "range(0, nan)": lambda: ss.range(0, float("nan")),
        "log_sampling(1, 10, 10**9)": lambda: ss.log_sampling(1, 10, 10**9),
        "log_sampling(0, 10)": lambda: ss.log_sampling(0, 10),
        "choice([])": lambda: ss.choice([]),
        "choice(10**7 values)": lambda: ss.choice(list(range(10**7))),
        "flag('')": lambda: ss.flag(""),
        "flag(3)": lambda: ss.flag(3),
        "flag(None)": lambda: ss.flag(None),
        "flag('  ')": lambda: ss.flag("  "),
        "pool_size=10**9": lambda: SearchConfiguration(generations=1, pool_size=10**9),
        "generations=10**12": lambda: SearchConfiguration(generations=10**12),
        "num_objectives=10**9": lambda: SearchConfiguration(generations=1, num_objectives=10**9),
        "seed=-1": lambda: SearchConfiguration(generations=1, seed=-1),
        "timeout_s=nan": lambda: SearchConfiguration(generations=1, timeout_s=float("nan")),
        "start(workers=0)": lambda: Search(p, p.space(), SearchConfiguration(generations=1),
                                           store=":memory:").start(workers=0),
        "KernelRun(timeout_s=-1)": lambda: KernelRun("stencil_c", objectives=["text_bytes"], timeout_s=-1),
        "KernelRun(workers=0)": lambda: KernelRun("stencil_c", objectives=["text_bytes"], workers=0),
        "store is a folder": lambda: Search(p, p.space(), SearchConfiguration(generations=1),
                                            store=tempfile.gettempdir()),
        "store under /proc": lambda: Search(p, p.space(), SearchConfiguration(generations=1), store="/proc/x.db"),
    }
    out = []
    for name, make in cases.items():
        t0 = time.monotonic()
        try:
            make()
            ok, why = False, "accepted"
        except CompileIQLabError as exc:
            ok, why = "\n" not in str(exc), str(exc)[:160]
        except BaseException as exc:  # noqa: BLE001 - what this script counts
            ok, why = False, f"{type(exc).__name__}: {exc}"[:160]
        out.append(Attempt("Python API", "input", name, ok and time.monotonic() - t0 < 5, why))
    return out


def damaged_stores(work: Path) -> list[Attempt]:
    code, text, _ = cli(["tune", "stencil_c", "--objectives", "text_bytes,compile_time", "--generations", "4",
                         "--pool-size", "8", "--warm-start", "none", "--store", "pristine.db"], work, timeout=300)
    assert code == 0, text
    pristine = work / "pristine.db"
    with sqlite3.connect(pristine) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    pages = pristine.stat().st_size // 4096
    rng = random.Random(0)
    cases: dict[str, Callable[[Path], None]] = {}
    for p in range(pages):
        cases[f"zero page {p}"] = (lambda q: lambda f: _poke(f, q * 4096, bytes(4096)))(p)
        cases[f"random page {p}"] = (lambda q: lambda f: _poke(f, q * 4096, rng.randbytes(4096)))(p)
    for n in (1, 7, 100):
        cases[f"{n} random bytes flipped"] = (lambda k: lambda f: [
            _poke(f, rng.randrange(f.stat().st_size), rng.randbytes(1)) for _ in range(k)])(n)
    for frac in (0.1, 0.5, 0.9):
        cases[f"truncated to {frac:.0%}"] = (lambda x: lambda f: os.truncate(f, int(f.stat().st_size * x)))(frac)
    for column, value in (("params", "'{x'"), ("scores", "'[1,'"), ("scores", "'\"a\"'"), ("params", "'[1]'"),
                          ("detail", "'no'"), ("elapsed_s", "'slow'"), ("status", "7"), ("config_key", "7")):
        cases[f"row {column} = {value}"] = (lambda c, v: lambda f: _sql(f, f"UPDATE evals SET {c} = {v} "
                                                                         "WHERE eval_id = 3"))(column, value)
    for key, value in (("space", "5"), ("config", '"x"'), ("metadata", "[1]"), ("validation", '"v"'),
                       ("status", "{}"), ("schema_version", '"one"'), ("config", "{")):
        cases[f"header {key} = {value}"] = (lambda k, v: lambda f: _sql(
            f, f"UPDATE meta SET value = '{v}' WHERE key = '{k}'"))(key, value)
    cases["meta table dropped"] = lambda f: _sql(f, "DROP TABLE meta")
    cases["evals table dropped"] = lambda f: _sql(f, "DROP TABLE evals")
    cases["empty file"] = lambda f: f.write_bytes(b"")
    cases["a text file"] = lambda f: f.write_text("hello\n" * 1000)
    out = []
    for name, damage in cases.items():
        path = work / "damaged.db"
        for leftover in work.glob("damaged.db*"):
            leftover.unlink()
        shutil.copy(pristine, path)
        damage(path)
        for command in (["show", "damaged.db"], ["export", "damaged.db", "-o", "d.acf"],
                        ["report", "damaged.db", "-o", "d.html"],
                        ["tune", "stencil_c", "--objectives", "text_bytes,compile_time", "--generations", "5",
                         "--pool-size", "8", "--warm-start", "none", "--store", "damaged.db"]):
            code, text, _ = cli(command, work, timeout=300)
            ok = "Traceback" not in text and (code == 0 or clean_rejection(code, text)[0])
            out.append(Attempt("damaged store", "input", f"{command[0]}: {name}", ok, text.strip()[-160:]))
    return out


def _poke(path: Path, at: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(data)


def _sql(path: Path, statement: str) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(statement)
    conn.close()


# -- faults ----------------------------------------------------------------------------------------------------
_RACER = textwrap.dedent("""
    import json, sys, time
    from compileiq_lab import Search, SearchConfiguration
    from compileiq_lab.exceptions import CompileIQLabError
    from compileiq_lab.testing import FlagProblem
    store, start_at, out = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    p = FlagProblem(n_flags=6, n_levels=2, seed=3)
    while time.time() < start_at:
        time.sleep(0.0005)
    try:
        r = Search(p, p.space(), SearchConfiguration(generations=3, pool_size=6, seed=1), store=store).start()
        rep = {"ok": True, "rows": len(r), "status": r.status}
    except CompileIQLabError as exc:
        rep = {"ok": False, "error": str(exc)}
    json.dump(rep, open(out, "w"))
""")


def races(work: Path, trials: int) -> list[Attempt]:
    from compileiq_lab import load_results

    script = work / "racer.py"
    script.write_text(_RACER)
    start_at = time.time() + 8
    procs = [subprocess.Popen([sys.executable, str(script), str(work / f"race{t}.db"), str(start_at),
                               str(work / f"race{t}-{w}.json")]) for t in range(trials) for w in range(2)]
    for p in procs:
        p.wait(timeout=600)
    out = []
    for t in range(trials):
        reports = [json.loads((work / f"race{t}-{w}.json").read_text()) for w in range(2)]
        stored = len(load_results(str(work / f"race{t}.db")))
        winners = [r for r in reports if r["ok"]]
        ok = bool(winners) and all(stored >= r["rows"] for r in winners) and all(
            "another run" in r["error"] for r in reports if not r["ok"])
        out.append(Attempt("two creators of one store", "fault", f"trial {t}", ok, json.dumps(reports)[:160]))
    return out


def disk_full(work: Path) -> list[Attempt]:
    from compileiq_lab import load_results

    out = []
    if shutil.which("unshare") is None:
        return out
    tune = (f"{' '.join(CLI)} tune sgemm --space ptxas --objectives registers,sass_instructions --generations 6 "
            "--pool-size 10 --store s.db --workdir cache --warm-start none")
    for free_kb in (50, 400, 1100, 1300, 1600, 2200):
        folder = work / f"full{free_kb}"
        folder.mkdir()
        script = textwrap.dedent(f"""
            mkdir -p cache && mount -t tmpfs -o size=5m tmpfs cache || exit 90
            dd if=/dev/zero of=cache/filler bs=1k count={5120 - free_kb} 2>/dev/null
            {tune} > first.out 2>&1; echo $? > first.rc
            find cache -type f -size 0 | grep -v filler > empty.txt
            rm cache/filler
            {tune} > second.out 2>&1; echo $? > second.rc
        """)
        res = subprocess.run(["unshare", "-rm", "sh", "-c", script], cwd=folder, capture_output=True, text=True,
                             timeout=900)
        if res.returncode == 90:
            return out
        first = (folder / "first.out").read_text()
        rows = load_results(str(folder / "s.db"))
        bad = [r for r in rows.records if r.status != "ok"]
        ok = ("Traceback" not in first and (folder / "empty.txt").read_text() == ""
              and (folder / "second.rc").read_text().strip() == "0" and rows.status == "finished" and not bad)
        out.append(Attempt("full disk (tmpfs)", "fault", f"{free_kb} KiB free", ok,
                           first.strip().splitlines()[-1][:160] if first.strip() else ""))
    return out


def size_limits(work: Path) -> list[Attempt]:
    src = work / "big.cu"
    src.write_text('extern "C" __global__ void big(float* o, const float* a, int n) {\n  float s = a[threadIdx.x];\n'
                   "  #pragma unroll\n  for (int i = 0; i < 3000; ++i) s = s * a[(threadIdx.x + i) % n] + i;\n"
                   "  o[threadIdx.x] = s;\n}\n")
    out = []
    for limit_kb in (16, 48, 200):
        code = textwrap.dedent(f"""
            import resource, sys
            resource.setrlimit(resource.RLIMIT_FSIZE, ({limit_kb} * 1024, {limit_kb} * 1024))
            from compileiq_lab.cli.main import main
            sys.exit(main(["tune", "{src}", "--space", "ptxas", "--objectives", "registers", "--generations", "1",
                           "--pool-size", "3", "--store", ":memory:", "--workdir", "w{limit_kb}"]))
        """)
        res = subprocess.run([sys.executable, "-c", code], cwd=work, capture_output=True, text=True, timeout=600)
        text = res.stdout + res.stderr
        partial = [p for p in (work / f"w{limit_kb}").rglob("*") if p.is_file() and p.suffix in (".ptx", ".cubin")
                   and not p.with_name(p.name + ".time").exists()]
        ok = "Traceback" not in text and not partial and (
            res.returncode == 0 or "is full or limited" in text)
        out.append(Attempt("file-size limit (ulimit -f)", "fault", f"{limit_kb} KiB", ok, text.strip()[-160:]))
    return out


def hanging_probes(work: Path) -> list[Attempt]:
    out = []
    fakes = {"hangs": "#!/bin/sh\nsleep 300\n", "prints garbage": "#!/bin/sh\necho 'Segmentation fault'\nexit 0\n",
             "crashes": "#!/bin/sh\nkill -SEGV $$\n", "prints nothing": "#!/bin/sh\nexit 0\n"}
    for name, body in fakes.items():
        bin_dir = work / f"fake-{name.replace(' ', '-')}"
        bin_dir.mkdir()
        for tool in ("ptxas", "nvcc"):
            (bin_dir / tool).write_text(body)
            (bin_dir / tool).chmod(0o755)
        env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "CUDA_HOME": str(bin_dir)}
        code, text, took = cli(["tune", "sgemm", "--space", "ptxas", "--generations", "1", "--store", f"{name}.db"],
                               work, timeout=180, env=env)
        ok, why = clean_rejection(code, text)
        out.append(Attempt("broken compiler on PATH", "fault", f"{name} ({took:.0f} s)", ok and took < 90, why))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--race-trials", type=int, default=12)
    ap.add_argument("--only", default=None, help="comma list of section functions to run")
    args = ap.parse_args()
    sections: dict[str, Callable[[Path], list[Attempt]]] = {
        "cli_numbers": cli_numbers, "crafted_acfs": crafted_acfs, "kernel_folders": kernel_folders,
        "python_api": lambda w: python_api(), "damaged_stores": damaged_stores,
        "races": lambda w: races(w, args.race_trials), "disk_full": disk_full, "size_limits": size_limits,
        "hanging_probes": hanging_probes,
    }
    chosen = args.only.split(",") if args.only else list(sections)
    attempts: list[Attempt] = []
    for name in chosen:
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.monotonic()
            got = sections[name](Path(tmp))
            for a in got:  # the scratch folder's name says nothing
                a.detail = a.detail.replace(str(Path(tmp).resolve()), "<tmp>").replace(tmp, "<tmp>")
                a.detail = a.detail.replace(tempfile.gettempdir(), "<tmp>")
            attempts += got
            print(f"{name}: {sum(a.ok for a in got)}/{len(got)} in {time.monotonic() - t0:.0f} s", file=sys.stderr)
    by_cat: dict[tuple[str, str], list[Attempt]] = {}
    for a in attempts:
        by_cat.setdefault((a.kind, a.category), []).append(a)
    rows = [[kind, cat, len(v), sum(a.ok for a in v), len(v) - sum(a.ok for a in v)]
            for (kind, cat), v in sorted(by_cat.items())]
    failures = [a.__dict__ for a in attempts if not a.ok]
    inputs = [a for a in attempts if a.kind == "input"]
    faults = [a for a in attempts if a.kind == "fault"]
    notes = (" ".join(__doc__.split("\n", 1)[1].split()) + "\n\n" +
             f"Bad inputs: {sum(a.ok for a in inputs)}/{len(inputs)} rejected cleanly (or, for a damaged store, "
             f"read); faults: {sum(a.ok for a in faults)}/{len(faults)} survived with nothing lost.\n\n"
             + ("Still failing:\n\n" + "\n".join(f"- {f['category']}: {f['name']}: {f['detail']}" for f in failures)
                if failures else "Nothing still fails."))
    write("break_it", {"attempts": [a.__dict__ for a in attempts]}, "Trying to break it",
          markdown_table(["kind", "category", "tried", "clean", "failed"], rows), notes)
    print(notes)


if __name__ == "__main__":
    main()
